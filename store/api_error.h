// Kubernetes API errors carried inside absl::Status.
//
// Every layer returns absl::Status; the HTTP edge (handlers/status_mapping.h) turns
// it into a metav1.Status. The absl code is the nearest one (NotFound for
// 404, Aborted for 409 Conflict, InvalidArgument for 422, ...; api_error.cc); the exact HTTP code, the reason and the details ride in a
// payload so that, for example, 409 AlreadyExists and 409 Conflict stay distinct.
// The message and detail shapes follow k8s.io/apimachinery/pkg/api/errors.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "api/field_error.h"

namespace poolcoord::store {

// One entry of Status.details.causes, and the builders of each type
// (api/field_error.h).
using api::FieldCause;
using api::FieldForbidden;
using api::FieldInvalid;
using api::FieldNotSupported;
using api::FieldRequired;
using api::FieldTooLong;
using api::FieldTypeInvalid;

// The decoded form of an API error; the handlers render it as a Status object.
struct ApiErrorInfo {
  int code = 500;           // HTTP status code
  std::string reason;       // StatusReason: "NotFound", "Conflict", ...
  std::string message;
  std::string name;         // details.name
  std::string group;        // details.group
  std::string kind;         // details.kind: the resource plural, as Kubernetes does
  std::string uid;          // details.uid
  int retry_after_seconds = 0;
  std::vector<FieldCause> causes;
};

// Builds a Status with the payload that ApiErrorFromStatus reads back.
absl::Status MakeApiError(absl::StatusCode code, const ApiErrorInfo& info);

// Reads the payload back; for a Status without one, derives code and reason from
// the absl code (InvalidArgument: 400 BadRequest, Internal/Unknown: 500, ...).
ApiErrorInfo ApiErrorFromStatus(const absl::Status& status);

// Shorthands. `resource` is the plural ("widgets"); group is always ours unless
// given. Messages follow kube-apiserver's wording.
absl::Status NotFoundError(std::string_view resource, std::string_view name);
// 404 for a path that nothing serves (an unknown resource or subresource):
// "the server could not find the requested resource", details empty, as
// k8s.io/apiserver answers when no route matches (NewGenericServerResponse).
absl::Status UnknownPathError();
absl::Status AlreadyExistsError(std::string_view resource, std::string_view name);
// "Operation cannot be fulfilled on <resource>.<group> "<name>": <detail>"
absl::Status ConflictError(std::string_view resource, std::string_view name,
                           std::string_view detail);
// The optimistic-concurrency conflict, with kube-apiserver's exact detail text.
absl::Status StaleResourceVersionError(std::string_view resource, std::string_view name);
// 422: "<Kind>.<group> "<name>" is invalid: <field>: <message>, ..."
absl::Status InvalidError(std::string_view kind_name, std::string_view name,
                          std::vector<FieldCause> causes);
// The same for an object that names another group in its apiVersion, as
// errors.NewInvalid words it with the object's own GroupKind (a body of kind
// "Pod" and apiVersion "x/v1": `Pod.x "name" is invalid: ...`).
absl::Status InvalidErrorInGroup(std::string_view group, std::string_view kind_name,
                                 std::string_view name, std::vector<FieldCause> causes);
absl::Status BadRequestError(std::string_view message);
absl::Status ForbiddenError(std::string_view message);
// An admission denial of one object, as apierrors.NewForbidden words it:
// "<resource>.<group> "<name>" is forbidden: <detail>", details naming it.
absl::Status ForbiddenError(std::string_view resource, std::string_view name,
                            std::string_view detail);
absl::Status UnauthorizedError(std::string_view message = "Unauthorized");
// 410 Expired, e.g. "too old resource version: 5 (20)".
absl::Status ExpiredError(std::string_view message);
absl::Status TooManyRequestsError(std::string_view message, int retry_after_seconds);
absl::Status RequestEntityTooLargeError(std::string_view message);
absl::Status UnsupportedMediaTypeError(std::string_view message);
absl::Status NotAcceptableError(std::string_view message);
absl::Status MethodNotAllowedError(std::string_view message);
// 504 Timeout, the message "Timeout: <message>" as apierrors.NewTimeoutError
// words it (kube-apiserver 1.32.6: "Timeout: Too large resource version: 999999,
// current: 200"); with cause type ResourceVersionTooLarge when `rv_too_large`.
absl::Status TimeoutError(std::string_view message, bool rv_too_large = false);
absl::Status ServiceUnavailableError(std::string_view message);
absl::Status InternalError(std::string_view message);

}  // namespace poolcoord::store
