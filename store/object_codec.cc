#include "store/object_codec.h"
#include "api/codec.h"
#include "base/json_write.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "store/store.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "rapidjson/error/en.h"
#include "store/api_error.h"
#include "base/microtime.h"

namespace poolcoord::store {
namespace {

#define CODEC_RETURN_IF_ERROR(expr)   \
  do {                                \
    absl::Status _st = (expr);        \
    if (!_st.ok()) return _st;        \
  } while (0)

constexpr char kInternalMember[] = "poolcoord.internal";


std::string_view Key(const rapidjson::Value& name) {
  return std::string_view(name.GetString(), name.GetStringLength());
}

// ---------------------------------------------------------------- encoding

using base::JsonField;
using base::JsonString;

void AppendRawValue(JsonWriter& w, std::string_view json, rapidjson::Type type);

void WriteStringMap(JsonWriter& w, std::string_view key, const StringMap& m) {
  if (m.empty()) return;
  JsonString(w, key);
  // Shared maps (a pool's label, the delegate annotation) carry their JSON.
  if (const std::string* json = m.SharedJson()) {
    AppendRawValue(w, *json, rapidjson::kObjectType);
    return;
  }
  w.StartObject();
  for (const auto& [k, v] : m) JsonField(w, k, v);
  w.EndObject();
}

// Raw arrays were produced by our own writer on decode, so they are valid JSON.
void WriteRawArray(JsonWriter& w, std::string_view key, const std::string& json) {
  if (json.empty() || json == "[]") return;
  JsonString(w, key);
  w.RawValue(json.data(), json.size(), rapidjson::kArrayType);
}

void WriteObjectImpl(JsonWriter& w, const Object& o, bool storage) {
  w.StartObject();
  JsonField(w, "kind", InfoFor(o.kind).kind_name);
  JsonField(w, "apiVersion", kGroupVersion);
  JsonString(w, "metadata");
  WriteObjectMeta(w, o.metadata);
  // The spec fields the wire shows of the kind (its ResourceInfo row); the
  // storage encoding keeps every field. The proof is write-only: never written,
  // to clients or to storage.
  api::WriteSpec(w, o.spec, storage ? ~uint32_t{0} : InfoFor(o.kind).spec_fields);
  api::WriteStatus(w, o.status, DelegationOf(o));
  if (storage) {
    JsonString(w, kInternalMember);
    w.StartObject();
    JsonString(w, "observedMonotonicUs");
    w.Int64(o.observed_monotonic_us);
    w.EndObject();
  }
  w.EndObject();
}

// ---------------------------------------------------------------- decoding

// Where a field sits, for Go-style error messages: the Go struct type holding it
// and its dotted JSON path from the root.
struct FieldPos {
  const char* go_struct;
  std::string path;
};

// The kind of a JSON value as encoding/json's UnmarshalTypeError.Value names it.
std::string JsonKind(const rapidjson::Value& v) {
  return api::JsonKindName(v, api::JsonKindNames::kGoJson);
}

std::string NumberLiteral(const rapidjson::Value& v) {
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  return absl::StrCat(v.GetDouble());
}

absl::Status TypeError(std::string_view got, const FieldPos& pos, std::string_view go_type) {
  return BadRequestError(absl::StrCat("json: cannot unmarshal ", base::Av(got), " into Go struct field ",
                                      pos.go_struct, ".", pos.path, " of type ", base::Av(go_type)));
}

class Decoder {
 public:
  Decoder(Kind kind, std::vector<std::string>* unknown, bool storage,
          std::vector<FieldCause>* causes = nullptr)
      : kind_(kind), unknown_(unknown), storage_(storage), out_causes_(causes) {
    findings_.unknown = unknown;
  }

