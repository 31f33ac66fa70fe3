// "Does the cloud see me?" — the rule an agent applies to its own node before
// it says "reachable" or "cut off" in its heartbeats (docs/agent.md "Does the
// cloud see me?").
//
// Two signals, both measured by the agent on its own monotonic clock:
// 1. its own requests to kube-apiserver: each has a timeout well under the
//    PoolLease renew deadline (request_timeout), and the agent reads its node's
//    Lease every probe_period, so a working link answers at least that often.
//    A request is *answered* when any HTTP response came back in time (a 403 or
//    a 503 from the aggregator proves the link as well as a 200); a transport
//    error or timeout is not.
// 2. its node's own Lease in kube-node-lease, from that read: whether the last
//    renewTime on it is the forwarder's (it equals the forwarder's
//    coordination.pool/forwarded-renew-time annotation) rather than the kubelet's.
//    The node lifecycle controller judges that Lease: while the forwarder wrote
//    last, the cloud sees the node only through delegation.
//
// The rule, at monotonic time now:
//   reachable(now)  ⇔ the latest request was answered
//                     ∧ now − that answer < probe_period + request_timeout
//   seen(now)       ⇔ reachable(now)
//                     ∧ ( the latest Lease read was not forwarded
//                       ∨ reachable has held without a break for at least
//                         kubelet_return_timeout )
// A heartbeat says "reachable" exactly when seen(now); otherwise "cut off".
// An agent campaigns for its pool's PoolLease only while seen(now), and a
// leader for which seen(now) turns false steps down at once.
//
// Why the second clause: when a partition heals, the agent's link answers at
// once, but the kubelet may take tens of seconds to renew (its backoff, a dead
// TCP connection to time out). Saying "reachable" at the first answer would end
// the delegation (the leader deletes the DelegatedLease) while the cloud Lease
// still carries only the forwarder's last renewal, and the node could go
// NotReady in between. So the member keeps asking for delegation until the
// kubelet's own renewal shows on the Lease — or until kubelet_return_timeout
// (default 40 s, the pre-1.32 grace period) has passed with a working link, as a
// kubelet that has not renewed by then is not coming back soon, and the cloud
// is then left to judge it (a dead kubelet is not kept alive by delegation).
// While the agent reaches the cloud and no delegation is in place, its heartbeat
// says "reachable" whatever the kubelet does: the cloud can see the kubelet
// itself.
//
// Thread-safety: none; the owner serializes access.
#pragma once

#include <cstdint>

namespace poolcoord::agent {

struct ReachabilityOptions {
  int64_t probe_period_us = 5'000'000;
  int64_t request_timeout_us = 3'000'000;
  int64_t kubelet_return_timeout_us = 40'000'000;
};

// What one successful read of the node's own Lease showed.
struct NodeLeaseObservation {
  bool exists = false;
  // The last renewTime is the forwarder's (see above).
  bool forwarded = false;
};

class CloudReachability {
 public:
  explicit CloudReachability(ReachabilityOptions options = {}) : options_(options) {}

  // Every request the agent makes to kube-apiserver, when it completes.
  void OnRequest(int64_t now_mono_us, bool answered);
  // A read of the node's Lease that was answered (200, or 404 with exists =
  // false); call OnRequest for it too.
  void OnNodeLease(int64_t now_mono_us, const NodeLeaseObservation& lease);

  bool Reachable(int64_t now_mono_us) const;
  bool Seen(int64_t now_mono_us) const;
  // The monotonic time the current unbroken run of answers began (valid while
  // Reachable).
  int64_t reachable_since_us() const { return reachable_since_us_; }
  const NodeLeaseObservation& last_lease() const { return lease_; }
  const ReachabilityOptions& options() const { return options_; }

 private:
  ReachabilityOptions options_;
  bool any_ = false;
  bool last_answered_ = false;
  int64_t last_answer_us_ = 0;
  int64_t reachable_since_us_ = 0;
  NodeLeaseObservation lease_;
};

inline void CloudReachability::OnRequest(int64_t now_mono_us, bool answered) {
  if (answered) {
    if (!Reachable(now_mono_us)) reachable_since_us_ = now_mono_us;
    last_answer_us_ = now_mono_us;
  }
  last_answered_ = answered;
  any_ = true;
}

inline void CloudReachability::OnNodeLease(int64_t now_mono_us, const NodeLeaseObservation& lease) {
  lease_ = lease;
}

inline bool CloudReachability::Reachable(int64_t now_mono_us) const {
  return any_ && last_answered_ &&
         now_mono_us - last_answer_us_ < options_.probe_period_us + options_.request_timeout_us;
}

inline bool CloudReachability::Seen(int64_t now_mono_us) const {
  if (!Reachable(now_mono_us)) return false;
  return !lease_.forwarded ||
         now_mono_us - reachable_since_us_ >= options_.kubelet_return_timeout_us;
}

}  // namespace poolcoord::agent
