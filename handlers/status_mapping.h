// The HTTP edge of absl::Status: every error a handler returns becomes a
// metav1.Status body with the code and reason carried by store/api_error.h (or
// derived from the absl code by store/api_error.cc's table: NotFound 404,
// AlreadyExists/Aborted 409, InvalidArgument 422, PermissionDenied 403, ...).
//
// Shape, as k8s.io/apiserver's responsewriters write it:
//   {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
//    "message":"...","reason":"NotFound",
//    "details":{"name":"x","group":"coordination.pool","kind":"widgets","uid":"...",
//               "causes":[{"reason":"FieldValueInvalid","message":"...","field":"spec.x"}],
//               "retryAfterSeconds":1},
//    "code":404}
// Empty message/reason and empty detail fields are omitted, and "details" is
// omitted when all of its fields are. A cause's "reason" is its CauseType.
// Strings that are not valid UTF-8 have the bad bytes replaced by U+FFFD, as Go's
// encoding/json does. All functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "handlers/http_types.h"
#include "store/api_error.h"

namespace poolcoord::handlers {

// The Status body alone: for watch ERROR events, and anywhere a Status is nested.
// An OK status renders as 500 InternalError (a caller bug, never a success).
std::string StatusJson(const absl::Status& status);
std::string StatusJson(const store::ApiErrorInfo& info);

// The response for a failed request: info.code as the HTTP status, the Status
// body, Content-Type application/json, and Retry-After (seconds) whenever
// details.retryAfterSeconds is set (responsewriters.ErrorNegotiated); a 429
// without one gets 1 second, as kube-apiserver's max-in-flight filter sends.
Response ErrorResponse(const absl::Status& status);

// A success Status, as the generic registry returns for a delete that does not
// return the object: {"kind":"Status","apiVersion":"v1","metadata":{},
// "status":"Success","details":{"name","group","kind","uid"}} (empty fields
// omitted). `kind` is the resource plural, as Kubernetes puts there.
std::string SuccessStatusJson(std::string_view name, std::string_view group,
                              std::string_view kind, std::string_view uid);

}  // namespace poolcoord::handlers
