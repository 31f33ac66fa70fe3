// The forwarder: the controller that turns live DelegatedLeases into renewals
// of the cloud's node Leases (docs/forwarding.md).
//
// What it does, per node. For each node whose DelegatedLease belongs to the
// current, live term of its pool's leader (election::LeaseRules::
// DelegationCurrent), it renews `kube-node-lease/<node>` in the cloud: a PUT
// with the resourceVersion it holds (re-read only on Conflict), or a POST when
// the Lease is missing. The renewTime it writes is max(its own now, the cloud
// Lease's renewTime + 1 µs): the node lifecycle controller counts a renewal
// only when renewTime grows, so edge clocks never leak into the cloud.
//
// Timing (the node lifecycle controller marks a node Unknown once its Lease is
// older than --node-monitor-grace-period, 40 s before Kubernetes 1.32 and 50 s
// since, and never makes it Ready again from a Lease):
// - the first forward of a delegation comes as soon as the DelegatedLease is
//   live and the kubelet's own last renewal is older than one kubelet renew
//   interval (`kubelet_renew_interval`, 10 s as the kubelet's), never after the
//   cloud Lease's duration;
// - while the DelegatedLease stays live, the cloud Lease is renewed once every
//   renew interval: each forward queues the node's next one, due one interval
//   later. When the workers fall behind, the most overdue renewal goes first
//   (controllers/work_queue.h), so every delegated Lease ages alike and none
//   nears the grace period while the forwarder's rate covers
//   nodes / (grace - renew interval); poolcoord_forwarder_queue_lag_seconds
//   says how far behind it is.
// The kubelet's renewal is dated on this process's monotonic clock: when the
// renewTime value was seen to change, moved back by the value's age on our wall
// clock (by the renewTime, or by the server's managedFields time of the write
// when that is older: a kubelet clock running ahead cannot delay the first
// forward) but never before the last time the old value was seen (a kubelet
// clock running behind cannot make us forward early by more than our polling
// gap). A DelegatedLease the
// leader last wrote before that renewal is stale news about a node that came
// back: not forwarded, so a returning kubelet is never fought while its
// DelegatedLease runs out.
//
// The marks it leaves (election/lease_marks.h) carry all of its state, so a
// restart loses nothing: a Lease whose renewTime differs from
// forwarded-renew-time (and from carried-renew-time) was renewed by its
// kubelet: the node is back, the marks and the taint go. Unless that renewTime
// is not later than the last one we wrote (the kubelet's clock runs behind):
// the node lifecycle controller would not count it, so each such renewal is
// carried to that renewTime + 1 µs (carried-renew-time; the marks kept, the
// taint removed, poolcoord_kubelet_renewals_carried_total) until the
// kubelet's own renewTime grows past it. A marked Lease last renewed longer
// than `node_monitor_grace_period` ago (the delegation lapsed, the node went
// Unknown) starts a new delegation when forwarding resumes.
//
// What it reads. DelegatedLeases and PoolLeases from the store's watch cache
// (Store::GetWithFreshness, resourceVersion "0"), woken by the store's watch;
// the cloud Leases it marked from an informer (cloud/informer.h: a list and
// watch of kube-node-lease with the label selector
// coordination.pool/delegated=true, the narrowest the API allows), newer
// answers to its own writes kept beside it (client-go's mutation cache). A Lease
// it has not marked yet (a delegation's first forward) is read with one GET,
// or, when many wait for one at once (a storm), all of them with one LIST of
// kube-node-lease from kube-apiserver's watch cache (`bulk_first_reads`).
//
// How it works. One WorkQueue (client-go's semantics: a node is never synced by
// two workers at once, a node due again while queued is queued once, failures
// come back with per-node exponential backoff) holds each node's next lease
// sync at its due time, and, at a lower priority, its taint sync: the
// unschedulable taint (a conditional JSON merge patch of the Node) waits while
// renewals are due. `workers` threads take from it; their cloud requests share
// the client's rate limit (--kube-api-qps/--kube-api-burst, on the RestClient).
// Events go through an EventRecorder, dropped when its queue is full.
//
// Shards. Nodes fall into `shards` shards by a hash of their name (ShardOf);
// the forwarder syncs only the nodes of shards it owns. Alone it owns shard 0 of
// 1 from the start. With several replicas, controllers/forwarder_shards.h
// acquires shards through Leases and calls AcquireShard/ReleaseShard: a shard
// released here has no sync running or starting for it once ReleaseShard
// returns, so two replicas never write for one node at once (the shard's Lease
// hands it over only after that).
//
// Two ways to drive it: Start() runs it on threads of its own; Prime(), Pump(),
// ProcessReady(), Resync() and FlushEvents() perform the same steps on the
// caller's thread, for tests and a simulator that move a FakeClock.
//
// Thread-safety: Start/Stop from one thread; everything else from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "cloud/clientset.h"
#include "cloud/informer.h"
#include "controllers/event_recorder.h"
#include "controllers/work_queue.h"
#include "election/lease_marks.h"
#include "election/lease_rules.h"
#include "store/store.h"

