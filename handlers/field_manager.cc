#include "handlers/field_manager.h"

#include "absl/strings/str_cat.h"
#include "handlers/apply.h"
#include "handlers/json_input.h"
#include "handlers/managed_fields.h"
#include "handlers/typed_json.h"
#include "store/api_error.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {
namespace {

using rapidjson::Value;

// The object as clients see it, without metadata.managedFields.
void ObjectJson(const store::Object& o, rapidjson::Document& doc) {
  const std::string text = store::EncodeObject(o);
  doc.Parse(text.data(), text.size());
  auto md = doc.FindMember("metadata");
  if (md != doc.MemberEnd() && md->value.IsObject()) md->value.RemoveMember("managedFields");
}

void EmptyObject(store::Kind kind, rapidjson::Document& doc) {
  doc.SetObject();
  doc.AddMember("apiVersion", Value(store::kGroupVersion), doc.GetAllocator());
  doc.AddMember("kind", Value(rapidjson::StringRef(store::InfoFor(kind).kind_name)),
                doc.GetAllocator());
}

bool SameMetadata(const store::ObjectMeta& a, const store::ObjectMeta& b) {
  return a.labels == b.labels && a.annotations == b.annotations && a.finalizers == b.finalizers &&
         a.owner_references_json == b.owner_references_json;
}

bool ServerWritten(const store::ManagedFieldsEntry& e) {
  return (e.operation() == "Update" || e.operation() == "Apply") && e.fields_type() == "FieldsV1" &&
         !e.api_version().empty();
}

// OwnerHint's bits beside the SpecField ones.
constexpr uint32_t kHintValid = 1u << 31;
constexpr uint32_t kHintInvalid = 1u << 30;     // cached: not in the form we write
constexpr uint32_t kHintUpdateMain = 1u << 29;  // an Update of ours on the main resource
constexpr uint32_t kHintSpecFields = (1u << 29) - 1;

// Which spec fields an entry owns as members (SpecField bits) with kHintValid
// set, and kHintUpdateMain for an Update entry of our apiVersion without a
// subresource; 0 when the entry is not one the server writes (ServerWritten) or
// its fieldsV1 is not in the form it writes. A function of the entry's text, so
// cached beside its shared record (store::ManagedFieldsEntry::owner_hint): worked
// out once for every object whose entry has the same text.
uint32_t OwnerHint(const store::ManagedFieldsEntry& e) {
  if (const uint32_t hint = e.owner_hint(); hint != 0) return hint == kHintInvalid ? 0 : hint;
  if (!ServerWritten(e)) {
    e.set_owner_hint(kHintInvalid);
    return 0;
  }
  uint32_t mask = kHintValid;
  if (e.operation() == "Update" && e.subresource().empty() &&
      e.api_version() == store::kGroupVersion) {
    mask |= kHintUpdateMain;
  }
  const bool ok = ssa::FieldsV1ChildMembers(e.fields_v1(), "spec", [&](std::string_view field) {
    mask |= store::SpecFieldBit(field);
  });
  // Not valid: kept as kHintInvalid, so that it is not read again either.
  e.set_owner_hint(ok ? mask : kHintInvalid);
  return ok ? mask : 0;
}

// The renewal fast path. True when it settled the entries: the update changed
// nothing, or only spec fields that `r.manager`'s Update entry alone owns (its
// time becomes now). False: the caller computes the general way.
bool TryRecordSpecUpdate(const store::Object& live, store::Object& next,
                         const FieldManagerRequest& r) {
  if (!r.subresource.empty() || next.metadata.managed_fields != live.metadata.managed_fields ||
      !SameMetadata(live.metadata, next.metadata)) {
    return false;
  }
  bool removed = false;
  const uint32_t changed = store::ChangedSpecFields(live.spec, next.spec, &removed);
  if (changed == 0) return true;
  if (removed) return false;
  auto& entries = next.metadata.managed_fields;
  store::ManagedFieldsEntry* own = nullptr;
  for (store::ManagedFieldsEntry& e : entries) {
    const uint32_t hint = OwnerHint(e);
    if (hint == 0) return false;
    const bool mine = (hint & kHintUpdateMain) != 0 && e.manager() == r.manager;
    if ((hint & kHintSpecFields & changed) != (mine ? changed : 0)) return false;
    if (mine) own = &e;
  }
  if (own == nullptr) return false;
  if (own->time != r.now_s) {
    own->time = r.now_s;
    ssa::SortEntries(entries);
  }
  return true;
}

}  // namespace

std::string RequestManager(std::string_view field_manager, std::string_view user_agent) {
  if (field_manager.empty()) return ssa::ManagerFromUserAgent(user_agent);
  std::string sanitized;
  if (SanitizeUtf8(field_manager, &sanitized)) return sanitized;
  return std::string(field_manager);
}

