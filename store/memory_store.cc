#include "store/memory_store.h"
#include "store/object_set.h"
#include "store/watch_channel.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/api_error.h"

namespace poolcoord::store {
namespace {

int Index(Kind kind) { return static_cast<int>(kind); }

class MemoryStore;

// Lets watchers reach their store for progress requests while it lives; the
// store detaches itself before it goes.
struct StoreLink {
  absl::Mutex mu;
  MemoryStore* store ABSL_GUARDED_BY(mu) = nullptr;
};

class MemoryWatcher final : public Watcher {
 public:
  MemoryWatcher(std::shared_ptr<WatchChannel> channel, Kind kind, std::shared_ptr<StoreLink> link)
      : channel_(std::move(channel)), kind_(kind), link_(std::move(link)) {}
  ~MemoryWatcher() override { channel_->Close(); }
  MemoryWatcher(const MemoryWatcher&) = delete;
  MemoryWatcher& operator=(const MemoryWatcher&) = delete;

  EventPtr Next(std::chrono::milliseconds timeout) override { return channel_->Next(timeout); }
  EventPtr TryNext() override { return channel_->TryNext(); }
  bool NotifyWhenReady(std::function<void()> wake) override {
    return channel_->NotifyWhenReady(std::move(wake));
  }
  bool Closed() const override { return channel_->Closed(); }
  void Stop() override { channel_->Close(); }
  bool RequestProgress() override;

 private:
  std::shared_ptr<WatchChannel> channel_;
  const Kind kind_;
  std::shared_ptr<StoreLink> link_;
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(const MemoryStoreOptions& options)
      : options_(options), link_(std::make_shared<StoreLink>()) {
    const base::Clock* clock = options.clock ? options.clock : base::RealClock::Get();
    {
      absl::MutexLock lock(&mu_);
      revision_ = compacted_ = std::max<int64_t>(1, clock->NowMicros());
    }
    absl::MutexLock lock(&link_->mu);
    link_->store = this;
  }
  ~MemoryStore() override {
    {
      absl::MutexLock lock(&link_->mu);
      link_->store = nullptr;
    }
    Shutdown();
  }
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  absl::StatusOr<ObjectPtr> Get(Kind kind, std::string_view name) override {
    absl::ReaderMutexLock lock(&mu_);
    ObjectPtr found = FindLocked(kind, name);
    if (!found) return NotFoundError(InfoFor(kind).plural, name);
    return found;
  }

  absl::StatusOr<std::vector<ObjectPtr>> GetAll(std::span<const ObjectKey> keys) override {
    std::vector<ObjectPtr> out;
    out.reserve(keys.size());
    absl::ReaderMutexLock lock(&mu_);
    for (const ObjectKey& key : keys) out.push_back(FindLocked(key.kind, key.name));
    return out;
  }

