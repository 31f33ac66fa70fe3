#include "handlers/openapi.h"

#include <openssl/sha.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/json_write.h"
#include "base/log.h"
#include "handlers/discovery.h"
#include "handlers/openapi_schema.h"
#include "handlers/registry/registry.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/object.h"
#include "yaml-cpp/yaml.h"

namespace poolcoord::handlers {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

using openapi::ArrayRefProp;
using openapi::BoolProp;
using openapi::Definition;
using openapi::Int32Prop;
using openapi::Int64Prop;
using openapi::kApiVersionDoc;
using openapi::kKindDoc;
using openapi::Meta;
using openapi::ObjectProp;
using openapi::Ours;
using openapi::Prop;
using openapi::RefProp;
using openapi::StringArrayProp;
using openapi::StringMapProp;
using openapi::StringProp;
using openapi::Type;

constexpr char kJson[] = "application/json";
constexpr char kMeta[] = "io.k8s.apimachinery.pkg.apis.meta.v1.";
constexpr char kOurs[] = "pool.coordination.v1alpha1.";
constexpr char kV3Path[] = "/openapi/v3/apis/coordination.pool/v1alpha1";

// absl::StrCat takes absl::string_view, a distinct type in Debian's build
// (not std::string_view); this concatenates std::string_view-convertible parts.
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

using base::JsonField;
using base::JsonKey;
using base::JsonString;

// The meta.k8s.io definitions, as data: handlers/meta_definitions.yaml (its
// header gives the form), built in by CMakeLists.txt.
constexpr char kMetaDefinitionsYaml[] =
#include "handlers/meta_definitions.yaml.inc"
    ;

// A property of the data file: its type, and what goes with it.
Prop MetaProp(const YAML::Node& p) {
  const std::string name = p["name"].as<std::string>();
  const std::string type = p["type"].as<std::string>();
  const std::string doc = p["description"].as<std::string>();
  const std::string ref = p["ref"] ? Meta(p["ref"].as<std::string>()) : "";
  Prop prop = type == "string"         ? StringProp(name, doc)
              : type == "int32"        ? Int32Prop(name, doc)
              : type == "int64"        ? Int64Prop(name, doc)
              : type == "bool"         ? BoolProp(name, doc)
              : type == "object"       ? ObjectProp(name, doc)
              : type == "string-array" ? StringArrayProp(name, doc)
              : type == "string-map"   ? StringMapProp(name, doc)
              : type == "ref"          ? RefProp(name, ref, doc)
              : type == "array"        ? ArrayRefProp(name, ref, doc)
                                       : Prop{};
  if (prop.name.empty() || ((type == "ref" || type == "array") && ref.empty())) {
    // The file is ours and built in: a mistake in it is found by the first test.
    base::LogError("handlers/meta_definitions.yaml: property ", name, " has type \"", type, "\"",
                   ref.empty() ? " without a ref" : "");
    std::abort();
  }
  if (p["list_type"]) {
    std::vector<std::string> keys;
    if (p["list_map_keys"]) keys = p["list_map_keys"].as<std::vector<std::string>>();
    prop = WithListType(std::move(prop), p["list_type"].as<std::string>(), std::move(keys));
  }
  if (p["map_type"]) prop.map_type = p["map_type"].as<std::string>();
  return prop;
}

std::vector<Definition> MetaDefinitions() {
  std::vector<Definition> out;
  for (const YAML::Node& d : YAML::Load(kMetaDefinitionsYaml)) {
    Definition def{Meta(d["name"].as<std::string>()), d["description"].as<std::string>(),
                   d["type"] ? d["type"].as<std::string>() : "object",
                   d["format"] ? d["format"].as<std::string>() : "", {}, {}, ""};
    if (d["required"]) def.required = d["required"].as<std::vector<std::string>>();
    if (d["map_type"]) def.map_type = d["map_type"].as<std::string>();
    for (const YAML::Node& p : d["properties"]) def.props.push_back(MetaProp(p));
    out.push_back(std::move(def));
  }
  return out;
}

// A kind's List: the same shape for every kind.
Definition ListDefinition(const store::ResourceInfo& info) {
  const std::string kind = info.kind_name;
  return {Ours(kind + "List"),
          kind + "List is a list of " + kind + "s.",
          "object",
          "",
          {StringProp("apiVersion", kApiVersionDoc),
           ArrayRefProp("items", Ours(kind), "The " + kind + "s, by name."),
           StringProp("kind", kKindDoc),
           RefProp("metadata", Meta("ListMeta"), "Standard list metadata.")},
          {"items"},
          kind + "List"};
}

// Every kind's own definitions (its strategy's), then its List.
std::vector<Definition> OurDefinitions() {
  std::vector<Definition> d;
  for (const registry::Strategy* kind : registry::AllKinds()) {
    for (Definition& def : kind->Definitions()) d.push_back(std::move(def));
    d.push_back(ListDefinition(kind->Info()));
  }
  return d;
}

std::string RefPath(bool v3, std::string_view name) {
  return Cat(v3 ? "#/components/schemas/" : "#/definitions/", name);
}

void WriteRef(JsonWriter& w, bool v3, std::string_view name) {
  w.StartObject();
  JsonField(w, "$ref", RefPath(v3, name));
  w.EndObject();
}

void WriteGvk(JsonWriter& w, std::string_view kind) {
  w.StartObject();
  JsonField(w, "group", store::kGroup);
  JsonField(w, "kind", kind);
  JsonField(w, "version", store::kVersion);
  w.EndObject();
}

void WriteProp(JsonWriter& w, bool v3, const Prop& p) {
  w.StartObject();
  JsonField(w, "description", p.description);
  switch (p.type) {
    case Type::kString:
      JsonField(w, "type", "string");
      break;
    case Type::kInt32:
    case Type::kInt64:
      JsonField(w, "type", "integer");
      JsonField(w, "format", p.type == Type::kInt32 ? "int32" : "int64");
      break;
    case Type::kBool:
      JsonField(w, "type", "boolean");
      break;
    case Type::kRef:
      // v3: a $ref has no siblings in OpenAPI 3.0, so the field's own description
      // rides beside an allOf (kube-openapi's form; kubectl explain reads both).
      if (v3) {
        JsonKey(w, "allOf");
        w.StartArray();
        WriteRef(w, v3, p.ref);
        w.EndArray();
      } else {
        JsonField(w, "$ref", RefPath(v3, p.ref));
      }
      break;
    case Type::kArrayString:
      JsonField(w, "type", "array");
      JsonKey(w, "items");
      w.StartObject();
      JsonField(w, "type", "string");
      w.EndObject();
      break;
    case Type::kArrayRef:
      JsonField(w, "type", "array");
      JsonKey(w, "items");
      WriteRef(w, v3, p.ref);
      break;
    case Type::kMapString:
      JsonField(w, "type", "object");
      JsonKey(w, "additionalProperties");
      w.StartObject();
      JsonField(w, "type", "string");
      w.EndObject();
      break;
    case Type::kObject:
      JsonField(w, "type", "object");
      break;
  }
  if (!p.map_type.empty()) JsonField(w, "x-kubernetes-map-type", p.map_type);
  if (!p.list_type.empty()) {
    if (!p.list_map_keys.empty()) {
      JsonKey(w, "x-kubernetes-list-map-keys");
      w.StartArray();
      for (const std::string& k : p.list_map_keys) JsonString(w, k);
      w.EndArray();
    }
    JsonField(w, "x-kubernetes-list-type", p.list_type);
  }
  w.EndObject();
}

void WriteDefinition(JsonWriter& w, bool v3, const Definition& d) {
  JsonKey(w, d.name);
  w.StartObject();
  JsonField(w, "description", d.description);
  JsonField(w, "type", d.type);
  if (!d.format.empty()) JsonField(w, "format", d.format);
  if (!d.props.empty()) {
    JsonKey(w, "properties");
    w.StartObject();
    for (const Prop& p : d.props) {
      JsonKey(w, p.name);
      WriteProp(w, v3, p);
    }
    w.EndObject();
  }
  if (!d.required.empty()) {
    JsonKey(w, "required");
    w.StartArray();
    for (const std::string& r : d.required) JsonString(w, r);
    w.EndArray();
  }
  if (!d.gvk_kind.empty()) {
    JsonKey(w, "x-kubernetes-group-version-kind");
    w.StartArray();
    WriteGvk(w, d.gvk_kind);
    w.EndArray();
  }
  if (!d.map_type.empty()) JsonField(w, "x-kubernetes-map-type", d.map_type);
  w.EndObject();
}

// --- parameters and operations

struct Param {
  const char* name;
  const char* in;  // "query" or "path"
  const char* type;
  const char* description;
};

constexpr Param kName{"name", "path", "string", "The name of the object."};
constexpr Param kAllowWatchBookmarks{
    "allowWatchBookmarks", "query", "boolean",
    "With watch: ask for BOOKMARK events, which carry only a newer resourceVersion to resume "
    "from."};
constexpr Param kContinue{
    "continue", "query", "string",
    "The continue token of the previous page, to get the next page of a list cut by limit. "
    "An expired token gets 410 Expired."};
// Names every kind's own field selectors (their strategies' SelectableFields).
const Param& FieldSelectorParam() {
  static const Param* const param = [] {
    auto* doc = new std::string(
        "Restricts the objects by fields: metadata.name and metadata.namespace (=, ==, !=)");
    for (const registry::Strategy* kind : registry::AllKinds()) {
      const auto fields = kind->SelectableFields();
      for (size_t i = 0; i < fields.size(); ++i) doc->append(i ? ", " : ", and ").append(fields[i].path);
      if (!fields.empty()) doc->append(" on ").append(kind->Info().plural);
    }
    doc->append(".");
    return new Param{"fieldSelector", "query", "string", doc->c_str()};
  }();
  return *param;
}
constexpr Param kLabelSelector{
    "labelSelector", "query", "string",
    "Restricts the objects by labels: k=v, k==v, k!=v, k in (a,b), k notin (a), k, !k; commas "
    "mean AND."};
constexpr Param kLimit{"limit", "query", "integer",
                       "The largest number of objects to return; the rest follows through "
                       "continue."};
constexpr Param kResourceVersion{
    "resourceVersion", "query", "string",
    "Unset: the most recent state. \"0\": any state. N: not older than N; a watch from N "
    "streams the changes after N."};
constexpr Param kResourceVersionMatch{
    "resourceVersionMatch", "query", "string",
    "How resourceVersion applies to a list: Exact or NotOlderThan. Requires resourceVersion."};
constexpr Param kSendInitialEvents{
    "sendInitialEvents", "query", "boolean",
    "With watch and resourceVersionMatch=NotOlderThan: start with synthetic ADDED events for "
    "the current objects, then a BOOKMARK annotated k8s.io/initial-events-end."};
constexpr Param kTimeoutSeconds{"timeoutSeconds", "query", "integer",
                                "Ends a list or watch call after this many seconds."};
constexpr Param kWatch{"watch", "query", "boolean",
                       "Watch for changes instead of listing: one JSON event per line."};
constexpr Param kDryRun{"dryRun", "query", "string",
                        "\"All\" runs every check and returns the result without persisting "
                        "it; any other value is 422 Invalid."};
constexpr Param kFieldManager{"fieldManager", "query", "string",
                              "The name of the actor making the change, recorded as the field "
                              "manager."};
constexpr Param kFieldValidation{
    "fieldValidation", "query", "string",
    "What to do with fields the schema does not know: Ignore drops them silently, Warn (the "
    "default) drops them with a Warning header each, Strict fails the request with 400 "
    "BadRequest (strict decoding error: unknown field ...)."};
constexpr Param kForce{"force", "query", "boolean",
                       "Apply patches only: take ownership of fields other managers own instead "
                       "of failing with 409 Conflict. Forbidden (422) with other patch types."};
constexpr Param kGracePeriodSeconds{"gracePeriodSeconds", "query", "integer",
                                    "Seconds before the object is deleted; 0 means now."};
constexpr Param kPropagationPolicy{"propagationPolicy", "query", "string",
                                   "Whether and how dependents are garbage collected: Orphan, "
                                   "Background or Foreground."};

enum class Body { kNone, kObject, kDeleteOptions, kPatch };

struct Operation {
  const char* method;  // get, post, put, patch, delete
  const char* action;  // x-kubernetes-action
  std::string operation_id;
  std::string description;
  std::vector<const Param*> params;
  Body body = Body::kNone;
  std::vector<int> codes;    // success codes
  std::string response_def;  // full definition name of the success body
  bool streams = false;      // also produces application/json;stream=watch
};

struct PathItem {
  std::string path;
  bool has_name = false;
  std::vector<Operation> operations;
};

std::vector<const Param*> ListParams() {
  return {&kAllowWatchBookmarks, &kContinue,        &FieldSelectorParam(),
          &kLabelSelector,       &kLimit,           &kResourceVersion,
          &kResourceVersionMatch, &kSendInitialEvents, &kTimeoutSeconds,
          &kWatch};
}

std::vector<PathItem> PathsFor(const store::ResourceInfo& info) {
  const std::string k = info.kind_name;
  const std::string base = Cat("/apis/", store::kGroupVersion, "/", info.plural);
  const std::string watch_base =
      Cat("/apis/", store::kGroupVersion, "/watch/", info.plural);
  const std::string id = Cat("CoordinationPoolV1alpha1", k);
  const std::string object = Ours(k);
  const std::string list = Ours(k + "List");
  const std::string status = Meta("Status");
  const std::string event = Meta("WatchEvent");
  const std::vector<const Param*> write = {&kDryRun, &kFieldManager, &kFieldValidation};
  const std::vector<const Param*> patch = {&kDryRun, &kFieldManager, &kFieldValidation, &kForce};
  const std::vector<const Param*> del = {&kDryRun, &kGracePeriodSeconds, &kPropagationPolicy};
  const std::vector<const Param*> delcoll = {
      &kContinue,        &kDryRun, &FieldSelectorParam(), &kGracePeriodSeconds, &kLabelSelector,
      &kLimit,           &kPropagationPolicy, &kResourceVersion, &kResourceVersionMatch,
      &kSendInitialEvents, &kTimeoutSeconds};

  std::vector<PathItem> paths;
  paths.push_back(
      {base,
       false,
       {{"get", "list", "list" + id, "list or watch objects of kind " + k, ListParams(),
         Body::kNone, {200}, list, true},
        {"post", "post", "create" + id, "create a " + k, write, Body::kObject, {200, 201, 202},
         object, false},
        {"delete", "deletecollection", "deleteCoordinationPoolV1alpha1Collection" + k,
         "delete a collection of " + k, delcoll, Body::kDeleteOptions, {200}, status, false}}});
  paths.push_back(
      {base + "/{name}",
       true,
       {{"get", "get", "read" + id, "read the specified " + k, {}, Body::kNone, {200}, object,
         false},
        {"put", "put", "replace" + id, "replace the specified " + k, write, Body::kObject,
         {200, 201}, object, false},
        {"patch", "patch", "patch" + id, "partially update the specified " + k, patch,
         Body::kPatch, {200, 201}, object, false},
        {"delete", "delete", "delete" + id, "delete a " + k, del, Body::kDeleteOptions,
         {200, 202}, status, false}}});
  paths.push_back(
      {base + "/{name}/status",
       true,
       {{"get", "get", "read" + id + "Status", "read status of the specified " + k, {},
         Body::kNone, {200}, object, false},
        {"put", "put", "replace" + id + "Status", "replace status of the specified " + k, write,
         Body::kObject, {200, 201}, object, false},
        {"patch", "patch", "patch" + id + "Status",
         "partially update status of the specified " + k, patch, Body::kPatch, {200, 201},
         object, false}}});
  paths.push_back({watch_base,
                   false,
                   {{"get", "watchlist", "watch" + id + "List",
                     "watch individual changes to a list of " + k +
                         ". deprecated: use the 'watch' parameter with a list operation instead.",
                     ListParams(), Body::kNone, {200}, event, true}}});
  paths.push_back({watch_base + "/{name}",
                   true,
                   {{"get", "watch", "watch" + id,
                     "watch changes to an object of kind " + k +
                         ". deprecated: use the 'watch' parameter with a list operation instead, "
                         "filtered to a single item with the 'fieldSelector' parameter.",
                     ListParams(), Body::kNone, {200}, event, true}}});
  return paths;
}

void WriteParam(JsonWriter& w, bool v3, const Param& p) {
  w.StartObject();
  JsonField(w, "name", p.name);
  JsonField(w, "in", p.in);
  JsonField(w, "description", p.description);
  if (std::string_view(p.in) == "path") {
    JsonKey(w, "required");
    w.Bool(true);
  }
  if (v3) {
    JsonKey(w, "schema");
    w.StartObject();
    JsonField(w, "type", p.type);
    w.EndObject();
  } else {
    JsonField(w, "type", p.type);
  }
  w.EndObject();
}

const char* BodyDefinitionSuffix(Body body) {
  switch (body) {
    case Body::kDeleteOptions:
      return "DeleteOptions";
    case Body::kPatch:
      return "Patch";
    default:
      return "";
  }
}

std::string BodyDefinition(Body body, const Operation& op) {
  if (body == Body::kObject) return op.response_def;
  return Meta(BodyDefinitionSuffix(body));
}

constexpr const char* kPatchTypes[] = {"application/json-patch+json",
                                       "application/merge-patch+json",
                                       "application/apply-patch+yaml"};

void WriteOperation(JsonWriter& w, bool v3, const Operation& op, std::string_view kind) {
  JsonKey(w, op.method);
  w.StartObject();
  JsonField(w, "description", op.description);
  if (!v3) {
    JsonKey(w, "consumes");
    w.StartArray();
    if (op.body == Body::kPatch) {
      for (const char* t : kPatchTypes) w.String(t);
    } else {
      w.String("*/*");
    }
    w.EndArray();
    JsonKey(w, "produces");
    w.StartArray();
    w.String(kJson);
    if (op.streams) w.String("application/json;stream=watch");
    w.EndArray();
    JsonKey(w, "schemes");
    w.StartArray();
    w.String("https");
    w.EndArray();
  }
  JsonKey(w, "tags");
  w.StartArray();
  w.String("coordinationPool_v1alpha1");
  w.EndArray();
  JsonField(w, "operationId", op.operation_id);

  bool v2_body = !v3 && op.body != Body::kNone;
  if (!op.params.empty() || v2_body) {
    JsonKey(w, "parameters");
    w.StartArray();
    if (v2_body) {
      w.StartObject();
      JsonField(w, "name", "body");
      JsonField(w, "in", "body");
      JsonKey(w, "required");
      w.Bool(op.body != Body::kDeleteOptions);
      JsonKey(w, "schema");
      WriteRef(w, false, BodyDefinition(op.body, op));
      w.EndObject();
    }
    for (const Param* p : op.params) WriteParam(w, v3, *p);
    w.EndArray();
  }
  if (v3 && op.body != Body::kNone) {
    JsonKey(w, "requestBody");
    w.StartObject();
    JsonKey(w, "content");
    w.StartObject();
    const std::string def = BodyDefinition(op.body, op);
    if (op.body == Body::kPatch) {
      for (const char* t : kPatchTypes) {
        JsonKey(w, t);
        w.StartObject();
        JsonKey(w, "schema");
        WriteRef(w, true, def);
        w.EndObject();
      }
    } else {
      JsonKey(w, "*/*");
      w.StartObject();
      JsonKey(w, "schema");
      WriteRef(w, true, def);
      w.EndObject();
    }
    w.EndObject();
    JsonKey(w, "required");
    w.Bool(op.body != Body::kDeleteOptions);
    w.EndObject();
  }

  JsonKey(w, "responses");
  w.StartObject();
  for (int code : op.codes) {
    JsonKey(w, std::to_string(code));
    w.StartObject();
    JsonField(w, "description", code == 200 ? "OK" : code == 201 ? "Created" : "Accepted");
    if (v3) {
      JsonKey(w, "content");
      w.StartObject();
      JsonKey(w, kJson);
      w.StartObject();
      JsonKey(w, "schema");
      WriteRef(w, true, op.response_def);
      w.EndObject();
      if (op.streams) {
        JsonKey(w, "application/json;stream=watch");
        w.StartObject();
        JsonKey(w, "schema");
        WriteRef(w, true, op.response_def);
        w.EndObject();
      }
      w.EndObject();
    } else {
      JsonKey(w, "schema");
      WriteRef(w, false, op.response_def);
    }
    w.EndObject();
  }
  JsonKey(w, "401");
  w.StartObject();
  JsonField(w, "description", "Unauthorized");
  w.EndObject();
  w.EndObject();

  JsonField(w, "x-kubernetes-action", op.action);
  JsonKey(w, "x-kubernetes-group-version-kind");
  WriteGvk(w, kind);
  w.EndObject();
}

void WritePaths(JsonWriter& w, bool v3) {
  JsonKey(w, "paths");
  w.StartObject();
  for (const registry::Strategy* kind : registry::AllKinds()) {
    const char* kind_name = kind->Info().kind_name;
    for (const PathItem& item : PathsFor(kind->Info())) {
      JsonKey(w, item.path);
      w.StartObject();
      for (const Operation& op : item.operations) WriteOperation(w, v3, op, kind_name);
      if (item.has_name) {
        JsonKey(w, "parameters");
        w.StartArray();
        WriteParam(w, v3, kName);
        w.EndArray();
      }
      w.EndObject();
    }
  }
  w.EndObject();
}

void WriteInfo(JsonWriter& w) {
  JsonKey(w, "info");
  w.StartObject();
  JsonField(w, "title", "poolcoord");
  JsonField(w, "version", store::kVersion);
  w.EndObject();
}

void WriteDefinitions(JsonWriter& w, bool v3) {
  w.StartObject();
  for (const Definition& d : MetaDefinitions()) WriteDefinition(w, v3, d);
  for (const Definition& d : OurDefinitions()) WriteDefinition(w, v3, d);
  w.EndObject();
}

std::string RenderV2() {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  JsonField(w, "swagger", "2.0");
  WriteInfo(w);
  WritePaths(w, false);
  JsonKey(w, "definitions");
  WriteDefinitions(w, false);
  w.EndObject();
  return buf.GetString();
}

std::string RenderV3() {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  JsonField(w, "openapi", "3.0.0");
  WriteInfo(w);
  WritePaths(w, true);
  JsonKey(w, "components");
  w.StartObject();
  JsonKey(w, "schemas");
  WriteDefinitions(w, true);
  w.EndObject();
  w.EndObject();
  return buf.GetString();
}

std::string UpperHexSha256(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::AsciiStrToUpper(absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest))));
}