namespace poolcoord::controllers {

struct ForwarderOptions {
  std::string node_lease_namespace = "kube-node-lease";
  // Events about Nodes go to "default", as the node lifecycle controller does.
  std::string events_namespace = "default";
  std::chrono::microseconds taint_after = std::chrono::seconds(40);
  // How often every DelegatedLease and marked Lease is looked at again, from
  // the caches (no cloud request), in case an event was missed.
  std::chrono::milliseconds resync_period = std::chrono::seconds(5);
  // The kubelet's Lease renew interval (10 s: a quarter of its 40 s Lease).
  std::chrono::microseconds kubelet_renew_interval = std::chrono::seconds(10);
  // kube-controller-manager's --node-monitor-grace-period: a delegation whose
  // last forward is older than this has lapsed; forwarding again starts anew.
  std::chrono::microseconds node_monitor_grace_period = std::chrono::seconds(40);
  int conflict_retries = 5;  // OpenYurt's leaseDelegateRetryTimes
  // A storm's first reads. When at least `bulk_first_reads` delegated nodes of
  // our shards have no copy of their Lease, a worker about to GET one LISTs the
  // namespace from kube-apiserver's watch cache (resourceVersion "0") instead,
  // and every waiting node takes its copy from that answer: one request where
  // a storm made one GET per node. At most one LIST per renew interval, and
  // only while the nodes waiting number at least 1/`list_items_per_read` of
  // the Leases the last LIST returned (a listed item costs kube-apiserver a
  // fraction of a GET; in a big cluster a small storm is cheaper by GETs).
  // 0: always a GET.
  int bulk_first_reads = 100;
  int list_items_per_read = 25;
  int workers = 64;          // concurrent syncs (each one cloud request at a time)
  int shards = 1;            // ShardOf(node, shards); 1: everything in shard 0
  std::string component = "poolcoord-forwarder";
  WorkQueueOptions queue;
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
  base::Counter& conflicts;
  base::Gauge& delegated_nodes;
  base::Gauge& pools_without_leader;
  base::Gauge& queue_lag;
  base::Gauge& queue_depth;
  base::Gauge& owned_shards;
  base::Histogram& forward_duration;
  base::Histogram& renewal_lateness;
};

class Forwarder {
 public:
  // None owned; all must outlive the Forwarder.
  Forwarder(store::Store* store, const election::LeaseRules* rules, ForwarderCloud cloud,
            const base::Clock* clock, base::MetricsRegistry* metrics,
            ForwarderOptions options = {});
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // The shard of a node (or a pool, for its leader-change Events): FNV-1a of
  // the name modulo `shards`, the same in every replica.
  static int ShardOf(std::string_view name, int shards);