  absl::StatusOr<MutableObjectPtr> Decode(const rapidjson::Value& v) {
    if (!v.IsObject()) {
      return BadRequestError(absl::StrCat("json: cannot unmarshal ", JsonKind(v),
                                          " into Go value of type ", InfoFor(kind_).kind_name));
    }
    auto obj = std::make_shared<Object>();
    obj->kind = kind_;
    DelegationFields delegation;
    const char* top = InfoFor(kind_).kind_name;
    std::string kind_name, api_version;
    for (const auto& m : v.GetObject()) {
      std::string_view key = Key(m.name);
      const rapidjson::Value& val = m.value;
      if (key == "kind") {
        CODEC_RETURN_IF_ERROR(String(val, {top, "kind"}, &kind_name));
      } else if (key == "apiVersion") {
        CODEC_RETURN_IF_ERROR(String(val, {top, "apiVersion"}, &api_version));
      } else if (key == "metadata") {
        if (val.IsNull()) continue;
        // ObjectMeta is decoded on its own, as kube-apiserver does for a custom
        // resource: its errors name ObjectMeta's fields ("ObjectMeta.labels").
        if (!val.IsObject()) {
          return BadRequestError(absl::StrCat("json: cannot unmarshal ", JsonKind(val),
                                              " into Go value of type v1.ObjectMeta"));
        }
        CODEC_RETURN_IF_ERROR(DecodeMeta(val, obj->metadata));
      } else if (key == "spec") {
        api::DecodeSpec(val, storage_ ? ~uint32_t{0} : InfoFor(kind_).spec_fields, &obj->spec,
                        &delegation, &findings_);
      } else if (key == "status") {
        api::DecodeStatus(val, &obj->status, &delegation, &findings_);
      } else if (storage_ && key == kInternalMember) {
        CODEC_RETURN_IF_ERROR(DecodeInternal(val, *obj));
      } else {
        Unknown("", key);
      }
    }
    if (!delegation.empty()) obj->delegation.reset(new SharedDelegationFields(delegation));
    // kind and apiVersion, when set, must be ours: alone in a 422 of the
    // object's own group and kind, as the custom resource validator's
    // ValidateTypeMeta reports them before anything else.
    std::vector<FieldCause> type_meta;
    if (!kind_name.empty() && kind_name != top) {
      type_meta.push_back(FieldInvalid("kind", base::GoQuote(kind_name), absl::StrCat("must be ", top)));
    }
    if (!api_version.empty() && api_version != kGroupVersion) {
      type_meta.push_back(FieldInvalid("apiVersion", base::GoQuote(api_version),
                                       absl::StrCat("must be ", kGroupVersion)));
    }
    if (!type_meta.empty()) {
      const size_t slash = api_version.find('/');
      const std::string group = api_version.empty()          ? std::string(kGroup)
                                : slash == std::string::npos ? std::string()
                                                             : api_version.substr(0, slash);
      return InvalidErrorInGroup(group, kind_name.empty() ? top : kind_name, obj->metadata.name,
                                 std::move(type_meta));
    }
    if (!findings_.causes.empty()) {
      if (out_causes_ != nullptr) {
        out_causes_->insert(out_causes_->end(), std::make_move_iterator(findings_.causes.begin()),
                            std::make_move_iterator(findings_.causes.end()));
        return obj;
      }
      return InvalidError(top, obj->metadata.name, std::move(findings_.causes));
    }
    return obj;
  }

 private:

  void Unknown(std::string_view prefix, std::string_view key) {
    if (unknown_ == nullptr) return;
    unknown_->push_back(prefix.empty() ? std::string(key) : absl::StrCat(base::Av(prefix), ".", base::Av(key)));
  }

  // --- metadata: decoded as Go's encoding/json decodes ObjectMeta (400).

  static absl::Status String(const rapidjson::Value& v, const FieldPos& pos, std::string* out) {
    if (v.IsNull()) return absl::OkStatus();
    if (!v.IsString()) return TypeError(JsonKind(v), pos, "string");
    out->assign(v.GetString(), v.GetStringLength());
    return absl::OkStatus();
  }

  template <typename Int>
  static absl::Status Integer(const rapidjson::Value& v, const FieldPos& pos,
                              std::optional<Int>* out) {
    constexpr const char* kType = sizeof(Int) == 4 ? "int32" : "int64";
    if (v.IsNull()) {
      out->reset();
      return absl::OkStatus();
    }
    if (!v.IsNumber()) return TypeError(JsonKind(v), pos, kType);
    if (!v.IsInt64()) return TypeError("number " + NumberLiteral(v), pos, kType);
    const int64_t n = v.GetInt64();
    if (n < std::numeric_limits<Int>::min() || n > std::numeric_limits<Int>::max()) {
      return TypeError("number " + NumberLiteral(v), pos, kType);
    }
    *out = static_cast<Int>(n);
    return absl::OkStatus();
  }

