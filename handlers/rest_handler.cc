#include "handlers/rest_handler.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "handlers/field_manager.h"
#include "handlers/json_input.h"
#include "handlers/list_options.h"
#include "handlers/media_types.h"
#include "handlers/patch.h"
#include "handlers/registry/generic_store.h"
#include "handlers/registry/registry.h"
#include "handlers/status_mapping.h"
#include "handlers/table.h"
#include "handlers/type_meta.h"
#include "handlers/watch_handler.h"
#include "handlers/yaml_input.h"
#include "handlers/yaml_output.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {
namespace {

using registry::GenericStore;
using store::Kind;
using store::MutableObjectPtr;
using store::Object;
using store::ObjectPtr;

constexpr char kJsonPatch[] = "application/json-patch+json";
constexpr char kMergePatch[] = "application/merge-patch+json";
constexpr char kApplyPatch[] = "application/apply-patch+yaml";

Response JsonResponse(int status, std::string body) {
  Response r;
  r.status = status;
  r.SetHeader("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

// The dryRun query parameter (and DeleteOptions.dryRun): only "All" is valid, as
// k8s.io/apiserver's ValidateDryRun says.
// A bad value is 422 against the request's options kind (`CreateOptions.meta.k8s.io
// "" is invalid: dryRun: Unsupported value: "Bogus": supported values: "All"`).
absl::Status InvalidOptions(std::string_view kind, std::vector<store::FieldCause> causes);
absl::StatusOr<bool> DryRun(const Request& request, std::string_view options_kind) {
  bool dry = false;
  for (const auto& [key, value] : request.query) {
    if (key != "dryRun") continue;
    if (value != "All") {
      return InvalidOptions(options_kind,
                            {store::FieldNotSupported("dryRun", absl::StrCat("\"", value, "\""),
                                                      "supported values: \"All\"")});
    }
    dry = true;
  }
  return dry;
}

enum class FieldValidation { kIgnore, kWarn, kStrict };

// As apimachinery's ValidateFieldValidation judges it for CreateOptions,
// UpdateOptions and PatchOptions: another value is 422 of the options kind.
absl::StatusOr<FieldValidation> ParseFieldValidation(const Request& request,
                                                     std::string_view options_kind) {
  std::string_view v = request.Query("fieldValidation");
  if (v.empty() || v == "Warn") return FieldValidation::kWarn;
  if (v == "Strict") return FieldValidation::kStrict;
  if (v == "Ignore") return FieldValidation::kIgnore;
  return InvalidOptions(
      options_kind, {store::FieldNotSupported("fieldValidation", base::GoQuote(v),
                                              "supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"")});
}

// What strict decoding found, as kube-apiserver lists it: repeated keys in
// document order, then unknown fields sorted ("duplicate field \"spec.x\"",
// "unknown field \"spec.y\"").
std::vector<std::string> StrictFindings(const std::vector<DuplicateField>& duplicates,
                                        std::vector<std::string> unknown,
                                        std::string_view duplicate_prefix = "") {
  std::vector<std::string> out;
  for (const DuplicateField& d : duplicates) {
    out.push_back(absl::StrCat(base::Av(duplicate_prefix), "duplicate field \"", d.path, "\""));
  }
  std::sort(unknown.begin(), unknown.end());
  for (const std::string& f : unknown) out.push_back(absl::StrCat("unknown field \"", f, "\""));
  return out;
}

std::string JoinFindings(const std::vector<std::string>& findings) {
  std::string out = "strict decoding error: ";
  for (size_t i = 0; i < findings.size(); ++i) absl::StrAppend(&out, i ? ", " : "", findings[i]);
  return out;
}

// Create and update bodies: Strict fails the request (400, as kube-apiserver's
// decoder words it), Warn adds one Warning header per finding. A YAML body's
// repeated keys (`line 4: key "x" already set in map`) come first, as go-yaml's
// unmarshal errors.
absl::Status ApplyFieldValidation(FieldValidation mode, Kind kind, const BodyTypeMeta& type_meta,
                                  const std::vector<std::string>& yaml_duplicates,
                                  const std::vector<std::string>& findings,
                                  std::vector<std::string>* warnings) {
  if ((findings.empty() && yaml_duplicates.empty()) || mode == FieldValidation::kIgnore) {
    return absl::OkStatus();
  }
  if (mode == FieldValidation::kStrict) {
    std::string message = CannotBeHandledAs(type_meta, kind);
    if (yaml_duplicates.empty()) {
      absl::StrAppend(&message, JoinFindings(findings));
    } else {
      absl::StrAppend(&message, "strict decoding error: yaml: unmarshal errors:");
      for (const std::string& d : yaml_duplicates) absl::StrAppend(&message, "\n  ", d);
      for (const std::string& f : findings) absl::StrAppend(&message, ", ", f);
    }
    return store::BadRequestError(message);
  }
  warnings->insert(warnings->end(), yaml_duplicates.begin(), yaml_duplicates.end());
  warnings->insert(warnings->end(), findings.begin(), findings.end());
  return absl::OkStatus();
}

std::string CompactJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

// A patched object that does not decode: 422 against the field "patch", with the
// patched object, as kube-apiserver's patcher reports it (`"" is invalid: patch:
// Invalid value: "{...}": <why>`).
absl::Status PatchInvalid(const rapidjson::Value& patched, std::string_view why) {
  store::FieldCause cause = store::FieldInvalid("patch", base::GoQuote(CompactJson(patched)), why);
  store::ApiErrorInfo info;
  info.code = 422;
  info.reason = "Invalid";
  info.message = absl::StrCat(" \"\" is invalid: ", cause.field, ": ", cause.message);
  info.causes.push_back(std::move(cause));
  return store::MakeApiError(absl::StatusCode::kInvalidArgument, info);
}

// Patches: Strict is 422 against the field "patch" (`... strict decoding error:
// ...`).
absl::Status ApplyPatchFieldValidation(FieldValidation mode, const rapidjson::Value& patched,
                                       const std::vector<std::string>& findings,
                                       std::vector<std::string>* warnings) {
  if (findings.empty() || mode == FieldValidation::kIgnore) return absl::OkStatus();
  if (mode == FieldValidation::kWarn) {
    warnings->insert(warnings->end(), findings.begin(), findings.end());
    return absl::OkStatus();
  }
  return PatchInvalid(patched, JoinFindings(findings));
}

// Encoding/json's refusals of a body's ObjectMeta (store::DecodeObject's 400s
// that start "json: ") as kube-apiserver words them for a decoded kind and version.
absl::Status DecodeFailure(absl::Status status, const BodyTypeMeta& type_meta, Kind kind) {
  store::ApiErrorInfo info = store::ApiErrorFromStatus(status);
  if (info.code != 400 || !absl::StartsWith(info.message, "json: ")) return status;
  return store::BadRequestError(absl::StrCat(CannotBeHandledAs(type_meta, kind), info.message));
}

bool IsBlank(std::string_view body) {
  return std::all_of(body.begin(), body.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  });
}

// What a write through an endpoint resets anyway (status on the main resource,
// spec on /status, as kube-apiserver's strategies for a custom resource with a
// status subresource do before validating) is not judged.
void DropResetCauses(registry::Subresource subresource, std::vector<store::FieldCause>* causes) {
  const std::string_view reset = subresource == registry::Subresource::kStatus ? "spec" : "status";
  causes->erase(std::remove_if(causes->begin(), causes->end(),
                               [reset](const store::FieldCause& c) {
                                 std::string_view f = c.field;
                                 return f.substr(0, reset.size()) == reset &&
                                        (f.size() == reset.size() || f[reset.size()] == '.' ||
                                         f[reset.size()] == '[');
                               }),
                causes->end());
  // A /status write validates the status alone, as kube-apiserver's status
  // strategy for a custom resource does: its messages name the field from there
  // ("phase in body must be ...", field status.phase).
  if (subresource != registry::Subresource::kStatus) return;
  for (store::FieldCause& c : *causes) {
    if (c.type != "FieldValueTypeInvalid" || !absl::StartsWith(c.field, "status.")) continue;
    const std::string from = absl::StrCat(c.field, " in body");
    if (size_t at = c.message.find(from); at != std::string::npos) {
      c.message.replace(at, from.size(), absl::StrCat(c.field.substr(7), " in body"));
    }
  }
}

// The schema requires spec (a CustomResourceDefinition's validation says
// `spec: Required value`); null and absent are the same.
bool HasSpec(const rapidjson::Value& doc) {
  if (!doc.IsObject()) return false;
  auto it = doc.FindMember("spec");
  return it != doc.MemberEnd() && !it->value.IsNull();
}

absl::Status SpecRequired(Kind kind, const std::string& name) {
  return store::InvalidError(store::InfoFor(kind).kind_name, name,
                             {store::FieldRequired("spec")});
}

// Warning headers as k8s.io/apiserver's warning recorder writes them: each text
// once, and at most kWarningTotalRunes of text in all; past that, every warning
// is cut to kWarningItemRunes and those that still fit are sent, the rest
// dropped. (16,000 unknown fields once made 7,657 Warning lines, 365 KB, and the
// response broke off inside its header.)
constexpr size_t kWarningTotalRunes = 4 * 1024;
constexpr size_t kWarningItemRunes = 256;

size_t RuneCount(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string_view FirstRunes(std::string_view s, size_t runes) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && n++ == runes) return s.substr(0, i);
  }
  return s;
}

void AddWarnings(Response* r, const std::vector<std::string>& warnings) {
  std::vector<std::string_view> texts;
  absl::flat_hash_set<std::string_view> seen;
  size_t total = 0;
  for (const auto& w : warnings) {
    if (w.empty() || !seen.insert(w).second) continue;
    texts.push_back(w);
    total += RuneCount(w);
  }
  if (total > kWarningTotalRunes) {
    std::vector<std::string_view> fitting;
    total = 0;
    for (std::string_view t : texts) {
      t = FirstRunes(t, kWarningItemRunes);
      total += RuneCount(t);
      if (total > kWarningTotalRunes) break;
      fitting.push_back(t);
    }
    texts = std::move(fitting);
  }
  for (std::string_view w : texts) {
    std::string escaped;
    for (char c : w) {
      if (c == '"' || c == '\\') escaped.push_back('\\');
      escaped.push_back(c);
    }
    r->SetHeader("Warning", absl::StrCat("299 - \"", escaped, "\""));
  }
}

// A create or update body: JSON, or YAML as kube-apiserver also takes for a
// custom resource.
absl::StatusOr<bool> IsYamlWriteBody(const Request& request) {
  std::string_view ct = request.Header("content-type");
  if (ct.empty() || MediaTypeIs(ct, "application/json")) return false;
  if (MediaTypeIs(ct, "application/yaml")) return true;
  return store::UnsupportedMediaTypeError(absl::StrCat(
      "the body of the request was in an unknown format - accepted media types include: "
      "application/json, application/yaml (got \"",
      std::string(ct), "\")"));
}

absl::Status CheckJsonContentType(const Request& request) {
  std::string_view ct = request.Header("content-type");
  if (ct.empty() || MediaTypeIs(ct, "application/json")) return absl::OkStatus();
  return store::UnsupportedMediaTypeError(absl::StrCat(
      "the body of the request was in an unknown format - accepted media types include: "
      "application/json (got \"",
      std::string(ct), "\")"));
}

// A JSON request body: invalid UTF-8 as U+FFFD, repeated keys found and
// dropped but the last (handlers/json_input.h).
absl::StatusOr<JsonBody> ParseBody(std::string_view body) { return ParseJsonBody(body); }

struct DecodedBody {
  MutableObjectPtr object;
  BodyTypeMeta type_meta;
  std::vector<std::string> yaml_duplicates;  // for fieldValidation: "line 4: key ..."
  std::vector<std::string> findings;  // for fieldValidation
  // The schema's refusals (store::DecodeObject's field_causes, `spec: Required
  // value`), for the registry to report with its own validation.
  std::vector<store::FieldCause> causes;
};

// A create or update body, in kube-apiserver's order for a custom resource:
// apiVersion and kind (400, handlers/type_meta.h), ObjectMeta as encoding/json
// decodes it (400), a kind not ours (422); then the schema's field errors.
absl::StatusOr<DecodedBody> DecodeBody(Kind kind, std::string_view body,
                                       registry::Subresource subresource, bool yaml) {
  if (IsBlank(body)) return EmptyBodyError(body, kind);
  auto parsed = yaml ? ParseYamlBody(body) : ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  DecodedBody out;
  if (yaml) {
    for (const DuplicateField& d : parsed->duplicates) {
      out.yaml_duplicates.push_back(
          absl::StrCat("line ", d.line, ": key ", base::GoQuote(d.key), " already set in map"));
    }
    parsed->duplicates.clear();
  }
  auto type_meta = CheckBodyTypeMeta(parsed->doc, body, kind);
  if (!type_meta.ok()) return type_meta.status();
  out.type_meta = *std::move(type_meta);
  std::vector<std::string> unknown;
  auto obj = store::DecodeObject(parsed->doc, kind, &unknown, &out.causes);
  if (!obj.ok()) return DecodeFailure(obj.status(), out.type_meta, kind);
  out.object = *std::move(obj);
  out.findings = StrictFindings(parsed->duplicates, std::move(unknown));
  if (subresource == registry::Subresource::kMain && !HasSpec(parsed->doc)) {
    out.causes.push_back(store::FieldRequired("spec"));
  }
  DropResetCauses(subresource, &out.causes);
  return out;
}

// 422 against an options kind of meta.k8s.io, as errors.NewInvalid(
// schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs) words it:
// `DeleteOptions.meta.k8s.io "" is invalid: ...`.
absl::Status InvalidOptions(std::string_view kind, std::vector<store::FieldCause> causes) {
  store::ApiErrorInfo info = store::ApiErrorFromStatus(store::InvalidError(kind, "", std::move(causes)));
  info.message = absl::StrCat(std::string(kind), ".meta.k8s.io", info.message.substr(info.message.find(' ')));
  info.group = "meta.k8s.io";
  return store::MakeApiError(absl::StatusCode::kInvalidArgument, info);
}

// The fieldManager query parameter, as k8s.io/apimachinery's ValidateFieldManager:
// at most 128 bytes, printable characters only (checked here for ASCII).
absl::Status ValidateFieldManager(const Request& request, std::string_view options_kind) {
  std::string_view manager = request.Query("fieldManager");
  std::vector<store::FieldCause> causes;
  if (manager.size() > 128) {
    causes.push_back(store::FieldTooLong("fieldManager", "may not be more than 128 bytes"));
  }
  for (size_t i = 0; i < manager.size(); ++i) {
    auto c = static_cast<unsigned char>(manager[i]);
    if (c < 0x20 || c == 0x7f) {
      causes.push_back(store::FieldInvalid(
          "fieldManager", absl::StrCat("\"", std::string(manager), "\""),
          absl::StrFormat("invalid character U+%04X (at position %d)", c, i)));
    }
  }
  if (causes.empty()) return absl::OkStatus();
  return InvalidOptions(options_kind, std::move(causes));
}

// The body of a create or update, decoded, with the write's query options.
struct DecodedWrite {
  MutableObjectPtr object;
  std::vector<std::string> warnings;  // fieldValidation=Warn
  std::vector<store::FieldCause> causes;  // DecodedBody::causes
  bool dry_run = false;
};

absl::StatusOr<DecodedWrite> DecodeWrite(const Request& request, Kind kind,
                                         std::string_view options_kind,
                                         registry::Subresource subresource) {
  auto yaml = IsYamlWriteBody(request);
  if (!yaml.ok()) return yaml.status();
  if (absl::Status s = ValidateFieldManager(request, options_kind); !s.ok()) return s;
  DecodedWrite out;
  auto dry = DryRun(request, options_kind);
  if (!dry.ok()) return dry.status();
  out.dry_run = *dry;
  auto validation = ParseFieldValidation(request, options_kind);
  if (!validation.ok()) return validation.status();
  auto decoded = DecodeBody(kind, request.body, subresource, *yaml);
  if (!decoded.ok()) return decoded.status();
  out.object = std::move(decoded->object);
  out.causes = std::move(decoded->causes);
  if (absl::Status s = ApplyFieldValidation(*validation, kind, decoded->type_meta,
                                            decoded->yaml_duplicates, decoded->findings, &out.warnings);
      !s.ok()) {
    return s;
  }
  return out;
}

std::string EncodeOne(const Object& o) { return store::EncodeObject(o); }

// Output format of a read, from the Accept header.
enum class Format { kJson, kTable, kPartial };

absl::StatusOr<Format> NegotiateFormat(const Request& request, bool list) {
  if (PrefersYaml(request)) return Format::kJson;  // ServeResource re-encodes it
  if (WantsTable(request)) {
    if (absl::Status s = ValidateTableOptions(request); !s.ok()) return s;
    return Format::kTable;
  }
  if (WantsPartialObjectMetadata(request, list)) return Format::kPartial;
  if (AcceptsJson(request.Header("accept"))) return Format::kJson;
  return store::NotAcceptableError(absl::StrCat(
      "only the following media types are accepted: application/json, application/yaml, "
      "application/json;as=Table;v=v1;g=meta.k8s.io, "
      "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io (got \"",
      std::string(request.Header("accept")), "\")"));
}

// The JSON list of a kind: {"kind":"<Kind>List","apiVersion":...,"metadata":
// {"resourceVersion":..[,"continue":..,"remainingItemCount":..]},"items":[...]}.
std::string ListJson(const store::ResourceInfo& info, const registry::ListPage& page) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("kind");
  const std::string list_kind = absl::StrCat(info.kind_name, "List");
  w.String(list_kind.c_str(), list_kind.size());
  w.Key("apiVersion");
  w.String(store::kGroupVersion);
  w.Key("metadata");
  w.StartObject();
  const std::string rv = std::to_string(page.revision);
  w.Key("resourceVersion");
  w.String(rv.c_str(), rv.size());
  if (!page.continue_token.empty()) {
    w.Key("continue");
    w.String(page.continue_token.c_str(), page.continue_token.size());
    w.Key("remainingItemCount");
    w.Int64(page.remaining);
  }
  w.EndObject();
  w.Key("items");
  w.StartArray();
  for (const auto& item : page.items) store::WriteObject(w, *item);
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

Response WriteResponse(int status, const store::WriteResult& result,
                       const std::vector<std::string>& warnings) {
  Response r = JsonResponse(status, EncodeOne(*result.object));
  AddWarnings(&r, warnings);
  return r;
}

absl::Status NameMismatch(const std::string& in_body, const std::string& in_url) {
  return store::BadRequestError(absl::StrCat("the name of the object (", in_body,
                                              ") does not match the name on the URL (", in_url,
                                              ")"));
}

// Who writes, for the managedFields of a write (handlers/field_manager.h).
FieldManagerRequest ManagerOf(const GenericStore& storage, const Request& request,
                              std::string_view subresource) {
  FieldManagerRequest r;
  r.kind = storage.strategy().kind();
  r.schema = &storage.strategy().MergeSchema().root();
  r.reset_fields = &storage.strategy().ResetFields(
      subresource == "status" ? registry::Subresource::kStatus : registry::Subresource::kMain);
  r.manager = RequestManager(request.Query("fieldManager"), request.Header("user-agent"));
  r.subresource = std::string(subresource);
  r.now_s = storage.NowMicros() / 1000000;
  return r;
}

registry::Subresource SubresourceOf(const ResourcePath& path) {
  return path.subresource == "status" ? registry::Subresource::kStatus
                                      : registry::Subresource::kMain;
}

// --- reads

// A resourceVersion newer than the store's gets 504 ResourceVersionTooLarge, as
// list and watch answer it and as kube-apiserver's cacher answers a get whose
// revision did not arrive (storage.NewTooLargeResourceVersionError). The cacher
// waits up to 3 s for its cache to catch up with etcd; our current revision is
// read from the store itself (etcd, not a cache that lags it), so the revision
// asked for was written nowhere yet and the answer comes at once, as for list
// and watch. Other values read the newest state, which is not older than any.
Response Get(store::Store* store, const GenericStore& storage, const ResourcePath& path,
             Request& request) {
  auto format = NegotiateFormat(request, false);
  if (!format.ok()) return ErrorResponse(format.status());
  if (int64_t rv = 0; absl::SimpleAtoi(base::Av(request.Query("resourceVersion")), &rv)) {
    if (const int64_t current = store->CurrentRevision(); rv > current) {
      return ErrorResponse(store::TimeoutError(
          absl::StrCat("Too large resource version: ", rv, ", current: ", current), true));
    }
  }
  auto obj = storage.Get(path.name);
  if (!obj.ok()) return ErrorResponse(obj.status());
  const Object& o = **obj;
  switch (*format) {
    case Format::kTable:
      return JsonResponse(200, RenderTable(path.kind, {*obj}, std::to_string(o.metadata.resource_version),
                                           request.Query("includeObject"), true, storage.NowMicros()));
    case Format::kPartial:
      return JsonResponse(200, RenderPartialObjectMetadata(o));
    case Format::kJson:
      break;
  }
  return JsonResponse(200, EncodeOne(o));
}

Response List(const GenericStore& storage, const ResourcePath& path, Request& request,
              const ListOptions& opts) {
  auto format = NegotiateFormat(request, true);
  if (!format.ok()) return ErrorResponse(format.status());
  auto page = storage.List(opts);
  if (!page.ok()) return ErrorResponse(page.status());
  const std::string rv = std::to_string(page->revision);
  switch (*format) {
    case Format::kTable:
      return JsonResponse(200, RenderTable(path.kind, page->items, rv, request.Query("includeObject"),
                                           true, storage.NowMicros(), page->continue_token,
                                           page->remaining));
    case Format::kPartial:
      return JsonResponse(200, RenderPartialObjectMetadataList(page->items, rv, page->continue_token,
                                                               page->remaining));
    case Format::kJson:
      break;
  }
  return JsonResponse(200, ListJson(storage.strategy().Info(), *page));
}

// --- writes

Response Create(const GenericStore& storage, Request& request) {
  auto decoded = DecodeWrite(request, storage.strategy().kind(), "CreateOptions",
                             registry::Subresource::kMain);
  if (!decoded.ok()) return ErrorResponse(decoded.status());
  // The change the client asked for, before the store's own stamps, as
  // kube-apiserver's create handler records it.
  RecordUpdate(nullptr, *decoded->object, ManagerOf(storage, request, ""));
  if (decoded->causes.empty()) storage.Precheck(request.user, *decoded->object);
  std::vector<std::string> warnings = std::move(decoded->warnings);
  auto result = storage.Create(request.user, std::move(decoded->object), decoded->dry_run, &warnings,
                            decoded->causes);
  if (!result.ok()) return ErrorResponse(result.status());
  return WriteResponse(201, *result, warnings);
}

Response Update(const GenericStore& storage, const ResourcePath& path, Request& request) {
  const registry::Subresource subresource = SubresourceOf(path);
  auto decoded = DecodeWrite(request, path.kind, "UpdateOptions", subresource);
  if (!decoded.ok()) return ErrorResponse(decoded.status());
  MutableObjectPtr& obj = decoded->object;
  if (obj->metadata.name.empty()) obj->metadata.name = path.name;
  if (obj->metadata.name != path.name) return ErrorResponse(NameMismatch(obj->metadata.name, path.name));
  const FieldManagerRequest manager = ManagerOf(storage, request, path.subresource);
  if (subresource == registry::Subresource::kMain && decoded->causes.empty()) {
    storage.Precheck(request.user, *obj);
  }
  registry::UpdateOptions options;
  options.decode_causes = &decoded->causes;
  std::vector<std::string> warnings = std::move(decoded->warnings);
  auto result = storage.Update(
      request.user, path.name, subresource,
      [&obj, &manager](const ObjectPtr& current) -> absl::StatusOr<MutableObjectPtr> {
        auto next = std::make_shared<Object>(*obj);
        RecordUpdate(current.get(), *next, manager);
        return next;
      },
      decoded->dry_run, &warnings, options);
  if (!result.ok()) return ErrorResponse(result.status());
  return WriteResponse(200, *result, warnings);
}

// PatchOptions as ValidatePatchOptions checks them (422 PatchOptions.meta.k8s.io):
// force only with an apply patch, and an apply patch needs a fieldManager.
absl::Status ValidatePatchOptions(const Request& request, bool apply) {
  if (absl::Status s = ValidateFieldManager(request, "PatchOptions"); !s.ok()) return s;
  if (!apply && request.HasQuery("force")) {
    return InvalidOptions("PatchOptions",
                          {store::FieldForbidden("force", "may not be specified for non-apply patch")});
  }
  if (apply && request.Query("fieldManager").empty()) {
    return InvalidOptions("PatchOptions",
                          {store::FieldRequired("fieldManager", "is required for apply patch")});
  }
  return absl::OkStatus();
}

// Server-side apply: the configuration merged onto the object (or creating it),
// fields owned per manager, conflicts as 409 unless forced (handlers/apply.h).
// Repeated keys are judged by fieldValidation with the YAML line, as
// kube-apiserver's apply patcher does; before the apply runs, so that a Strict
// refusal never waits behind a conflict.
Response Apply(const GenericStore& storage, const ResourcePath& path, Request& request,
               FieldValidation validation, bool dry_run) {
  auto body = ParseYamlBody(request.body);
  if (!body.ok()) return ErrorResponse(body.status());
  std::vector<std::string> duplicates;
  for (const DuplicateField& d : body->duplicates) {
    duplicates.push_back(
        absl::StrCat("line ", d.line, ": key ", base::GoQuote(d.key), " already set in map"));
  }
  if (!duplicates.empty() && validation == FieldValidation::kStrict) {
    std::string msg =
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:";
    for (const std::string& l : duplicates) absl::StrAppend(&msg, "\n  ", l);
    return ErrorResponse(store::BadRequestError(msg));
  }
  const FieldManagerRequest manager = ManagerOf(storage, request, path.subresource);
  if (absl::Status s = CheckApplyConfiguration(body->doc, path.kind, *manager.schema, path.name);
      !s.ok()) {
    return ErrorResponse(s);
  }
  const registry::Subresource subresource = SubresourceOf(path);
  // What a write through this endpoint resets anyway (status on the main
  // resource, spec on /status) is neither merged, judged nor owned.
  body->doc.RemoveMember(subresource == registry::Subresource::kStatus ? "spec" : "status");
  std::vector<std::string> warnings;
  if (validation == FieldValidation::kWarn) warnings = std::move(duplicates);
  const bool force = request.QueryBool("force");
  registry::UpdateOptions options;
  options.create_if_missing = true;
  auto result = storage.Update(
      request.user, path.name, subresource,
      [&](const ObjectPtr& current) -> absl::StatusOr<MutableObjectPtr> {
        auto applied = ApplyConfiguration(current.get(), body->doc, manager, force);
        if (!applied.ok()) return applied.status();
        MutableObjectPtr next = std::move(applied->object);
        if (subresource == registry::Subresource::kMain && next->spec == store::LeaseSpec{}) {
          return SpecRequired(path.kind, path.name);
        }
        if (current == nullptr) next->metadata.name = path.name;
        return next;
      },
      dry_run, &warnings, options);
  if (!result.ok()) return ErrorResponse(result.status());
  return WriteResponse(result->created ? 201 : 200, *result, warnings);
}

Response Patch(const GenericStore& storage, const ResourcePath& path, Request& request) {
  std::string_view ct = request.Header("content-type");
  const bool json_patch = MediaTypeIs(ct, kJsonPatch);
  const bool merge_patch = MediaTypeIs(ct, kMergePatch);
  const bool apply_patch = MediaTypeIs(ct, kApplyPatch);
  if (!json_patch && !merge_patch && !apply_patch) {
    return ErrorResponse(store::UnsupportedMediaTypeError(absl::StrCat(
        "the body of the request was in an unknown format - accepted media types include: ",
        kJsonPatch, ", ", kMergePatch, ", ", kApplyPatch)));
  }
  if (absl::Status s = ValidatePatchOptions(request, apply_patch); !s.ok()) return ErrorResponse(s);
  auto dry = DryRun(request, "PatchOptions");
  if (!dry.ok()) return ErrorResponse(dry.status());
  auto validation = ParseFieldValidation(request, "PatchOptions");
  if (!validation.ok()) return ErrorResponse(validation.status());
  if (apply_patch) return Apply(storage, path, request, *validation, *dry);
  auto parsed = ParseBody(request.body);
  if (!parsed.ok()) return ErrorResponse(parsed.status());
  const rapidjson::Document& patch = parsed->doc;
  if (json_patch && !patch.IsArray()) {
    return ErrorResponse(store::BadRequestError(
        "a JSON patch (application/json-patch+json) must be an array of operations"));
  }
  if (merge_patch && !patch.IsObject()) {
    return ErrorResponse(store::BadRequestError(
        "a merge patch (application/merge-patch+json) must be a JSON object"));
  }
  const registry::Subresource subresource = SubresourceOf(path);
  const FieldManagerRequest manager = ManagerOf(storage, request, path.subresource);
  const std::vector<std::string> duplicates =
      StrictFindings(parsed->duplicates, {}, json_patch ? "json patch " : "");
  std::vector<std::string> warnings;
  const registry::Strategy& strategy = storage.strategy();
  const bool fast_merge = merge_patch && subresource == registry::Subresource::kMain && duplicates.empty();
  if (fast_merge && strategy.MergePatchPrechecks(patch)) {
    // What the patch sets, for the strategy's Precheck, off the store's lock.
    Object fields;
    fields.kind = path.kind;
    fields.metadata.name = path.name;
    if (MutableObjectPtr proposed = strategy.FastMergePatch(fields, patch)) {
      storage.Precheck(request.user, *proposed);
    }
  }
  // The patch applies to the stored object inside the store's atomic update, so
  // a concurrent writer can never slip between read and write.
  std::vector<store::FieldCause> decode_causes;
  auto patched = [&](const ObjectPtr& current) -> absl::StatusOr<MutableObjectPtr> {
    warnings.clear();
    decode_causes.clear();
    if (fast_merge) {
      if (MutableObjectPtr fast = strategy.FastMergePatch(*current, patch)) {
        RecordUpdate(current.get(), *fast, manager);
        return fast;
      }
    }
    std::string encoded = EncodeOne(*current);
    rapidjson::Document doc;
    doc.Parse(encoded.c_str(), encoded.size());
    absl::Status s = json_patch ? ApplyJsonPatch(doc, patch)
                                : ApplyMergePatch(doc, patch, doc.GetAllocator());
    if (!s.ok()) return s;
    // A patch that removes the kind: kube-apiserver cannot decode the result
    // (422 against "patch"); one that removes the apiVersion it answers with a
    // 500, we with the 422 of an apiVersion not ours.
    auto type_name = [&doc](const char* key) -> std::string_view {
      auto it = doc.FindMember(key);
      if (it == doc.MemberEnd() || !it->value.IsString()) return {};
      return std::string_view(it->value.GetString(), it->value.GetStringLength());
    };
    if (type_name("kind").empty()) {
      return PatchInvalid(doc, absl::StrCat("Object 'Kind' is missing in '", CompactJson(doc), "'"));
    }
    if (type_name("apiVersion").empty()) {
      return store::InvalidError(store::InfoFor(path.kind).kind_name, path.name,
                                 {store::FieldInvalid("apiVersion", "\"\"",
                                                      absl::StrCat("must be ", store::kGroupVersion))});
    }
    std::vector<std::string> unknown;
    auto decoded = store::DecodeObject(doc, path.kind, &unknown, &decode_causes);
    if (!decoded.ok()) {
      store::ApiErrorInfo info = store::ApiErrorFromStatus(decoded.status());
      if (info.code == 400) return PatchInvalid(doc, info.message);
      return decoded.status();
    }
    std::vector<std::string> findings = duplicates;
    for (std::string& f : StrictFindings({}, std::move(unknown))) findings.push_back(std::move(f));
    if (s = ApplyPatchFieldValidation(*validation, doc, findings, &warnings); !s.ok()) return s;
    if ((*decoded)->metadata.name != path.name) return NameMismatch((*decoded)->metadata.name, path.name);
    if (subresource == registry::Subresource::kMain && !HasSpec(doc)) {
      decode_causes.push_back(store::FieldRequired("spec"));
    }
    DropResetCauses(subresource, &decode_causes);
    RecordUpdate(current.get(), **decoded, manager);
    return decoded;
  };
  registry::UpdateOptions options;
  options.decode_causes = &decode_causes;
  auto result = storage.Update(request.user, path.name, subresource, patched, *dry, &warnings, options);
  if (!result.ok()) return ErrorResponse(result.status());
  return WriteResponse(200, *result, warnings);
}

struct DeleteOptions {
  registry::Preconditions preconditions;
  bool dry_run = false;
};

// ValidateDeleteOptions: propagationPolicy one of the three (or unset), not
// together with orphanDependents.
absl::Status ValidateDeletePolicy(std::optional<std::string_view> policy, bool orphan_set) {
  if (!policy) return absl::OkStatus();
  std::vector<store::FieldCause> causes;
  const std::string repr = absl::StrCat("\"", std::string(*policy), "\"");
  if (orphan_set) {
    causes.push_back(store::FieldInvalid("propagationPolicy", repr,
                                         "orphanDependents and deletionPropagation cannot be both set"));
  }
  if (*policy != "Orphan" && *policy != "Background" && *policy != "Foreground") {
    causes.push_back(store::FieldNotSupported(
        "propagationPolicy", repr, "supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""));
  }
  if (causes.empty()) return absl::OkStatus();
  return InvalidOptions("DeleteOptions", std::move(causes));
}

const char* JsonTypeName(const rapidjson::Value& v) {
  if (v.IsString()) return "string";
  if (v.IsNumber()) return "number";
  if (v.IsBool()) return "bool";
  if (v.IsArray()) return "array";
  return "object";
}

// What encoding/json says when a DeleteOptions field has the wrong JSON type;
// kube-apiserver answers it as 400 BadRequest (kubernetes#133358).
absl::Status DeleteOptionsTypeError(const rapidjson::Value& v, std::string_view field,
                                    std::string_view go_type) {
  return store::BadRequestError(absl::StrCat("json: cannot unmarshal ", JsonTypeName(v),
                                             " into Go struct field DeleteOptions.", std::string(field),
                                             " of type ", std::string(go_type)));
}

// DELETE options as kube-apiserver reads them: from a non-empty body (a
// DeleteOptions of any apiVersion: the meta scheme registers it unversioned, and
// per-group DeleteOptions from older clients must keep working; unknown fields
// are ignored), otherwise from the query. Wrong JSON types and unparseable query
// numbers are 400, bad values 422. dryRun is also read from the query, always.
absl::StatusOr<DeleteOptions> ParseDeleteOptions(const Request& request) {
  DeleteOptions out;
  auto dry = DryRun(request, "DeleteOptions");
  if (!dry.ok()) return dry.status();
  out.dry_run = *dry;
  if (absl::StripAsciiWhitespace(request.body).empty()) {
    if (std::string_view g = request.Query("gracePeriodSeconds"); !g.empty()) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(base::Av(g), &v)) {
        return store::BadRequestError(absl::StrCat("invalid value for gracePeriodSeconds: strconv.ParseInt: parsing \"",
                                                   std::string(g), "\": invalid syntax"));
      }
    }
    std::optional<std::string_view> policy;
    if (request.HasQuery("propagationPolicy")) policy = request.Query("propagationPolicy");
    if (absl::Status s = ValidateDeletePolicy(policy, !request.Query("orphanDependents").empty()); !s.ok()) {
      return s;
    }
    return out;
  }
  if (absl::Status s = CheckJsonContentType(request); !s.ok()) return s;
  auto body = ParseBody(request.body);
  if (!body.ok()) return body.status();
  rapidjson::Document* doc = &body->doc;
  if (!doc->IsObject()) return store::BadRequestError("DeleteOptions must be a JSON object");
  auto member = [&doc](const char* name) -> const rapidjson::Value* {
    auto m = doc->FindMember(name);
    return m == doc->MemberEnd() || m->value.IsNull() ? nullptr : &m->value;
  };
  for (const char* name : {"kind", "apiVersion"}) {
    if (const auto* v = member(name); v && !v->IsString()) {
      return DeleteOptionsTypeError(*v, name, "string");
    }
  }
  if (const auto* k = member("kind"); k && k->GetStringLength() != 0 &&
                                      std::string_view(k->GetString()) != "DeleteOptions") {
    return store::BadRequestError(
        absl::StrCat("the request body is a ", k->GetString(), ", not DeleteOptions"));
  }
  if (const auto* g = member("gracePeriodSeconds"); g && !g->IsInt64()) {
    return DeleteOptionsTypeError(*g, "gracePeriodSeconds", "int64");
  }
  for (const char* name : {"orphanDependents", "ignoreStoreReadErrorWithClusterBreakingPotential"}) {
    if (const auto* v = member(name); v && !v->IsBool()) return DeleteOptionsTypeError(*v, name, "bool");
  }
  const auto* policy = member("propagationPolicy");
  if (policy && !policy->IsString()) {
    return DeleteOptionsTypeError(*policy, "propagationPolicy", "v1.DeletionPropagation");
  }
  const auto* dry_run = member("dryRun");
  if (dry_run && !dry_run->IsArray()) return DeleteOptionsTypeError(*dry_run, "dryRun", "[]string");
  if (dry_run) {
    for (const auto& v : dry_run->GetArray()) {
      if (!v.IsString()) return DeleteOptionsTypeError(v, "dryRun", "string");
    }
  }
  const auto* pre = member("preconditions");
  if (pre && !pre->IsObject()) return DeleteOptionsTypeError(*pre, "preconditions", "v1.Preconditions");
  if (pre) {
    for (const char* name : {"uid", "resourceVersion"}) {
      auto m = pre->FindMember(name);
      if (m != pre->MemberEnd() && !m->value.IsNull() && !m->value.IsString()) {
        return DeleteOptionsTypeError(m->value, absl::StrCat("preconditions.", name),
                                      name == std::string_view("uid") ? "types.UID" : "string");
      }
    }
  }
  std::optional<std::string_view> policy_value;
  if (policy) policy_value = std::string_view(policy->GetString(), policy->GetStringLength());
  if (absl::Status s = ValidateDeletePolicy(policy_value, member("orphanDependents") != nullptr); !s.ok()) {
    return s;
  }
  if (dry_run) {
    for (const auto& v : dry_run->GetArray()) {
      if (std::string_view(v.GetString()) != "All") {
        return InvalidOptions("DeleteOptions",
                              {store::FieldNotSupported("dryRun", absl::StrCat("\"", v.GetString(), "\""),
                                                        "supported values: \"All\"")});
      }
      out.dry_run = true;
    }
  }
  if (pre) {
    if (auto u = pre->FindMember("uid"); u != pre->MemberEnd() && u->value.IsString()) {
      out.preconditions.uid = u->value.GetString();
    }
    if (auto rv = pre->FindMember("resourceVersion");
        rv != pre->MemberEnd() && rv->value.IsString()) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(rv->value.GetString(), &v)) {
        return store::BadRequestError(absl::StrCat("invalid resourceVersion precondition \"",
                                                   rv->value.GetString(), "\""));
      }
      out.preconditions.resource_version = v;
    }
  }
  return out;
}

Response Delete(const GenericStore& storage, const ResourcePath& path, Request& request) {
  auto opts = ParseDeleteOptions(request);
  if (!opts.ok()) return ErrorResponse(opts.status());
  auto result = storage.Delete(request.user, path.name, opts->preconditions, opts->dry_run);
  if (!result.ok()) return ErrorResponse(result.status());
  return JsonResponse(200, EncodeOne(*result->object));
}

Response DeleteCollection(const GenericStore& storage, const ResourcePath& path, Request& request) {
  auto list_opts = ParseListOptions(request, path.kind);
  if (!list_opts.ok()) return ErrorResponse(list_opts.status());
  auto opts = ParseDeleteOptions(request);
  if (!opts.ok()) return ErrorResponse(opts.status());
  auto deleted = storage.DeleteCollection(request.user, *list_opts, opts->preconditions, opts->dry_run);
  if (!deleted.ok()) return ErrorResponse(deleted.status());
  return JsonResponse(200, ListJson(storage.strategy().Info(), *deleted));
}

Response MethodNotAllowed(const Request& request) {
  return ErrorResponse(store::MethodNotAllowedError(
      absl::StrCat("the server does not allow this method on the requested resource (",
                   request.method, " ", request.path, ")")));
}

Response ServeResourceJson(const RestContext& ctx, const ResourcePath& path, Request& request);

}  // namespace

