// The forwarder: turns live DelegatedLeases into renewals of the cloud's node
// Leases (docs/architecture.md "Forwarding").
//
// For each node with a DelegatedLease that belongs to the current, live term of
// its pool's leader, it renews `kube-node-lease/<node>` in the cloud: GET, then
// PUT with the cloud's resourceVersion (retried on Conflict), or POST when the
// Lease is missing. The renewTime it writes is max(its own now, the cloud
// Lease's renewTime + 1 µs): the node lifecycle controller counts a renewal only
// when renewTime grows, so edge clocks never leak into the cloud.
//
// Timing (the node lifecycle controller marks a node Unknown once its Lease is
// older than --node-monitor-grace-period, 40 s before Kubernetes 1.32 and 50 s
// since, and never makes it Ready again from a Lease):
// - the first forward of a delegation comes as soon as the DelegatedLease is
//   live and the kubelet's own last renewal is older than one kubelet renew
//   interval (`kubelet_renew_interval`, 10 s as the kubelet's), never after the
//   cloud Lease's duration;
// - while the DelegatedLease stays live, the cloud Lease is renewed at least
//   every renew interval, leader renewals or not.
// So the cloud Lease of a delegated node is never older than one renew
// interval (+ the 200 ms of the work loop), whatever the phase of the kubelet's
// last renewal: well under half of either grace period. The kubelet's renewal
// is dated on this process's monotonic clock: when the renewTime value was seen
// to change, moved back by the value's age on our wall clock but never before
// the last time the old value was seen (so a kubelet clock running behind cannot
// make us forward early by more than our polling gap, and one running ahead
// only delays by the renew interval). A DelegatedLease the leader last wrote
// before that renewal is stale news about a node that came back: not forwarded,
// so a returning kubelet is never fought while its DelegatedLease runs out.
//
// Every piece of state lives on the cloud objects, so a restart loses nothing
// (OpenYurt's in-memory counters did, issue #1233):
//   annotation openyurt.io/delegate-heartbeat: "true"   the Lease is delegated
//   annotation coordination.pool/delegated-since         MicroTime delegation began
//   annotation coordination.pool/forwarded-renew-time    the renewTime we wrote last
//   label      coordination.pool/delegated=true           to list marked Leases
//   taint node.openyurt.io/unschedulable=true:NoSchedule once delegated for
//                                                        `taint_after` (40 s)
// A Lease whose renewTime differs from forwarded-renew-time (and from
// carried-renew-time) was renewed by its kubelet: the node is back, so the
// marks and the taint are removed. Unless that renewTime is not later than the
// last one we wrote (the kubelet's clock runs behind ours): the node lifecycle
// controller would not count it, nor the next ones until the kubelet's clock
// passes ours, so each such renewal is carried to that renewTime + 1 µs, noted
// in coordination.pool/carried-renew-time (not forwarded-renew-time: the
// node's agent reads the Lease as its kubelet's), the marks kept and the taint
// removed (poolcoord_kubelet_renewals_carried_total), until the kubelet's own
// renewTime grows past it. Nothing is written without a kubelet write to carry. A marked
// Lease we last renewed longer than `node_monitor_grace_period` ago (the
// delegation lapsed and the node went Unknown) starts a new delegation when
// forwarding resumes: a new delegated-since, a DelegationStarted event, and the
// old taint removed until the new delegation is old enough.
//
// The taint is written with a JSON merge patch carrying the Node's
// resourceVersion (the chart grants nodes get/list/watch/patch, not update).
// Every failed cloud write is counted (poolcoord_forward_errors_total) and
// logged, except a renewal the admission webhook refuses (403) because its
// delegation ended while the write was in flight (the DelegatedLease deleted
// or no longer current when re-read after the refusal): that is the webhook
// doing its job, counted in poolcoord_forwards_withdrawn_total.
//
// Only one process may forward at a time (the single memory-store replica, or
// the elected replica with etcd3): the caller starts and stops it.
// Thread-safety: SyncNode/SyncAll may run from any thread; Start/Stop from one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "cloud/clientset.h"
#include "election/lease_rules.h"
#include "store/store.h"

