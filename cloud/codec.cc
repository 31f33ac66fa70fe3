#include "cloud/codec.h"

#include "absl/strings/str_cat.h"
#include "api/codec.h"
#include "base/json_write.h"
#include "base/microtime.h"
#include "cloud/errors.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::cloud {
namespace {

using rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// ----------------------------------------------------------------- reading --

const Value* Member(const Value& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

std::string Str(const Value& v, const char* name) {
  const Value* m = Member(v, name);
  return m && m->IsString() ? std::string(m->GetString(), m->GetStringLength()) : "";
}

std::optional<int32_t> OptInt(const Value& v, const char* name) {
  const Value* m = Member(v, name);
  if (!m || !m->IsInt()) return std::nullopt;
  return m->GetInt();
}

std::optional<bool> OptBool(const Value& v, const char* name) {
  const Value* m = Member(v, name);
  if (!m || !m->IsBool()) return std::nullopt;
  return m->GetBool();
}

std::optional<int64_t> OptMicroTime(const Value& v, const char* name) {
  const Value* m = Member(v, name);
  if (!m || !m->IsString()) return std::nullopt;
  auto t = base::ParseMicroTime(std::string_view(m->GetString(), m->GetStringLength()));
  if (!t.ok()) return std::nullopt;
  return *t;
}

std::optional<int64_t> OptTime(const Value& v, const char* name) {
  const Value* m = Member(v, name);
  if (!m || !m->IsString()) return std::nullopt;
  auto t = base::ParseTime(std::string_view(m->GetString(), m->GetStringLength()));
  if (!t.ok()) return std::nullopt;
  return *t * 1'000'000;
}

std::vector<std::string> StrArray(const Value* v) {
  std::vector<std::string> out;
  if (!v || !v->IsArray()) return out;
  for (const auto& s : v->GetArray()) {
    if (s.IsString()) out.emplace_back(s.GetString(), s.GetStringLength());
  }
  return out;
}

std::map<std::string, std::string> StrMap(const Value* v) {
  std::map<std::string, std::string> out;
  if (!v || !v->IsObject()) return out;
  for (const auto& m : v->GetObject()) {
    if (m.value.IsString()) {
      out.emplace(std::string(m.name.GetString(), m.name.GetStringLength()),
                  std::string(m.value.GetString(), m.value.GetStringLength()));
    }
  }
  return out;
}

ObjectMeta ReadMeta(const Value& obj) {
  ObjectMeta m;
  const Value* md = Member(obj, "metadata");
  if (!md) return m;
  m.name = Str(*md, "name");
  m.generate_name = Str(*md, "generateName");
  m.namespace_ = Str(*md, "namespace");
  m.uid = Str(*md, "uid");
  m.resource_version = Str(*md, "resourceVersion");
  m.labels = StrMap(Member(*md, "labels"));
  m.annotations = StrMap(Member(*md, "annotations"));
  m.finalizers = StrArray(Member(*md, "finalizers"));
  m.creation_timestamp_us = OptTime(*md, "creationTimestamp");
  if (const Value* refs = Member(*md, "ownerReferences"); refs && refs->IsArray()) {
    for (const auto& r : refs->GetArray()) {
      OwnerReference o;
      o.api_version = Str(r, "apiVersion");
      o.kind = Str(r, "kind");
      o.name = Str(r, "name");
      o.uid = Str(r, "uid");
      o.controller = OptBool(r, "controller");
      o.block_owner_deletion = OptBool(r, "blockOwnerDeletion");
      m.owner_references.push_back(std::move(o));
    }
  }
  return m;
}

base::UserInfo ReadUser(const Value* u, const char* name_key) {
  base::UserInfo user;
  if (!u || !u->IsObject()) return user;
  user.username = Str(*u, name_key);
  user.uid = Str(*u, "uid");
  user.groups = StrArray(Member(*u, "groups"));
  if (const Value* e = Member(*u, "extra"); e && e->IsObject()) {
    for (const auto& m : e->GetObject()) {
      user.extra[std::string(m.name.GetString(), m.name.GetStringLength())] = StrArray(&m.value);
    }
  }
  return user;
}

absl::StatusOr<rapidjson::Document> Parse(std::string_view json, const char* what) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cloud answered with a ", what, " that is not a JSON object"));
  }
  return d;
}