  // Runs on threads of its own: the store watches, the cloud informer,
  // `workers` workers, the resync and the Event sender. Stop ends them all and
  // joins; a stopped forwarder does not start again.
  void Start();
  void Stop();

  // --- The same steps, driven by the caller (tests, the simulator).
  // Opens the store watches, queues every DelegatedLease, and lists the marked
  // cloud Leases into the informer (one LIST). Errors: the store's or the cloud's.
  absl::Status Prime();
  // Hands the store watch events that are ready to the queue.
  void Pump();
  // A watch event of the marked cloud Leases (what the informer's watch delivers).
  void ObserveCloudLease(const cloud::WatchEvent<cloud::Lease>& event);
  // Syncs the nodes whose sync is due now (at most `max`, the most overdue
  // first), on this thread; returns how many.
  int ProcessReady(int max = std::numeric_limits<int>::max());
  // Looks at every DelegatedLease and marked Lease again and refreshes the gauges.
  void Resync();
  void FlushEvents();
  // When ProcessReady has something next (monotonic µs; WorkQueue::kNever: nothing).
  int64_t NextDue() const;

  // Brings the cloud Lease of one node in line with its DelegatedLease (or its
  // absence) now, whatever its shard. Errors: the cloud's (cloud/errors.h),
  // each counted and logged.
  absl::Status SyncNode(const std::string& node);
  // Adds or removes the node's unschedulable taint as its delegation asks.
  absl::Status SyncTaint(const std::string& node);

  // Shards (forwarder_shards.h calls these). AcquireShard queues the shard's
  // nodes. ReleaseShard returns once no sync of the shard runs, and none
  // starts until it is acquired again.
  void AcquireShard(int shard);
  void ReleaseShard(int shard);
  bool OwnsShard(int shard) const;

  const ForwarderMetrics& metrics() const { return metrics_; }
  const WorkQueue& queue() const { return queue_; }

 private:
  struct Delegation {
    bool started = false;  // this forward began a delegation
    int64_t since_us = 0;  // when the delegation began (wall)
  };
  struct NodeState {
    // The kubelet's last renewTime value, when it changed and when it was last
    // seen (monotonic µs), to date its renewals.
    std::optional<int64_t> renew_us;
    int64_t changed_mono_us = 0;
    int64_t looked_mono_us = 0;
    bool renewal_seen = false;
    // The newest copy of its Lease we read or wrote ourselves (newer than the
    // informer's until the watch brings it; the informer has no Lease we have
    // not marked).
    std::optional<cloud::Lease> known;
    // Whether its Node carries our taint, as last read or written.
    std::optional<bool> tainted;
    // Our last forward: the renewTime written and our monotonic time then.
    std::optional<int64_t> forwarded_renew_us;
    int64_t forwarded_mono_us = 0;
  };
  struct TaintWant {
    bool present = false;
    int64_t due_mono_us = 0;  // when `present` changes next (kNever: not by time)
  };

