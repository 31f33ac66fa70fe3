#include "election/pool_lease_lock.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "base/microtime.h"

namespace poolcoord::election {
namespace {

const rapidjson::Value* Member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  if (it == v.MemberEnd() || it->value.IsNull()) return nullptr;
  return &it->value;
}

absl::Status ParseMicro(const rapidjson::Value& spec, const char* field, int64_t* out) {
  const rapidjson::Value* v = Member(spec, field);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsString()) return absl::InvalidArgumentError(absl::StrCat("spec.", field, " not a string"));
  absl::StatusOr<int64_t> us = base::ParseMicroTime(std::string_view(v->GetString(), v->GetStringLength()));
  if (!us.ok()) return us.status();
  *out = *us;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VersionedRecord> ParseLeaseRecord(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError("lease object is not a JSON object");
  }
  VersionedRecord out;
  if (const rapidjson::Value* md = Member(doc, "metadata")) {
    if (const rapidjson::Value* rv = Member(*md, "resourceVersion"); rv && rv->IsString()) {
      out.version = rv->GetString();
    }
  }
  const rapidjson::Value* spec = Member(doc, "spec");
  if (spec == nullptr) return out;
  if (const rapidjson::Value* h = Member(*spec, "holderIdentity"); h && h->IsString()) {
    out.record.holder_identity = h->GetString();
  }
  if (const rapidjson::Value* d = Member(*spec, "leaseDurationSeconds"); d && d->IsInt()) {
    out.record.lease_duration_seconds = d->GetInt();
  }
  if (const rapidjson::Value* t = Member(*spec, "leaseTransitions"); t && t->IsInt()) {
    out.record.lease_transitions = t->GetInt();
  }
  if (absl::Status s = ParseMicro(*spec, "acquireTime", &out.record.acquire_time_us); !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseMicro(*spec, "renewTime", &out.record.renew_time_us); !s.ok()) return s;
  return out;
}

LeaseResource PoolLeaseResource() {
  return {kPoolLeasesPath, "coordination.pool/v1alpha1", "PoolLease"};
}

LeaseResource CoordinationLeaseResource(const std::string& ns) {
  return {absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", ns, "/leases"),
          "coordination.k8s.io/v1", "Lease"};
}

std::string EncodeLease(const LeaseResource& resource, std::string_view base_json,
                        const std::string& name, const LeaderElectionRecord& record,
                        const std::string& version) {
  rapidjson::Document doc;
  if (!base_json.empty()) doc.Parse(base_json.data(), base_json.size());
  if (base_json.empty() || doc.HasParseError() || !doc.IsObject()) doc.SetObject();
  auto& a = doc.GetAllocator();
  auto set = [&](rapidjson::Value& obj, const char* key, rapidjson::Value value) {
    if (auto it = obj.FindMember(key); it != obj.MemberEnd()) {
      it->value = std::move(value);
    } else {
      obj.AddMember(rapidjson::Value(key, a), std::move(value), a);
    }
  };
  set(doc, "apiVersion", rapidjson::Value(resource.api_version.c_str(), a));
  set(doc, "kind", rapidjson::Value(resource.kind.c_str(), a));
  if (!doc.HasMember("metadata") || !doc["metadata"].IsObject()) {
    set(doc, "metadata", rapidjson::Value(rapidjson::kObjectType));
  }
  rapidjson::Value& md = doc["metadata"];
  set(md, "name", rapidjson::Value(name.c_str(), a));
  if (!version.empty()) {
    set(md, "resourceVersion", rapidjson::Value(version.c_str(), a));
  } else {
    md.RemoveMember("resourceVersion");
  }
  // status is server-owned; the main resource ignores it, so do not echo it.
  doc.RemoveMember("status");
  rapidjson::Value spec(rapidjson::kObjectType);
  spec.AddMember("holderIdentity", rapidjson::Value(record.holder_identity.c_str(), a), a);
  spec.AddMember("leaseDurationSeconds", record.lease_duration_seconds, a);
  const std::string acquire = base::FormatMicroTime(record.acquire_time_us);
  const std::string renew = base::FormatMicroTime(record.renew_time_us);
  spec.AddMember("acquireTime", rapidjson::Value(acquire.c_str(), a), a);
  spec.AddMember("renewTime", rapidjson::Value(renew.c_str(), a), a);
  spec.AddMember("leaseTransitions", record.lease_transitions, a);
  set(doc, "spec", std::move(spec));
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  doc.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

ResourceLeaseLock::ResourceLeaseLock(store::KubeClient* client, LeaseResource resource,
                                     std::string name, std::string identity,
                                     store::KubeRequestOptions options)
    : client_(client),
      resource_(std::move(resource)),
      name_(std::move(name)),
      identity_(std::move(identity)),
      options_(std::move(options)) {}

std::string ResourceLeaseLock::Describe() const {
  return absl::StrCat(resource_.collection_path, "/", name_);
}

absl::StatusOr<VersionedRecord> ResourceLeaseLock::Get() {
  absl::StatusOr<store::KubeResponse> r =
      client_->Get(absl::StrCat(resource_.collection_path, "/", name_), options_);
  if (!r.ok()) return r.status();
  if (r->status != 200) return store::StatusFromKubeResponse(*r);
  absl::StatusOr<VersionedRecord> rec = ParseLeaseRecord(r->body);
  if (!rec.ok()) return rec.status();
  absl::MutexLock lock(&mu_);
  last_object_json_ = std::move(r->body);
  return rec;
}

absl::StatusOr<std::string> ResourceLeaseLock::Create(const LeaderElectionRecord& record) {
  const std::string body = EncodeLease(resource_, "", name_, record, "");
  absl::StatusOr<store::KubeResponse> r = client_->Post(resource_.collection_path, body, options_);
  if (!r.ok()) return r.status();
  if (r->status != 201 && r->status != 200) return store::StatusFromKubeResponse(*r);
  absl::StatusOr<VersionedRecord> rec = ParseLeaseRecord(r->body);
  if (!rec.ok()) return rec.status();
  absl::MutexLock lock(&mu_);
  last_object_json_ = std::move(r->body);
  return rec->version;
}

absl::StatusOr<std::string> ResourceLeaseLock::Update(const LeaderElectionRecord& record,
                                                      const std::string& version) {
  std::string body;
  {
    absl::MutexLock lock(&mu_);
    body = EncodeLease(resource_, last_object_json_, name_, record, version);
  }
  absl::StatusOr<store::KubeResponse> r =
      client_->Put(absl::StrCat(resource_.collection_path, "/", name_), body, options_);
  if (!r.ok()) return r.status();
  if (r->status != 200) return store::StatusFromKubeResponse(*r);
  absl::StatusOr<VersionedRecord> rec = ParseLeaseRecord(r->body);
  if (!rec.ok()) return rec.status();
  absl::MutexLock lock(&mu_);
  last_object_json_ = std::move(r->body);
  return rec->version;
}

}  // namespace poolcoord::election