std::string ListVersion(const Value& list) {
  const Value* md = Member(list, "metadata");
  return md ? Str(*md, "resourceVersion") : "";
}

// A lease-shaped object (a Lease, PoolLease or DelegatedLease): its spec and
// status by the group's one codec, leniently (as client-go decodes, what the
// codec refuses is left unset and the refusal ignored).
template <typename T>
T ReadLeaseShaped(const Value& v) {
  T l;
  l.metadata = ReadMeta(v);
  api::DecodeFindings ignored;
  if (const Value* spec = Member(v, "spec")) {
    api::DecodeSpec(*spec, ~uint32_t{0}, &l.spec, &l.delegation, &ignored);
  }
  if (const Value* status = Member(v, "status")) {
    api::DecodeStatus(*status, &l.status, &l.delegation, &ignored);
  }
  // A challenge without a value is none: the leader relays the first one.
  std::erase_if(l.delegation.challenges,
                [](const DelegationChallenge& c) { return c.value.empty(); });
  return l;
}

// The time of the managedFields entry that owns spec.renewTime (fieldsV1:
// {"f:spec":{"f:renewTime":{}}}), as Lease::renew_time_written_us says.
std::optional<int64_t> RenewTimeWritten(const Value& obj) {
  const Value* md = Member(obj, "metadata");
  const Value* entries = md ? Member(*md, "managedFields") : nullptr;
  if (!entries || !entries->IsArray()) return std::nullopt;
  for (const auto& e : entries->GetArray()) {
    const Value* fields = Member(e, "fieldsV1");
    const Value* spec = fields ? Member(*fields, "f:spec") : nullptr;
    if (spec && Member(*spec, "f:renewTime")) return OptTime(e, "time");
  }
  return std::nullopt;
}

Lease ReadLease(const Value& v) {
  Lease l = ReadLeaseShaped<Lease>(v);
  l.renew_time_written_us = RenewTimeWritten(v);
  return l;
}
DelegatedLease ReadDelegatedLease(const Value& v) { return ReadLeaseShaped<DelegatedLease>(v); }

Node ReadNode(const Value& v) {
  Node n;
  n.metadata = ReadMeta(v);
  const Value* spec = Member(v, "spec");
  const Value* taints = spec ? Member(*spec, "taints") : nullptr;
  if (taints && taints->IsArray()) {
    for (const auto& t : taints->GetArray()) {
      n.taints.push_back(
          Taint{Str(t, "key"), Str(t, "value"), Str(t, "effect"), OptTime(t, "timeAdded")});
    }
  }
  const Value* status = Member(v, "status");
  const Value* addresses = status ? Member(*status, "addresses") : nullptr;
  if (addresses && addresses->IsArray()) {
    for (const auto& a : addresses->GetArray()) {
      if (a.IsObject()) n.addresses.push_back(NodeAddress{Str(a, "type"), Str(a, "address")});
    }
  }
  return n;
}

ConfigMap ReadConfigMap(const Value& v) {
  ConfigMap c;
  c.metadata = ReadMeta(v);
  c.data = StrMap(Member(v, "data"));
  return c;
}

// A list object: its resourceVersion and each item read with `read`.
template <typename List, typename Read>
absl::StatusOr<List> DecodeList(std::string_view json, const char* what, Read read) {
  auto d = Parse(json, what);
  if (!d.ok()) return d.status();
  List out;
  out.resource_version = ListVersion(*d);
  if (const Value* items = Member(*d, "items"); items && items->IsArray()) {
    for (const auto& item : items->GetArray()) out.items.push_back(read(item));
  }
  return out;
}

