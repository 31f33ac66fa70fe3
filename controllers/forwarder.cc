#include "controllers/forwarder.h"

#include <pthread.h>

#include <algorithm>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/microtime.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "controllers/delegation_marks.h"

namespace poolcoord::controllers {
namespace {

using election::kCarriedRenewTimeAnnotation;
using election::kDelegateAnnotation;
using election::kDelegatedLabel;
using election::kDelegatedSinceAnnotation;
using election::kForwardedRenewTimeAnnotation;
using election::kUnschedulableTaint;

constexpr char kLeaseKey[] = "l/";
constexpr char kTaintKey[] = "t/";
constexpr int kLeasePriority = 0;
constexpr int kTaintPriority = 1;
// A renewal taken from the queue a little before its due time still counts
// as due (wall and monotonic clocks are converted with µs rounding).
constexpr int64_t kDueSlackUs = 100'000;

std::optional<int64_t> AnnotationTime(const cloud::Lease& lease, const char* key) {
  auto it = lease.metadata.annotations.find(key);
  if (it == lease.metadata.annotations.end() || it->second.empty()) return std::nullopt;
  auto t = base::ParseMicroTime(it->second);
  if (!t.ok()) return std::nullopt;
  return *t;
}

bool Marked(const cloud::Lease& lease) {
  return lease.metadata.annotations.count(kDelegatedSinceAnnotation) > 0;
}

// kube-apiserver's resourceVersions are etcd revisions: the larger is newer.
// An unparsable one (a server of another kind) is never taken as newer.
int64_t Revision(const cloud::Lease& lease) {
  int64_t rv = -1;
  if (!absl::SimpleAtoi(lease.metadata.resource_version, &rv)) return -1;
  return rv;
}

// The informer of the cloud Leases we marked: the narrowest watch the API
// allows (node Leases have no field to select on but their name).
cloud::ReflectorOptions MarkedLeasesReflector() {
  cloud::ReflectorOptions o;
  o.name = "marked node Leases";
  o.thread_name = "fwd-informer";
  o.list.label_selector = absl::StrCat(kDelegatedLabel, "=true");
  return o;
}

EventRecorderOptions RecorderOptions(const std::string& component) {
  EventRecorderOptions o;
  o.component = component;
  o.thread_name = "fwd-events";
  return o;
}

store::Freshness FromCache() {
  store::Freshness f;
  f.rule = store::Freshness::Rule::kAny;
  return f;
}

}  // namespace

ForwarderMetrics::ForwarderMetrics(base::MetricsRegistry* r)
    : forwards(r->AddCounter("poolcoord_forwards_total",
                             "Cloud Lease renewals written for delegated nodes.")
                   .WithLabels({})),
      forward_errors(r->AddCounter("poolcoord_forward_errors_total",
                                   "Failed cloud Lease, Node or Event reads and writes of the "
                                   "forwarder.")
                         .WithLabels({})),
      forwards_withdrawn(
          r->AddCounter("poolcoord_forwards_withdrawn_total",
                        "Cloud Lease renewals refused (403) because their delegation ended "
                        "while the write was in flight: the admission webhook doing its job, "
                        "not a failure.")
              .WithLabels({})),
      delegations_started(
          r->AddCounter("poolcoord_delegations_started_total", "Nodes whose delegation began.")
              .WithLabels({})),
      delegations_stopped(r->AddCounter("poolcoord_delegations_stopped_total",
                                        "Nodes that renew their own Lease again.")
                              .WithLabels({})),
      renewals_carried(
          r->AddCounter("poolcoord_kubelet_renewals_carried_total",
                        "Renewals of a returning kubelet whose clock runs behind the last "
                        "forwarded renewTime, rewritten so that renewTime grows.")
              .WithLabels({})),
      taints_added(r->AddCounter("poolcoord_taints_added_total",
                                 "Unschedulable taints added to delegated nodes.")
                       .WithLabels({})),
      taints_removed(
          r->AddCounter("poolcoord_taints_removed_total", "Unschedulable taints removed.")
              .WithLabels({})),
      leader_changes(
          r->AddCounter("poolcoord_pool_leader_changes_total", "PoolLease holder changes seen.")
              .WithLabels({})),
      conflicts(r->AddCounter("poolcoord_forward_conflicts_total",
                              "Cloud Lease writes answered 409 Conflict (someone wrote since our "
                              "read): the Lease is read again and the write retried.")
                    .WithLabels({})),
      delegated_nodes(r->AddGauge("poolcoord_delegated_nodes", "Nodes with a current delegation.")
                          .WithLabels({})),
      pools_without_leader(
          r->AddGauge("poolcoord_pools_without_leader", "PoolLeases without a live holder.")
              .WithLabels({})),
      queue_lag(r->AddGauge("poolcoord_forwarder_queue_lag_seconds",
                            "How long the most overdue cloud Lease renewal has been due: how far "
                            "the forwarder is behind (0 when it keeps up). A delegated node's "
                            "Lease is as old as the renew interval plus this.")
                    .WithLabels({})),
      queue_depth(r->AddGauge("poolcoord_forwarder_queue_depth",
                              "Node syncs waiting in the forwarder's queue (due or not).")
                      .WithLabels({})),
      owned_shards(r->AddGauge("poolcoord_forwarder_owned_shards",
                               "Forwarding shards this replica owns.")
                       .WithLabels({})),
      forward_duration(r->AddHistogram("poolcoord_forward_duration_seconds",
                                       "Time to write one cloud Lease renewal.", {},
                                       {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
                           .WithLabels({})),
      renewal_lateness(r->AddHistogram("poolcoord_forwarder_sync_lateness_seconds",
                                       "From when a node's Lease sync was due to when a worker "
                                       "took it.",
                                       {}, {0.01, 0.1, 0.5, 1, 2, 5, 10, 20, 30})
                           .WithLabels({})) {}

Forwarder::Forwarder(store::Store* store, const election::LeaseRules* rules, ForwarderCloud cloud,
                     const base::Clock* clock, base::MetricsRegistry* metrics,
                     ForwarderOptions options)
    : store_(store),
      rules_(rules),
      cloud_(cloud),
      clock_(clock),
      options_(std::move(options)),
      metrics_(metrics),
      queue_(clock, options_.queue),
      events_(cloud.events, clock, metrics, RecorderOptions(options_.component),
              [this](const std::string& name, const absl::Status& s) {
                Failed(name, "recording an Event", s).IgnoreError();
              }),
      marked_(cloud.node_leases,
              MarkedLeasesReflector(),
              [this](const std::string& type, const cloud::Lease& lease) {
                OnMarkedLease(type, lease);
              }),
      owned_(std::max(options_.shards, 1), options_.shards <= 1),
      inflight_(std::max(options_.shards, 1), 0) {
  metrics_.owned_shards.Set(options_.shards <= 1 ? 1 : 0);
}

Forwarder::~Forwarder() { Stop(); }

int Forwarder::ShardOf(std::string_view name, int shards) {
  if (shards <= 1) return 0;
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<int>(h % static_cast<uint64_t>(shards));
}

// ------------------------------------------------------------ driving it --

void Forwarder::Start() {
  stopping_ = false;
  marked_.Start();
  events_.Start();
  // Named "fwd-*" (top -H, /proc/PID/task/*/comm): bench/forwarder_scale.py
  // sums the forwarder's own CPU by them.
  auto named = [](const char* name, auto fn) {
    return std::thread([name, fn] {
      pthread_setname_np(pthread_self(), name);
      fn();
    });
  };
  threads_.push_back(named("fwd-watch", [this] { WatchLoop(store::Kind::kDelegatedLease); }));
  threads_.push_back(named("fwd-watch", [this] { WatchLoop(store::Kind::kPoolLease); }));
  threads_.push_back(named("fwd-resync", [this] { HousekeepingLoop(); }));
  for (int i = 0; i < std::max(options_.workers, 1); ++i) {
    threads_.push_back(named("fwd-worker", [this] {
      while (std::optional<WorkQueue::Item> item = queue_.Get()) Process(*item);
    }));
  }
}

void Forwarder::Stop() {
  if (stopping_.exchange(true)) return;
  queue_.ShutDown();
  {
    absl::MutexLock l(&mu_);
    for (auto& w : watchers_) w->Stop();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  marked_.Stop();
  events_.Stop();
}

absl::Status Forwarder::Prime() {
  for (store::Kind kind : {store::Kind::kDelegatedLease, store::Kind::kPoolLease}) {
    store::ListOptions o;
    o.freshness = FromCache();
    absl::StatusOr<store::ListResult> list = store_->List(kind, o);
    if (!list.ok()) return list.status();
    auto w = store_->Watch(kind, list->revision);
    if (!w.ok()) return w.status();
    {
      absl::MutexLock l(&mu_);
      watchers_.push_back(*std::move(w));
    }
    for (const auto& obj : list->items) Seed(kind, obj);
  }
  cloud::ListOptions marked;
  marked.label_selector = absl::StrCat(kDelegatedLabel, "=true");
  absl::StatusOr<cloud::LeaseList> leases = cloud_.node_leases->List(marked);
  if (!leases.ok()) return Failed("*", "listing the marked cloud Leases", leases.status());
  marked_.Replace(leases->items);
  return absl::OkStatus();
}

void Forwarder::Pump() {
  std::vector<std::shared_ptr<store::Watcher>> watchers;
  {
    absl::MutexLock l(&mu_);
    watchers = watchers_;
  }
  // Prime opened them in this order.
  const store::Kind kinds[] = {store::Kind::kDelegatedLease, store::Kind::kPoolLease};
  for (size_t i = 0; i < watchers.size() && i < 2; ++i) {
    while (store::EventPtr ev = watchers[i]->TryNext()) OnStoreEvent(kinds[i], *ev);
  }
}

void Forwarder::ObserveCloudLease(const cloud::WatchEvent<cloud::Lease>& event) {
  marked_.Apply(event);
}

int Forwarder::ProcessReady(int max) {
  int n = 0;
  while (n < max) {
    std::optional<WorkQueue::Item> item = queue_.TryGet();
    if (!item) break;
    Process(*item);
    ++n;
  }
  metrics_.queue_lag.Set(queue_.Lag(kLeasePriority) / 1e6);
  metrics_.queue_depth.Set(static_cast<double>(queue_.Len()));
  return n;
}

void Forwarder::FlushEvents() { events_.Flush(); }

int64_t Forwarder::NextDue() const { return queue_.NextDue(); }

void Forwarder::WatchLoop(store::Kind kind) {
  while (!stopping_) {
    // List, then watch from the list's revision: nothing written in between
    // is missed (a watch "from now" would miss it).
    store::ListOptions o;
    o.freshness = FromCache();
    absl::StatusOr<store::ListResult> list = store_->List(kind, o);
    absl::StatusOr<std::unique_ptr<store::Watcher>> w =
        list.ok() ? store_->Watch(kind, list->revision) : list.status();
    if (!w.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    std::shared_ptr<store::Watcher> watcher = *std::move(w);
    {
      absl::MutexLock l(&mu_);
      watchers_.push_back(watcher);
    }
    if (stopping_) watcher->Stop();  // Stop may have missed it
    for (const auto& obj : list->items) Seed(kind, obj);
    while (!stopping_) {
      store::EventPtr ev = watcher->Next(std::chrono::milliseconds(500));
      if (!ev) {
        if (watcher->Closed()) break;
        continue;
      }
      if (ev->type == store::EventType::kError) break;
      OnStoreEvent(kind, *ev);
    }
    absl::MutexLock l(&mu_);
    watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), watcher), watchers_.end());
  }
}

void Forwarder::HousekeepingLoop() {
  auto next_resync = std::chrono::steady_clock::now();
  while (!stopping_) {
    if (std::chrono::steady_clock::now() >= next_resync) {
      Resync();
      next_resync = std::chrono::steady_clock::now() + options_.resync_period;
    }
    metrics_.queue_lag.Set(queue_.Lag(kLeasePriority) / 1e6);
    metrics_.queue_depth.Set(static_cast<double>(queue_.Len()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void Forwarder::Process(const WorkQueue::Item& item) {
  const bool taint = item.key.rfind(kTaintKey, 0) == 0;
  const std::string node = item.key.substr(2);
  const int shard = ShardOf(node, options_.shards);
  {
    absl::MutexLock l(&shards_mu_);
    if (!owned_[shard]) {
      queue_.Forget(item.key);
      queue_.Done(item.key);
      return;
    }
    ++inflight_[shard];
  }
  if (!taint) {
    metrics_.renewal_lateness.Observe(
        std::max<int64_t>(0, clock_->MonotonicMicros() - item.due_us) / 1e6);
  }
  absl::Status s = taint ? SyncTaint(node) : SyncNode(node);
  if (s.ok()) {
    queue_.Forget(item.key);
  } else {
    queue_.AddRateLimited(item.key, item.priority);
  }
  {
    absl::MutexLock l(&shards_mu_);
    if (--inflight_[shard] == 0) shard_idle_.SignalAll();
  }
  queue_.Done(item.key);
}

// ----------------------------------------------------------------- shards --

bool Forwarder::OwnsShard(int shard) const {
  absl::MutexLock l(&shards_mu_);
  return shard >= 0 && shard < static_cast<int>(owned_.size()) && owned_[shard];
}

void Forwarder::AcquireShard(int shard) {
  {
    absl::MutexLock l(&shards_mu_);
    if (shard < 0 || shard >= static_cast<int>(owned_.size()) || owned_[shard]) return;
    owned_[shard] = true;
    metrics_.owned_shards.Set(static_cast<double>(std::count(owned_.begin(), owned_.end(), true)));
  }
  base::LogInfo("forwarder: shard ", shard, " of ", options_.shards, " acquired");
  QueueShard(shard);
}

void Forwarder::ReleaseShard(int shard) {
  absl::MutexLock l(&shards_mu_);
  if (shard < 0 || shard >= static_cast<int>(owned_.size())) return;
  owned_[shard] = false;
  metrics_.owned_shards.Set(static_cast<double>(std::count(owned_.begin(), owned_.end(), true)));
  while (inflight_[shard] > 0) shard_idle_.Wait(&shards_mu_);
}

void Forwarder::QueueShard(int shard) {
  const int64_t now = clock_->MonotonicMicros();
  store::ListOptions o;
  o.freshness = FromCache();
  if (auto list = store_->List(store::Kind::kDelegatedLease, o); list.ok()) {
    for (const auto& dl : list->items) {
      if (ShardOf(dl->metadata.name, options_.shards) == shard) {
        queue_.AddIfAbsent(kLeaseKey + dl->metadata.name, now, kLeasePriority);
      }
    }
  }
  for (const auto& lease : marked_.Items()) {
    if (ShardOf(lease->metadata.name, options_.shards) == shard) OnMarkedLease("ADDED", *lease);
  }
}

// ------------------------------------------------------- what wakes a node --

void Forwarder::ScheduleLease(const std::string& node, int64_t due_mono_us) {
  queue_.AddAt(kLeaseKey + node, due_mono_us, kLeasePriority);
}

void Forwarder::ScheduleTaint(const std::string& node, int64_t due_mono_us) {
  queue_.AddAt(kTaintKey + node, due_mono_us, kTaintPriority);
}

int64_t Forwarder::WallToMono(int64_t wall_us) const {
  return clock_->MonotonicMicros() - (clock_->NowMicros() - wall_us);
}

void Forwarder::Seed(store::Kind kind, const store::ObjectPtr& obj) {
  if (kind == store::Kind::kPoolLease) {
    // Today's holders, known without an Event: only changes are news.
    absl::MutexLock l(&mu_);
    holders_[obj->metadata.name] = obj->spec.holder_identity.value_or("");
    return;
  }
  store::Event ev;
  ev.type = store::EventType::kAdded;
  ev.object = obj;
  OnStoreEvent(kind, ev);
}

void Forwarder::OnStoreEvent(store::Kind kind, const store::Event& ev) {
  if (!ev.object || ev.type == store::EventType::kBookmark || ev.type == store::EventType::kError) {
    return;
  }
  const store::Object& o = *ev.object;
  if (kind == store::Kind::kDelegatedLease) {
    // Status writes (the GC's expired mark) change nothing to forward.
    if (ev.type == store::EventType::kModified && ev.previous && ev.previous->spec == o.spec &&
        ev.previous->status.observed_time_us == o.status.observed_time_us) {
      return;
    }
    if (!OwnsShard(ShardOf(o.metadata.name, options_.shards))) return;
    // A node already queued (its next renewal, or a first forward waiting for
    // the kubelet's renewal to age) is not synced again for a leader's renewal:
    // the due time it is queued at is what forwarding needs.
    queue_.AddIfAbsent(kLeaseKey + o.metadata.name, clock_->MonotonicMicros(), kLeasePriority);
    return;
  }
  // PoolLease: leader changes are recorded as Events by the owner of the
  // pool's shard (one replica).
  const std::string holder = o.spec.holder_identity.value_or("");
  std::string previous;
  {
    absl::MutexLock l(&mu_);
    auto it = holders_.find(o.metadata.name);
    previous = it == holders_.end() ? "" : it->second;
    if (ev.type == store::EventType::kDeleted) {
      holders_.erase(o.metadata.name);
    } else {
      holders_[o.metadata.name] = holder;
    }
  }
  if (ev.type != store::EventType::kDeleted && !holder.empty() && holder != previous &&
      OwnsShard(ShardOf(o.metadata.name, options_.shards))) {
    metrics_.leader_changes.Inc();
    events_.Record("PoolLease", store::kGroupVersion, o.metadata.name, "LeaderChanged",
                   absl::StrCat("pool ", o.metadata.name, " is now led by ", holder,
                                previous.empty() ? "" : absl::StrCat(" (was ", previous, ")")));
  }
}

void Forwarder::OnMarkedLease(const std::string& type, const cloud::Lease& lease) {
  if (type == "DELETED") return;  // unmarked (by us) or deleted with its Node
  const std::string& node = lease.metadata.name;
  if (!OwnsShard(ShardOf(node, options_.shards))) return;
  const std::optional<int64_t> renew = lease.spec.renew_time_us;
  const std::optional<int64_t> forwarded = AnnotationTime(lease, kForwardedRenewTimeAnnotation);
  const std::optional<int64_t> carried = AnnotationTime(lease, kCarriedRenewTimeAnnotation);
  const bool ours = renew && forwarded && *renew == *forwarded;
  const bool carried_last = renew && carried && *renew == *carried;
  if (!ours && !carried_last) {
    // Its kubelet wrote it: clear the marks (or carry the renewal) now.
    queue_.Add(kLeaseKey + node, kLeasePriority);
    return;
  }
  if (ours) {
    queue_.AddIfAbsent(kLeaseKey + node,
                       clock_->MonotonicMicros() - ForwardAge(node, *forwarded) +
                           options_.kubelet_renew_interval.count(),
                       kLeasePriority);
  }
}

void Forwarder::Resync() {
  const int64_t now = clock_->MonotonicMicros();
  store::ListOptions o;
  o.freshness = FromCache();
  auto list = store_->List(store::Kind::kDelegatedLease, o);
  auto pools = store_->List(store::Kind::kPoolLease, o);
  if (pools.ok()) {
    int64_t without = 0;
    for (const auto& p : pools->items) without += rules_->PoolLeaseLive(*p) ? 0 : 1;
    metrics_.pools_without_leader.Set(static_cast<double>(without));
  }
  if (list.ok()) {
    int64_t delegated = 0;
    for (const auto& dl : list->items) {
      store::ObjectPtr pool;
      if (dl->spec.pool_name) {
        if (auto got = store_->GetWithFreshness(store::Kind::kPoolLease, *dl->spec.pool_name,
                                                FromCache());
            got.ok()) {
          pool = *got;
        }
      }
      if (rules_->DelegationCurrent(*dl, pool.get())) ++delegated;
      if (OwnsShard(ShardOf(dl->metadata.name, options_.shards))) {
        queue_.AddIfAbsent(kLeaseKey + dl->metadata.name, now, kLeasePriority);
      }
    }
    metrics_.delegated_nodes.Set(static_cast<double>(delegated));
  }
  for (const auto& item : marked_.Items()) {
    const cloud::Lease& lease = *item;
    const std::string& node = lease.metadata.name;
    if (!OwnsShard(ShardOf(node, options_.shards))) continue;
    OnMarkedLease("MODIFIED", lease);
    const TaintWant want = WantTaint(lease);
    std::optional<bool> tainted;
    {
      absl::MutexLock l(&mu_);
      if (auto it = nodes_.find(node); it != nodes_.end()) tainted = it->second.tainted;
    }
    if (tainted != want.present) {
      ScheduleTaint(node, want.present ? now : std::min(now, want.due_mono_us));
    }
  }
  metrics_.queue_lag.Set(queue_.Lag(kLeasePriority) / 1e6);
  metrics_.queue_depth.Set(static_cast<double>(queue_.Len()));
}

// --------------------------------------------------------------- reading --

std::optional<cloud::Lease> Forwarder::CachedLease(const std::string& node, bool marked_only) {
  std::shared_ptr<const cloud::Lease> informed = marked_.Get(node);
  std::optional<cloud::Lease> known;
  {
    absl::MutexLock l(&mu_);
    if (auto it = nodes_.find(node); it != nodes_.end()) known = it->second.known;
  }
  std::optional<cloud::Lease> newest;
  if (known && (!informed || Revision(*known) > Revision(*informed))) {
    newest = std::move(known);
  } else if (informed) {
    newest = *informed;
  }
  if (newest && marked_only && !Marked(*newest)) return std::nullopt;
  return newest;
}

void Forwarder::Remember(const std::string& node, const cloud::Lease& lease) {
  absl::MutexLock l(&mu_);
  nodes_[node].known = lease;
}

void Forwarder::Forget(const std::string& node) {
  absl::MutexLock l(&mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end() && it->second.tainted != true) nodes_.erase(it);
}

bool Forwarder::DelegationEnded(const std::string& node) {
  auto dl = store_->Get(store::Kind::kDelegatedLease, node);
  if (!dl.ok()) return absl::IsNotFound(dl.status());  // unreadable: not known to have ended
  store::ObjectPtr pool;
  if ((*dl)->spec.pool_name) {
    if (auto got = store_->Get(store::Kind::kPoolLease, *(*dl)->spec.pool_name); got.ok()) {
      pool = *got;
    }
  }
  return !rules_->DelegationCurrent(**dl, pool.get());
}

absl::StatusOr<cloud::Lease> Forwarder::FirstRead(const std::string& node, bool* fresh) {
  if (options_.bulk_first_reads > 0) {
    BulkRead();
    if (std::optional<cloud::Lease> listed = CachedLease(node, /*marked_only=*/false)) {
      *fresh = false;  // read when the LIST was; BulkRead dated it
      return *std::move(listed);
    }
  }
  *fresh = true;
  absl::StatusOr<cloud::Lease> got = cloud_.node_leases->GetFromCache(node);
  if (got.ok()) Remember(node, *got);
  return got;
}

int Forwarder::WaitingFirstReads() {
  store::ListOptions o;
  o.freshness = FromCache();
  absl::StatusOr<store::ListResult> list = store_->List(store::Kind::kDelegatedLease, o);
  if (!list.ok()) return 0;
  int waiting = 0;
  for (const store::ObjectPtr& dl : list->items) {
    const std::string& node = dl->metadata.name;
    if (OwnsShard(ShardOf(node, options_.shards)) && !CachedLease(node, /*marked_only=*/false)) {
      ++waiting;
    }
  }
  return waiting;
}

void Forwarder::BulkRead() {
  const int64_t interval = options_.kubelet_renew_interval.count();
  {
    absl::MutexLock l(&bulk_mu_);
    // A LIST in flight may bring this node's Lease: wait for it, not GET.
    while (bulk_reading_) bulk_done_.Wait(&bulk_mu_);
    const int64_t now = clock_->MonotonicMicros();
    if (bulk_listed_mono_us_ && now - *bulk_listed_mono_us_ < interval) return;
    if (bulk_counted_mono_us_ && now - *bulk_counted_mono_us_ < 1'000'000 && !bulk_worth_it_) {
      return;
    }
    bulk_reading_ = true;  // this worker counts, and maybe lists
  }
  const int waiting = WaitingFirstReads();
  const int64_t counted = clock_->MonotonicMicros();
  bool worth_it = false;
  {
    absl::MutexLock l(&bulk_mu_);
    worth_it = waiting >= options_.bulk_first_reads &&
               static_cast<size_t>(waiting) * std::max(options_.list_items_per_read, 1) >=
                   bulk_list_size_;
    bulk_counted_mono_us_ = counted;
    bulk_worth_it_ = worth_it;
  }
  if (worth_it) {
    const int64_t listed_mono = clock_->MonotonicMicros();
    cloud::ListOptions o;
    o.resource_version = "0";  // kube-apiserver's watch cache: etcd reads nothing
    absl::StatusOr<cloud::LeaseList> list = cloud_.node_leases->List(o);
    size_t size = 0;
    if (!list.ok()) {
      Failed("*", "listing the node Leases for a storm's first reads", list.status()).IgnoreError();
    } else {
      size = list->items.size();
      for (cloud::Lease& lease : list->items) {
        const std::string node = lease.metadata.name;
        if (!OwnsShard(ShardOf(node, options_.shards))) continue;
        if (!store_->GetWithFreshness(store::Kind::kDelegatedLease, node, FromCache()).ok()) {
          continue;
        }
        std::shared_ptr<const cloud::Lease> informed = marked_.Get(node);
        absl::MutexLock l(&mu_);
        NodeState& st = nodes_[node];
        if ((st.known && Revision(*st.known) >= Revision(lease)) ||
            (informed && Revision(*informed) >= Revision(lease))) {
          continue;
        }
        // Current when the LIST was sent: a kubelet renewal it does not show
        // is dated from then, not from some earlier look.
        if (!st.renewal_seen) st.looked_mono_us = listed_mono;
        st.known = std::move(lease);
      }
    }
    absl::MutexLock l(&bulk_mu_);
    bulk_listed_mono_us_ = listed_mono;  // a failed LIST is not retried sooner either
    if (list.ok()) bulk_list_size_ = size;
  }
  absl::MutexLock l(&bulk_mu_);
  bulk_reading_ = false;
  bulk_done_.SignalAll();
}

absl::Status Forwarder::Failed(const std::string& node, const char* what, absl::Status status) {
  metrics_.forward_errors.Inc();
  base::LogWarning("forwarder: node ", node, ": ", what, " failed: ", status.message());
  return status;
}

int64_t Forwarder::ForwardAge(const std::string& node, int64_t forwarded_us) {
  absl::MutexLock l(&mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end() && it->second.forwarded_renew_us == forwarded_us) {
    return clock_->MonotonicMicros() - it->second.forwarded_mono_us;
  }
  const int64_t wall_age = clock_->NowMicros() - forwarded_us;
  if (wall_age >= 0) return wall_age;
  // Ahead of our clock and not written by this process: dated from its first
  // sight, so that it comes due one interval later.
  NodeState& st = nodes_[node];
  st.forwarded_renew_us = forwarded_us;
  st.forwarded_mono_us = clock_->MonotonicMicros();
  return 0;
}

int64_t Forwarder::RenewalAge(const std::string& node, std::optional<int64_t> renew_us,
                              std::optional<int64_t> written_us, bool fresh) {
  const int64_t mono = clock_->MonotonicMicros();
  const int64_t now = clock_->NowMicros();
  constexpr int64_t kAncient = std::numeric_limits<int64_t>::max() / 4;
  // The value's age on our wall clock, the older of two dates: the renewTime
  // itself (the writer's clock) and the server's record of when it changed
  // (its clock, whole seconds: older by less than 1 s). A kubelet clock ahead
  // makes the first young; the second dates it anyway. Dated by neither (a
  // renewTime in the future, no record), seen for the first time it counts as
  // old (a restart delays nothing), seen changing it counts as new.
  int64_t wall_age = renew_us ? now - *renew_us : kAncient;
  if (written_us) {
    wall_age = wall_age < 0 ? now - *written_us : std::max(wall_age, now - *written_us);
  }
  absl::MutexLock l(&mu_);
  NodeState& s = nodes_[node];
  if (!s.renewal_seen) {
    s.renewal_seen = true;
    s.renew_us = renew_us;
    s.changed_mono_us = mono - (wall_age < 0 ? kAncient : wall_age);
  } else if (s.renew_us != renew_us) {
    // Written since we last saw the old value, and not before then.
    const int64_t age = std::clamp<int64_t>(wall_age, 0, mono - s.looked_mono_us);
    s.renew_us = renew_us;
    s.changed_mono_us = mono - age;
  }
  // A cached copy says nothing of what the server held now: only a read
  // moves the time the value was last known to be current.
  if (fresh) s.looked_mono_us = mono;
  return mono - s.changed_mono_us;
}

// ------------------------------------------------------------ node's sync --

absl::Status Forwarder::SyncNode(const std::string& node) {
  store::ObjectPtr dl;
  if (auto got = store_->GetWithFreshness(store::Kind::kDelegatedLease, node, FromCache());
      got.ok()) {
    dl = *got;
  }
  store::ObjectPtr pool;
  if (dl && dl->spec.pool_name) {
    if (auto got =
            store_->GetWithFreshness(store::Kind::kPoolLease, *dl->spec.pool_name, FromCache());
        got.ok()) {
      pool = *got;
    }
  }
  const bool current = dl && rules_->DelegationCurrent(*dl, pool.get());
  const int64_t interval = options_.kubelet_renew_interval.count();
  std::optional<bool> tainted;
  {
    absl::MutexLock l(&mu_);
    if (auto it = nodes_.find(node); it != nodes_.end()) tainted = it->second.tainted;
  }
  // After a forward: renew again one interval later; a new delegation first
  // drops a lapsed one's taint, and the taint goes on once it is old enough.
  auto after_forward = [&](const Delegation& d, int64_t forwarded_mono, bool lapsed) {
    ScheduleLease(node, forwarded_mono + interval);
    if (lapsed && tainted != false) {
      // A lapsed delegation's taint goes until the new one is old enough. (A
      // delegation of an unmarked Lease has no taint of ours to remove: the
      // marks and the taint go together.)
      ScheduleTaint(node, clock_->MonotonicMicros());
    } else if (tainted != true) {
      ScheduleTaint(node, WallToMono(d.since_us + options_.taint_after.count()));
    }
    return absl::OkStatus();
  };
  // A delegation's first forward reads the Lease (it is not marked, so not in
  // the informer); the rechecks before it use that read.
  std::optional<cloud::Lease> cached = CachedLease(node, /*marked_only=*/false);
  for (int attempt = 0; attempt <= options_.conflict_retries; ++attempt) {
    absl::StatusOr<cloud::Lease> got;
    bool fresh = attempt > 0 || !cached;
    if (!fresh) {
      got = *cached;
    } else if (attempt == 0) {
      // The first read comes from kube-apiserver's watch cache (a storm's
      // first forwards then cost etcd nothing), by a LIST when many wait.
      got = FirstRead(node, &fresh);
    } else {
      got = cloud_.node_leases->Get(node);  // after a 409: a quorum read
      if (got.ok()) Remember(node, *got);
    }
    if (cloud::IsNotFound(got.status())) {
      if (!current) {
        Forget(node);
        return absl::OkStatus();
      }
      const int64_t t = clock_->MonotonicMicros();
      absl::StatusOr<Delegation> d = Forward(node, *dl, std::nullopt, /*new_delegation=*/true);
      if (cloud::IsAlreadyExists(d.status()) || cloud::IsConflict(d.status())) continue;
      if (absl::IsCancelled(d.status())) return absl::OkStatus();  // the delegation ended
      if (!d.ok()) return d.status();
      return after_forward(*d, t, /*lapsed=*/false);
    }
    if (!got.ok()) return Failed(node, "reading its cloud Lease", got.status());
    const cloud::Lease& lease = *got;
    const bool marked = Marked(lease);
    const std::optional<int64_t> since = AnnotationTime(lease, kDelegatedSinceAnnotation);
    const std::optional<int64_t> forwarded = AnnotationTime(lease, kForwardedRenewTimeAnnotation);
    const std::optional<int64_t> renew = lease.spec.renew_time_us;
    const bool ours = renew && forwarded && *renew == *forwarded;
    // A kubelet renewal we carried (below), with no kubelet write since.
    const std::optional<int64_t> carried = AnnotationTime(lease, kCarriedRenewTimeAnnotation);
    const bool carried_last = renew && carried && *renew == *carried;
    const int64_t renewal_age = RenewalAge(node, renew, lease.renew_time_written_us, fresh);
    if (marked && !ours && !carried_last) {
      // The kubelet renewed on its own since our last write: the node is back.
      const int64_t last_written =
          std::max(forwarded.value_or(std::numeric_limits<int64_t>::min()),
                   carried.value_or(std::numeric_limits<int64_t>::min()));
      absl::Status s;
      if (renew && (forwarded || carried) && *renew <= last_written) {
        // But its clock runs behind the renewTime we wrote last. The node
        // lifecycle controller takes a Lease as a sign of life only when its
        // renewTime grows (savedLease.Spec.RenewTime.Before(observed)), so
        // this renewal and the next ones, until the kubelet's clock passes
        // ours, would not count: the node would go Unknown while it renews.
        // Each of them is carried one microsecond past the last renewTime we
        // wrote (the evidence is the kubelet's own write, which the informer
        // brings), the marks kept until its clock catches up. The carried
        // value goes into its own annotation, not forwarded-renew-time: the
        // node's agent reads the Lease as its kubelet's (the cloud sees the
        // node itself again).
        s = CarryKubeletRenewal(lease, last_written + 1);
      } else {
        s = ClearDelegation(lease);
      }
      if (cloud::IsConflict(s)) {
        metrics_.conflicts.Inc();
        continue;
      }
      if (!s.ok()) return s;
      if (tainted != false) ScheduleTaint(node, clock_->MonotonicMicros());
      return absl::OkStatus();
    }
    if (!current) {
      if (!marked) Forget(node);
      return absl::OkStatus();
    }
    if (!marked && renewal_age < interval) {
      // The kubelet's own renewal is fresh: it may still be renewing (a node
      // that came back while its DelegatedLease runs out). Look again when it
      // is one renew interval old.
      ScheduleLease(node, clock_->MonotonicMicros() + (interval - renewal_age));
      return absl::OkStatus();
    }
    const int64_t now = clock_->NowMicros();
    if (!marked && dl->status.observed_time_us.value_or(0) <= now - renewal_age) {
      // The leader has not renewed the DelegatedLease since the kubelet's own
      // last renewal: stale news about a node that came back, not a new loss.
      // The leader's next renewal queues the node again.
      return absl::OkStatus();
    }
    // Marked by us, but not renewed for longer than the grace period: the node
    // went Unknown in between, so this is a new delegation, not a resumed one.
    const int64_t forward_age = forwarded ? ForwardAge(node, *forwarded) : 0;
    const bool lapsed = marked && (!since || !forwarded ||
                                   forward_age > options_.node_monitor_grace_period.count());
    if (marked && !lapsed && forward_age < interval - kDueSlackUs) {
      // Our last renewal is fresh: the next one is due one interval after it.
      ScheduleLease(node, clock_->MonotonicMicros() + (interval - forward_age));
      if (tainted != true) {
        ScheduleTaint(node, WallToMono(*since + options_.taint_after.count()));
      }
      return absl::OkStatus();
    }
    const int64_t t = clock_->MonotonicMicros();
    absl::StatusOr<Delegation> d = Forward(node, *dl, lease, /*new_delegation=*/!marked || lapsed);
    if (cloud::IsConflict(d.status()) || cloud::IsAlreadyExists(d.status())) {
      metrics_.conflicts.Inc();
      continue;
    }
    if (absl::IsCancelled(d.status())) return absl::OkStatus();  // the delegation ended
    if (!d.ok()) return d.status();
    return after_forward(*d, t, lapsed);
  }
  return Failed(node, "writing its cloud Lease",
                absl::AbortedError(absl::StrCat("still conflicting after ",
                                                options_.conflict_retries, " retries")));
}

absl::StatusOr<Forwarder::Delegation> Forwarder::Forward(const std::string& node,
                                                         const store::Object& delegated,
                                                         std::optional<cloud::Lease> existing,
                                                         bool new_delegation) {
  const int64_t t0 = clock_->MonotonicMicros();
  const bool exists = existing.has_value();
  cloud::Lease lease = exists ? *std::move(existing) : cloud::Lease{};
  lease.metadata.name = node;
  lease.metadata.namespace_ = options_.node_lease_namespace;
  const int64_t now = clock_->NowMicros();
  const int64_t renew =
      lease.spec.renew_time_us ? std::max(now, *lease.spec.renew_time_us + 1) : now;
  const std::optional<int64_t> old_since = AnnotationTime(lease, kDelegatedSinceAnnotation);
  Delegation d;
  d.started = new_delegation || !old_since;
  d.since_us = d.started ? now : *old_since;
  auto& ann = lease.metadata.annotations;
  ann[kDelegateAnnotation] = "true";
  ann[kDelegatedSinceAnnotation] = base::FormatMicroTime(d.since_us);
  ann[kForwardedRenewTimeAnnotation] = base::FormatMicroTime(renew);
  lease.metadata.labels[kDelegatedLabel] = "true";
  lease.spec.holder_identity = node;
  if (!lease.spec.lease_duration_seconds) {
    lease.spec.lease_duration_seconds = delegated.spec.lease_duration_seconds.value_or(40);
  }
  lease.spec.renew_time_us = renew;
  absl::StatusOr<cloud::Lease> written =
      exists ? cloud_.node_leases->Update(lease) : cloud_.node_leases->Create(lease);
  if (!written.ok()) {
    // Someone wrote first: the caller reads again (not a failure of ours).
    if (cloud::IsConflict(written.status()) || cloud::IsAlreadyExists(written.status())) {
      return written.status();
    }
    if (cloud::IsForbidden(written.status()) && DelegationEnded(node)) {
      // The leader deleted the DelegatedLease (or its term ended) between our
      // read and kube-apiserver asking the webhook, which then refused the
      // delegate annotation as it must.
      metrics_.forwards_withdrawn.Inc();
      base::LogInfo("forwarder: node ", node, ": its delegation ended while its cloud Lease was ",
                    "being renewed; the webhook refused the write: ", written.status().message());
      return absl::CancelledError("the delegation ended while forwarding");
    }
    return Failed(node, exists ? "renewing its cloud Lease" : "creating its cloud Lease",
                  written.status());
  }
  Remember(node, *written);
  {
    absl::MutexLock l(&mu_);
    NodeState& s = nodes_[node];
    s.forwarded_renew_us = renew;
    s.forwarded_mono_us = clock_->MonotonicMicros();
  }
  metrics_.forwards.Inc();
  metrics_.forward_duration.Observe((clock_->MonotonicMicros() - t0) / 1e6);
  if (d.started) {
    metrics_.delegations_started.Inc();
    events_.Record("Node", "v1", node, "DelegationStarted",
                   absl::StrCat("node ", node, " lost the cloud; its pool leader ",
                                delegated.spec.delegate.value_or("?"),
                                " renews its Lease while it heartbeats inside pool ",
                                delegated.spec.pool_name.value_or("?")));
  }
  return d;
}

absl::Status Forwarder::CarryKubeletRenewal(cloud::Lease lease, int64_t renew_us) {
  const std::string node = lease.metadata.name;
  lease.spec.renew_time_us = renew_us;
  lease.metadata.annotations[kCarriedRenewTimeAnnotation] = base::FormatMicroTime(renew_us);
  absl::StatusOr<cloud::Lease> written = cloud_.node_leases->Update(lease);
  if (cloud::IsNotFound(written.status())) return absl::OkStatus();
  if (cloud::IsConflict(written.status())) return written.status();
  if (!written.ok()) return Failed(node, "carrying its kubelet's renewal", written.status());
  Remember(node, *written);
  metrics_.renewals_carried.Inc();
  return absl::OkStatus();
}

absl::Status Forwarder::ClearDelegation(cloud::Lease lease) {
  const std::string node = lease.metadata.name;
  StripDelegationMarks(&lease);
  absl::StatusOr<cloud::Lease> written = cloud_.node_leases->Update(lease);
  if (cloud::IsNotFound(written.status())) return absl::OkStatus();
  if (cloud::IsConflict(written.status())) return written.status();
  if (!written.ok()) return Failed(node, "clearing the marks of its cloud Lease", written.status());
  Remember(node, *written);
  metrics_.delegations_stopped.Inc();
  events_.Record("Node", "v1", node, "DelegationStopped",
                 absl::StrCat("node ", node, " renews its own Lease again; delegation ended"));
  return absl::OkStatus();
}

// ------------------------------------------------------------------ taint --

Forwarder::TaintWant Forwarder::WantTaint(const std::optional<cloud::Lease>& lease) const {
  if (!lease || !Marked(*lease)) return {false, WorkQueue::kNever};
  const std::optional<int64_t> since = AnnotationTime(*lease, kDelegatedSinceAnnotation);
  const std::optional<int64_t> carried = AnnotationTime(*lease, kCarriedRenewTimeAnnotation);
  const std::optional<int64_t> renew = lease->spec.renew_time_us;
  // A returning kubelet's renewals being carried: the node is back.
  if (!since || (renew && carried && *renew == *carried)) return {false, WorkQueue::kNever};
  const int64_t at = *since + options_.taint_after.count();
  if (clock_->NowMicros() >= at) return {true, WorkQueue::kNever};
  return {false, WallToMono(at)};
}

absl::Status Forwarder::SyncTaint(const std::string& node) {
  const std::optional<cloud::Lease> lease = CachedLease(node, /*marked_only=*/true);
  const TaintWant want = WantTaint(lease);
  if (want.due_mono_us != WorkQueue::kNever) ScheduleTaint(node, want.due_mono_us);
  std::optional<bool> known;
  {
    absl::MutexLock l(&mu_);
    if (auto it = nodes_.find(node); it != nodes_.end()) known = it->second.tainted;
  }
  if (known == want.present) return absl::OkStatus();
  auto record = [&](bool present) {
    absl::MutexLock l(&mu_);
    nodes_[node].tainted = present;
  };
  const char* what = want.present ? "tainting its Node" : "removing the taint of its Node";
  absl::StatusOr<bool> changed =
      SetUnschedulableTaint(cloud_.nodes, node, want.present, options_.conflict_retries);
  if (cloud::IsNotFound(changed.status())) {  // no Node: nothing to taint
    record(false);
    return absl::OkStatus();
  }
  if (!changed.ok()) return Failed(node, what, changed.status());
  record(want.present);
  if (!*changed) return absl::OkStatus();
  if (want.present) {
    metrics_.taints_added.Inc();
    const int64_t since = AnnotationTime(*lease, kDelegatedSinceAnnotation).value_or(0);
    events_.Record("Node", "v1", node, "TaintAdded",
                   absl::StrCat("node ", node, " delegated for ",
                                (clock_->NowMicros() - since) / 1'000'000, "s: tainted ",
                                kUnschedulableTaint, "=true:NoSchedule"));
  } else {
    metrics_.taints_removed.Inc();
    events_.Record("Node", "v1", node, "TaintRemoved",
                   absl::StrCat("node ", node, " is back: removed taint ", kUnschedulableTaint));
  }
  return absl::OkStatus();
}

}  // namespace poolcoord::controllers