struct Document {
  std::string body;
  std::string hash;  // upper-case hex sha256 of body
  std::string etag;  // "\"" + hash + "\""
};

Document MakeDocument(std::string body) {
  Document d;
  d.body = std::move(body);
  d.hash = UpperHexSha256(d.body);
  d.etag = Cat("\"", d.hash, "\"");
  return d;
}

const Document& V2() {
  static const Document* const doc = new Document(MakeDocument(RenderV2()));
  return *doc;
}

const Document& V3() {
  static const Document* const doc = new Document(MakeDocument(RenderV3()));
  return *doc;
}

std::string V3Url() { return Cat(kV3Path, "?hash=", V3().hash); }

const Document& V3Root() {
  static const Document* const doc = [] {
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    w.StartObject();
    JsonKey(w, "paths");
    w.StartObject();
    JsonKey(w, Cat("apis/", store::kGroupVersion));
    w.StartObject();
    JsonField(w, "serverRelativeURL", V3Url());
    w.EndObject();
    w.EndObject();
    w.EndObject();
    return new Document(MakeDocument(buf.GetString()));
  }();
  return *doc;
}

bool AdmitsJson(const Request& request) {
  for (const MediaRange& r : ParseAccept(request.Header("accept"))) {
    if (r.IsPlainJson()) return true;
  }
  return false;
}

