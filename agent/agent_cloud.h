// What the agent core needs from the cloud, behind one small interface:
// poolcoord-agent implements it over the typed cloud clients (kube-apiserver
// and, through its aggregator, poolcoord's API); the simulator over its modelled
// cloud; the tests over fakes.
//
// Errors follow store::StatusFromKubeResponse's table (404 NotFound, 409
// Aborted or AlreadyExists, 403 PermissionDenied, 422 InvalidArgument, ...);
// a transport failure or timeout is Unavailable or DeadlineExceeded.
//
// Thread-safety: AgentCore calls every method from its cloud side only (one
// thread at a time), the elector's lock included.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/cloud_reachability.h"
#include "agent/heartbeat_verifier.h"
#include "election/lease_lock.h"

namespace poolcoord::agent {

// One DelegatedLease create (resource_version empty) or update, with the fields
// the leader chooses; the implementation adds the annotation
// openyurt.io/delegate-heartbeat: "true" and holderIdentity = node.
struct DelegatedLeaseWrite {
  std::string node;      // metadata.name and spec.holderIdentity
  std::string pool;      // spec.poolName
  std::string delegate;  // spec.delegate: the leader itself
  int64_t renew_time_us = 0;
  int32_t lease_duration_seconds = 0;
  std::string resource_version;  // "" = create
  // The member's own signed heartbeat this write rests on. When it carries a
  // challenge (the server issues them), the write sends it as
  // spec.proof: the datagram exactly as received (signed bytes, signature) and
  // the certificate it names. Without a challenge no proof is sent (a server
  // without verifiable delegation, or one in --delegation-proof=off).
  std::shared_ptr<const VerifiedHeartbeat> evidence;
};

// Whether a write resting on `evidence` sends it as spec.proof (see
// DelegatedLeaseWrite::evidence).
inline bool SendsProof(const VerifiedHeartbeat& evidence) {
  return !evidence.heartbeat().challenge.empty() && evidence.certificate != nullptr;
}

class AgentCloud {
 public:
  virtual ~AgentCloud() = default;

  // Called by the implementation when any request to kube-apiserver completes
  // (the lock's included): answered = an HTTP answer came back within the
  // request timeout, whatever its status. Set once by AgentCore before use.
  void set_request_observer(std::function<void(bool answered)> observer) {
    observer_ = std::move(observer);
  }

  // The node's own Lease in kube-node-lease. NotFound when it does not exist.
  virtual absl::StatusOr<NodeLeaseObservation> ReadNodeLease(const std::string& node) = 0;
  // The resourceVersion of the node's DelegatedLease; NotFound when absent.
  virtual absl::StatusOr<std::string> ReadDelegatedLease(const std::string& node) = 0;
  // Create or update (with the resourceVersion precondition); the new
  // resourceVersion.
  virtual absl::StatusOr<std::string> WriteDelegatedLease(const DelegatedLeaseWrite& write) = 0;
  // Delete with the resourceVersion precondition ("" = none).
  virtual absl::Status DeleteDelegatedLease(const std::string& node,
                                            const std::string& resource_version) = 0;
  // The PoolLease of the agent's pool, as the elector's lock. Owned by the
  // implementation; lives as long as it does.
  virtual election::LeaseLock* PoolLeaseLock() = 0;
  // The pool's recent delegation challenges as the last PoolLease answer (read
  // or write) gave them, newest first: status.challenges' values;
  // the first is the current one, which the leader relays. Empty when the
  // server issues none.
  virtual std::vector<std::string> PoolChallenges() { return {}; }

 protected:
  void ReportRequest(bool answered) {
    if (observer_) observer_(answered);
  }

 private:
  std::function<void(bool)> observer_;
};

}  // namespace poolcoord::agent