void RecordUpdate(const store::Object* live, store::Object& next, const FieldManagerRequest& r) {
  if (live != nullptr && TryRecordSpecUpdate(*live, next, r)) return;
  const ssa::SchemaNode& root = *r.schema;
  ssa::Managers managers = ssa::BaseManagers(live ? &live->metadata.managed_fields : nullptr,
                                             next.metadata.managed_fields, !r.subresource.empty());
  rapidjson::Document before, after;
  if (live != nullptr) {
    ObjectJson(*live, before);
  } else {
    EmptyObject(r.kind, before);
  }
  ObjectJson(next, after);
  ssa::RecordUpdate(ssa::FilterComparison(ssa::Compare(&before, &after, root), r.subresource,
                                          r.reset_fields ? *r.reset_fields : ssa::NoResetFields()),
                    r.manager, store::kGroupVersion, r.subresource, r.now_s, managers);
  ssa::CapUpdateManagers(managers);
  next.metadata.managed_fields = ssa::EncodeManagers(managers);
}

absl::Status CheckApplyConfiguration(const rapidjson::Value& config, store::Kind kind,
                                     const ssa::SchemaNode& schema, std::string_view url_name) {
  if (!config.IsObject()) {
    const char* what = config.IsArray() ? "array" : config.IsString() ? "string"
                       : config.IsNumber() ? "number" : config.IsBool() ? "bool" : "null";
    if (config.IsNull()) {
      return store::BadRequestError("invalid object type: /, Kind=");
    }
    return store::BadRequestError(absl::StrCat(
        "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
        "unmarshal ", what, " into Go value of type map[string]interface {}"));
  }
  auto text = [&config](const char* key) -> std::string {
    auto it = config.FindMember(key);
    if (it == config.MemberEnd() || !it->value.IsString()) return "";
    return std::string(it->value.GetString(), it->value.GetStringLength());
  };
  const std::string api_version = text("apiVersion"), kind_name = text("kind");
  const char* want_kind = store::InfoFor(kind).kind_name;
  if (api_version != store::kGroupVersion || kind_name != want_kind) {
    const size_t slash = api_version.find('/');
    const std::string gv = slash == std::string::npos ? absl::StrCat("/", api_version) : api_version;
    return store::BadRequestError(
        absl::StrCat("invalid object type: ", gv, ", Kind=", kind_name));
  }
  auto md = config.FindMember("metadata");
  std::string name;
  if (md != config.MemberEnd() && md->value.IsObject()) {
    auto mf = md->value.FindMember("managedFields");
    if (mf != md->value.MemberEnd() && !mf->value.IsNull()) {
      return store::BadRequestError("metadata.managedFields must be nil");
    }
    auto n = md->value.FindMember("name");
    if (n != md->value.MemberEnd() && n->value.IsString()) {
      name.assign(n->value.GetString(), n->value.GetStringLength());
    }
  }
  if (absl::Status s = ssa::Validate(config, schema); !s.ok()) {
    return store::BadRequestError(absl::StrCat("failed to create typed patch object (/", name, "; ",
                                                store::kGroupVersion, ", Kind=", want_kind, "): ",
                                                s.message()));
  }
  if (!name.empty() && name != url_name) {
    return store::BadRequestError(
        absl::StrCat("the name of the object (", name, ") does not match the name on the URL (",
                     std::string(url_name), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<AppliedObject> ApplyConfiguration(const store::Object* live,
                                                 const rapidjson::Value& config,
                                                 const FieldManagerRequest& r, bool force) {
  rapidjson::Document doc;
  ssa::Managers managers;
  if (live != nullptr) {
    ObjectJson(*live, doc);
    auto decoded = ssa::DecodeManagers(live->metadata.managed_fields);
    if (decoded.ok()) managers = *std::move(decoded);
  }
  ssa::ApplyOptions options;
  options.schema = r.schema;
  options.reset_fields = r.reset_fields;
  options.manager = r.manager;
  options.api_version = store::kGroupVersion;
  options.subresource = r.subresource;
  options.now_s = r.now_s;
  options.force = force;
  auto result = ssa::Apply(live ? &doc : nullptr, config, std::move(managers), options,
                           doc.GetAllocator());
  if (!result.ok()) return result.status();
  ssa::CapUpdateManagers(result->managers);
  auto object = store::DecodeObject(result->object, r.kind, nullptr);
  if (!object.ok()) return object.status();
  (*object)->metadata.managed_fields = ssa::EncodeManagers(result->managers);
  AppliedObject out;
  out.changed = result->changed ||
                (live != nullptr && (*object)->metadata.managed_fields != live->metadata.managed_fields);
  out.object = *std::move(object);
  return out;
}

}  // namespace poolcoord::handlers