template <typename T, typename Read>
absl::StatusOr<WatchEvent<T>> ReadWatchEvent(std::string_view line, Read read) {
  auto d = Parse(line, "watch event");
  if (!d.ok()) return d.status();
  WatchEvent<T> ev;
  ev.type = Str(*d, "type");
  const Value* obj = Member(*d, "object");
  if (ev.type == "ERROR") {
    int code = obj ? OptInt(*obj, "code").value_or(500) : 500;
    return ApiError(code, obj ? Str(*obj, "reason") : "",
                    obj ? absl::StrCat("watch: ", Str(*obj, "message")) : "watch: ERROR event");
  }
  if (obj) ev.object = read(*obj);
  return ev;
}

// ----------------------------------------------------------------- writing --

void FieldIfSet(Writer& w, const char* key, const std::string& s) {
  if (!s.empty()) base::JsonField(w, key, s);
}
void MicroField(Writer& w, const char* key, int64_t us) {
  base::JsonField(w, key, base::FormatMicroTime(us));
}
void TimeField(Writer& w, const char* key, int64_t us) {
  base::JsonField(w, key, base::FormatTime(us / 1'000'000));
}

void WriteStrMap(Writer& w, const char* key, const std::map<std::string, std::string>& m) {
  if (m.empty()) return;
  base::JsonKey(w, key);
  w.StartObject();
  for (const auto& [k, v] : m) base::JsonField(w, k.c_str(), v);
  w.EndObject();
}

void WriteStrArray(Writer& w, const char* key, const std::vector<std::string>& a) {
  if (a.empty()) return;
  base::JsonKey(w, key);
  w.StartArray();
  for (const auto& s : a) base::JsonString(w, s);
  w.EndArray();
}

void WriteMeta(Writer& w, const ObjectMeta& m) {
  base::JsonKey(w, "metadata");
  w.StartObject();
  FieldIfSet(w, "name", m.name);
  FieldIfSet(w, "generateName", m.generate_name);
  FieldIfSet(w, "namespace", m.namespace_);
  FieldIfSet(w, "uid", m.uid);
  FieldIfSet(w, "resourceVersion", m.resource_version);
  if (m.creation_timestamp_us) {
    FieldIfSet(w, "creationTimestamp", base::FormatTime(*m.creation_timestamp_us / 1'000'000));
  }
  WriteStrMap(w, "labels", m.labels);
  WriteStrMap(w, "annotations", m.annotations);
  if (!m.owner_references.empty()) {
    base::JsonKey(w, "ownerReferences");
    w.StartArray();
    for (const auto& o : m.owner_references) {
      w.StartObject();
      base::JsonField(w, "apiVersion", o.api_version);
      base::JsonField(w, "kind", o.kind);
      base::JsonField(w, "name", o.name);
      base::JsonField(w, "uid", o.uid);
      if (o.controller) {
        base::JsonKey(w, "controller");
        w.Bool(*o.controller);
      }
      if (o.block_owner_deletion) {
        base::JsonKey(w, "blockOwnerDeletion");
        w.Bool(*o.block_owner_deletion);
      }
      w.EndObject();
    }
    w.EndArray();
  }
  WriteStrArray(w, "finalizers", m.finalizers);
  w.EndObject();
}

template <typename Fn>
std::string Write(Fn fn) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  fn(w);
  return std::string(buf.GetString(), buf.GetSize());
}

void PercentEscape(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out->push_back(static_cast<char>(c));
    } else {
      out->push_back('%');
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
    }
  }
}

}  // namespace

