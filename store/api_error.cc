#include "store/api_error.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "store/object.h"

namespace poolcoord::store {
namespace {

// The payload rides under this type URL. Wire format: a sequence of
// "<decimal length>:<bytes>" fields, in the order of EncodeInfo. Length-prefixed so
// that messages with any bytes (quotes, colons, newlines) survive unchanged.
constexpr char kPayloadUrl[] = "poolcoord/api-error";


void PutField(std::string& out, std::string_view value) {
  absl::StrAppend(&out, value.size(), ":", base::Av(value));
}

// Reads one field written by PutField; nullopt on malformed input.
std::optional<std::string> GetField(std::string_view& in) {
  size_t colon = in.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 12) return std::nullopt;
  uint64_t len = 0;
  if (!absl::SimpleAtoi(base::Av(in.substr(0, colon)), &len)) return std::nullopt;
  in.remove_prefix(colon + 1);
  if (len > in.size()) return std::nullopt;
  std::string value(in.substr(0, len));
  in.remove_prefix(len);
  return value;
}

std::optional<int64_t> GetInt(std::string_view& in) {
  auto field = GetField(in);
  int64_t v = 0;
  if (!field || !absl::SimpleAtoi(*field, &v)) return std::nullopt;
  return v;
}

std::string EncodeInfo(const ApiErrorInfo& info) {
  std::string out;
  PutField(out, std::to_string(info.code));
  PutField(out, info.reason);
  PutField(out, info.message);
  PutField(out, info.name);
  PutField(out, info.group);
  PutField(out, info.kind);
  PutField(out, info.uid);
  PutField(out, std::to_string(info.retry_after_seconds));
  PutField(out, std::to_string(info.causes.size()));
  for (const auto& cause : info.causes) {
    PutField(out, cause.type);
    PutField(out, cause.message);
    PutField(out, cause.field);
  }
  return out;
}

std::optional<ApiErrorInfo> DecodeInfo(std::string_view in) {
  ApiErrorInfo info;
  auto code = GetInt(in);
  auto reason = GetField(in);
  auto message = GetField(in);
  auto name = GetField(in);
  auto group = GetField(in);
  auto kind = GetField(in);
  auto uid = GetField(in);
  auto retry = GetInt(in);
  auto count = GetInt(in);
  if (!code || !reason || !message || !name || !group || !kind || !uid || !retry || !count ||
      *count < 0) {
    return std::nullopt;
  }
  info.code = static_cast<int>(*code);
  info.reason = std::move(*reason);
  info.message = std::move(*message);
  info.name = std::move(*name);
  info.group = std::move(*group);
  info.kind = std::move(*kind);
  info.uid = std::move(*uid);
  info.retry_after_seconds = static_cast<int>(*retry);
  for (int64_t i = 0; i < *count; ++i) {
    auto type = GetField(in);
    auto msg = GetField(in);
    auto field = GetField(in);
    if (!type || !msg || !field) return std::nullopt;
    info.causes.push_back({std::move(*type), std::move(*msg), std::move(*field)});
  }
  if (!in.empty()) return std::nullopt;
  return info;
}

ApiErrorInfo Simple(int code, std::string_view reason, std::string_view message) {
  ApiErrorInfo info;
  info.code = code;
  info.reason = std::string(reason);
  info.message = std::string(message);
  return info;
}

// "<resource>.<group>" as kube-apiserver's qualifiedResource.String() prints it.
std::string Qualified(std::string_view resource) {
  return absl::StrCat(base::Av(resource), ".", kGroup);
}

ApiErrorInfo WithDetails(ApiErrorInfo info, std::string_view resource, std::string_view name) {
  info.name = std::string(name);
  info.group = kGroup;
  info.kind = std::string(resource);
  return info;
}

}  // namespace

absl::Status MakeApiError(absl::StatusCode code, const ApiErrorInfo& info) {
  if (code == absl::StatusCode::kOk) code = absl::StatusCode::kUnknown;
  absl::Status status(code, base::Av(info.message));
  status.SetPayload(kPayloadUrl, absl::Cord(EncodeInfo(info)));
  return status;
}

ApiErrorInfo ApiErrorFromStatus(const absl::Status& status) {
  if (auto payload = status.GetPayload(kPayloadUrl)) {
    if (auto info = DecodeInfo(std::string(*payload))) return *std::move(info);
  }
  std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return Simple(200, "", message);
    case absl::StatusCode::kNotFound:
      return Simple(404, "NotFound", message);
    case absl::StatusCode::kAlreadyExists:
      return Simple(409, "AlreadyExists", message);
    case absl::StatusCode::kAborted:
      return Simple(409, "Conflict", message);
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return Simple(400, "BadRequest", message);
    case absl::StatusCode::kOutOfRange:
      return Simple(410, "Expired", message);
    case absl::StatusCode::kUnauthenticated:
      return Simple(401, "Unauthorized", message);
    case absl::StatusCode::kPermissionDenied:
      return Simple(403, "Forbidden", message);
    case absl::StatusCode::kResourceExhausted:
      return Simple(429, "TooManyRequests", message);
    case absl::StatusCode::kUnavailable:
      return Simple(503, "ServiceUnavailable", message);
    case absl::StatusCode::kDeadlineExceeded:
      return Simple(504, "Timeout", message);
    case absl::StatusCode::kUnimplemented:
      return Simple(405, "MethodNotAllowed", message);
    default:
      return Simple(500, "InternalError", message);
  }
}

absl::Status NotFoundError(std::string_view resource, std::string_view name) {
  auto info = WithDetails(
      Simple(404, "NotFound", absl::StrCat(Qualified(resource), " ", base::GoQuote(name), " not found")),
      resource, name);
  return MakeApiError(absl::StatusCode::kNotFound, info);
}