// Serves `doc` with its ETag, or 304 when the client has it.
Response ServeDocument(const Request& request, const Document& doc, Response r) {
  r.SetHeader("Content-Type", kJson);
  r.SetHeader("ETag", doc.etag);
  if (IfNoneMatchMatches(request.Header("if-none-match"), doc.etag)) {
    r.status = 304;
    return r;
  }
  r.status = 200;
  r.body = doc.body;
  return r;
}

// An HTTP-date (RFC 9110 IMF-fixdate) one year from now, as kube-openapi's handler3
// sets Expires for a hash URL.
std::string ExpiresInOneYear() {
  absl::Time now = absl::Now();
  absl::CivilSecond cs = absl::ToCivilSecond(now, absl::UTCTimeZone());
  absl::Time later = absl::FromCivil(
      absl::CivilSecond(cs.year() + 1, cs.month(), cs.day(), cs.hour(), cs.minute(), cs.second()),
      absl::UTCTimeZone());
  return absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", later, absl::UTCTimeZone());
}

}  // namespace

namespace openapi {

std::string Meta(std::string_view type) { return Cat(kMeta, type); }
std::string Ours(std::string_view type) { return Cat(kOurs, type); }

Definition KindDefinition(std::string_view kind, std::string description,
                          std::string metadata_doc, std::string spec_doc,
                          std::string status_doc) {
  return {Ours(kind),
          std::move(description),
          "object",
          "",
          {StringProp("apiVersion", kApiVersionDoc), StringProp("kind", kKindDoc),
           RefProp("metadata", Meta("ObjectMeta"), std::move(metadata_doc)),
           RefProp("spec", Ours(Cat(kind, "Spec")), std::move(spec_doc)),
           RefProp("status", Ours(Cat(kind, "Status")), std::move(status_doc))},
          {"spec"},
          std::string(kind)};
}

}  // namespace openapi

const std::string& OpenApiV3Hash() { return V3().hash; }

Response ServeOpenApiV2(const Request& request) {
  if (!AdmitsJson(request)) return NotAcceptableResponse(kJson);
  return ServeDocument(request, V2(), Response{});
}

Response ServeOpenApiV3Root(const Request& request) {
  if (!AdmitsJson(request)) return NotAcceptableResponse(kJson);
  return ServeDocument(request, V3Root(), Response{});
}

Response ServeOpenApiV3GroupVersion(const Request& request) {
  if (!AdmitsJson(request)) return NotAcceptableResponse(kJson);
  const Document& doc = V3();
  Response r;
  if (request.HasQuery("hash")) {
    if (request.Query("hash") != doc.hash) {
      // A stale (or foreign) hash: send the client to the current content.
      r.status = 301;
      r.SetHeader("Location", V3Url());
      r.SetHeader("Content-Type", kJson);
      return r;
    }
    r.SetHeader("Vary", "Accept");
    r.SetHeader("Cache-Control", "public, immutable");
    r.SetHeader("Expires", ExpiresInOneYear());
  }
  return ServeDocument(request, doc, std::move(r));
}

}  // namespace poolcoord::handlers
