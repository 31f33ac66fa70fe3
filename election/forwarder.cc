#include "election/forwarder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "base/microtime.h"

namespace poolcoord::election {
namespace {

using rapidjson::Document;
using rapidjson::Value;

constexpr char kDelegatedLabel[] = "coordination.pool/delegated";

std::string ToJson(const Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

const Value* Member(const Value& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

std::string StringAt(const Value& v, const char* a, const char* b) {
  const Value* x = Member(v, a);
  const Value* y = x ? Member(*x, b) : nullptr;
  return y && y->IsString() ? std::string(y->GetString(), y->GetStringLength()) : "";
}

Value& EnsureObject(Value& parent, const char* name, Document::AllocatorType& a) {
  auto it = parent.FindMember(name);
  if (it == parent.MemberEnd() || !it->value.IsObject()) {
    if (it != parent.MemberEnd()) parent.RemoveMember(it);
    parent.AddMember(Value(name, a), Value(rapidjson::kObjectType), a);
    it = parent.FindMember(name);
  }
  return it->value;
}

void SetString(Value& obj, const char* name, const std::string& value, Document::AllocatorType& a) {
  auto it = obj.FindMember(name);
  if (it != obj.MemberEnd()) {
    it->value.SetString(value.c_str(), value.size(), a);
  } else {
    obj.AddMember(Value(name, a), Value(value.c_str(), value.size(), a), a);
  }
}

void RemoveKey(Document& doc, const char* section, const char* key) {
  auto md = doc.FindMember("metadata");
  if (md == doc.MemberEnd() || !md->value.IsObject()) return;
  auto s = md->value.FindMember(section);
  if (s == md->value.MemberEnd() || !s->value.IsObject()) return;
  s->value.RemoveMember(key);
}

std::optional<int64_t> MicroTimeAt(const std::string& text) {
  if (text.empty()) return std::nullopt;
  auto t = base::ParseMicroTime(text);
  if (!t.ok()) return std::nullopt;
  return *t;
}

absl::StatusOr<Document> ParseObject(const std::string& body) {
  Document d;
  d.Parse(body.c_str(), body.size());
  if (d.HasParseError() || !d.IsObject()) {
    return absl::InternalError("the cloud answered with a body that is not a JSON object");
  }
  return d;
}

int64_t LeaseDurationMicros(const Document& lease) {
  const Value* spec = Member(lease, "spec");
  const Value* d = spec ? Member(*spec, "leaseDurationSeconds") : nullptr;
  return (d && d->IsInt() ? d->GetInt() : 40) * 1'000'000LL;
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
      delegations_started(r->AddCounter("poolcoord_delegations_started_total",
                                        "Nodes whose delegation began.")
                              .WithLabels({})),
      delegations_stopped(r->AddCounter("poolcoord_delegations_stopped_total",
                                        "Nodes that renew their own Lease again.")
                              .WithLabels({})),
      taints_added(r->AddCounter("poolcoord_taints_added_total",
                                 "Unschedulable taints added to delegated nodes.")
                       .WithLabels({})),
      taints_removed(
          r->AddCounter("poolcoord_taints_removed_total", "Unschedulable taints removed.")
              .WithLabels({})),
      leader_changes(r->AddCounter("poolcoord_pool_leader_changes_total",
                                   "PoolLease holder changes seen.")
                         .WithLabels({})),
      delegated_nodes(
          r->AddGauge("poolcoord_delegated_nodes", "Nodes with a current delegation.").WithLabels({})),
      pools_without_leader(r->AddGauge("poolcoord_pools_without_leader",
                                       "PoolLeases without a live holder.")
                               .WithLabels({})),
      forward_duration(r->AddHistogram("poolcoord_forward_duration_seconds",
                                       "Time to write one cloud Lease renewal.", {},
                                       {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
                           .WithLabels({})) {}

Forwarder::Forwarder(store::Store* store, const LeaseRules* rules, store::KubeClient* cloud,
                     const base::Clock* clock, base::MetricsRegistry* metrics, ForwarderOptions options)
    : store_(store), rules_(rules), cloud_(cloud), clock_(clock), options_(std::move(options)),
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

void Forwarder::NoteKubeletRenewal(const std::string& node, int64_t renew_us, bool changed) {
  absl::MutexLock l(&mu_);
  auto [it, inserted] = kubelet_seen_.try_emplace(
      node, KubeletSeen{renew_us, changed ? clock_->MonotonicMicros() : kNeverSeen});
  if (!inserted && it->second.renew_us != renew_us) {
    it->second = KubeletSeen{renew_us, clock_->MonotonicMicros()};
  }
}

bool Forwarder::KubeletRenewalLive(const std::string& node, int64_t duration_us) {
  absl::MutexLock l(&mu_);
  auto it = kubelet_seen_.find(node);
  if (it == kubelet_seen_.end() || it->second.seen_mono_us == kNeverSeen) return false;
  return clock_->MonotonicMicros() - it->second.seen_mono_us < duration_us;
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
        // Our own status writes (lastForwardTime) change nothing to forward.
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
      SyncAll().IgnoreError();  // errors are counted; the next resync retries
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
  }
}

absl::Status Forwarder::SyncAll() {
  absl::Status first;
  int64_t delegated = 0;
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
  auto marked = cloud_->Get(absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/",
                                         options_.node_lease_namespace, "/leases?labelSelector=",
                                         kDelegatedLabel, "%3Dtrue"));
  if (marked.ok() && marked->status == 200) {
    auto doc = ParseObject(marked->body);
    if (doc.ok()) {
      const Value* items = Member(*doc, "items");
      if (items && items->IsArray()) {
        for (const auto& item : items->GetArray()) nodes.insert(StringAt(item, "metadata", "name"));
      }
    }
  } else if (!marked.ok()) {
    first = marked.status();
  }
  for (const auto& node : nodes) {
    if (stopping_) break;
    if (node.empty()) continue;
    absl::Status s = SyncNode(node);
    if (!s.ok() && first.ok()) first = s;
  }
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
  const std::string path = absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/",
                                        options_.node_lease_namespace, "/leases/", node);
  for (int attempt = 0; attempt <= options_.conflict_retries; ++attempt) {
    auto got = cloud_->Get(path);
    if (!got.ok()) {
      metrics_.forward_errors.Inc();
      return got.status();
    }
    if (got->status == 404) {
      if (!current) return absl::OkStatus();
      bool started = false;
      int64_t since = 0;
      absl::Status s = ForwardOnce(node, *dl, nullptr, &started, &since);
      if (absl::IsAborted(s) || absl::IsAlreadyExists(s)) continue;
      return s;
    }
    if (got->status != 200) {
      metrics_.forward_errors.Inc();
      return store::StatusFromKubeResponse(*got);
    }
    auto doc = ParseObject(got->body);
    if (!doc.ok()) return doc.status();
    const Value* md = Member(*doc, "metadata");
    const Value* ann = md ? Member(*md, "annotations") : nullptr;
    auto annotation = [&](const char* key) -> std::string {
      const Value* v = ann ? Member(*ann, key) : nullptr;
      return v && v->IsString() ? v->GetString() : "";
    };
    const bool marked = !annotation(kDelegatedSinceAnnotation).empty();
    const auto renew = MicroTimeAt(StringAt(*doc, "spec", "renewTime"));
    const auto forwarded = MicroTimeAt(annotation(kForwardedRenewTimeAnnotation));
    const bool kubelet_renewed = marked && renew && (!forwarded || *renew != *forwarded);
    // On a marked Lease a renewTime other than ours was written by the kubelet
    // since our last forward: a change seen now.
    if (renew && (!forwarded || *renew != *forwarded)) NoteKubeletRenewal(node, *renew, marked);
    if (kubelet_renewed) {
      absl::Status s = ClearDelegation(node);
      if (absl::IsAborted(s)) continue;
      if (!s.ok()) return s;
      return SetTaint(node, false);
    }
    if (!current) return absl::OkStatus();
    if (!marked && KubeletRenewalLive(node, LeaseDurationMicros(*doc))) {
      // The node renews its own Lease: the leader's DelegatedLease is stale news
      // (it expires soon); forwarding now would fight the kubelet.
      return absl::OkStatus();
    }
    // Forward only what the leader renewed since our last forward (the resync
    // must not turn into extra heartbeats of its own).
    if (marked && dl->status.last_forward_time_us && dl->status.observed_time_us &&
        *dl->status.last_forward_time_us >= *dl->status.observed_time_us) {
      auto since = MicroTimeAt(annotation(kDelegatedSinceAnnotation));
      if (since && clock_->NowMicros() - *since >= options_.taint_after.count()) {
        return SetTaint(node, true);
      }
      return absl::OkStatus();
    }
    bool started = false;
    int64_t since = 0;
    absl::Status s = ForwardOnce(node, *dl, &*doc, &started, &since);
    if (absl::IsAborted(s)) continue;
    if (!s.ok()) return s;
    if (clock_->NowMicros() - since >= options_.taint_after.count()) return SetTaint(node, true);
    return absl::OkStatus();
  }
  metrics_.forward_errors.Inc();
  return absl::AbortedError(absl::StrCat("cloud Lease ", node, ": still conflicting after ",
                                         options_.conflict_retries, " retries"));
}

// One PUT of the cloud Lease read as `existing` (or a POST when it is nullptr).
// Aborted on a 409 so the caller re-reads and retries.
absl::Status Forwarder::ForwardOnce(const std::string& node, const store::Object& delegated,
                                    rapidjson::Document* existing, bool* started,
                                    int64_t* since_us) {
  const int64_t t0 = clock_->MonotonicMicros();
  const std::string collection = absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/",
                                              options_.node_lease_namespace, "/leases");
  Document created;
  const bool exists = existing != nullptr;
  if (!exists) created.Parse("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\"}");
  Document& doc = exists ? *existing : created;
  auto& a = doc.GetAllocator();
  // Adding a member may move its siblings (RapidJSON grows member arrays), so
  // every container is created first and references are taken afterwards.
  EnsureObject(doc, "metadata", a);
  EnsureObject(doc, "spec", a);
  SetString(doc["metadata"], "name", node, a);
  SetString(doc["metadata"], "namespace", options_.node_lease_namespace, a);
  EnsureObject(doc["metadata"], "annotations", a);
  EnsureObject(doc["metadata"], "labels", a);
  Value& ann = doc["metadata"]["annotations"];
  Value& labels = doc["metadata"]["labels"];
  Value& spec = doc["spec"];
  const int64_t now = clock_->NowMicros();
  std::optional<int64_t> cloud_renew;
  if (auto it = spec.FindMember("renewTime"); it != spec.MemberEnd() && it->value.IsString()) {
    cloud_renew = MicroTimeAt(it->value.GetString());
  }
  const int64_t renew = cloud_renew ? std::max(now, *cloud_renew + 1) : now;
  std::optional<int64_t> since;
  if (auto it = ann.FindMember(kDelegatedSinceAnnotation); it != ann.MemberEnd() && it->value.IsString()) {
    since = MicroTimeAt(it->value.GetString());
  }
  *started = !since.has_value();
  *since_us = since.value_or(now);
  SetString(ann, kDelegateAnnotation, "true", a);
  SetString(ann, kDelegatedSinceAnnotation, base::FormatMicroTime(*since_us), a);
  SetString(ann, kForwardedRenewTimeAnnotation, base::FormatMicroTime(renew), a);
  SetString(labels, kDelegatedLabel, "true", a);
  SetString(spec, "holderIdentity", node, a);
  if (!spec.HasMember("leaseDurationSeconds")) {
    spec.AddMember("leaseDurationSeconds", delegated.spec.lease_duration_seconds.value_or(40), a);
  }
  SetString(spec, "renewTime", base::FormatMicroTime(renew), a);
  auto put = exists ? cloud_->Put(absl::StrCat(collection, "/", node), ToJson(doc))
                    : cloud_->Post(collection, ToJson(doc));
  if (!put.ok()) {
    metrics_.forward_errors.Inc();
    return put.status();
  }
  if (put->status == 409) return absl::AbortedError("conflict");
  if (put->status >= 300) {
    metrics_.forward_errors.Inc();
    return store::StatusFromKubeResponse(*put);
  }
  metrics_.forwards.Inc();
  metrics_.forward_duration.Observe((clock_->MonotonicMicros() - t0) / 1e6);
  // Remember the forward on the DelegatedLease (status.lastForwardTime).
  const int64_t observed = delegated.status.observed_time_us.value_or(0);
  store_
      ->Update(store::Kind::kDelegatedLease, node,
               [&](const store::ObjectPtr& cur,
                   store::TxnReader&) -> absl::StatusOr<store::MutableObjectPtr> {
                 if (!cur) return absl::NotFoundError("gone");
                 auto next = std::make_shared<store::Object>(*cur);
                 // A renewal that landed while we forwarded must stay "not yet
                 // forwarded" (lastForwardTime < its observedTime), or the resync
                 // would skip it.
                 const bool newer = cur->status.observed_time_us.value_or(0) > observed;
                 next->status.last_forward_time_us =
                     newer ? observed : std::max<int64_t>(observed, clock_->NowMicros());
                 return next;
               })
      .status()
      .IgnoreError();
  if (*started) {
    metrics_.delegations_started.Inc();
    RecordEvent("Node", "v1", node, "DelegationStarted",
                absl::StrCat("node ", node, " lost the cloud; its pool leader ",
                             delegated.spec.delegate.value_or("?"),
                             " renews its Lease while it heartbeats inside pool ",
                             delegated.spec.pool_name.value_or("?")));
  }
  return absl::OkStatus();
}

absl::Status Forwarder::ClearDelegation(const std::string& node) {
  const std::string path = absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/",
                                        options_.node_lease_namespace, "/leases/", node);
  auto got = cloud_->Get(path);
  if (!got.ok()) return got.status();
  if (got->status == 404) return absl::OkStatus();
  if (got->status != 200) return store::StatusFromKubeResponse(*got);
  auto doc = ParseObject(got->body);
  if (!doc.ok()) return doc.status();
  RemoveKey(*doc, "annotations", kDelegateAnnotation);
  RemoveKey(*doc, "annotations", kDelegatedSinceAnnotation);
  RemoveKey(*doc, "annotations", kForwardedRenewTimeAnnotation);
  RemoveKey(*doc, "labels", kDelegatedLabel);
  auto put = cloud_->Put(path, ToJson(*doc));
  if (!put.ok()) return put.status();
  if (put->status == 409) return absl::AbortedError("conflict");
  if (put->status >= 300) return store::StatusFromKubeResponse(*put);
  metrics_.delegations_stopped.Inc();
  RecordEvent("Node", "v1", node, "DelegationStopped",
              absl::StrCat("node ", node, " renews its own Lease again; delegation ended"));
  return absl::OkStatus();
}

absl::Status Forwarder::SetTaint(const std::string& node, bool present) {
  const std::string path = absl::StrCat("/api/v1/nodes/", node);
  for (int attempt = 0; attempt <= options_.conflict_retries; ++attempt) {
    auto got = cloud_->Get(path);
    if (!got.ok()) return got.status();
    if (got->status == 404) return absl::OkStatus();  // no Node object: nothing to taint
    if (got->status != 200) return store::StatusFromKubeResponse(*got);
    auto doc = ParseObject(got->body);
    if (!doc.ok()) return doc.status();
    auto& a = doc->GetAllocator();
    Value& spec = EnsureObject(*doc, "spec", a);
    auto taints_it = spec.FindMember("taints");
    bool has = false;
    if (taints_it != spec.MemberEnd() && taints_it->value.IsArray()) {
      for (const auto& t : taints_it->value.GetArray()) {
        const Value* key = Member(t, "key");
        if (key && key->IsString() && std::string_view(key->GetString()) == kUnschedulableTaint) has = true;
      }
    }
    if (has == present) return absl::OkStatus();
    if (present) {
      if (taints_it == spec.MemberEnd() || !taints_it->value.IsArray()) {
        if (taints_it != spec.MemberEnd()) spec.RemoveMember(taints_it);
        spec.AddMember("taints", Value(rapidjson::kArrayType), a);
        taints_it = spec.FindMember("taints");
      }
      Value taint(rapidjson::kObjectType);
      taint.AddMember("key", Value(kUnschedulableTaint, a), a);
      taint.AddMember("value", "true", a);
      taint.AddMember("effect", "NoSchedule", a);
      taints_it->value.PushBack(taint, a);
    } else {
      Value kept(rapidjson::kArrayType);
      for (auto& t : taints_it->value.GetArray()) {
        const Value* key = Member(t, "key");
        if (key && key->IsString() && std::string_view(key->GetString()) == kUnschedulableTaint) continue;
        kept.PushBack(Value(t, a), a);
      }
      taints_it->value = std::move(kept);
    }
    auto put = cloud_->Put(path, ToJson(*doc));
    if (!put.ok()) return put.status();
    if (put->status == 409) continue;
    if (put->status >= 300) return store::StatusFromKubeResponse(*put);
    (present ? metrics_.taints_added : metrics_.taints_removed).Inc();
    RecordEvent("Node", "v1", node, present ? "TaintAdded" : "TaintRemoved",
                present ? absl::StrCat("node ", node, " delegated for ",
                                       options_.taint_after.count() / 1'000'000,
                                       "s: tainted ", kUnschedulableTaint, "=true:NoSchedule")
                        : absl::StrCat("node ", node, " is back: removed taint ", kUnschedulableTaint));
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat("node ", node, ": taint update still conflicting"));
}

void Forwarder::RecordEvent(const std::string& kind, const std::string& api_version,
                            const std::string& name, const std::string& reason,
                            const std::string& message) {
  Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  const std::string now = base::FormatTime(clock_->NowMicros() / 1'000'000);
  const std::string micro = base::FormatMicroTime(clock_->NowMicros());
  Value md(rapidjson::kObjectType);
  md.AddMember("generateName", Value(absl::StrCat(name, ".").c_str(), a), a);
  md.AddMember("namespace", Value(options_.events_namespace.c_str(), a), a);
  Value involved(rapidjson::kObjectType);
  involved.AddMember("kind", Value(kind.c_str(), a), a);
  involved.AddMember("apiVersion", Value(api_version.c_str(), a), a);
  involved.AddMember("name", Value(name.c_str(), a), a);
  Value source(rapidjson::kObjectType);
  source.AddMember("component", Value(options_.component.c_str(), a), a);
  d.AddMember("apiVersion", "v1", a);
  d.AddMember("kind", "Event", a);
  d.AddMember("metadata", md, a);
  d.AddMember("involvedObject", involved, a);
  d.AddMember("reason", Value(reason.c_str(), a), a);
  d.AddMember("message", Value(message.c_str(), a), a);
  d.AddMember("type", "Normal", a);
  d.AddMember("source", source, a);
  d.AddMember("firstTimestamp", Value(now.c_str(), a), a);
  d.AddMember("lastTimestamp", Value(now.c_str(), a), a);
  d.AddMember("eventTime", Value(micro.c_str(), a), a);
  d.AddMember("count", 1, a);
  d.AddMember("reportingComponent", Value(options_.component.c_str(), a), a);
  d.AddMember("reportingInstance", Value(options_.component.c_str(), a), a);
  d.AddMember("action", Value(reason.c_str(), a), a);
  // Events are best effort: a lost Event must never stop forwarding.
  cloud_->Post(absl::StrCat("/api/v1/namespaces/", options_.events_namespace, "/events"), ToJson(d))
      .status()
      .IgnoreError();
}


}  // namespace poolcoord::election