  // Bad time strings are validation errors (422) at `cause_path`, collected
  // across fields; another JSON type is encoding/json's 400.
  absl::Status TimeField(const rapidjson::Value& v, const FieldPos& pos, std::string_view cause_path,
                         bool micro, std::optional<int64_t>* out) {
    if (v.IsNull()) {
      out->reset();
      return absl::OkStatus();
    }
    if (!v.IsString()) return TypeError(JsonKind(v), pos, "string");
    std::string_view text(v.GetString(), v.GetStringLength());
    auto parsed = micro ? base::ParseMicroTime(text) : base::ParseTime(text);
    if (!parsed.ok()) {
      findings_.causes.push_back(FieldInvalid(
          cause_path, base::GoQuote(text),
          micro ? "must be a MicroTime: RFC 3339 with exactly 6 fractional digits, e.g. "
                  "\"2024-01-01T00:00:00.000000Z\""
                : "must be an RFC 3339 time, e.g. \"2024-01-01T00:00:00Z\""));
      return absl::OkStatus();
    }
    *out = *parsed;
    return absl::OkStatus();
  }

  // Repeated keys: the last one wins, as with encoding/json.
  static absl::Status DecodeStringMap(const rapidjson::Value& v, const FieldPos& pos,
                                      StringMap* out) {
    out->clear();
    if (v.IsNull()) return absl::OkStatus();
    if (!v.IsObject()) return TypeError(JsonKind(v), pos, "map[string]string");
    std::vector<StringMap::value_type> items;
    items.reserve(v.MemberCount());
    for (const auto& m : v.GetObject()) {
      if (m.value.IsNull()) {
        items.emplace_back(MapKey(Key(m.name)), std::string());
        continue;
      }
      if (!m.value.IsString()) return TypeError(JsonKind(m.value), pos, "string");
      items.emplace_back(MapKey(Key(m.name)),
                         std::string(m.value.GetString(), m.value.GetStringLength()));
    }
    *out = StringMap::FromUnsorted(std::move(items));
    return absl::OkStatus();
  }

  static absl::Status StringList(const rapidjson::Value& v, const FieldPos& pos,
                                 std::vector<std::string>* out) {
    out->clear();
    if (v.IsNull()) return absl::OkStatus();
    if (!v.IsArray()) return TypeError(JsonKind(v), pos, "[]string");
    for (const auto& e : v.GetArray()) {
      if (!e.IsString()) return TypeError(JsonKind(e), pos, "string");
      out->emplace_back(e.GetString(), e.GetStringLength());
    }
    return absl::OkStatus();
  }

  static absl::Status RawArray(const rapidjson::Value& v, const FieldPos& pos,
                               std::string_view go_type, std::string* out) {
    out->clear();
    if (v.IsNull()) return absl::OkStatus();
    if (!v.IsArray()) return TypeError(JsonKind(v), pos, go_type);
    for (const auto& e : v.GetArray()) {
      if (!e.IsObject()) return TypeError(JsonKind(e), pos, go_type.substr(2));
    }
    if (v.Empty()) return absl::OkStatus();
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    v.Accept(w);
    out->assign(buf.GetString(), buf.GetSize());
    return absl::OkStatus();
  }

