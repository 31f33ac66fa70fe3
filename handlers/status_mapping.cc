#include "handlers/status_mapping.h"

#include <cstdint>
#include <string>

#include "base/quote.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::handlers {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// RapidJSON copies bytes verbatim; invalid UTF-8 would make the body invalid JSON.
void WriteString(JsonWriter& w, std::string_view s) {
  const std::string clean = base::ToValidUtf8(s);
  w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
}

void WriteKey(JsonWriter& w, const char* key) { w.Key(key); }

void WriteOptional(JsonWriter& w, const char* key, std::string_view value) {
  if (value.empty()) return;
  WriteKey(w, key);
  WriteString(w, value);
}

void WriteHead(JsonWriter& w, const char* status) {
  WriteKey(w, "kind");
  w.String("Status");
  WriteKey(w, "apiVersion");
  w.String("v1");
  WriteKey(w, "metadata");
  w.StartObject();
  w.EndObject();
  WriteKey(w, "status");
  w.String(status);
}

void WriteDetails(JsonWriter& w, const store::ApiErrorInfo& info) {
  bool any = !info.name.empty() || !info.group.empty() || !info.kind.empty() ||
             !info.uid.empty() || !info.causes.empty() || info.retry_after_seconds > 0;
  if (!any) return;
  WriteKey(w, "details");
  w.StartObject();
  WriteOptional(w, "name", info.name);
  WriteOptional(w, "group", info.group);
  WriteOptional(w, "kind", info.kind);
  WriteOptional(w, "uid", info.uid);
  if (!info.causes.empty()) {
    WriteKey(w, "causes");
    w.StartArray();
    for (const auto& cause : info.causes) {
      w.StartObject();
      WriteOptional(w, "reason", cause.type);
      WriteOptional(w, "message", cause.message);
      WriteOptional(w, "field", cause.field);
      w.EndObject();
    }
    w.EndArray();
  }
  if (info.retry_after_seconds > 0) {
    WriteKey(w, "retryAfterSeconds");
    w.Int(info.retry_after_seconds);
  }
  w.EndObject();
}

// The info that is rendered: an OK status is a caller bug, and a 429 always
// tells the client when to come back.
store::ApiErrorInfo Normalize(store::ApiErrorInfo info) {
  if (info.code < 400 || info.code > 599) {
    info.code = 500;
    info.reason = "InternalError";
    if (info.message.empty()) info.message = "Internal error occurred: no error was reported";
  }
  if (info.code == 429 && info.retry_after_seconds <= 0) info.retry_after_seconds = 1;
  return info;
}

}  // namespace

std::string StatusJson(const store::ApiErrorInfo& raw) {
  store::ApiErrorInfo info = Normalize(raw);
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteHead(w, "Failure");
  WriteOptional(w, "message", info.message);
  WriteOptional(w, "reason", info.reason);
  WriteDetails(w, info);
  WriteKey(w, "code");
  w.Int(info.code);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string StatusJson(const absl::Status& status) {
  return StatusJson(store::ApiErrorFromStatus(status));
}

Response ErrorResponse(const absl::Status& status) {
  store::ApiErrorInfo info = Normalize(store::ApiErrorFromStatus(status));
  Response response;
  response.status = info.code;
  response.SetHeader("Content-Type", "application/json");
  if (info.retry_after_seconds > 0) {
    response.SetHeader("Retry-After", std::to_string(info.retry_after_seconds));
  }
  response.body = StatusJson(info);
  return response;
}

std::string SuccessStatusJson(std::string_view name, std::string_view group,
                              std::string_view kind, std::string_view uid) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteHead(w, "Success");
  if (!name.empty() || !group.empty() || !kind.empty() || !uid.empty()) {
    WriteKey(w, "details");
    w.StartObject();
    WriteOptional(w, "name", name);
    WriteOptional(w, "group", group);
    WriteOptional(w, "kind", kind);
    WriteOptional(w, "uid", uid);
    w.EndObject();
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace poolcoord::handlers