// Accept: application/yaml: the JSON answer (object, list or Status) in YAML, as
// kube-apiserver serves a custom resource; watch streams and Tables stay as they are.
Response ServeResource(const RestContext& ctx, const ResourcePath& path, Request& request) {
  Response r = ServeResourceJson(ctx, path, request);
  if (PrefersYaml(request)) r = ToYamlResponse(std::move(r));
  return r;
}

namespace {

Response ServeResourceJson(const RestContext& ctx, const ResourcePath& path, Request& request) {
  const GenericStore storage(registry::ForKind(path.kind), ctx.store, ctx.clock, ctx.rules);
  const std::string& m = request.method;
  if (!path.subresource.empty() && path.subresource != "status") {
    // As kube-apiserver 1.32 answers for its own resources (GET, PUT, PATCH,
    // POST or DELETE of leases/x/bogus, x there or not): no route serves the
    // path. Its custom-resource handler says `<plural>.<group> "x" not found`
    // instead, which reads as if x were missing.
    return ErrorResponse(store::UnknownPathError());
  }
  if (path.name.empty()) {
    if (m == "GET") {
      auto opts = ParseListOptions(request, path.kind);
      if (!opts.ok()) return ErrorResponse(opts.status());
      if (opts->watch) return ServeWatch(ctx.store, path.kind, *opts, request, ctx.clock);
      return List(storage, path, request, *opts);
    }
    if (m == "POST") return Create(storage, request);
    if (m == "DELETE") return DeleteCollection(storage, path, request);
    return MethodNotAllowed(request);
  }
  if (m == "GET") {
    if (request.QueryBool("watch")) {
      // A watch on one named object, as kube-apiserver serves GET .../<name>?watch=true.
      auto opts = ParseListOptions(request, path.kind);
      if (!opts.ok()) return ErrorResponse(opts.status());
      auto pinned = FieldSelector::Parse(absl::StrCat("metadata.name=", path.name),
                                         SupportedFieldSelectors(path.kind));
      if (pinned.ok()) opts->field_selector = *std::move(pinned);
      return ServeWatch(ctx.store, path.kind, *opts, request, ctx.clock);
    }
    return Get(ctx.store, storage, path, request);
  }
  if (m == "PUT") return Update(storage, path, request);
  if (m == "PATCH") return Patch(storage, path, request);
  if (m == "DELETE" && path.subresource.empty()) return Delete(storage, path, request);
  return MethodNotAllowed(request);
}

}  // namespace

}  // namespace poolcoord::handlers
