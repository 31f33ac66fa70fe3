// AgentCloud over the cloud cluster: kube-apiserver for the node's own Lease,
// and poolcoord's API behind kube-apiserver's aggregator for the PoolLease and
// DelegatedLeases — all with the node's kubelet client certificate, so the
// server sees system:node:<node> (docs/architecture.md "Who talks to it").
//
//   GET    /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/<node>
//   GET    /apis/coordination.pool/v1alpha1/delegatedleases/<node>
//   POST   /apis/coordination.pool/v1alpha1/delegatedleases
//   PUT    /apis/coordination.pool/v1alpha1/delegatedleases/<node>   (resourceVersion set)
//   DELETE /apis/coordination.pool/v1alpha1/delegatedleases/<node>   (Preconditions.resourceVersion)
//   the PoolLease through election::PoolLeaseLock
// Every request's outcome goes to the request observer: answered when an HTTP
// answer came back (any status; cloud::CodeOf is set), not when the transport
// failed or timed out.
//
// Thread-safety: as AgentCloud (one caller at a time).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "agent/agent_cloud.h"
#include "cloud/clientset.h"
#include "cloud/rest_client.h"
#include "election/pool_lease_lock.h"

namespace poolcoord::agent {

inline constexpr char kDelegatedLeasesPath[] = "/apis/coordination.pool/v1alpha1/delegatedleases";

class KubeAgentCloud : public AgentCloud {
 public:
  // `rest` is not owned and must outlive this object; its timeout is the
  // agent's request timeout.
  KubeAgentCloud(cloud::RestClient* rest, std::string node, std::string pool);
  ~KubeAgentCloud() override;

  absl::StatusOr<NodeLeaseObservation> ReadNodeLease(const std::string& node) override;
  absl::StatusOr<std::string> ReadDelegatedLease(const std::string& node) override;
  absl::StatusOr<std::string> WriteDelegatedLease(const DelegatedLeaseWrite& write) override;
  absl::Status DeleteDelegatedLease(const std::string& node,
                                    const std::string& resource_version) override;
  election::LeaseLock* PoolLeaseLock() override { return lock_.get(); }
  std::vector<std::string> PoolChallenges() override { return pool_lease_lock_.Challenges(); }

  // Whether `status` (of a request) means kube-apiserver answered.
  static bool Answered(const absl::Status& status);

 private:
  class ObservedLock;
  template <typename T>
  T Observe(T result);

  cloud::RestClient* const rest_;
  cloud::Clientset clientset_;
  const std::string node_;
  election::PoolLeaseLock pool_lease_lock_;
  std::unique_ptr<election::LeaseLock> lock_;
};

// The DelegatedLease a write makes (the annotation, holderIdentity = node,
// poolName, delegate, renewTime, leaseDurationSeconds, and
// metadata.resourceVersion when updating), with spec.proof {heartbeat,
// certificate} (base64 of the heartbeat datagram as received and of the
// certificate's DER; docs/verifiable-delegation.md) when the evidence carries a
// challenge; and that object as the JSON body of the write (cloud's
// EncodeDelegatedLease).
cloud::DelegatedLease DelegatedLeaseOf(const DelegatedLeaseWrite& write);
std::string EncodeDelegatedLease(const DelegatedLeaseWrite& write);
// The base64 spec.proof fields for `evidence`, or nullopt when it carries no
// challenge (or no certificate).
std::optional<api::DelegationProof> ProofOf(const VerifiedHeartbeat& evidence);
// metadata.resourceVersion of a DelegatedLease JSON; InvalidArgument when it is
// not one.
absl::StatusOr<std::string> ResourceVersionOf(absl::string_view json);
// Whether a node Lease's last renewTime is the forwarder's (its
// coordination.pool/forwarded-renew-time annotation equals spec.renewTime).
NodeLeaseObservation ObserveNodeLease(const cloud::Lease& lease);

}  // namespace poolcoord::agent
