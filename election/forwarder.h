// The forwarder: turns live DelegatedLeases into renewals of the cloud's node
// Leases (DESIGN.md "Forwarding").
//
// For each node with a DelegatedLease that belongs to the current, live term of
// its pool's leader, it renews `kube-node-lease/<node>` in the cloud: GET, then
// PUT with the cloud's resourceVersion (retried on 409), or POST when the Lease is
// missing. The renewTime it writes is max(its own now, the cloud Lease's renewTime
// + 1 µs): the node lifecycle controller counts a renewal only when renewTime
// grows, so edge clocks never leak into the cloud.
//
// Every piece of state lives on the cloud objects, so a restart loses nothing
// (OpenYurt's in-memory counters did, issue #1233):
//   annotation openyurt.io/delegate-heartbeat: "true"   the Lease is delegated
//   annotation coordination.pool/delegated-since         MicroTime delegation began
//   annotation coordination.pool/forwarded-renew-time    the renewTime we wrote last
//   taint node.openyurt.io/unschedulable=true:NoSchedule once delegated for
//                                                        `taint_after` (40 s)
// A Lease whose renewTime differs from forwarded-renew-time was renewed by its
// kubelet: the node is back, so the annotations and the taint are removed and
// nothing is forwarded while the kubelet's own renewal is live.
//
// Only one process may forward at a time (the single memory-store replica, or
// the elected replica with etcd3): the caller starts and stops it.
#pragma once

#include <atomic>
#include <climits>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>
#include <set>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "rapidjson/document.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "election/lease_rules.h"
#include "store/kube_client.h"
#include "store/store.h"

namespace poolcoord::election {

inline constexpr char kDelegatedSinceAnnotation[] = "coordination.pool/delegated-since";
inline constexpr char kForwardedRenewTimeAnnotation[] = "coordination.pool/forwarded-renew-time";
inline constexpr char kUnschedulableTaint[] = "node.openyurt.io/unschedulable";

struct ForwarderOptions {
  std::string node_lease_namespace = "kube-node-lease";
  // Events about Nodes go to "default", as the node lifecycle controller does.
  std::string events_namespace = "default";
  std::chrono::microseconds taint_after = std::chrono::seconds(40);
  std::chrono::milliseconds resync_period = std::chrono::seconds(5);
  int conflict_retries = 5;  // OpenYurt's leaseDelegateRetryTimes
  std::string component = "poolcoord-forwarder";
};

// The forwarder's metrics (names and labels read by the chart's dashboards and
// alerts: keep them).
struct ForwarderMetrics {
  explicit ForwarderMetrics(base::MetricsRegistry* registry);
  base::Counter& forwards;
  base::Counter& forward_errors;
  base::Counter& delegations_started;
  base::Counter& delegations_stopped;
  base::Counter& taints_added;
  base::Counter& taints_removed;
  base::Counter& leader_changes;
  base::Gauge& delegated_nodes;
  base::Gauge& pools_without_leader;
  base::Histogram& forward_duration;
};

class Forwarder {
 public:
  // None owned; all must outlive the Forwarder.
  Forwarder(store::Store* store, const LeaseRules* rules, store::KubeClient* cloud,
            const base::Clock* clock, base::MetricsRegistry* metrics,
            ForwarderOptions options = {});
  ~Forwarder();

  // Starts the watch of DelegatedLeases and PoolLeases and the resync loop.
  void Start();
  // Stops and joins; idempotent.
  void Stop();

  // Brings the cloud state of one node in line with its DelegatedLease (or its
  // absence). Errors: the cloud's, as absl::Status.
  absl::Status SyncNode(const std::string& node);
  // One pass over every DelegatedLease and every cloud Lease that carries our
  // marker. Returns the first error, after trying every node.
  absl::Status SyncAll();

  const ForwarderMetrics& metrics() const { return metrics_; }

 private:
  absl::Status ForwardOnce(const std::string& node, const store::Object& delegated,
                           rapidjson::Document* existing, bool* started, int64_t* since_us);
  absl::Status ClearDelegation(const std::string& node);
  absl::Status SetTaint(const std::string& node, bool present);
  void RecordEvent(const std::string& kind, const std::string& api_version, const std::string& name,
                   const std::string& reason, const std::string& message);
  // Remembers, on this process's monotonic clock, when a kubelet-written
  // renewTime value was first seen changing. Only the change is timed, never the
  // kubelet's clock; a value seen once without a change counts as old, so a
  // restart delays nothing (it only forgets the damping below).
  void NoteKubeletRenewal(const std::string& node, int64_t renew_us, bool changed);
  // True while the kubelet's own last renewal, seen changing, is within its
  // lease duration: then an unmarked Lease is not forwarded (no flapping while a
  // returning node's DelegatedLease runs out).
  bool KubeletRenewalLive(const std::string& node, int64_t duration_us);
  void Enqueue(const std::string& node);
  void WatchLoop(store::Kind kind);
  void WorkLoop();

  store::Store* store_;
  const LeaseRules* rules_;
  store::KubeClient* cloud_;
  const base::Clock* clock_;
  ForwarderOptions options_;
  ForwarderMetrics metrics_;

  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  std::set<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> holders_ ABSL_GUARDED_BY(mu_);  // pool -> last seen holder
  static constexpr int64_t kNeverSeen = INT64_MIN;
  struct KubeletSeen {
    int64_t renew_us;
    int64_t seen_mono_us;
  };
  std::map<std::string, KubeletSeen> kubelet_seen_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<store::Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::election