  // metadata.managedFields as sent: JSON types are checked here (400 as
  // encoding/json words it), meaning by the field manager. fieldsV1 is kept as
  // compact JSON text (JSON null: absent).
  absl::Status DecodeManagedFields(const rapidjson::Value& v,
                                   ManagedFields* out) {
    out->clear();
    constexpr char kStruct[] = "ManagedFieldsEntry";
    const FieldPos list_pos{"ObjectMeta", "managedFields"};
    if (v.IsNull()) return absl::OkStatus();
    if (!v.IsArray()) return TypeError(JsonKind(v), list_pos, "[]v1.ManagedFieldsEntry");
    out->reserve(v.Size());
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
      const rapidjson::Value& e = v[i];
      if (e.IsNull()) {
        out->emplace_back();
        continue;
      }
      if (!e.IsObject()) return TypeError(JsonKind(e), list_pos, "v1.ManagedFieldsEntry");
      std::string manager, operation, api_version, fields_type, fields_v1, subresource;
      std::optional<int64_t> time;
      const std::string prefix = absl::StrCat("metadata.managedFields[", i, "]");
      for (const auto& m : e.GetObject()) {
        std::string_view key = Key(m.name);
        const FieldPos pos{kStruct, absl::StrCat("managedFields.", base::Av(key))};
        if (key == "manager") {
          CODEC_RETURN_IF_ERROR(String(m.value, pos, &manager));
        } else if (key == "operation") {
          CODEC_RETURN_IF_ERROR(String(m.value, pos, &operation));
        } else if (key == "apiVersion") {
          CODEC_RETURN_IF_ERROR(String(m.value, pos, &api_version));
        } else if (key == "fieldsType") {
          CODEC_RETURN_IF_ERROR(String(m.value, pos, &fields_type));
        } else if (key == "subresource") {
          CODEC_RETURN_IF_ERROR(String(m.value, pos, &subresource));
        } else if (key == "time") {
          CODEC_RETURN_IF_ERROR(TimeField(m.value, pos, prefix + ".time", false, &time));
        } else if (key == "fieldsV1") {
          // Any JSON, as v1.FieldsV1 keeps raw bytes; a set that is not an object
          // is refused later by the field manager, as kube-apiserver does.
          if (m.value.IsNull()) continue;
          rapidjson::StringBuffer buf;
          JsonWriter w(buf);
          m.value.Accept(w);
          fields_v1.assign(buf.GetString(), buf.GetSize());
        } else {
          Unknown(prefix, key);
        }
      }
      out->emplace_back(ManagedFieldsText{manager, operation, api_version, fields_type, fields_v1,
                                          subresource},
                        time);
    }
    return absl::OkStatus();
  }

  absl::Status DecodeMeta(const rapidjson::Value& v, ObjectMeta& meta) {
    auto at = [](std::string_view key) {
      return FieldPos{"ObjectMeta", std::string(key)};
    };
    for (const auto& m : v.GetObject()) {
      std::string_view key = Key(m.name);
      const rapidjson::Value& val = m.value;
      if (key == "name") {
        CODEC_RETURN_IF_ERROR(String(val, at(key), &meta.name));
      } else if (key == "generateName") {
        CODEC_RETURN_IF_ERROR(String(val, at(key), &meta.generate_name));
      } else if (key == "uid") {
        CODEC_RETURN_IF_ERROR(String(val, at(key), &meta.uid));
      } else if (key == "namespace" || key == "selfLink") {
        // Known to ObjectMeta; meaningless for our cluster-scoped kinds.
        std::string ignored;
        CODEC_RETURN_IF_ERROR(String(val, at(key), &ignored));
      } else if (key == "resourceVersion") {
        std::string rv;
        CODEC_RETURN_IF_ERROR(String(val, at(key), &rv));
        meta.resource_version = 0;
        if (!rv.empty()) {
          bool digits = rv.size() <= 19;
          for (char c : rv) digits = digits && c >= '0' && c <= '9';
          if (!digits || !absl::SimpleAtoi(rv, &meta.resource_version)) {
            return BadRequestError(absl::StrCat("invalid resourceVersion ", base::GoQuote(rv)));
          }
        }
      } else if (key == "generation") {
        std::optional<int64_t> g;
        CODEC_RETURN_IF_ERROR(Integer(val, at(key), &g));
        meta.generation = g.value_or(0);
      } else if (key == "creationTimestamp") {
        std::optional<int64_t> t;
        CODEC_RETURN_IF_ERROR(TimeField(val, at(key), "metadata.creationTimestamp", false, &t));
        meta.creation_timestamp = t.value_or(0);
      } else if (key == "deletionTimestamp") {
        CODEC_RETURN_IF_ERROR(
            TimeField(val, at(key), "metadata.deletionTimestamp", false, &meta.deletion_timestamp));
      } else if (key == "deletionGracePeriodSeconds") {
        CODEC_RETURN_IF_ERROR(Integer(val, at(key), &meta.deletion_grace_period_seconds));
      } else if (key == "labels") {
        CODEC_RETURN_IF_ERROR(DecodeStringMap(val, at(key), &meta.labels));
      } else if (key == "annotations") {
        CODEC_RETURN_IF_ERROR(DecodeStringMap(val, at(key), &meta.annotations));
      } else if (key == "finalizers") {
        CODEC_RETURN_IF_ERROR(StringList(val, at(key), &meta.finalizers));
      } else if (key == "ownerReferences") {
        CODEC_RETURN_IF_ERROR(
            RawArray(val, at(key), "[]v1.OwnerReference", &meta.owner_references_json));
      } else if (key == "managedFields") {
        CODEC_RETURN_IF_ERROR(DecodeManagedFields(val, &meta.managed_fields));
      } else {
        Unknown("metadata", key);
      }
    }
    return absl::OkStatus();
  }

