#include "handlers/table.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "base/json_write.h"
#include "base/quote.h"
#include "handlers/discovery.h"
#include "store/api_error.h"
#include "handlers/registry/registry.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr char kMetaGroup[] = "meta.k8s.io";
constexpr char kMetaV1[] = "meta.k8s.io/v1";
constexpr char kNone[] = "<none>";
constexpr char kUnknown[] = "<unknown>";

using base::JsonString;

// Descriptions follow the field documentation in the OpenAPI schemas, as
// kube-apiserver's printers take them from the types' swagger docs.
constexpr TableColumn kNameColumn{
    "Name", "string", "name",
    "Name is the unique name of the object in the cluster.",
    0};
constexpr TableColumn kAgeColumn{
    "Age", "string", "",
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created, shown as the time elapsed since then.",
    0};

void WriteColumn(JsonWriter& w, const TableColumn& c) {
  w.StartObject();
  w.Key("name");
  w.String(c.name);
  w.Key("type");
  w.String(c.type);
  w.Key("format");
  w.String(c.format);
  w.Key("description");
  w.String(c.description);
  w.Key("priority");
  w.Int(c.priority);
  w.EndObject();
}

void WriteColumns(JsonWriter& w, const registry::Strategy& strategy) {
  w.StartArray();
  WriteColumn(w, kNameColumn);
  for (const TableColumn& c : strategy.Columns()) WriteColumn(w, c);
  WriteColumn(w, kAgeColumn);
  w.EndArray();
}

void WriteCells(JsonWriter& w, const registry::Strategy& strategy, const store::Object& o,
                int64_t now_us) {
  std::optional<int64_t> created;
  if (o.metadata.creation_timestamp != 0) created = o.metadata.creation_timestamp * 1'000'000;
  w.StartArray();
  JsonString(w, o.metadata.name);
  strategy.WriteCells(w, o, now_us);
  WriteAgeCell(w, created, now_us);
  w.EndArray();
}

// The metadata of a list: resourceVersion, and continue and remainingItemCount
// (> 0 only) when a limit cut it.
void WriteListMeta(JsonWriter& w, const std::string& resource_version,
                   std::string_view continue_token, int64_t remaining) {
  w.Key("metadata");
  w.StartObject();
  w.Key("resourceVersion");
  JsonString(w, resource_version);
  if (!continue_token.empty()) {
    w.Key("continue");
    JsonString(w, continue_token);
  }
  if (remaining > 0) {
    w.Key("remainingItemCount");
    w.Int64(remaining);
  }
  w.EndObject();
}

void WritePartial(JsonWriter& w, const store::Object& o) {
  w.StartObject();
  w.Key("kind");
  w.String("PartialObjectMetadata");
  w.Key("apiVersion");
  w.String(kMetaV1);
  w.Key("metadata");
  store::WriteObjectMeta(w, o.metadata);
  w.EndObject();
}

// The first acceptable media range, in the client's order, decides: a range
// matching `wanted` wins; a plain JSON range first means plain JSON.
template <typename Pred>
bool PrefersOverJson(const Request& request, Pred wanted) {
  for (const MediaRange& r : ParseAccept(request.Header("accept"))) {
    if (r.type == "application" && r.subtype == "json" && r.Param("g") == kMetaGroup &&
        wanted(r)) {
      return true;
    }
    if (r.IsPlainJson()) return false;
  }
  return false;
}

}  // namespace

void WriteStringCell(store::JsonWriter& w, const std::optional<std::string>& value) {
  if (value && !value->empty()) {
    JsonString(w, *value);
  } else {
    w.String(kNone);
  }
}

void WriteAgeCell(store::JsonWriter& w, std::optional<int64_t> since_us, int64_t now_us) {
  if (!since_us) {
    w.String(kUnknown);
    return;
  }
  JsonString(w, HumanDuration(now_us - *since_us));
}

absl::Status ValidateTableOptions(const Request& request) {
  const std::string_view include = request.Query("includeObject");
  if (include.empty() || include == "None" || include == "Metadata" || include == "Object") {
    return absl::OkStatus();
  }
  return store::BadRequestError(absl::StrCat(
      "Unable to convert to Table as requested: includeObject: Invalid value: ",
      base::GoQuote(include), ": must be 'Metadata', 'Object', 'None', or empty"));
}

bool WantsTable(const Request& request) {
  return PrefersOverJson(request, [](const MediaRange& r) {
    return r.Param("as") == "Table" && (r.Param("v") == "v1" || r.Param("v") == "v1beta1");
  });
}

bool WantsPartialObjectMetadata(const Request& request, bool list) {
  std::string_view as = list ? "PartialObjectMetadataList" : "PartialObjectMetadata";
  return PrefersOverJson(request, [as](const MediaRange& r) {
    return r.Param("as") == as && r.Param("v") == "v1";
  });
}

std::string RenderTable(store::Kind kind, const std::vector<store::ObjectPtr>& objects,
                        const std::string& resource_version, std::string_view include_object,
                        bool with_column_definitions, int64_t now_us,
                        std::string_view continue_token, int64_t remaining) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("Table");
  w.Key("apiVersion");
  w.String(kMetaV1);
  WriteListMeta(w, resource_version, continue_token, remaining);
  const registry::Strategy& strategy = registry::ForKind(kind);
  w.Key("columnDefinitions");
  if (with_column_definitions) {
    WriteColumns(w, strategy);
  } else {
    w.StartArray();
    w.EndArray();
  }
  w.Key("rows");
  w.StartArray();
  for (const store::ObjectPtr& object : objects) {
    if (object == nullptr) continue;
    w.StartObject();
    w.Key("cells");
    WriteCells(w, strategy, *object, now_us);
    if (include_object == "Object") {
      w.Key("object");
      store::WriteObject(w, *object);
    } else if (include_object != "None") {
      w.Key("object");
      WritePartial(w, *object);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

std::string RenderPartialObjectMetadata(const store::Object& object) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  WritePartial(w, object);
  return buf.GetString();
}

std::string RenderPartialObjectMetadataList(const std::vector<store::ObjectPtr>& objects,
                                            const std::string& resource_version,
                                            std::string_view continue_token, int64_t remaining) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("PartialObjectMetadataList");
  w.Key("apiVersion");
  w.String(kMetaV1);
  WriteListMeta(w, resource_version, continue_token, remaining);
  w.Key("items");
  w.StartArray();
  for (const store::ObjectPtr& object : objects) {
    if (object != nullptr) WritePartial(w, *object);
  }
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

}  // namespace poolcoord::handlers