  // One queue item: "l/<node>" (lease, priority 0) or "t/<node>" (taint, 1).
  void Process(const WorkQueue::Item& item);
  // The node's Lease as we know it without asking: the informer's or our own
  // last read or write, the newer; nullopt when neither has it, or when
  // `marked_only` and it does not carry our marks. A stale copy costs one 409
  // and a read when written with.
  std::optional<cloud::Lease> CachedLease(const std::string& node, bool marked_only);
  absl::StatusOr<Delegation> Forward(const std::string& node, const store::Object& delegated,
                                     std::optional<cloud::Lease> existing, bool new_delegation);
  absl::Status CarryKubeletRenewal(cloud::Lease lease, int64_t renew_us);
  absl::Status ClearDelegation(cloud::Lease lease);
  TaintWant WantTaint(const std::optional<cloud::Lease>& lease) const;
  bool DelegationEnded(const std::string& node);
  // A delegation's first read of its node's Lease: the copy a LIST brought
  // (BulkRead; `*fresh` false) or a GET from kube-apiserver's watch cache.
  absl::StatusOr<cloud::Lease> FirstRead(const std::string& node, bool* fresh);
  // Waits for a LIST in flight; takes one when a storm's first reads make it
  // cheaper than their GETs (ForwarderOptions::bulk_first_reads).
  void BulkRead();
  // Delegated nodes of our shards with no copy of their Lease.
  int WaitingFirstReads();
  absl::Status Failed(const std::string& node, const char* what, absl::Status status);
  // The age of the kubelet's renewal `renew_us`, dated as the class comment
  // says; `written_us`: when the server saw it written (cloud::Lease::
  // renew_time_written_us). `fresh`: the value was just read from
  // kube-apiserver (not a cached copy), so it was current at this moment.
  int64_t RenewalAge(const std::string& node, std::optional<int64_t> renew_us,
                     std::optional<int64_t> written_us, bool fresh);
  // How long ago we wrote the renewal whose renewTime is `forwarded_us`. The
  // value itself may lie ahead of our clock (it is max(now, previous + 1 µs)),
  // so our own time of the write is used when we made it; otherwise (a
  // restart) the value's age on our wall clock, or, when it lies ahead, the
  // time since we first saw it: a renewal is then written one interval later,
  // never an hour late.
  int64_t ForwardAge(const std::string& node, int64_t forwarded_us);
  void Remember(const std::string& node, const cloud::Lease& lease);
  void Forget(const std::string& node);
  int64_t WallToMono(int64_t wall_us) const;
  void ScheduleLease(const std::string& node, int64_t due_mono_us);
  void ScheduleTaint(const std::string& node, int64_t due_mono_us);
  // What a marked Lease's change tells: queues the node's next sync.
  void OnMarkedLease(const std::string& type, const cloud::Lease& lease);
  void OnStoreEvent(store::Kind kind, const store::Event& event);
  // An object of the store's list before its watch: what is there already.
  void Seed(store::Kind kind, const store::ObjectPtr& obj);
  void QueueShard(int shard);
  void WatchLoop(store::Kind kind);
  void HousekeepingLoop();

  store::Store* const store_;
  const election::LeaseRules* const rules_;
  const ForwarderCloud cloud_;
  const base::Clock* const clock_;
  const ForwarderOptions options_;
  ForwarderMetrics metrics_;
  WorkQueue queue_;
  EventRecorder events_;
  cloud::Informer<cloud::LeaseInterface, cloud::LeaseList> marked_;

  std::atomic<bool> stopping_{false};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, NodeState> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> holders_ ABSL_GUARDED_BY(mu_);  // pool -> holder
  std::vector<std::shared_ptr<store::Watcher>> watchers_ ABSL_GUARDED_BY(mu_);

  // BulkRead's state: a LIST in flight, when the last began, its size.
  absl::Mutex bulk_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  bool bulk_reading_ ABSL_GUARDED_BY(bulk_mu_) = false;
  absl::CondVar bulk_done_;
  std::optional<int64_t> bulk_listed_mono_us_ ABSL_GUARDED_BY(bulk_mu_);
  size_t bulk_list_size_ ABSL_GUARDED_BY(bulk_mu_) = 0;
  // WaitingFirstReads is counted at most once a second; whether a LIST was
  // worth it then.
  std::optional<int64_t> bulk_counted_mono_us_ ABSL_GUARDED_BY(bulk_mu_);
  bool bulk_worth_it_ ABSL_GUARDED_BY(bulk_mu_) = false;

  mutable absl::Mutex shards_mu_;
  std::vector<bool> owned_ ABSL_GUARDED_BY(shards_mu_);
  std::vector<int> inflight_ ABSL_GUARDED_BY(shards_mu_);
  absl::CondVar shard_idle_;

  std::vector<std::thread> threads_;
};

}  // namespace poolcoord::controllers