namespace poolcoord::election {

inline constexpr char kDelegatedSinceAnnotation[] = "coordination.pool/delegated-since";
inline constexpr char kForwardedRenewTimeAnnotation[] = "coordination.pool/forwarded-renew-time";
inline constexpr char kCarriedRenewTimeAnnotation[] = "coordination.pool/carried-renew-time";
inline constexpr char kDelegatedLabel[] = "coordination.pool/delegated";
inline constexpr char kUnschedulableTaint[] = "node.openyurt.io/unschedulable";

struct ForwarderOptions {
  std::string node_lease_namespace = "kube-node-lease";
  // Events about Nodes go to "default", as the node lifecycle controller does.
  std::string events_namespace = "default";
  std::chrono::microseconds taint_after = std::chrono::seconds(40);
  std::chrono::milliseconds resync_period = std::chrono::seconds(5);
  // The kubelet's Lease renew interval (10 s: a quarter of its 40 s Lease).
  std::chrono::microseconds kubelet_renew_interval = std::chrono::seconds(10);
  // kube-controller-manager's --node-monitor-grace-period: a delegation whose
  // last forward is older than this has lapsed; forwarding again starts anew.
  std::chrono::microseconds node_monitor_grace_period = std::chrono::seconds(40);
  int conflict_retries = 5;  // OpenYurt's leaseDelegateRetryTimes
  std::string component = "poolcoord-forwarder";
};

// The cloud clients the forwarder writes through (not owned).
struct ForwarderCloud {
  cloud::LeaseInterface* node_leases = nullptr;  // Leases of options.node_lease_namespace
  cloud::NodeInterface* nodes = nullptr;
  cloud::EventInterface* events = nullptr;  // Events of options.events_namespace
};

// The forwarder's metrics (names and labels read by the chart's dashboards and
// alerts: keep them).
struct ForwarderMetrics {
  explicit ForwarderMetrics(base::MetricsRegistry* registry);
  base::Counter& forwards;
  base::Counter& forward_errors;
  base::Counter& forwards_withdrawn;
  base::Counter& delegations_started;
  base::Counter& delegations_stopped;
  base::Counter& renewals_carried;
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
  Forwarder(store::Store* store, const LeaseRules* rules, ForwarderCloud cloud,
            const base::Clock* clock, base::MetricsRegistry* metrics,
            ForwarderOptions options = {});
  ~Forwarder();

  // Starts the watch of DelegatedLeases and PoolLeases and the resync loop.
  void Start();
  // Stops and joins; idempotent.
  void Stop();

  // Brings the cloud state of one node in line with its DelegatedLease (or its
  // absence). Errors: the cloud's (cloud/errors.h), each counted and logged.
  absl::Status SyncNode(const std::string& node);
  // One pass over every DelegatedLease and every cloud Lease that carries our
  // marker. Returns the first error, after trying every node.
  absl::Status SyncAll();
  // Syncs the nodes whose recheck time (on the monotonic clock) has come: the
  // renewal due one renew interval after the last forward, or the first forward
  // due when the kubelet's own renewal gets one renew interval old. The work
  // loop calls it every 200 ms. Returns the first error.
  absl::Status SyncDue();

  const ForwarderMetrics& metrics() const { return metrics_; }

 private:
  struct Delegation;
  // Writes one renewal of the cloud Lease `existing` (created when nullopt).
  // Conflict / AlreadyExists when someone wrote first: the caller re-reads.
  // Cancelled when the webhook refused it because the delegation ended
  // meanwhile (not counted as an error).
  absl::StatusOr<Delegation> Forward(const std::string& node, const store::Object& delegated,
                                     std::optional<cloud::Lease> existing, bool new_delegation);
  // Rewrites the kubelet's own renewal in `lease` with renewTime `renew_us`
  // (and forwarded-renew-time), marks kept. Conflict: the caller re-reads.
  absl::Status CarryKubeletRenewal(cloud::Lease lease, int64_t renew_us);
  absl::Status ClearDelegation(cloud::Lease lease);
  absl::Status SetTaint(const std::string& node, bool present, int64_t since_us);
  void RecordEvent(const std::string& kind, const std::string& api_version, const std::string& name,
                   const std::string& reason, const std::string& message);
  // Whether `node`'s delegation is over now: its DelegatedLease is gone or no
  // longer current (store read again).
  bool DelegationEnded(const std::string& node);
  // Counts and logs a failed cloud call; returns `status`.
  absl::Status Failed(const std::string& node, const char* what, absl::Status status);
  // Dates the renewTime value `renew_us` of `node`'s Lease seen now, on the
  // monotonic clock; returns the age of the renewal it dates.
  int64_t RenewalAge(const std::string& node, std::optional<int64_t> renew_us);
  // Asks the work loop to sync `node` again at `mono_us`.
  void RecheckAt(const std::string& node, int64_t mono_us);
  void Enqueue(const std::string& node);
  void WatchLoop(store::Kind kind);
  void WorkLoop();

  store::Store* store_;
  const LeaseRules* rules_;
  const ForwarderCloud cloud_;
  const base::Clock* clock_;
  const ForwarderOptions options_;
  ForwarderMetrics metrics_;

  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  std::set<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> due_ ABSL_GUARDED_BY(mu_);          // node -> monotonic µs
  std::map<std::string, std::string> holders_ ABSL_GUARDED_BY(mu_);  // pool -> last seen holder
  struct RenewalSeen {
    std::optional<int64_t> renew_us;  // the value
    int64_t changed_mono_us;          // when it was written, as dated above
    int64_t looked_mono_us;           // when it was last seen
  };
  std::map<std::string, RenewalSeen> seen_ ABSL_GUARDED_BY(mu_);
  // node -> the DelegatedLease status.observedTime its last forward carried.
  std::map<std::string, int64_t> forwarded_observed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<store::Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::election
