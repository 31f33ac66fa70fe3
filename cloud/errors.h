// Kubernetes API errors as absl::Status, and the predicates of
// k8s.io/apimachinery/pkg/api/errors (IsNotFound, IsConflict, ...), so callers
// of the typed clients ask what went wrong in Kubernetes' own terms instead of
// reading HTTP codes.
//
// A Status made here carries the answer's metav1.Status reason and HTTP code as
// a payload; the predicates read it (as apimachinery's ReasonForError does) and
// fall back to the absl code for errors made elsewhere (a fake in a test may
// return absl::NotFoundError and IsNotFound holds).
//
// absl codes, following the project's table: 400/422 InvalidArgument, 401
// Unauthenticated, 403 PermissionDenied, 404 NotFound, 409 AlreadyExists (reason
// AlreadyExists) or Aborted (Conflict), 410 OutOfRange, 429 ResourceExhausted,
// 500 Internal, 503 Unavailable, 504 DeadlineExceeded, else Unknown.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace poolcoord::cloud {

// The error for an HTTP answer `status` (>= 300) with body `body` (a metav1.Status
// when the server sent one). The message is "<message>" of the Status, else the
// start of the body; OK for 2xx.
absl::Status StatusFromResponse(int status, std::string_view body);

// metav1.StatusCause: one of details.causes of a metav1.Status ("which field,
// and why"). A 403 of the delegation proof check names field "spec.proof" (issue
// 15), which tells it from "you do not lead this pool".
struct StatusCause {
  std::string type;  // "FieldValueForbidden", "FieldValueInvalid", ...
  std::string message;
  std::string field;  // "spec.proof"
  bool operator==(const StatusCause&) const = default;
};

// A Kubernetes error made by hand (fakes, tests): `reason` as metav1.StatusReason
// ("NotFound", "Conflict", "AlreadyExists", ...), `code` the HTTP code, and the
// details.causes the server would have sent.
absl::Status ApiError(int code, std::string_view reason, std::string_view message,
                      const std::vector<StatusCause>& causes = {});

// The metav1.Status reason carried by `status` ("" when none), and its HTTP code
// (0 when none).
std::string ReasonOf(const absl::Status& status);
int CodeOf(const absl::Status& status);
// The answer's details.causes (empty when none, or for errors made elsewhere).
std::vector<StatusCause> CausesOf(const absl::Status& status);
// Whether a cause names `field` ("spec.proof").
bool HasCauseField(const absl::Status& status, std::string_view field);
// The server's own message (metav1.Status.message), without the
// "HTTP <code> <reason>: " that StatusFromResponse puts before it for logs:
// what kubectl prints after "Error from server (<reason>): ". Any other status:
// its message.
std::string MessageOf(const absl::Status& status);

bool IsNotFound(const absl::Status& s);
bool IsAlreadyExists(const absl::Status& s);
// 409 with reason Conflict: the resourceVersion precondition failed.
bool IsConflict(const absl::Status& s);
bool IsInvalid(const absl::Status& s);
bool IsBadRequest(const absl::Status& s);
bool IsUnauthorized(const absl::Status& s);
bool IsForbidden(const absl::Status& s);
// 410 Gone / reason Expired: a watch or list resourceVersion too old; relist.
bool IsResourceExpired(const absl::Status& s);
bool IsTooManyRequests(const absl::Status& s);
bool IsServiceUnavailable(const absl::Status& s);
bool IsTimeout(const absl::Status& s);
bool IsMethodNotSupported(const absl::Status& s);

}  // namespace poolcoord::cloud