  static absl::Status DecodeInternal(const rapidjson::Value& v, Object& obj) {
    if (!v.IsObject()) return absl::InvalidArgumentError("internal fields are not an object");
    auto it = v.FindMember("observedMonotonicUs");
    if (it != v.MemberEnd()) {
      if (!it->value.IsInt64()) return absl::InvalidArgumentError("bad observedMonotonicUs");
      obj.observed_monotonic_us = it->value.GetInt64();
    }
    return absl::OkStatus();
  }

  Kind kind_;
  std::vector<std::string>* unknown_;
  bool storage_;
  std::vector<FieldCause>* out_causes_;
  // The field causes of spec and status (api::DecodeSpec, DecodeStatus) and of
  // metadata times, in document order.
  api::DecodeFindings findings_;
};

absl::Status ParseJson(std::string_view body, rapidjson::Document& doc) {
  if (absl::Status nesting = CheckJsonNesting(body); !nesting.ok()) return nesting;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError()) {
    return BadRequestError(absl::StrCat("json parse error: ",
                                        rapidjson::GetParseError_En(doc.GetParseError()),
                                        " at offset ", doc.GetErrorOffset()));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The writer's output stream. RapidJSON keeps it protected; a pointer to the
// member, taken in a derived class, reads it from any writer.
struct StreamOf : JsonWriter {
  static constexpr rapidjson::StringBuffer* JsonWriter::*kStream = &StreamOf::os_;
};

// Text appended as a JSON value, with memcpy: RapidJSON's RawValue copies byte by
// byte through its stack (about 20 instructions a byte).
void AppendRawValue(JsonWriter& w, std::string_view json, rapidjson::Type type) {
  w.RawValue("", 0, type);  // the separator and the writer's bookkeeping
  rapidjson::StringBuffer* os = w.*StreamOf::kStream;
  std::memcpy(os->Push(json.size()), json.data(), json.size());
}

// An entry's time (seconds) as RFC 3339. A write's entries and the next writes of
// the same objects mostly fall in the same second: each thread formats a second
// once.
void AppendEntryTime(int64_t seconds, std::string* out) {
  thread_local int64_t last = std::numeric_limits<int64_t>::min();
  thread_local std::string text;
  if (seconds != last) {
    text.clear();
    base::AppendTime(seconds, &text);
    last = seconds;
  }
  out->append(text);
}

// metadata.managedFields, written as one piece of text: every response and watch
// event carries it, and RapidJSON's writer would escape-check it byte by byte.
// Each entry's members but its time are written once, when its shared record is
// made (store/managed_fields_entry.h); the time, when set, comes last.
void WriteManagedFields(JsonWriter& w, const ManagedFields& entries) {
  if (entries.empty()) return;
  thread_local std::string text;
  text.clear();
  text.push_back('[');
  for (size_t i = 0; i < entries.size(); ++i) {
    const ManagedFieldsEntry& e = entries[i];
    if (i) text.push_back(',');
    const std::string_view head = e.json_head();
    text.append(head);
    if (e.time) {
      if (head.size() > 1) text.push_back(',');
      text.append("\"time\":\"", 8);
      AppendEntryTime(*e.time, &text);
      text.push_back('"');
    }
    text.push_back('}');
  }
  text.push_back(']');
  JsonString(w, "managedFields");
  AppendRawValue(w, text, rapidjson::kArrayType);
}

}  // namespace

void WriteObjectMeta(JsonWriter& w, const ObjectMeta& m) {
  w.StartObject();
  if (!m.name.empty()) JsonField(w, "name", m.name);
  if (!m.generate_name.empty()) JsonField(w, "generateName", m.generate_name);
  if (!m.uid.empty()) JsonField(w, "uid", m.uid);
  if (m.resource_version != 0) JsonField(w, "resourceVersion", std::to_string(m.resource_version));
  if (m.generation != 0) {
    JsonString(w, "generation");
    w.Int64(m.generation);
  }
  if (m.creation_timestamp != 0) {
    JsonField(w, "creationTimestamp", base::FormatTime(m.creation_timestamp));
  }
  if (m.deletion_timestamp) JsonField(w, "deletionTimestamp", base::FormatTime(*m.deletion_timestamp));
  if (m.deletion_grace_period_seconds) {
    JsonString(w, "deletionGracePeriodSeconds");
    w.Int64(*m.deletion_grace_period_seconds);
  }
  WriteStringMap(w, "labels", m.labels);
  WriteStringMap(w, "annotations", m.annotations);
  if (!m.finalizers.empty()) {
    JsonString(w, "finalizers");
    w.StartArray();
    for (const auto& f : m.finalizers) JsonString(w, f);
    w.EndArray();
  }
  WriteRawArray(w, "ownerReferences", m.owner_references_json);
  WriteManagedFields(w, m.managed_fields);
  w.EndObject();
}

void WriteObject(JsonWriter& w, const Object& o) { WriteObjectImpl(w, o, false); }

std::string EncodeObject(const Object& o) {
  // Room for a typical object with its managedFields without regrowing.
  rapidjson::StringBuffer buf(nullptr, 1536);
  JsonWriter w(buf);
  WriteObject(w, o);
  return std::string(buf.GetString(), buf.GetSize());
}

absl::StatusOr<MutableObjectPtr> DecodeObject(const rapidjson::Value& v, Kind kind,
                                              std::vector<std::string>* unknown_fields) {
  return Decoder(kind, unknown_fields, false).Decode(v);
}

absl::StatusOr<MutableObjectPtr> DecodeObject(const rapidjson::Value& v, Kind kind,
                                              std::vector<std::string>* unknown_fields,
                                              std::vector<FieldCause>* field_causes) {
  return Decoder(kind, unknown_fields, false, field_causes).Decode(v);
}

absl::StatusOr<MutableObjectPtr> DecodeObjectJson(std::string_view body, Kind kind,
                                                  std::vector<std::string>* unknown_fields) {
  rapidjson::Document doc;
  CODEC_RETURN_IF_ERROR(ParseJson(body, doc));
  return DecodeObject(doc, kind, unknown_fields);
}

std::string EncodeForStorage(const Object& o) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  WriteObjectImpl(w, o, true);
  return std::string(buf.GetString(), buf.GetSize());
}

absl::StatusOr<MutableObjectPtr> DecodeFromStorage(std::string_view data, Kind kind) {
  rapidjson::Document doc;
  absl::Status parsed = ParseJson(data, doc);
  if (!parsed.ok()) return InternalError(absl::StrCat("stored object: ", parsed.message()));
  auto obj = Decoder(kind, nullptr, true).Decode(doc);
  if (!obj.ok()) return InternalError(absl::StrCat("stored object: ", obj.status().message()));
  return obj;
}

const std::string& Event::ObjectJson() const {
  std::call_once(json_once_, [this] {
    if (object) json_ = EncodeObject(*object);
  });
  return json_;
}

absl::Status CheckJsonNesting(std::string_view json, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return BadRequestError(absl::StrCat("the request body nests arrays or objects deeper than ",
                                            max_depth, " levels"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

}  // namespace poolcoord::store
