#include "election/forwarder.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/microtime.h"
#include "cloud/codec.h"
#include "cloud/errors.h"

namespace poolcoord::election {
namespace {

std::optional<int64_t> AnnotationTime(const cloud::Lease& lease, const char* key) {
  auto it = lease.metadata.annotations.find(key);
  if (it == lease.metadata.annotations.end() || it->second.empty()) return std::nullopt;
  auto t = base::ParseMicroTime(it->second);
  if (!t.ok()) return std::nullopt;
  return *t;
}

bool HasUnschedulableTaint(const cloud::Node& node) {
  return std::any_of(node.taints.begin(), node.taints.end(),
                     [](const cloud::Taint& t) { return t.key == kUnschedulableTaint; });
}

}  // namespace

struct Forwarder::Delegation {
  bool started = false;  // this forward began a delegation
  int64_t since_us = 0;  // when the delegation began (wall)
};

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
      delegated_nodes(r->AddGauge("poolcoord_delegated_nodes", "Nodes with a current delegation.")
                          .WithLabels({})),
      pools_without_leader(
          r->AddGauge("poolcoord_pools_without_leader", "PoolLeases without a live holder.")
              .WithLabels({})),
      forward_duration(r->AddHistogram("poolcoord_forward_duration_seconds",
                                       "Time to write one cloud Lease renewal.", {},
                                       {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
                           .WithLabels({})) {}

Forwarder::Forwarder(store::Store* store, const LeaseRules* rules, ForwarderCloud cloud,
                     const base::Clock* clock, base::MetricsRegistry* metrics,
                     ForwarderOptions options)
    : store_(store),
      rules_(rules),
      cloud_(cloud),
      clock_(clock),
      options_(std::move(options)),
      metrics_(metrics) {}

Forwarder::~Forwarder() { Stop(); }

void Forwarder::Start() {
  stopping_ = false;
  threads_.emplace_back([this] { WatchLoop(store::Kind::kDelegatedLease); });
  threads_.emplace_back([this] { WatchLoop(store::Kind::kPoolLease); });
  threads_.emplace_back([this] { WorkLoop(); });
}

void Forwarder::Stop() {
  if (stopping_.exchange(true)) return;
  {
    absl::MutexLock l(&mu_);
    for (auto& w : watchers_) w->Stop();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
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

absl::Status Forwarder::Failed(const std::string& node, const char* what, absl::Status status) {
  metrics_.forward_errors.Inc();
  base::LogWarning("forwarder: node ", node, ": ", what, " failed: ", status.message());
  return status;
}

int64_t Forwarder::RenewalAge(const std::string& node, std::optional<int64_t> renew_us) {
  const int64_t mono = clock_->MonotonicMicros();
  constexpr int64_t kAncient = std::numeric_limits<int64_t>::max() / 4;
  // The value's age on our wall clock. A renewTime in the future cannot be
  // dated: seen for the first time it counts as old (a restart delays nothing),
  // seen changing it counts as new.
  const int64_t wall_age = renew_us ? clock_->NowMicros() - *renew_us : kAncient;
  absl::MutexLock l(&mu_);
  auto [it, inserted] = seen_.try_emplace(
      node, RenewalSeen{renew_us, mono - (wall_age < 0 ? kAncient : wall_age), mono});
  RenewalSeen& seen = it->second;
  if (!inserted && seen.renew_us != renew_us) {
    // Written since we last saw the old value, and not before then.
    const int64_t age = std::clamp<int64_t>(wall_age, 0, mono - seen.looked_mono_us);
    seen = RenewalSeen{renew_us, mono - age, mono};
  }
  seen.looked_mono_us = mono;
  return mono - seen.changed_mono_us;
}

void Forwarder::RecheckAt(const std::string& node, int64_t mono_us) {
  absl::MutexLock l(&mu_);
  auto [it, inserted] = due_.try_emplace(node, mono_us);
  if (!inserted) it->second = std::min(it->second, mono_us);
}

void Forwarder::Enqueue(const std::string& node) {
  absl::MutexLock l(&mu_);
  queue_.insert(node);
}

void Forwarder::WatchLoop(store::Kind kind) {
  while (!stopping_) {
    auto w = store_->Watch(kind, 0);
    if (!w.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    std::shared_ptr<store::Watcher> watcher = *std::move(w);
    {
      absl::MutexLock l(&mu_);
      watchers_.push_back(watcher);
    }
    while (!stopping_) {
      store::EventPtr ev = watcher->Next(std::chrono::milliseconds(500));
      if (!ev) {
        if (watcher->Closed()) break;
        continue;
      }
      if (ev->type == store::EventType::kError) break;
      if (!ev->object) continue;
      const store::Object& o = *ev->object;
      if (kind == store::Kind::kDelegatedLease) {
        // Status writes (the GC's expired mark) change nothing to forward.
        if (ev->type == store::EventType::kModified && ev->previous &&
            ev->previous->spec == o.spec &&
            ev->previous->status.observed_time_us == o.status.observed_time_us) {
          continue;
        }
        Enqueue(o.metadata.name);
        continue;
      }
      // PoolLease: record leader changes as Events.
      const std::string holder = o.spec.holder_identity.value_or("");
      std::string previous;
      {
        absl::MutexLock l(&mu_);
        auto it = holders_.find(o.metadata.name);
        previous = it == holders_.end() ? "" : it->second;
        if (ev->type == store::EventType::kDeleted) {
          holders_.erase(o.metadata.name);
        } else {
          holders_[o.metadata.name] = holder;
        }
      }
      if (ev->type != store::EventType::kDeleted && !holder.empty() && holder != previous) {
        metrics_.leader_changes.Inc();
        RecordEvent("PoolLease", store::kGroupVersion, o.metadata.name, "LeaderChanged",
                    absl::StrCat("pool ", o.metadata.name, " is now led by ", holder,
                                 previous.empty() ? "" : absl::StrCat(" (was ", previous, ")")));
      }
    }
    absl::MutexLock l(&mu_);
    watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), watcher), watchers_.end());
  }
}

void Forwarder::WorkLoop() {
  auto next_resync = std::chrono::steady_clock::now();
  while (!stopping_) {
    if (std::chrono::steady_clock::now() >= next_resync) {
      SyncAll().IgnoreError();  // errors are counted and logged; the next resync retries
      next_resync = std::chrono::steady_clock::now() + options_.resync_period;
    }
    std::set<std::string> batch;
    {
      absl::MutexLock l(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](std::set<std::string>* q) { return !q->empty(); }, &queue_),
                           absl::Milliseconds(200));
      batch.swap(queue_);
    }
    for (const auto& node : batch) {
      if (stopping_) break;
      SyncNode(node).IgnoreError();
    }
    SyncDue().IgnoreError();
  }
}

absl::Status Forwarder::SyncDue() {
  std::vector<std::string> due;
  {
    absl::MutexLock l(&mu_);
    const int64_t mono = clock_->MonotonicMicros();
    for (auto it = due_.begin(); it != due_.end();) {
      if (it->second <= mono) {
        due.push_back(it->first);
        it = due_.erase(it);
      } else {
        ++it;
      }
    }
  }
  absl::Status first;
  for (const auto& node : due) {
    if (stopping_) break;
    absl::Status s = SyncNode(node);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::Status Forwarder::SyncAll() {
  absl::Status first;
  std::set<std::string> nodes;
  auto list = store_->List(store::Kind::kDelegatedLease, {});
  if (list.ok()) {
    for (const auto& dl : list->items) nodes.insert(dl->metadata.name);
  }
  auto pools = store_->List(store::Kind::kPoolLease, {});
  if (pools.ok()) {
    int64_t without = 0;
    for (const auto& p : pools->items) without += rules_->PoolLeaseLive(*p) ? 0 : 1;
    metrics_.pools_without_leader.Set(without);
  }
  // Cloud Leases we marked, to notice kubelets that renew on their own again.
  cloud::ListOptions marked;
  marked.label_selector = absl::StrCat(kDelegatedLabel, "=true");
  absl::StatusOr<cloud::LeaseList> leases = cloud_.node_leases->List(marked);
  if (leases.ok()) {
    for (const auto& lease : leases->items) nodes.insert(lease.metadata.name);
  } else {
    first = Failed("*", "listing the marked cloud Leases", leases.status());
  }
  for (const auto& node : nodes) {
    if (stopping_) break;
    if (node.empty()) continue;
    absl::Status s = SyncNode(node);
    if (!s.ok() && first.ok()) first = s;
  }
  int64_t delegated = 0;
  if (list.ok()) {
    for (const auto& dl : list->items) {
      auto pool = store_->Get(store::Kind::kPoolLease, dl->spec.pool_name.value_or(""));
      if (rules_->DelegationCurrent(*dl, pool.ok() ? pool->get() : nullptr)) ++delegated;
    }
  }
  metrics_.delegated_nodes.Set(delegated);
  return first;
}

absl::Status Forwarder::SyncNode(const std::string& node) {
  store::ObjectPtr dl;
  if (auto got = store_->Get(store::Kind::kDelegatedLease, node); got.ok()) dl = *got;
  store::ObjectPtr pool;
  if (dl && dl->spec.pool_name) {
    if (auto got = store_->Get(store::Kind::kPoolLease, *dl->spec.pool_name); got.ok()) pool = *got;
  }
  const bool current = dl && rules_->DelegationCurrent(*dl, pool.get());
  const int64_t interval = options_.kubelet_renew_interval.count();
  // After a forward: renew again within one renew interval, and taint once the
  // delegation is old enough (a new delegation first drops a lapsed one's taint).
  auto after_forward = [&](const Delegation& d) {
    RecheckAt(node, clock_->MonotonicMicros() + interval);
    if (clock_->NowMicros() - d.since_us >= options_.taint_after.count()) {
      return SetTaint(node, true, d.since_us);
    }
    return d.started ? SetTaint(node, false, d.since_us) : absl::OkStatus();
  };
  for (int attempt = 0; attempt <= options_.conflict_retries; ++attempt) {
    absl::StatusOr<cloud::Lease> got = cloud_.node_leases->Get(node);
    if (cloud::IsNotFound(got.status())) {
      if (!current) return absl::OkStatus();
      absl::StatusOr<Delegation> d = Forward(node, *dl, std::nullopt, /*new_delegation=*/true);
      if (cloud::IsAlreadyExists(d.status()) || cloud::IsConflict(d.status())) continue;
      if (absl::IsCancelled(d.status())) return absl::OkStatus();  // the delegation ended
      if (!d.ok()) return d.status();
      return after_forward(*d);
    }
    if (!got.ok()) return Failed(node, "reading its cloud Lease", got.status());
    const cloud::Lease& lease = *got;
    const bool marked = lease.metadata.annotations.count(kDelegatedSinceAnnotation) > 0;
    const std::optional<int64_t> since = AnnotationTime(lease, kDelegatedSinceAnnotation);
    const std::optional<int64_t> forwarded = AnnotationTime(lease, kForwardedRenewTimeAnnotation);
    const std::optional<int64_t> renew = lease.spec.renew_time_us;
    const bool ours = renew && forwarded && *renew == *forwarded;
    // A kubelet renewal we carried (below), with no kubelet write since.
    const std::optional<int64_t> carried = AnnotationTime(lease, kCarriedRenewTimeAnnotation);
    const bool carried_last = renew && carried && *renew == *carried;
    const int64_t renewal_age = RenewalAge(node, renew);
    if (marked && !ours && !carried_last) {
      // The kubelet renewed on its own since our last write: the node is back.
      const int64_t last_written =
          std::max(forwarded.value_or(std::numeric_limits<int64_t>::min()),
                   carried.value_or(std::numeric_limits<int64_t>::min()));
      if (renew && (forwarded || carried) && *renew <= last_written) {
        // But its clock runs behind the renewTime we wrote last. The node
        // lifecycle controller takes a Lease as a sign of life only when its
        // renewTime grows (savedLease.Spec.RenewTime.Before(observed)), so
        // this renewal and the next ones, until the kubelet's clock passes
        // ours, would not count: the node would go Unknown while it renews.
        // Each of them is carried one microsecond past the last renewTime we
        // wrote (the evidence is the kubelet's own write; the resync sees
        // each within resync_period), the marks kept until its clock catches
        // up. The carried value goes into its own annotation, not
        // forwarded-renew-time: the node's agent reads the Lease as its
        // kubelet's (the cloud sees the node itself again).
        absl::Status s = CarryKubeletRenewal(lease, last_written + 1);
        if (cloud::IsConflict(s)) continue;
        if (!s.ok()) return s;
        return SetTaint(node, false, 0);
      }
      absl::Status s = ClearDelegation(lease);
      if (cloud::IsConflict(s)) continue;
      if (!s.ok()) return s;
      return SetTaint(node, false, 0);
    }
    if (!current) return absl::OkStatus();
    if (!marked && renewal_age < interval) {
      // The kubelet's own renewal is fresh: it may still be renewing (a node
      // that came back while its DelegatedLease runs out). Look again when it
      // is one renew interval old.
      RecheckAt(node, clock_->MonotonicMicros() + (interval - renewal_age));
      return absl::OkStatus();
    }
    const int64_t now = clock_->NowMicros();
    if (!marked && dl->status.observed_time_us.value_or(0) <= now - renewal_age) {
      // The leader has not renewed the DelegatedLease since the kubelet's own
      // last renewal: stale news about a node that came back, not a new loss.
      return absl::OkStatus();
    }
    // Marked by us, but not renewed for longer than the grace period: the node
    // went Unknown in between, so this is a new delegation, not a resumed one.
    const bool lapsed = marked && (!since || !forwarded ||
                                   now - *forwarded > options_.node_monitor_grace_period.count());
    bool leader_renewed = true;
    {
      absl::MutexLock l(&mu_);
      auto it = forwarded_observed_.find(node);
      leader_renewed = it == forwarded_observed_.end() ||
                       dl->status.observed_time_us.value_or(0) > it->second;
    }
    if (marked && !lapsed && !leader_renewed && now - *forwarded < interval) {
      // Nothing new from the leader and our renewal is fresh: the resync must
      // not turn into extra heartbeats of its own.
      RecheckAt(node, clock_->MonotonicMicros() + (interval - (now - *forwarded)));
      if (now - *since >= options_.taint_after.count()) return SetTaint(node, true, *since);
      return absl::OkStatus();
    }
    absl::StatusOr<Delegation> d = Forward(node, *dl, lease, /*new_delegation=*/!marked || lapsed);
    if (cloud::IsConflict(d.status()) || cloud::IsAlreadyExists(d.status())) continue;
    if (absl::IsCancelled(d.status())) return absl::OkStatus();  // the delegation ended
    if (!d.ok()) return d.status();
    return after_forward(*d);
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
      // delegate annotation as it must. Seen in test_cluster_lifecycle when a
      // delegation is withdrawn as its renewal is due.
      metrics_.forwards_withdrawn.Inc();
      base::LogInfo("forwarder: node ", node, ": its delegation ended while its cloud Lease was ",
                    "being renewed; the webhook refused the write: ", written.status().message());
      return absl::CancelledError("the delegation ended while forwarding");
    }
    return Failed(node, exists ? "renewing its cloud Lease" : "creating its cloud Lease",
                  written.status());
  }
  metrics_.forwards.Inc();
  metrics_.forward_duration.Observe((clock_->MonotonicMicros() - t0) / 1e6);
  // The renewal this forward carried, kept here rather than in the leader's
  // object (a write there would fail the leader's next PUT with 409).
  {
    absl::MutexLock l(&mu_);
    forwarded_observed_[node] = delegated.status.observed_time_us.value_or(0);
  }
  if (d.started) {
    metrics_.delegations_started.Inc();
    RecordEvent("Node", "v1", node, "DelegationStarted",
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
  metrics_.renewals_carried.Inc();
  return absl::OkStatus();
}

absl::Status Forwarder::ClearDelegation(cloud::Lease lease) {
  const std::string node = lease.metadata.name;
  lease.metadata.annotations.erase(kDelegateAnnotation);
  lease.metadata.annotations.erase(kDelegatedSinceAnnotation);
  lease.metadata.annotations.erase(kForwardedRenewTimeAnnotation);
  lease.metadata.annotations.erase(kCarriedRenewTimeAnnotation);
  lease.metadata.labels.erase(kDelegatedLabel);
  absl::StatusOr<cloud::Lease> written = cloud_.node_leases->Update(lease);
  if (cloud::IsNotFound(written.status())) return absl::OkStatus();
  if (cloud::IsConflict(written.status())) return written.status();
  if (!written.ok()) return Failed(node, "clearing the marks of its cloud Lease", written.status());
  metrics_.delegations_stopped.Inc();
  RecordEvent("Node", "v1", node, "DelegationStopped",
              absl::StrCat("node ", node, " renews its own Lease again; delegation ended"));
  return absl::OkStatus();
}

absl::Status Forwarder::SetTaint(const std::string& node, bool present, int64_t since_us) {
  const char* what = present ? "tainting its Node" : "removing the taint of its Node";
  for (int attempt = 0; attempt <= options_.conflict_retries; ++attempt) {
    absl::StatusOr<cloud::Node> got = cloud_.nodes->Get(node);
    if (cloud::IsNotFound(got.status())) return absl::OkStatus();  // no Node: nothing to taint
    if (!got.ok()) return Failed(node, "reading its Node", got.status());
    if (HasUnschedulableTaint(*got) == present) return absl::OkStatus();
    std::vector<cloud::Taint> taints = got->taints;
    if (present) {
      taints.push_back(cloud::Taint{kUnschedulableTaint, "true", "NoSchedule", std::nullopt});
    } else {
      taints.erase(
          std::remove_if(taints.begin(), taints.end(),
                         [](const cloud::Taint& t) { return t.key == kUnschedulableTaint; }),
          taints.end());
    }
    // The resourceVersion makes the patch conditional: a taint added by someone
    // else since our read is never dropped (Conflict, and we read again).
    absl::StatusOr<cloud::Node> patched = cloud_.nodes->Patch(
        node, cloud::kMergePatch, cloud::TaintsMergePatch(taints, got->metadata.resource_version));
    if (cloud::IsConflict(patched.status())) continue;
    if (!patched.ok()) return Failed(node, what, patched.status());
    if (present) {
      metrics_.taints_added.Inc();
      RecordEvent("Node", "v1", node, "TaintAdded",
                  absl::StrCat("node ", node, " delegated for ",
                               (clock_->NowMicros() - since_us) / 1'000'000, "s: tainted ",
                               kUnschedulableTaint, "=true:NoSchedule"));
    } else {
      metrics_.taints_removed.Inc();
      RecordEvent("Node", "v1", node, "TaintRemoved",
                  absl::StrCat("node ", node, " is back: removed taint ", kUnschedulableTaint));
    }
    return absl::OkStatus();
  }
  return Failed(node, what, absl::AbortedError("the Node is still conflicting"));
}

void Forwarder::RecordEvent(const std::string& kind, const std::string& api_version,
                            const std::string& name, const std::string& reason,
                            const std::string& message) {
  cloud::Event e;
  const int64_t now = clock_->NowMicros();
  e.metadata.generate_name = absl::StrCat(name, ".");
  e.metadata.namespace_ = options_.events_namespace;
  e.involved_object.kind = kind;
  e.involved_object.api_version = api_version;
  e.involved_object.name = name;
  e.reason = reason;
  e.message = message;
  e.type = "Normal";
  e.source_component = options_.component;
  e.first_timestamp_us = now;
  e.last_timestamp_us = now;
  e.event_time_us = now;
  e.count = 1;
  e.reporting_controller = options_.component;
  e.reporting_instance = options_.component;
  e.action = reason;
  // A lost Event never stops forwarding, but it is counted and logged.
  absl::StatusOr<cloud::Event> created = cloud_.events->Create(e);
  if (!created.ok()) Failed(name, "recording an Event", created.status()).IgnoreError();
}

}  // namespace poolcoord::election