std::string EncodeLease(const Lease& l, const std::string& api_version, const std::string& kind) {
  // A PoolLease's spec fields are coordination.k8s.io/v1 LeaseSpec's.
  const uint32_t fields = api::InfoFor(api::Kind::kPoolLease).spec_fields;
  return Write([&](Writer& w) {
    w.StartObject();
    base::JsonField(w, "apiVersion", api_version);
    base::JsonField(w, "kind", kind);
    WriteMeta(w, l.metadata);
    api::WriteSpec(w, l.spec, fields);
    w.EndObject();
  });
}

std::string EncodeDelegatedLease(const DelegatedLease& l) {
  const api::ResourceInfo& info = api::InfoFor(api::Kind::kDelegatedLease);
  const api::DelegationProof* proof = l.delegation.proof ? &*l.delegation.proof : nullptr;
  return Write([&](Writer& w) {
    w.StartObject();
    base::JsonField(w, "apiVersion", api::kGroupVersion);
    base::JsonField(w, "kind", info.kind_name);
    WriteMeta(w, l.metadata);
    api::WriteSpec(w, l.spec, info.spec_fields, proof);
    w.EndObject();
  });
}

absl::StatusOr<Lease> DecodeLease(std::string_view json) {
  auto d = Parse(json, "Lease");
  if (!d.ok()) return d.status();
  return ReadLease(*d);
}

absl::StatusOr<LeaseList> DecodeLeaseList(std::string_view json) {
  return DecodeList<LeaseList>(json, "LeaseList", ReadLease);
}

absl::StatusOr<DelegatedLease> DecodeDelegatedLease(std::string_view json) {
  auto d = Parse(json, "DelegatedLease");
  if (!d.ok()) return d.status();
  return ReadDelegatedLease(*d);
}

absl::StatusOr<DelegatedLeaseList> DecodeDelegatedLeaseList(std::string_view json) {
  return DecodeList<DelegatedLeaseList>(json, "DelegatedLeaseList", ReadDelegatedLease);
}

absl::StatusOr<Node> DecodeNode(std::string_view json) {
  auto d = Parse(json, "Node");
  if (!d.ok()) return d.status();
  return ReadNode(*d);
}

absl::StatusOr<NodeList> DecodeNodeList(std::string_view json) {
  return DecodeList<NodeList>(json, "NodeList", ReadNode);
}