  absl::StatusOr<ListResult> List(Kind kind, const ListOptions& options) override {
    absl::ReaderMutexLock lock(&mu_);
    const ObjectSet& objects = kinds_[Index(kind)].objects;
    const int64_t at = options.at_revision;
    if (at == 0 || at == revision_) return ListObjects(objects, options, revision_);
    if (at > revision_) {
      return TimeoutError(absl::StrCat("Too large resource version: ", at, ", current: ", revision_),
                          /*rv_too_large=*/true);
    }
    // No past states are kept, but the history holds every change since
    // compacted_: undone over today's objects, they give the list as of `at`.
    if (at < compacted_) {
      return ExpiredError(
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter.");
    }
    ObjectOverlay then;
    for (auto e = history_.begin() + (at - compacted_); e != history_.end(); ++e) {
      const Event& event = **e;
      if (!event.object || event.object->kind != kind) continue;
      // The earliest change after `at` knows the state at `at`: its previous.
      then.try_emplace(event.object->metadata.name,
                       event.type == EventType::kAdded ? nullptr : event.previous);
    }
    return ListObjects(objects, options, at, &then);
  }

  absl::StatusOr<WriteResult> Update(Kind kind, std::string_view name, const UpdateFn& fn,
                                     bool dry_run) override {
    std::vector<std::function<void()>> wakes;
    absl::StatusOr<WriteResult> result;
    {
      absl::MutexLock lock(&mu_);
      result = UpdateLocked(kind, name, fn, dry_run);
      wakes.swap(deferred_wakes_);
    }
    // The watchers' wake-ups (the watch cache's dispatcher, or API streams) after
    // the lock: woken under it, each made the next writer wait on a contended
    // lock (+7% instructions per renewal with the watch cache, callgrind).
    for (auto& wake : wakes) wake();
    return result;
  }

  absl::StatusOr<WriteResult> UpdateLocked(Kind kind, std::string_view name, const UpdateFn& fn,
                                           bool dry_run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& state = kinds_[Index(kind)];
    auto it = state.objects.find(name);
    ObjectPtr current = it == state.objects.end() ? nullptr : *it;

    LockedReader reader(this);
    absl::StatusOr<MutableObjectPtr> proposed = fn(current, reader);
    if (!proposed.ok()) return proposed.status();
    MutableObjectPtr next = *std::move(proposed);

    WritePlan plan = PlanWrite(kind, name, current, next, dry_run);
    if (plan.done) return std::move(plan.result);
    WriteResult result = std::move(plan.result);
    if (!next) {
      const int64_t revision = ++revision_;
      auto last = std::make_shared<Object>(*current);
      last->metadata.resource_version = revision;
      state.objects.erase(it);
      result.object = last;
      RecordLocked(kind, EventType::kDeleted, std::move(last), current, revision);
      return result;
    }

    const int64_t revision = ++revision_;
    next->metadata.resource_version = revision;
    ObjectPtr stored = std::move(next);
    UpsertObject(state.objects, stored);
    result.object = stored;
    RecordLocked(kind, current ? EventType::kModified : EventType::kAdded, stored, current,
                 revision);
    return result;
  }

  absl::StatusOr<std::unique_ptr<Watcher>> Watch(Kind kind, int64_t from_revision) override {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return ServiceUnavailableError("the server is shutting down");
    if (from_revision < 0) {
      return BadRequestError(absl::StrCat("invalid resourceVersion ", from_revision));
    }
    if (from_revision == 0) from_revision = revision_;
    if (from_revision < compacted_) {
      return ExpiredError(
          absl::StrCat("too old resource version: ", from_revision, " (", compacted_, ")"));
    }
    if (from_revision > revision_) {
      return TimeoutError(absl::StrCat("Too large resource version: ", from_revision,
                                       ", current: ", revision_),
                          /*rv_too_large=*/true);
    }
    auto& state = kinds_[Index(kind)];
    SweepClosedLocked(state);
    auto channel = std::make_shared<WatchChannel>(options_.watcher_queue_limit);
    // history_ holds every revision in (compacted_, revision_], one event each,
    // so the first event to replay sits at a computable index.
    const size_t start = static_cast<size_t>(from_revision - compacted_);
    for (size_t i = start; i < history_.size(); ++i) {
      if (history_[i]->object && history_[i]->object->kind == kind) {
        channel->PushReplay(history_[i]);
      }
    }
    state.watchers.push_back(channel);
    return std::unique_ptr<Watcher>(std::make_unique<MemoryWatcher>(std::move(channel), kind, link_));
  }

  // A bookmark at the newest revision: every event up to it went into the
  // channel inside the write that made it, under the exclusive lock, so it
  // lands behind all of them. The consumer's wake-up is left in `*wake`, to run
  // once the caller holds no lock (the watch cache may apply events in it).
  bool PushProgress(Kind kind, WatchChannel& channel, std::function<void()>* wake) {
    absl::ReaderMutexLock lock(&mu_);
    if (shutdown_) return false;
    return channel.Push(BookmarkEvent(kind, revision_), wake);
  }

  int64_t CurrentRevision() override {
    absl::ReaderMutexLock lock(&mu_);
    return revision_;
  }

  int64_t OldestWatchableRevision() override {
    absl::ReaderMutexLock lock(&mu_);
    return compacted_;
  }

  void Shutdown() override {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    for (auto& state : kinds_) {
      for (auto& channel : state.watchers) channel->Close();
      state.watchers.clear();
    }
  }

 private:
  struct KindState {
    ObjectSet objects;
    std::vector<std::shared_ptr<WatchChannel>> watchers;
  };

  // The TxnReader handed to fn: it reads under the lock Update already holds.
  class LockedReader final : public TxnReader {
   public:
    explicit LockedReader(MemoryStore* store) : store_(store) {}
    ObjectPtr Get(Kind kind, std::string_view name) override {
      store_->mu_.AssertHeld();
      return store_->FindLocked(kind, name);
    }

   private:
    MemoryStore* store_;
  };

  ObjectPtr FindLocked(Kind kind, std::string_view name) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return FindObject(kinds_[Index(kind)].objects, name);
  }

