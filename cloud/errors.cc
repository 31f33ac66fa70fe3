#include "cloud/errors.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_view.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::cloud {
namespace {

// Payload: "<code> <reason>".
constexpr char kPayloadUrl[] = "type.poolcoord/cloud.k8s-status";
// Payload: details.causes as a JSON array of {reason, message, field}.
constexpr char kCausesUrl[] = "type.poolcoord/cloud.k8s-causes";

std::string EncodeCauses(const std::vector<StatusCause>& causes) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> out(buf);
  auto str = [&](const char* key, const std::string& value) {
    out.Key(key);
    out.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
  };
  out.StartArray();
  for (const StatusCause& c : causes) {
    out.StartObject();
    str("reason", c.type);
    str("message", c.message);
    str("field", c.field);
    out.EndObject();
  }
  out.EndArray();
  return std::string(buf.GetString(), buf.GetSize());
}

std::vector<StatusCause> DecodeCauses(const rapidjson::Value& list) {
  std::vector<StatusCause> causes;
  if (!list.IsArray()) return causes;
  auto str = [](const rapidjson::Value& o, const char* key) {
    auto it = o.FindMember(key);
    return it != o.MemberEnd() && it->value.IsString()
               ? std::string(it->value.GetString(), it->value.GetStringLength())
               : std::string();
  };
  for (const auto& c : list.GetArray()) {
    if (!c.IsObject()) continue;
    causes.push_back({str(c, "reason"), str(c, "message"), str(c, "field")});
  }
  return causes;
}

absl::StatusCode CodeFor(int http, std::string_view reason) {
  switch (http) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 500:
      return absl::StatusCode::kInternal;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kUnknown;
  }
}

// The reason kube-apiserver would have given for an answer without a Status
// body (apimachinery's ReasonForError falls back the same way by code).
std::string DefaultReason(int http) {
  switch (http) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

bool KnownReason(std::string_view reason) {
  static constexpr std::string_view kKnown[] = {"Unauthorized",
                                                "Forbidden",
                                                "NotFound",
                                                "AlreadyExists",
                                                "Conflict",
                                                "Gone",
                                                "Invalid",
                                                "ServerTimeout",
                                                "StoreReadError",
                                                "Timeout",
                                                "TooManyRequests",
                                                "BadRequest",
                                                "MethodNotAllowed",
                                                "NotAcceptable",
                                                "RequestEntityTooLarge",
                                                "UnsupportedMediaType",
                                                "InternalError",
                                                "Expired",
                                                "ServiceUnavailable"};
  for (std::string_view k : kKnown) {
    if (k == reason) return true;
  }
  return false;
}

// apimachinery's rule: the reason decides; an unknown (or no) reason falls back
// to the HTTP code. Errors made without a payload fall back to the absl code.
bool Is(const absl::Status& s, std::string_view reason, int code,
        bool (*absl_is)(const absl::Status&)) {
  const int http = CodeOf(s);
  if (http == 0) return absl_is != nullptr && absl_is(s);
  const std::string r = ReasonOf(s);
  if (r == reason) return true;
  return !KnownReason(r) && http == code;
}

}  // namespace

absl::Status ApiError(int code, std::string_view reason, std::string_view message,
                      const std::vector<StatusCause>& causes) {
  absl::Status status(CodeFor(code, reason), base::Av(message));
  status.SetPayload(kPayloadUrl, absl::Cord(absl::StrCat(code, " ", base::Av(reason))));
  if (!causes.empty()) status.SetPayload(kCausesUrl, absl::Cord(EncodeCauses(causes)));
  return status;
}

absl::Status StatusFromResponse(int status, std::string_view body) {
  if (status >= 200 && status < 300) return absl::OkStatus();
  std::string message;
  std::string reason;
  std::vector<StatusCause> causes;
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (!doc.HasParseError() && doc.IsObject()) {
    if (auto it = doc.FindMember("message"); it != doc.MemberEnd() && it->value.IsString()) {
      message = it->value.GetString();
    }
    if (auto it = doc.FindMember("reason"); it != doc.MemberEnd() && it->value.IsString()) {
      reason = it->value.GetString();
    }
    if (auto it = doc.FindMember("details"); it != doc.MemberEnd() && it->value.IsObject()) {
      if (auto c = it->value.FindMember("causes"); c != it->value.MemberEnd()) {
        causes = DecodeCauses(c->value);
      }
    }
  }
  if (message.empty()) message = std::string(body.substr(0, 300));
  if (reason.empty()) reason = DefaultReason(status);
  return ApiError(status, reason,
                  absl::StrCat("HTTP ", status, reason.empty() ? "" : " ", reason, ": ", message),
                  causes);
}

std::string ReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kPayloadUrl);
  if (!payload) return "";
  const std::string text(*payload);
  const size_t space = text.find(' ');
  return space == std::string::npos ? "" : text.substr(space + 1);
}

int CodeOf(const absl::Status& status) {
  auto payload = status.GetPayload(kPayloadUrl);
  int code = 0;
  if (!payload) return 0;
  const std::string text(*payload);
  if (!absl::SimpleAtoi(absl::string_view(text).substr(0, text.find(' ')), &code)) return 0;
  return code;
}

std::vector<StatusCause> CausesOf(const absl::Status& status) {
  auto payload = status.GetPayload(kCausesUrl);
  if (!payload) return {};
  const std::string text(*payload);
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError()) return {};
  return DecodeCauses(doc);
}

bool HasCauseField(const absl::Status& status, std::string_view field) {
  for (const StatusCause& c : CausesOf(status)) {
    if (c.field == field) return true;
  }
  return false;
}

std::string MessageOf(const absl::Status& status) {
  std::string message(status.message());
  const int code = CodeOf(status);
  if (code == 0) return message;
  const std::string reason = ReasonOf(status);
  const std::string prefix =
      absl::StrCat("HTTP ", code, reason.empty() ? "" : " ", reason, ": ");
  if (absl::StartsWith(message, prefix)) message.erase(0, prefix.size());
  return message;
}

bool IsNotFound(const absl::Status& s) { return Is(s, "NotFound", 404, absl::IsNotFound); }
bool IsAlreadyExists(const absl::Status& s) {
  return Is(s, "AlreadyExists", 409, absl::IsAlreadyExists);
}
bool IsConflict(const absl::Status& s) { return Is(s, "Conflict", 409, absl::IsAborted); }
bool IsInvalid(const absl::Status& s) { return Is(s, "Invalid", 422, nullptr); }
bool IsBadRequest(const absl::Status& s) { return Is(s, "BadRequest", 400, nullptr); }
bool IsUnauthorized(const absl::Status& s) {
  return Is(s, "Unauthorized", 401, absl::IsUnauthenticated);
}
bool IsForbidden(const absl::Status& s) {
  return Is(s, "Forbidden", 403, absl::IsPermissionDenied);
}
bool IsResourceExpired(const absl::Status& s) {
  return Is(s, "Expired", 410, absl::IsOutOfRange) || Is(s, "Gone", 410, nullptr);
}
bool IsTooManyRequests(const absl::Status& s) {
  return Is(s, "TooManyRequests", 429, absl::IsResourceExhausted);
}
bool IsServiceUnavailable(const absl::Status& s) {
  return Is(s, "ServiceUnavailable", 503, absl::IsUnavailable);
}
bool IsTimeout(const absl::Status& s) { return Is(s, "Timeout", 504, absl::IsDeadlineExceeded); }
bool IsMethodNotSupported(const absl::Status& s) { return Is(s, "MethodNotAllowed", 405, nullptr); }

}  // namespace poolcoord::cloud
