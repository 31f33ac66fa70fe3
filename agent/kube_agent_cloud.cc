#include "agent/kube_agent_cloud.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/microtime.h"
#include "base/string_view.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "election/lease_marks.h"
#include "election/lease_rules.h"
#include "rapidjson/document.h"

namespace poolcoord::agent {

// The elector's requests count for reachability as much as the agent's own.
class KubeAgentCloud::ObservedLock : public election::LeaseLock {
 public:
  ObservedLock(KubeAgentCloud* owner, election::LeaseLock* lock) : owner_(owner), lock_(lock) {}
  absl::StatusOr<election::VersionedRecord> Get() override { return owner_->Observe(lock_->Get()); }
  absl::StatusOr<std::string> Create(const election::LeaderElectionRecord& r) override {
    return owner_->Observe(lock_->Create(r));
  }
  absl::StatusOr<std::string> Update(const election::LeaderElectionRecord& r,
                                     const std::string& version) override {
    return owner_->Observe(lock_->Update(r, version));
  }
  std::string Identity() const override { return lock_->Identity(); }
  std::string Describe() const override { return lock_->Describe(); }

 private:
  KubeAgentCloud* owner_;
  election::LeaseLock* lock_;
};

KubeAgentCloud::KubeAgentCloud(cloud::RestClient* rest, std::string node, std::string pool)
    : rest_(rest),
      clientset_(rest),
      node_(std::move(node)),
      pool_lease_lock_(clientset_.LeaseShaped(cloud::PoolLeases()), std::move(pool), node_),
      lock_(std::make_unique<ObservedLock>(this, &pool_lease_lock_)) {}

KubeAgentCloud::~KubeAgentCloud() = default;

bool KubeAgentCloud::Answered(const absl::Status& status) {
  return status.ok() || cloud::CodeOf(status) != 0;
}

template <typename T>
T KubeAgentCloud::Observe(T result) {
  if constexpr (std::is_same_v<T, absl::Status>) {
    ReportRequest(Answered(result));
  } else {
    ReportRequest(Answered(result.status()));
  }
  return result;
}

NodeLeaseObservation ObserveNodeLease(const cloud::Lease& lease) {
  NodeLeaseObservation o;
  o.exists = true;
  auto it = lease.metadata.annotations.find(election::kForwardedRenewTimeAnnotation);
  if (it != lease.metadata.annotations.end() && lease.spec.renew_time_us.has_value()) {
    absl::StatusOr<int64_t> forwarded = base::ParseMicroTime(it->second);
    o.forwarded = forwarded.ok() && *forwarded == *lease.spec.renew_time_us;
  }
  return o;
}

absl::StatusOr<NodeLeaseObservation> KubeAgentCloud::ReadNodeLease(const std::string& node) {
  absl::StatusOr<cloud::Lease> lease = Observe(clientset_.Leases("kube-node-lease")->Get(node));
  if (!lease.ok()) return lease.status();
  return ObserveNodeLease(*lease);
}

absl::StatusOr<std::string> ResourceVersionOf(absl::string_view json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject()) return absl::InvalidArgumentError("not a JSON object");
  auto md = d.FindMember("metadata");
  if (md == d.MemberEnd() || !md->value.IsObject()) {
    return absl::InvalidArgumentError("no metadata in the answer");
  }
  auto rv = md->value.FindMember("resourceVersion");
  if (rv == md->value.MemberEnd() || !rv->value.IsString()) {
    return absl::InvalidArgumentError("no metadata.resourceVersion in the answer");
  }
  return std::string(rv->value.GetString(), rv->value.GetStringLength());
}

std::optional<api::DelegationProof> ProofOf(const VerifiedHeartbeat& evidence) {
  if (!SendsProof(evidence)) return std::nullopt;
  // The datagram format is canonical: re-encoding the signed bytes and the
  // signature gives back the very bytes that arrived.
  absl::StatusOr<std::string> datagram = EncodeHeartbeatDatagram(
      evidence.signed_heartbeat.signed_bytes, evidence.signed_heartbeat.signature);
  if (!datagram.ok()) return std::nullopt;
  return api::DelegationProof{absl::Base64Escape(*datagram),
                              absl::Base64Escape(evidence.certificate->der())};
}

cloud::DelegatedLease DelegatedLeaseOf(const DelegatedLeaseWrite& w) {
  cloud::DelegatedLease l;
  l.metadata.name = w.node;
  l.metadata.resource_version = w.resource_version;
  l.metadata.annotations[election::kDelegateAnnotation] = "true";
  l.spec.holder_identity = w.node;
  l.spec.lease_duration_seconds = w.lease_duration_seconds;
  l.spec.renew_time_us = w.renew_time_us;
  l.spec.pool_name = w.pool;
  l.spec.delegate = w.delegate;
  if (w.evidence != nullptr) l.delegation.proof = ProofOf(*w.evidence);
  return l;
}

std::string EncodeDelegatedLease(const DelegatedLeaseWrite& w) {
  return cloud::EncodeDelegatedLease(DelegatedLeaseOf(w));
}

absl::StatusOr<std::string> KubeAgentCloud::ReadDelegatedLease(const std::string& node) {
  absl::StatusOr<std::string> body = Observe(rest_->Get(absl::StrCat(kDelegatedLeasesPath, "/", node)));
  if (!body.ok()) return body.status();
  return ResourceVersionOf(*body);
}

absl::StatusOr<std::string> KubeAgentCloud::WriteDelegatedLease(const DelegatedLeaseWrite& w) {
  const std::string body = EncodeDelegatedLease(w);
  absl::StatusOr<std::string> answer =
      w.resource_version.empty()
          ? Observe(rest_->Post(kDelegatedLeasesPath, body))
          : Observe(rest_->Put(absl::StrCat(kDelegatedLeasesPath, "/", w.node), body));
  if (!answer.ok()) return answer.status();
  return ResourceVersionOf(*answer);
}

absl::Status KubeAgentCloud::DeleteDelegatedLease(const std::string& node,
                                                  const std::string& resource_version) {
  std::string options = R"({"apiVersion":"v1","kind":"DeleteOptions")";
  if (!resource_version.empty()) {
    absl::StrAppend(&options, R"(,"preconditions":{"resourceVersion":")", resource_version, R"("})");
  }
  options += "}";
  return Observe(rest_->Do("DELETE", absl::StrCat(kDelegatedLeasesPath, "/", node), options))
      .status();
}

}  // namespace poolcoord::agent