  // Appends the event to the history window and fans it out. The one Event is
  // shared by the history and every watcher.
  void RecordLocked(Kind kind, EventType type, ObjectPtr object, ObjectPtr previous,
                    int64_t revision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto event = std::make_shared<Event>();
    event->type = type;
    event->object = std::move(object);
    event->previous = std::move(previous);
    event->revision = revision;
    EventPtr shared = std::move(event);

    history_.push_back(shared);
    history_bytes_ += static_cast<int64_t>(ApproximateBytes(*shared->object));
    const int64_t keep = std::max<int64_t>(options_.watch_history_size, 0);
    const int64_t keep_bytes = options_.watch_history_bytes;
    while (static_cast<int64_t>(history_.size()) > keep ||
           (keep_bytes > 0 && history_bytes_ > keep_bytes && history_.size() > 1)) {
      history_bytes_ -= static_cast<int64_t>(ApproximateBytes(*history_.front()->object));
      compacted_ = history_.front()->revision;
      history_.pop_front();
    }

    auto& watchers = kinds_[Index(kind)].watchers;
    for (size_t i = 0; i < watchers.size();) {
      std::function<void()> wake;
      const bool pushed = watchers[i]->Push(shared, &wake);
      if (wake) deferred_wakes_.push_back(std::move(wake));
      if (pushed) {
        ++i;
      } else {
        watchers[i] = std::move(watchers.back());
        watchers.pop_back();
      }
    }
  }

  void SweepClosedLocked(KindState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& w = state.watchers;
    w.erase(std::remove_if(w.begin(), w.end(), [](const auto& c) { return c->Closed(); }),
            w.end());
  }

  const MemoryStoreOptions options_;
  mutable absl::Mutex mu_;
  KindState kinds_[kMaxKinds] ABSL_GUARDED_BY(mu_);
  // The newest revision; the first (the clock's, at least 1) before any write, so
  // no list ever reports "0".
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 1;
  // Every revision <= compacted_ has left the history: watches must start at or
  // after it.
  int64_t compacted_ ABSL_GUARDED_BY(mu_) = 1;
  // Wake-ups collected by RecordLocked, run by Update once mu_ is released.
  std::vector<std::function<void()>> deferred_wakes_ ABSL_GUARDED_BY(mu_);
  std::deque<EventPtr> history_ ABSL_GUARDED_BY(mu_);
  int64_t history_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // ApproximateBytes of history_'s objects
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  const std::shared_ptr<StoreLink> link_;
};

bool MemoryWatcher::RequestProgress() {
  std::function<void()> wake;
  bool pushed = false;
  {
    absl::MutexLock lock(&link_->mu);
    if (link_->store == nullptr) return false;
    pushed = link_->store->PushProgress(kind_, *channel_, &wake);
  }
  if (wake) wake();
  return pushed;
}

}  // namespace

std::unique_ptr<Store> NewMemoryStore(const MemoryStoreOptions& options) {
  return std::make_unique<MemoryStore>(options);
}

}  // namespace poolcoord::store
