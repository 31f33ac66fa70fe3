// An informer: a reflector (cloud/reflector.h: list, then watch from the list's
// resourceVersion, relisting on 410) that keeps the objects it has seen in a
// cache keyed by name, and tells a handler of each change, as client-go's
// SharedIndexInformer does for one consumer. A controller reads the cache
// instead of asking the server for each object, and writes with the
// resourceVersion the cache holds.
//
//   Informer<LeaseInterface, LeaseList> leases(client, {.name = "marked Leases",
//       .list = {.label_selector = "coordination.pool/delegated=true"}},
//       [](const std::string& type, const Lease& lease) { ... });
//   leases.Start();
//   std::optional<Lease> l = leases.Get("node-1");
//
// The handler gets "ADDED", "MODIFIED" or "DELETED" with the object (for
// DELETED, the last state the cache held); a relist reports what changed
// against the cache, including DELETED for what is gone. A watch with a
// selector reports an object that stops matching as DELETED, as
// kube-apiserver does.
//
// Replace and Apply are what the reflector's thread calls; a test or a
// simulator may call them itself instead of Start, to feed the informer
// without a server.
//
// The cache holds each object once, shared: Get and Items hand out pointers to
// immutable objects, so reading the whole cache copies no object.
//
// Thread-safety: Get/Items/HasSynced from any thread; the handler runs on the
// reflector's thread (or the caller of Replace/Apply), never under the cache's
// lock, one call at a time.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cloud/reflector.h"

namespace poolcoord::cloud {

template <typename Client, typename ListType, typename T = ItemOf<ListType>>
class Informer {
 public:
  using Handler = std::function<void(const std::string& type, const T& object)>;

  // `client` is not owned and must outlive the informer; `handler` may be empty.
  Informer(Client* client, ReflectorOptions options, Handler handler)
      : handler_(std::move(handler)),
        reflector_(
            client, std::move(options), [this](const std::vector<T>& items) { Replace(items); },
            [this](const WatchEvent<T>& ev) { Apply(ev); }) {}
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Lists and watches on a thread of its own until Stop.
  void Start() { reflector_.Start(""); }
  void Stop() { reflector_.Stop(); }

  // True once a first list has filled the cache.
  bool HasSynced() const {
    absl::MutexLock l(&mu_);
    return synced_;
  }
  // nullptr when the cache has no object of that name.
  std::shared_ptr<const T> Get(const std::string& name) const {
    absl::MutexLock l(&mu_);
    auto it = items_.find(name);
    if (it == items_.end()) return nullptr;
    return it->second;
  }
  std::vector<std::shared_ptr<const T>> Items() const {
    absl::MutexLock l(&mu_);
    std::vector<std::shared_ptr<const T>> out;
    out.reserve(items_.size());
    for (const auto& [name, item] : items_) out.push_back(item);
    return out;
  }

  // A whole list: the cache becomes `items`; the handler hears the differences.
  void Replace(const std::vector<T>& items) {
    std::vector<std::pair<std::string, Ptr>> changes;
    {
      absl::MutexLock l(&mu_);
      std::map<std::string, Ptr> next;
      for (const T& item : items) next.emplace(item.metadata.name, std::make_shared<const T>(item));
      for (auto& [name, old] : items_) {
        if (!next.count(name)) changes.emplace_back("DELETED", std::move(old));
      }
      for (const auto& [name, item] : next) {
        auto it = items_.find(name);
        if (it == items_.end()) {
          changes.emplace_back("ADDED", item);
        } else if (it->second->metadata.resource_version != item->metadata.resource_version) {
          changes.emplace_back("MODIFIED", item);
        }
      }
      items_ = std::move(next);
      synced_ = true;
    }
    Notify(changes);
  }
  // One watch event.
  void Apply(const WatchEvent<T>& ev) {
    std::vector<std::pair<std::string, Ptr>> changes;
    {
      absl::MutexLock l(&mu_);
      const std::string& name = ev.object.metadata.name;
      if (ev.type == "DELETED") {
        auto it = items_.find(name);
        if (it == items_.end()) return;
        changes.emplace_back("DELETED", std::move(it->second));
        items_.erase(it);
      } else if (ev.type == "ADDED" || ev.type == "MODIFIED") {
        auto [it, inserted] = items_.insert_or_assign(name, std::make_shared<const T>(ev.object));
        changes.emplace_back(inserted ? "ADDED" : "MODIFIED", it->second);
      } else {
        return;
      }
    }
    Notify(changes);
  }

 private:
  using Ptr = std::shared_ptr<const T>;
  void Notify(const std::vector<std::pair<std::string, Ptr>>& changes) {
    if (!handler_) return;
    absl::MutexLock l(&handler_mu_);
    for (const auto& [type, item] : changes) handler_(type, *item);
  }

  const Handler handler_;
  mutable absl::Mutex mu_;
  std::map<std::string, Ptr> items_ ABSL_GUARDED_BY(mu_);
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex handler_mu_;  // one handler call at a time
  Reflector<Client, ListType, T> reflector_;
};

}  // namespace poolcoord::cloud