absl::Status UnknownPathError() {
  return MakeApiError(absl::StatusCode::kNotFound,
                      Simple(404, "NotFound", "the server could not find the requested resource"));
}

absl::Status AlreadyExistsError(std::string_view resource, std::string_view name) {
  auto info = WithDetails(Simple(409, "AlreadyExists",
                                 absl::StrCat(Qualified(resource), " ", base::GoQuote(name),
                                              " already exists")),
                          resource, name);
  return MakeApiError(absl::StatusCode::kAlreadyExists, info);
}

absl::Status ConflictError(std::string_view resource, std::string_view name,
                           std::string_view detail) {
  auto info = WithDetails(Simple(409, "Conflict",
                                 absl::StrCat("Operation cannot be fulfilled on ",
                                              Qualified(resource), " ", base::GoQuote(name), ": ",
                                              base::Av(detail))),
                          resource, name);
  return MakeApiError(absl::StatusCode::kAborted, info);
}

absl::Status StaleResourceVersionError(std::string_view resource, std::string_view name) {
  return ConflictError(resource, name,
                       "the object has been modified; please apply your changes to the latest "
                       "version and try again");
}

absl::Status InvalidError(std::string_view kind_name, std::string_view name,
                          std::vector<FieldCause> causes) {
  return InvalidErrorInGroup(kGroup, kind_name, name, std::move(causes));
}

absl::Status InvalidErrorInGroup(std::string_view group, std::string_view kind_name,
                                 std::string_view name, std::vector<FieldCause> causes) {
  // field.ErrorList.ToAggregate(): "field: body" per error, duplicates dropped, a
  // single error bare and several as "[a, b]".
  std::vector<std::string> parts;
  std::set<std::string> seen;
  for (const auto& cause : causes) {
    std::string text =
        cause.field.empty() ? cause.message : absl::StrCat(cause.field, ": ", cause.message);
    if (seen.insert(text).second) parts.push_back(std::move(text));
  }
  std::string message = absl::StrCat(base::Av(kind_name), group.empty() ? "" : ".", base::Av(group), " ",
                                     base::GoQuote(name), " is invalid");
  if (parts.size() == 1) {
    absl::StrAppend(&message, ": ", parts[0]);
  } else if (parts.size() > 1) {
    absl::StrAppend(&message, ": [");
    for (size_t i = 0; i < parts.size(); ++i) {
      absl::StrAppend(&message, i ? ", " : "", parts[i]);
    }
    absl::StrAppend(&message, "]");
  }
  ApiErrorInfo info = Simple(422, "Invalid", message);
  info.name = std::string(name);
  info.group = std::string(group);
  // NewInvalid puts the Kind, not the resource, in details.kind.
  info.kind = std::string(kind_name);
  info.causes = std::move(causes);
  return MakeApiError(absl::StatusCode::kInvalidArgument, info);
}

absl::Status BadRequestError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kInvalidArgument, Simple(400, "BadRequest", message));
}

absl::Status ForbiddenError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kPermissionDenied, Simple(403, "Forbidden", message));
}

absl::Status ForbiddenError(std::string_view resource, std::string_view name,
                            std::string_view detail) {
  auto info = WithDetails(Simple(403, "Forbidden",
                                 absl::StrCat(Qualified(resource), " ", base::GoQuote(name),
                                              " is forbidden: ", base::Av(detail))),
                          resource, name);
  return MakeApiError(absl::StatusCode::kPermissionDenied, info);
}

absl::Status UnauthorizedError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kUnauthenticated, Simple(401, "Unauthorized", message));
}

absl::Status ExpiredError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kOutOfRange, Simple(410, "Expired", message));
}

absl::Status TooManyRequestsError(std::string_view message, int retry_after_seconds) {
  ApiErrorInfo info = Simple(429, "TooManyRequests", message);
  info.retry_after_seconds = retry_after_seconds;
  return MakeApiError(absl::StatusCode::kResourceExhausted, info);
}

absl::Status RequestEntityTooLargeError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kResourceExhausted,
                      Simple(413, "RequestEntityTooLarge",
                             absl::StrCat("Request entity too large: ", base::Av(message))));
}

absl::Status UnsupportedMediaTypeError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kFailedPrecondition,
                      Simple(415, "UnsupportedMediaType", message));
}

absl::Status NotAcceptableError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kFailedPrecondition, Simple(406, "NotAcceptable", message));
}

absl::Status MethodNotAllowedError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kFailedPrecondition,
                      Simple(405, "MethodNotAllowed", message));
}

absl::Status TimeoutError(std::string_view message, bool rv_too_large) {
  ApiErrorInfo info = Simple(504, "Timeout", absl::StrCat("Timeout: ", base::Av(message)));
  if (rv_too_large) {
    // As k8s.io/apiserver's NewTooLargeResourceVersionError: retry after 1 s.
    info.retry_after_seconds = 1;
    info.causes.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
  }
  return MakeApiError(absl::StatusCode::kDeadlineExceeded, info);
}

absl::Status ServiceUnavailableError(std::string_view message) {
  return MakeApiError(absl::StatusCode::kUnavailable, Simple(503, "ServiceUnavailable", message));
}

absl::Status InternalError(std::string_view message) {
  // NewInternalError's wording, with the error itself as the one cause.
  ApiErrorInfo info =
      Simple(500, "InternalError", absl::StrCat("Internal error occurred: ", base::Av(message)));
  info.causes.push_back({"", std::string(message), ""});
  return MakeApiError(absl::StatusCode::kInternal, info);
}

}  // namespace poolcoord::store