std::string TaintsMergePatch(const std::vector<Taint>& taints,
                             const std::string& resource_version) {
  return Write([&](Writer& w) {
    w.StartObject();
    if (!resource_version.empty()) {
      base::JsonKey(w, "metadata");
      w.StartObject();
      base::JsonField(w, "resourceVersion", resource_version);
      w.EndObject();
    }
    base::JsonKey(w, "spec");
    w.StartObject();
    base::JsonKey(w, "taints");
    // An empty list, not null: null would delete the field, which a Node
    // validates the same but reads as "never tainted" in diffs.
    w.StartArray();
    for (const auto& t : taints) {
      w.StartObject();
      base::JsonField(w, "key", t.key);
      FieldIfSet(w, "value", t.value);
      base::JsonField(w, "effect", t.effect);
      if (t.time_added_us) TimeField(w, "timeAdded", *t.time_added_us);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    w.EndObject();
  });
}

std::string EncodeEvent(const Event& e) {
  return Write([&](Writer& w) {
    w.StartObject();
    base::JsonField(w, "apiVersion", "v1");
    base::JsonField(w, "kind", "Event");
    WriteMeta(w, e.metadata);
    base::JsonKey(w, "involvedObject");
    w.StartObject();
    base::JsonField(w, "kind", e.involved_object.kind);
    base::JsonField(w, "apiVersion", e.involved_object.api_version);
    FieldIfSet(w, "namespace", e.involved_object.namespace_);
    base::JsonField(w, "name", e.involved_object.name);
    FieldIfSet(w, "uid", e.involved_object.uid);
    w.EndObject();
    base::JsonField(w, "reason", e.reason);
    base::JsonField(w, "message", e.message);
    base::JsonField(w, "type", e.type);
    base::JsonKey(w, "source");
    w.StartObject();
    base::JsonField(w, "component", e.source_component);
    w.EndObject();
    TimeField(w, "firstTimestamp", e.first_timestamp_us);
    TimeField(w, "lastTimestamp", e.last_timestamp_us);
    MicroField(w, "eventTime", e.event_time_us);
    base::JsonKey(w, "count");
    w.Int(e.count);
    base::JsonField(w, "reportingComponent", e.reporting_controller);
    base::JsonField(w, "reportingInstance", e.reporting_instance);
    base::JsonField(w, "action", e.action);
    w.EndObject();
  });
}

absl::StatusOr<Event> DecodeEvent(std::string_view json) {
  auto d = Parse(json, "Event");
  if (!d.ok()) return d.status();
  Event e;
  e.metadata = ReadMeta(*d);
  if (const Value* io = Member(*d, "involvedObject")) {
    e.involved_object = {Str(*io, "apiVersion"), Str(*io, "kind"), Str(*io, "namespace"),
                         Str(*io, "name"), Str(*io, "uid")};
  }
  e.reason = Str(*d, "reason");
  e.message = Str(*d, "message");
  e.type = Str(*d, "type");
  if (const Value* src = Member(*d, "source")) e.source_component = Str(*src, "component");
  e.first_timestamp_us = OptTime(*d, "firstTimestamp").value_or(0);
  e.last_timestamp_us = OptTime(*d, "lastTimestamp").value_or(0);
  e.event_time_us = OptMicroTime(*d, "eventTime").value_or(0);
  e.count = OptInt(*d, "count").value_or(0);
  e.reporting_controller = Str(*d, "reportingComponent");
  e.reporting_instance = Str(*d, "reportingInstance");
  e.action = Str(*d, "action");
  return e;
}

std::string EncodeTokenReview(const TokenReview& r) {
  return Write([&](Writer& w) {
    w.StartObject();
    base::JsonField(w, "apiVersion", "authentication.k8s.io/v1");
    base::JsonField(w, "kind", "TokenReview");
    base::JsonKey(w, "spec");
    w.StartObject();
    base::JsonField(w, "token", r.token);
    WriteStrArray(w, "audiences", r.audiences);
    w.EndObject();
    w.EndObject();
  });
}

absl::StatusOr<TokenReview> DecodeTokenReview(std::string_view json) {
  auto d = Parse(json, "TokenReview");
  if (!d.ok()) return d.status();
  TokenReview r;
  if (const Value* spec = Member(*d, "spec")) {
    r.token = Str(*spec, "token");
    r.audiences = StrArray(Member(*spec, "audiences"));
  }
  if (const Value* s = Member(*d, "status")) {
    r.authenticated = OptBool(*s, "authenticated").value_or(false);
    r.error = Str(*s, "error");
    r.user = ReadUser(Member(*s, "user"), "username");
  }
  return r;
}

std::string EncodeSubjectAccessReviewSpec(const SubjectAccessReview& r) {
  return Write([&](Writer& w) {
    // Go's field order of SubjectAccessReviewSpec, empty fields left out
    // (omitempty), so equal reviews encode equally (a cache key).
    w.StartObject();
    if (r.resource_attributes) {
      const ResourceAttributes& a = *r.resource_attributes;
      base::JsonKey(w, "resourceAttributes");
      w.StartObject();
      FieldIfSet(w, "namespace", a.namespace_);
      FieldIfSet(w, "verb", a.verb);
      FieldIfSet(w, "group", a.group);
      FieldIfSet(w, "version", a.version);
      FieldIfSet(w, "resource", a.resource);
      FieldIfSet(w, "subresource", a.subresource);
      FieldIfSet(w, "name", a.name);
      w.EndObject();
    }
    if (r.non_resource_attributes) {
      base::JsonKey(w, "nonResourceAttributes");
      w.StartObject();
      FieldIfSet(w, "path", r.non_resource_attributes->path);
      FieldIfSet(w, "verb", r.non_resource_attributes->verb);
      w.EndObject();
    }
    FieldIfSet(w, "user", r.user.username);
    WriteStrArray(w, "groups", r.user.groups);
    if (!r.user.extra.empty()) {
      base::JsonKey(w, "extra");
      w.StartObject();
      for (const auto& [k, v] : r.user.extra) {  // std::map: sorted, as Go marshals maps
        base::JsonKey(w, k.c_str());
        w.StartArray();
        for (const auto& s : v) base::JsonString(w, s);
        w.EndArray();
      }
      w.EndObject();
    }
    FieldIfSet(w, "uid", r.user.uid);
    w.EndObject();
  });
}

std::string EncodeSubjectAccessReview(const SubjectAccessReview& r) {
  return absl::StrCat(
      R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":)",
      EncodeSubjectAccessReviewSpec(r), "}");
}

absl::StatusOr<SubjectAccessReview> DecodeSubjectAccessReview(std::string_view json) {
  auto d = Parse(json, "SubjectAccessReview");
  if (!d.ok()) return d.status();
  SubjectAccessReview r;
  if (const Value* spec = Member(*d, "spec")) {
    r.user = ReadUser(spec, "user");
    if (const Value* a = Member(*spec, "resourceAttributes")) {
      r.resource_attributes = ResourceAttributes{
          Str(*a, "namespace"), Str(*a, "verb"),        Str(*a, "group"), Str(*a, "version"),
          Str(*a, "resource"),  Str(*a, "subresource"), Str(*a, "name")};
    }
    if (const Value* a = Member(*spec, "nonResourceAttributes")) {
      r.non_resource_attributes = NonResourceAttributes{Str(*a, "path"), Str(*a, "verb")};
    }
  }
  if (const Value* s = Member(*d, "status")) {
    r.allowed = OptBool(*s, "allowed").value_or(false);
    r.denied = OptBool(*s, "denied").value_or(false);
    r.reason = Str(*s, "reason");
    r.evaluation_error = Str(*s, "evaluationError");
  }
  return r;
}

absl::StatusOr<ConfigMap> DecodeConfigMap(std::string_view json) {
  auto d = Parse(json, "ConfigMap");
  if (!d.ok()) return d.status();
  return ReadConfigMap(*d);
}

absl::StatusOr<ConfigMapList> DecodeConfigMapList(std::string_view json) {
  return DecodeList<ConfigMapList>(json, "ConfigMapList", ReadConfigMap);
}

absl::StatusOr<WatchEvent<Lease>> DecodeLeaseWatchEvent(std::string_view line) {
  return ReadWatchEvent<Lease>(line, ReadLease);
}

absl::StatusOr<WatchEvent<Node>> DecodeNodeWatchEvent(std::string_view line) {
  return ReadWatchEvent<Node>(line, ReadNode);
}

absl::StatusOr<WatchEvent<ConfigMap>> DecodeConfigMapWatchEvent(std::string_view line) {
  return ReadWatchEvent<ConfigMap>(line, ReadConfigMap);
}

std::string ListQuery(const ListOptions& o, bool watch) {
  std::string q;
  auto add = [&q](const char* key, std::string_view value) {
    q += q.empty() ? '?' : '&';
    q += key;
    q += '=';
    PercentEscape(&q, value);
  };
  if (watch) add("watch", "true");
  if (watch && o.allow_watch_bookmarks) add("allowWatchBookmarks", "true");
  if (watch && o.timeout_seconds > 0) add("timeoutSeconds", std::to_string(o.timeout_seconds));
  if (!o.label_selector.empty()) add("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) add("fieldSelector", o.field_selector);
  if (!o.resource_version.empty()) add("resourceVersion", o.resource_version);
  return q;
}

}  // namespace poolcoord::cloud
