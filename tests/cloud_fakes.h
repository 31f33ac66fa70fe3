// Hand-written fakes of the cloud's typed clients (cloud/clientset.h) for unit
// tests: in-memory objects with kube-apiserver's resourceVersion semantics
// (a stale resourceVersion is Conflict, a taken name AlreadyExists), a log of
// the calls made, and errors to inject per verb. Thread-safe (one mutex), so a
// component's own threads may call them while the test reads.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cloud/clientset.h"
#include "cloud/errors.h"
#include "rapidjson/document.h"

namespace poolcoord::testing {

// Errors to return instead of serving, by verb ("get", "list", "create",
// "update", "patch", "watch"), each used once. An injected function runs when
// its call comes (outside the fake's lock), to change the world between a
// component's read and its write, and returns the call's error.
class ErrorQueue {
 public:
  void Inject(const std::string& verb, absl::Status s) {
    Inject(verb, [s = std::move(s)] { return s; });
  }
  void Inject(const std::string& verb, std::function<absl::Status()> fn) {
    absl::MutexLock l(&mu_);
    errors_[verb].push_back(std::move(fn));
  }
  absl::Status Take(const std::string& verb) {
    std::function<absl::Status()> fn;
    {
      absl::MutexLock l(&mu_);
      auto it = errors_.find(verb);
      if (it == errors_.end() || it->second.empty()) return absl::OkStatus();
      fn = std::move(it->second.front());
      it->second.pop_front();
    }
    return fn();
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::deque<std::function<absl::Status()>>> errors_ ABSL_GUARDED_BY(mu_);
};

class FakeLeases : public cloud::LeaseInterface {
 public:
  absl::StatusOr<cloud::Lease> Get(const std::string& name) override {
    Log("get " + name);
    if (absl::Status s = errors.Take("get"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    auto it = leases_.find(name);
    if (it == leases_.end()) return NotFound(name);
    return it->second;
  }
  absl::StatusOr<cloud::LeaseList> List(const cloud::ListOptions& options) override {
    Log("list " + options.label_selector);
    if (absl::Status s = errors.Take("list"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    cloud::LeaseList out;
    out.resource_version = std::to_string(rv_);
    // "key" (exists) or "key=value".
    const size_t eq = options.label_selector.find('=');
    for (const auto& [name, lease] : leases_) {
      if (!options.label_selector.empty()) {
        auto it = lease.metadata.labels.find(options.label_selector.substr(0, eq));
        if (it == lease.metadata.labels.end() ||
            (eq != std::string::npos && it->second != options.label_selector.substr(eq + 1))) {
          continue;
        }
      }
      out.items.push_back(lease);
    }
    return out;
  }
  absl::StatusOr<cloud::Lease> Create(const cloud::Lease& lease) override {
    Log("create " + lease.metadata.name);
    if (absl::Status s = errors.Take("create"); !s.ok()) return s;
    cloud::Lease stored = lease;
    {
      absl::MutexLock l(&mu_);
      if (leases_.count(lease.metadata.name)) {
        return cloud::ApiError(409, "AlreadyExists",
                               absl::StrCat("leases \"", lease.metadata.name, "\" already exists"));
      }
      stored.metadata.uid = "uid-" + lease.metadata.name;
      stored.metadata.resource_version = std::to_string(++rv_);
      leases_[lease.metadata.name] = stored;
    }
    Notify(stored);
    return stored;
  }
  absl::StatusOr<cloud::Lease> Update(const cloud::Lease& lease) override {
    Log("update " + lease.metadata.name);
    if (absl::Status s = errors.Take("update"); !s.ok()) return s;
    cloud::Lease stored = lease;
    {
      absl::MutexLock l(&mu_);
      auto it = leases_.find(lease.metadata.name);
      if (it == leases_.end()) return NotFound(lease.metadata.name);
      if (!lease.metadata.resource_version.empty() &&
          lease.metadata.resource_version != it->second.metadata.resource_version) {
        return cloud::ApiError(409, "Conflict", "the object has been modified");
      }
      stored.metadata.uid = it->second.metadata.uid;
      stored.metadata.resource_version = std::to_string(++rv_);
      it->second = stored;
    }
    Notify(stored);
    return stored;
  }
  absl::Status Delete(const std::string& name) override {
    Log("delete " + name);
    if (absl::Status s = errors.Take("delete"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    if (leases_.erase(name) == 0) return NotFound(name);
    return absl::OkStatus();
  }
  // Watches are delivered through `on_change` instead (synchronously, by the
  // writer's thread), so a test decides when a component hears of a write.
  absl::Status Watch(const cloud::ListOptions&, const cloud::WatchHandler<cloud::Lease>&,
                     poolcoord::base::StreamControl*) override {
    return absl::UnimplementedError("FakeLeases has no watch: use on_change");
  }

  // Test side: what the kubelet (or anyone) writes, bypassing the log.
  void Put(cloud::Lease lease) {
    cloud::Lease stored;
    {
      absl::MutexLock l(&mu_);
      lease.metadata.resource_version = std::to_string(++rv_);
      stored = leases_[lease.metadata.name] = std::move(lease);
    }
    Notify(stored);
  }
  // Called with every stored change (Create, Update, Put), after the fake's
  // lock is released: what a watch of the Leases would deliver. Set it before
  // the component under test runs.
  std::function<void(const cloud::Lease&)> on_change;
  std::optional<cloud::Lease> Find(const std::string& name) {
    absl::MutexLock l(&mu_);
    auto it = leases_.find(name);
    if (it == leases_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> Calls() {
    absl::MutexLock l(&mu_);
    return calls_;
  }
  void ClearCalls() {
    absl::MutexLock l(&mu_);
    calls_.clear();
  }

  ErrorQueue errors;

 private:
  static absl::Status NotFound(const std::string& name) {
    return cloud::ApiError(404, "NotFound", absl::StrCat("leases \"", name, "\" not found"));
  }
  void Log(std::string call) {
    absl::MutexLock l(&mu_);
    calls_.push_back(std::move(call));
  }
  void Notify(const cloud::Lease& stored) ABSL_LOCKS_EXCLUDED(mu_) {
    if (on_change) on_change(stored);
  }
  absl::Mutex mu_;
  std::map<std::string, cloud::Lease> leases_ ABSL_GUARDED_BY(mu_);
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 100;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

// Nodes, served as a cluster whose RBAC grants get/list/watch/patch (the
// chart's): there is no update. Merge patches of spec.taints are applied with
// the resourceVersion precondition kube-apiserver checks.
class FakeNodes : public cloud::NodeInterface {
 public:
  absl::StatusOr<cloud::Node> Get(const std::string& name) override {
    Log("get " + name);
    if (absl::Status s = errors.Take("get"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return NotFound(name);
    return it->second;
  }
  absl::StatusOr<cloud::NodeList> List(const cloud::ListOptions& options) override {
    Log("list " + options.label_selector);
    if (absl::Status s = errors.Take("list"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    cloud::NodeList out;
    out.resource_version = std::to_string(rv_);
    // "key" (exists) or "key=value".
    const size_t eq = options.label_selector.find('=');
    const std::string key = options.label_selector.substr(0, eq);
    for (const auto& [name, node] : nodes_) {
      if (!options.label_selector.empty()) {
        auto label = node.metadata.labels.find(key);
        if (label == node.metadata.labels.end()) continue;
        if (eq != std::string::npos && label->second != options.label_selector.substr(eq + 1)) {
          continue;
        }
      }
      out.items.push_back(node);
    }
    return out;
  }
  absl::Status Watch(const cloud::ListOptions& options,
                     const cloud::WatchHandler<cloud::Node>& handler,
                     base::StreamControl* control) override {
    Log("watch " + options.resource_version);
    if (absl::Status s = errors.Take("watch"); !s.ok()) return s;
    size_t next = 0;
    while (control == nullptr || !control->stopped()) {
      cloud::WatchEvent<cloud::Node> ev;
      {
        absl::MutexLock l(&mu_);
        auto ready = [this, &next]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return next < events_.size() || watch_end_;
        };
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(50));
        if (watch_end_) {
          watch_end_ = false;
          return watch_end_status_;
        }
        if (next >= events_.size()) continue;
        ev = events_[next++];
      }
      const bool go_on = handler(ev);
      {
        absl::MutexLock l(&mu_);
        handled_ = next;
      }
      if (!go_on) return absl::OkStatus();
    }
    return absl::OkStatus();
  }
  absl::StatusOr<cloud::Node> Patch(const std::string& name, std::string_view patch_type,
                                    const std::string& patch) override {
    Log(absl::StrCat("patch ", name, " ", std::string(patch_type), " ", patch));
    if (absl::Status s = errors.Take("patch"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return NotFound(name);
    if (patch_type != cloud::kMergePatch) {
      return cloud::ApiError(415, "UnsupportedMediaType", "the fake applies merge patches only");
    }
    rapidjson::Document d;
    d.Parse(patch.data(), patch.size());
    if (d.HasParseError() || !d.IsObject()) return cloud::ApiError(400, "BadRequest", "bad patch");
    if (auto md = d.FindMember("metadata"); md != d.MemberEnd()) {
      auto rv = md->value.FindMember("resourceVersion");
      if (rv != md->value.MemberEnd() &&
          it->second.metadata.resource_version != rv->value.GetString()) {
        return cloud::ApiError(409, "Conflict", "the object has been modified");
      }
    }
    if (auto spec = d.FindMember("spec"); spec != d.MemberEnd()) {
      if (auto t = spec->value.FindMember("taints"); t != spec->value.MemberEnd()) {
        it->second.taints.clear();
        for (const auto& v : t->value.GetArray()) {
          cloud::Taint taint;
          taint.key = v["key"].GetString();
          if (v.HasMember("value")) taint.value = v["value"].GetString();
          taint.effect = v["effect"].GetString();
          it->second.taints.push_back(taint);
        }
      }
    }
    it->second.metadata.resource_version = std::to_string(++rv_);
    return it->second;
  }

  // Test side.
  void Put(cloud::Node node, const std::string& event_type = "ADDED") {
    absl::MutexLock l(&mu_);
    node.metadata.resource_version = std::to_string(++rv_);
    nodes_[node.metadata.name] = node;
    events_.push_back({event_type, node});
  }
  void Remove(const std::string& name) {
    absl::MutexLock l(&mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return;
    cloud::Node gone = it->second;
    gone.metadata.resource_version = std::to_string(++rv_);
    nodes_.erase(it);
    events_.push_back({"DELETED", gone});
  }
  // Ends the running watch with `s` (OK: the server closed it).
  void EndWatch(absl::Status s) {
    absl::MutexLock l(&mu_);
    watch_end_ = true;
    watch_end_status_ = std::move(s);
  }
  std::optional<cloud::Node> Find(const std::string& name) {
    absl::MutexLock l(&mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> Calls() {
    absl::MutexLock l(&mu_);
    return calls_;
  }
  // Whether a watch has handed every event put so far to its handler, and the
  // handler has returned.
  bool AllEventsHandled() {
    absl::MutexLock l(&mu_);
    return handled_ == events_.size();
  }

  ErrorQueue errors;

 private:
  static absl::Status NotFound(const std::string& name) {
    return cloud::ApiError(404, "NotFound", absl::StrCat("nodes \"", name, "\" not found"));
  }
  void Log(std::string call) {
    absl::MutexLock l(&mu_);
    calls_.push_back(std::move(call));
  }
  absl::Mutex mu_;
  std::map<std::string, cloud::Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::vector<cloud::WatchEvent<cloud::Node>> events_ ABSL_GUARDED_BY(mu_);
  size_t handled_ ABSL_GUARDED_BY(mu_) = 0;
  bool watch_end_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status watch_end_status_ ABSL_GUARDED_BY(mu_);
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 500;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

// poolcoord's DelegatedLeases (read side), with the field selector
// spec.poolName=<pool> the server supports.
class FakeDelegatedLeases : public cloud::DelegatedLeaseInterface {
 public:
  absl::StatusOr<cloud::DelegatedLease> Get(const std::string& name) override {
    if (absl::Status s = errors.Take("get"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    auto it = leases_.find(name);
    if (it == leases_.end()) {
      return cloud::ApiError(404, "NotFound",
                             absl::StrCat("delegatedleases.coordination.pool \"", name,
                                          "\" not found"));
    }
    return it->second;
  }
  absl::StatusOr<cloud::DelegatedLeaseList> List(const cloud::ListOptions& options) override {
    if (absl::Status s = errors.Take("list"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    cloud::DelegatedLeaseList out;
    const std::string prefix = "spec.poolName=";
    for (const auto& [name, lease] : leases_) {
      if (options.field_selector.rfind(prefix, 0) == 0 &&
          lease.spec.pool_name.value_or("") != options.field_selector.substr(prefix.size())) {
        continue;
      }
      out.items.push_back(lease);
    }
    return out;
  }
  void Put(cloud::DelegatedLease lease) {
    absl::MutexLock l(&mu_);
    leases_[lease.metadata.name] = std::move(lease);
  }

  ErrorQueue errors;

 private:
  absl::Mutex mu_;
  std::map<std::string, cloud::DelegatedLease> leases_ ABSL_GUARDED_BY(mu_);
};

class FakeEvents : public cloud::EventInterface {
 public:
  absl::StatusOr<cloud::Event> Create(const cloud::Event& event) override {
    if (absl::Status s = errors.Take("create"); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    events_.push_back(event);
    return event;
  }
  std::vector<cloud::Event> Events() {
    absl::MutexLock l(&mu_);
    return events_;
  }
  // The reasons of the Events about `name`, in order.
  std::vector<std::string> Reasons(const std::string& name) {
    absl::MutexLock l(&mu_);
    std::vector<std::string> out;
    for (const auto& e : events_) {
      if (e.involved_object.name == name) out.push_back(e.reason);
    }
    return out;
  }

  ErrorQueue errors;

 private:
  absl::Mutex mu_;
  std::vector<cloud::Event> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::testing
