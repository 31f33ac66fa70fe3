#include "store/cacher.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/api_error.h"
#include "store/object_set.h"
#include "store/watch_channel.h"

namespace poolcoord::store {
namespace {

// kube-apiserver's blockTimeout: how long a read waits for the cache to reach
// the revision it needs before the store below answers instead.
constexpr absl::Duration kBlockTimeout = absl::Seconds(3);
// Back-off between attempts to re-establish the upstream watch.
constexpr absl::Duration kRetryFirst = absl::Milliseconds(100);
constexpr absl::Duration kRetryMax = absl::Seconds(5);

absl::Status TooLargeError(int64_t wanted, int64_t current) {
  return TimeoutError(
      absl::StrCat("Too large resource version: ", wanted, ", current: ", current),
      /*rv_too_large=*/true);
}

class KindCache;

// Wakes a dispatcher. Shared with the wake callbacks handed to the upstream
// watcher, which may run on a store's writer thread after the dispatcher has
// gone.
class Signal {
 public:
  explicit Signal(KindCache* cache) : cache_(cache) {}

  // The upstream watcher's wake-up, on the thread that pushed the event (a
  // store writer after its lock, the etcd3 watch thread): the cache applies
  // the event right there while no API watcher waits for it, else the
  // dispatcher is woken. Defined below KindCache.
  void Ring();
  // Before the cache goes: Ring no longer reaches it (waits for one that does).
  void Detach() {
    absl::MutexLock lock(&link_mu_);
    cache_ = nullptr;
  }

  void Notify() {
    absl::MutexLock lock(&mu_);
    notified_ = true;
  }
  void Stop() {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
  }
  bool stopped() const {
    absl::MutexLock lock(&mu_);
    return stopped_;
  }
  // Until notified (the notification is consumed) or stopped.
  void Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Signal::NotifiedOrStopped));
    notified_ = false;
  }
  // Sleeps `d` unless stopped first; false once stopped.
  bool Sleep(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopped_), d);
    return !stopped_;
  }

 private:
  bool NotifiedOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return notified_ || stopped_;
  }
  // Held (shared) by Ring while it drains on the cache; Detach takes it.
  absl::Mutex link_mu_;
  KindCache* cache_ ABSL_GUARDED_BY(link_mu_);
  mutable absl::Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// One API watcher's queue. `after`: the revision it starts after; the
// dispatcher skips events at or below it (the watch asked for a revision the
// cache had not reached yet).
struct Subscriber {
  Subscriber(size_t limit, int64_t start) : channel(limit), after(start) {}
  // False once the watcher is gone: stopped, or closed by this push as too slow.
  bool Deliver(const EventPtr& event) {
    if (event->revision <= after) return !channel.Closed();
    return channel.Push(event);
  }
  WatchChannel channel;
  const int64_t after;
};
using Subscribers = std::vector<std::shared_ptr<Subscriber>>;

class CachedWatcher final : public Watcher {
 public:
  CachedWatcher(std::shared_ptr<Subscriber> subscriber, std::weak_ptr<KindCache> cache)
      : subscriber_(std::move(subscriber)), cache_(std::move(cache)) {}
  ~CachedWatcher() override { subscriber_->channel.Close(); }
  CachedWatcher(const CachedWatcher&) = delete;
  CachedWatcher& operator=(const CachedWatcher&) = delete;

  EventPtr Next(std::chrono::milliseconds timeout) override {
    return subscriber_->channel.Next(timeout);
  }
  EventPtr TryNext() override { return subscriber_->channel.TryNext(); }
  bool NotifyWhenReady(std::function<void()> wake) override {
    return subscriber_->channel.NotifyWhenReady(std::move(wake));
  }
  bool Closed() const override { return subscriber_->channel.Closed(); }
  void Stop() override { subscriber_->channel.Close(); }
  bool RequestProgress() override;

 private:
  const std::shared_ptr<Subscriber> subscriber_;
  const std::weak_ptr<KindCache> cache_;
};

// The cache of one kind: its objects, its ring of recent events, its watchers
// and the dispatcher thread that feeds all three from the upstream watch.
class KindCache : public std::enable_shared_from_this<KindCache> {
 public:
  KindCache(Store* below, Kind kind, const CacherOptions& options, bool driven)
      : below_(below),
        kind_(kind),
        options_(options),
        driven_(driven),
        signal_(std::make_shared<Signal>(this)),
        ring_(static_cast<size_t>(options.capacity)) {}
  ~KindCache() { Stop(); }
  KindCache(const KindCache&) = delete;
  KindCache& operator=(const KindCache&) = delete;

  // The first list and watch, then the dispatcher.
  absl::Status Start() {
    auto listed = below_->List(kind_, {});
    if (!listed.ok()) return listed.status();
    auto upstream = below_->Watch(kind_, listed->revision);
    if (!upstream.ok()) return upstream.status();
    Replace(*std::move(listed), *std::move(upstream));
    if (driven_) return absl::OkStatus();
    absl::MutexLock lock(&thread_mu_);
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  // Driven: everything the upstream holds, on the caller's thread.
  int Dispatch() {
    absl::MutexLock lock(&drain_mu_);
    return Drain();
  }

  // Idempotent.
  void Stop() {
    signal_->Detach();
    std::shared_ptr<Watcher> upstream;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      CloseAllLocked();
      upstream = upstream_;
    }
    signal_->Stop();
    if (upstream) upstream->Stop();
    absl::MutexLock lock(&thread_mu_);
    if (thread_.joinable()) thread_.join();
  }

  absl::StatusOr<std::unique_ptr<Watcher>> Watch(int64_t from) {
    if (from < 0) return BadRequestError(absl::StrCat("invalid resourceVersion ", from));
    int64_t seen = 0;
    {
      absl::ReaderMutexLock lock(&mu_);
      if (absl::Status s = ServableLocked(); !s.ok()) return s;
      seen = revision_;
    }
    if (from > seen) {
      // Asked from a revision the cache has not reached (it came from a list of
      // the store below, or another kind moved the revision): fine unless the
      // store has not reached it either.
      const int64_t current = below_->CurrentRevision();
      if (from > current) return TooLargeError(from, current);
    }
    absl::MutexLock lock(&mu_);
    if (absl::Status s = ServableLocked(); !s.ok()) return s;
    if (from == 0) from = revision_;
    const int64_t oldest = OldestLocked();
    if (from < oldest - 1) {
      return ExpiredError(
          absl::StrCat("too old resource version: ", from, " (", oldest - 1, ")"));
    }
    auto subscriber = std::make_shared<Subscriber>(options_.watcher_queue_limit, from);
    // The first kept event after `from`; revisions in the ring never decrease.
    int64_t lo = start_, hi = end_;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (At(mid)->revision > from) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    for (int64_t i = lo; i < end_; ++i) subscriber->channel.PushReplay(At(i));
    // Registered in the same critical section that read the ring: an event
    // the dispatcher appends later reaches the new watcher through the
    // subscriber list it copies with that append, never twice.
    AddSubscriberLocked(subscriber);
    return std::unique_ptr<Watcher>(
        std::make_unique<CachedWatcher>(std::move(subscriber), weak_from_this()));
  }

  // nullopt: the store below answers.
  std::optional<absl::StatusOr<ListResult>> List(const ListOptions& options) {
    if (options.at_revision != 0 || !options.after_name.empty() ||
        options.freshness.rule == Freshness::Rule::kLatest) {
      return std::nullopt;
    }
    absl::StatusOr<bool> readable = Readable(options.freshness);
    if (!readable.ok()) return readable.status();
    if (!*readable) return std::nullopt;
    absl::ReaderMutexLock lock(&mu_);
    if (!ready_) return std::nullopt;
    return ListObjects(objects_, options, revision_);
  }

  std::optional<absl::StatusOr<ObjectPtr>> Get(std::string_view name, const Freshness& freshness) {
    if (freshness.rule == Freshness::Rule::kLatest) return std::nullopt;
    absl::StatusOr<bool> readable = Readable(freshness);
    if (!readable.ok()) return readable.status();
    if (!*readable) return std::nullopt;
    absl::ReaderMutexLock lock(&mu_);
    if (!ready_) return std::nullopt;
    ObjectPtr found = FindObject(objects_, name);
    if (!found) return NotFoundError(InfoFor(kind_).plural, name);
    return found;
  }

  // CachedWatcher::RequestProgress.
  bool RequestProgress(const std::shared_ptr<Subscriber>& subscriber) {
    std::shared_ptr<Watcher> upstream;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || !ready_ || subscriber->channel.Closed()) return false;
      if (progress_supported_) {
        // Listed before asking, so the answer cannot pass the waiter by; only
        // an answer to this request or a later one serves it (an older one
        // may still be on its way, with an older revision).
        upstream_waiters_.push_back(UpstreamWaiter{subscriber, ++progress_asked_});
        upstream = upstream_;
      } else {
        local_waiters_.push_back(subscriber);
      }
    }
    if (upstream && upstream->RequestProgress()) return true;
    if (upstream) {
      absl::MutexLock lock(&mu_);
      local_waiters_.push_back(subscriber);
    }
    signal_->Notify();  // the dispatcher answers at the cache's revision
    return true;
  }

  // Signal::Ring, on the thread that pushed to the upstream watcher: applies
  // what the upstream holds while no API watcher and no progress request waits
  // (the events reach no one but the ring and the objects, so no thread need
  // be woken for them: a wake-up per write was a context switch per renewal).
  // True when done (the upstream is armed again, or the cache is stopping);
  // false when the dispatcher must go on: someone watches or waits for
  // progress, an upstream error needs recovery, the dispatcher is draining
  // (it then drains what is there), or kInlineBatch events were applied.
  // Events leave the upstream in its order and under drain_mu_ only, wherever
  // they are applied, so every watcher sees them in revision order as before.
  bool DrainInline() {
    if (driven_ || !drain_mu_.TryLock()) return false;
    const bool done = DrainInlineLocked();
    drain_mu_.Unlock();
    return done;
  }

 private:
  // --- reads

  absl::Status ServableLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    if (stopping_) return ServiceUnavailableError("the server is shutting down");
    if (!ready_) return TooManyRequestsError("storage is (re)initializing", 1);
    return absl::OkStatus();
  }

  // Whether the cache may answer a read with this freshness: false when the
  // store below should (cache not ready; behind N and unable to learn that it
  // is current); TimeoutError(rv_too_large) when N lies in the future.
  absl::StatusOr<bool> Readable(const Freshness& freshness) {
    const int64_t min =
        freshness.rule == Freshness::Rule::kNotOlderThan ? freshness.min_revision : 0;
    std::shared_ptr<Watcher> upstream;
    {
      absl::MutexLock lock(&mu_);
      if (!ready_ || stopping_) return false;
      if (revision_ >= min) return true;
      if (progress_supported_) {
        upstream = upstream_;
        ++progress_asked_;
      }
    }
    const int64_t current = below_->CurrentRevision();
    if (min > current) return TooLargeError(min, current);
    // The cache may be current already, with the revision moved by other
    // kinds: a progress bookmark tells. Without one the store answers.
    if (!upstream || !upstream->RequestProgress()) return false;
    if (driven_) Dispatch();  // no dispatcher would bring the bookmark
    absl::MutexLock lock(&mu_);
    auto fresh_or_gone = [this, min] {
      mu_.AssertReaderHeld();  // Await runs it under mu_
      return revision_ >= min || !ready_ || stopping_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&fresh_or_gone), kBlockTimeout);
    return ready_ && !stopping_ && revision_ >= min;
  }

  // Events one Ring applies at most before it hands over to the dispatcher:
  // a writer does not go on draining what other writers push.
  static constexpr int kInlineBatch = 64;

  bool DrainInlineLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(drain_mu_) {
    if (pending_) return false;
    for (int applied = 0; applied < kInlineBatch;) {
      if (signal_->stopped()) return true;
      std::shared_ptr<Watcher> upstream;
      {
        absl::ReaderMutexLock lock(&mu_);
        if (!subscribers_->empty() || !local_waiters_.empty()) return false;
        upstream = upstream_;
      }
      EventPtr event = upstream->TryNext();
      if (!event) {
        if (upstream->NotifyWhenReady(WakeUp())) return true;
        continue;
      }
      if (event->type == EventType::kError) {
        pending_ = std::move(event);  // Recover may wait and retry: the dispatcher's
        return false;
      }
      Handle(event);
      ++applied;
    }
    return false;
  }

  // --- the dispatcher

  void Run() {
    while (!signal_->stopped()) {
      {
        absl::MutexLock lock(&drain_mu_);
        Drain();
      }
      signal_->Wait();
    }
  }

  // Until the upstream is armed (its next event rings) or the cache stops;
  // driven, also when a lost upstream could not be resumed (pending_ holds
  // its error for the next Dispatch). Returns the events applied.
  int Drain() ABSL_EXCLUSIVE_LOCKS_REQUIRED(drain_mu_) {
    int applied = 0;
    if (pending_) Handle(std::exchange(pending_, nullptr));
    while (!signal_->stopped() && !pending_) {
      std::shared_ptr<Watcher> upstream = Upstream();
      if (EventPtr event = upstream->TryNext()) {
        applied += event->type == EventType::kAdded || event->type == EventType::kModified ||
                   event->type == EventType::kDeleted;
        Handle(event);
        continue;
      }
      Progress(0, /*from_upstream=*/false);
      // Armed: the upstream's next event rings. Not armed: one is there.
      if (upstream->NotifyWhenReady(WakeUp())) break;
    }
    return applied;
  }

  std::function<void()> WakeUp() const {
    return [signal = signal_] { signal->Ring(); };
  }

  void Handle(const EventPtr& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(drain_mu_) {
    switch (event->type) {
      case EventType::kError:
        Recover(event);
        break;
      case EventType::kBookmark:
        Progress(event->revision, /*from_upstream=*/true);
        break;
      default:
        Apply(event);
        break;
    }
  }

  std::shared_ptr<Watcher> Upstream() {
    absl::ReaderMutexLock lock(&mu_);
    return upstream_;
  }

  void Apply(const EventPtr& event) {
    std::shared_ptr<const Subscribers> subscribers;
    {
      absl::MutexLock lock(&mu_);
      if (event->type == EventType::kDeleted) {
        objects_.erase(std::string_view(event->object->metadata.name));
      } else {
        UpsertObject(objects_, event->object);
      }
      if (end_ - start_ == options_.capacity) DropOldestLocked();
      At(end_) = event;
      ++end_;
      ring_bytes_ += static_cast<int64_t>(ApproximateBytes(*event->object));
      while (options_.capacity_bytes > 0 && ring_bytes_ > options_.capacity_bytes &&
             end_ - start_ > 1) {
        DropOldestLocked();
      }
      revision_ = std::max(revision_, event->revision);
      subscribers = subscribers_;
    }
    // Outside every lock: the store's writers and the cache's readers go on
    // while the event reaches each watcher.
    bool gone = false;
    for (const auto& s : *subscribers) gone |= !s->Deliver(event);
    if (gone) SweepClosed();
  }

  // Answers waiting progress requests: those that asked the upstream when the
  // answer to their request arrives (`revision`, the upstream's bookmarks come
  // in the order they were asked for), the others whenever the dispatcher is
  // idle (every event before has been delivered, so the cache's revision is a
  // bookmark every watcher may resume from).
  void Progress(int64_t revision, bool from_upstream) {
    std::vector<std::weak_ptr<Subscriber>> waiters;
    int64_t at = 0;
    {
      absl::MutexLock lock(&mu_);
      if (from_upstream) {
        revision_ = std::max(revision_, revision);
        ++progress_answered_;
        auto answered = [this](const UpstreamWaiter& w) {
          mu_.AssertHeld();
          return w.request <= progress_answered_;
        };
        for (const auto& w : upstream_waiters_) {
          if (answered(w)) waiters.push_back(w.subscriber);
        }
        upstream_waiters_.erase(
            std::remove_if(upstream_waiters_.begin(), upstream_waiters_.end(), answered),
            upstream_waiters_.end());
      }
      if (local_waiters_.empty() && waiters.empty()) return;
      waiters.insert(waiters.end(), local_waiters_.begin(), local_waiters_.end());
      local_waiters_.clear();
      at = revision_;
    }
    for (const auto& weak : waiters) {
      if (auto s = weak.lock()) s->channel.Push(BookmarkEvent(kind_, std::max(at, s->after)));
    }
  }

  // The upstream watch ended (`error`): resume it from the cache's revision,
  // or, when the store below no longer reaches back that far, list again.
  // Driven: one attempt; a failed one leaves `error` pending for the next
  // Dispatch.
  void Recover(const EventPtr& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(drain_mu_) {
    absl::Duration retry = kRetryFirst;
    while (!signal_->stopped()) {
      int64_t from = 0;
      {
        absl::ReaderMutexLock lock(&mu_);
        from = revision_;
      }
      auto upstream = below_->Watch(kind_, from);
      if (upstream.ok()) {
        Install(*std::move(upstream));
        return;
      }
      if (absl::IsOutOfRange(upstream.status()) && Relist()) return;
      if (driven_) {
        pending_ = error;
        return;
      }
      if (!signal_->Sleep(retry)) return;
      retry = std::min(retry * 2, kRetryMax);
    }
  }

  // The reflector's relist: every watcher is closed (its client lists again),
  // the ring starts over at the new list's revision.
  bool Relist() {
    {
      absl::MutexLock lock(&mu_);
      ready_ = false;
      CloseAllLocked();
    }
    auto listed = below_->List(kind_, {});
    if (!listed.ok()) return false;
    auto upstream = below_->Watch(kind_, listed->revision);
    if (!upstream.ok()) return false;
    Replace(*std::move(listed), *std::move(upstream));
    return true;
  }

  void Replace(ListResult listed, std::unique_ptr<Watcher> upstream) {
    {
      absl::MutexLock lock(&mu_);
      objects_.clear();
      for (auto& item : listed.items) objects_.insert(objects_.end(), std::move(item));
      for (int64_t i = start_; i < end_; ++i) At(i) = nullptr;
      start_ = end_;
      ring_bytes_ = 0;
      removed_since_list_ = false;
      list_revision_ = listed.revision;
      revision_ = listed.revision;
      ready_ = !stopping_;
    }
    Install(std::move(upstream));
  }

  void Install(std::unique_ptr<Watcher> watcher) {
    std::shared_ptr<Watcher> upstream(std::move(watcher));
    std::shared_ptr<Watcher> previous;
    {
      absl::MutexLock lock(&mu_);
      previous = std::move(upstream_);
      upstream_ = upstream;
      // Requests sent on the old stream get no answer there.
      for (const auto& w : upstream_waiters_) local_waiters_.push_back(w.subscriber);
      upstream_waiters_.clear();
      // Asking once tells whether the stream can answer (the answer itself
      // is harmless); the etcd3 store's cannot.
      progress_supported_ = true;
      progress_asked_ = 1;
      progress_answered_ = 0;
      if (stopping_) upstream->Stop();
    }
    const bool supported = upstream->RequestProgress();
    {
      absl::MutexLock lock(&mu_);
      if (!supported && upstream_ == upstream) {
        progress_supported_ = false;
        for (const auto& w : upstream_waiters_) local_waiters_.push_back(w.subscriber);
        upstream_waiters_.clear();
      }
    }
    signal_->Notify();
    // Outside the lock: an etcd3 watcher joins its stream thread.
    previous.reset();
  }

  // --- watchers and the ring

  EventPtr& At(int64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ring_[static_cast<size_t>(index % options_.capacity)];
  }

  // The oldest revision a watch can be served events after, + 1
  // (watchCache.getAllEventsSinceLocked's `oldest`).
  int64_t OldestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!removed_since_list_ || start_ == end_) return list_revision_ + 1;
    return At(start_)->revision;
  }

  void AddSubscriberLocked(std::shared_ptr<Subscriber> subscriber)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Copy on write: the dispatcher delivers to the list it copied, without the
    // lock. Stopped watchers leave here too, once the list has doubled since
    // the last sweep (amortized O(1) per watch).
    const bool sweep = subscribers_->size() >= 2 * live_after_sweep_ + 64;
    auto next = std::make_shared<Subscribers>();
    next->reserve(subscribers_->size() + 1);
    for (const auto& s : *subscribers_) {
      if (!sweep || !s->channel.Closed()) next->push_back(s);
    }
    next->push_back(std::move(subscriber));
    if (sweep) live_after_sweep_ = next->size();
    subscribers_ = std::move(next);
  }

  void SweepClosed() {
    absl::MutexLock lock(&mu_);
    auto next = std::make_shared<Subscribers>();
    for (const auto& s : *subscribers_) {
      if (!s->channel.Closed()) next->push_back(s);
    }
    live_after_sweep_ = next->size();
    subscribers_ = std::move(next);
  }

  void CloseAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& s : *subscribers_) s->channel.Close();
    subscribers_ = std::make_shared<Subscribers>();
    live_after_sweep_ = 0;
    upstream_waiters_.clear();
    local_waiters_.clear();
  }

  Store* const below_;
  const Kind kind_;
  const CacherOptions options_;
  const bool driven_;
  const std::shared_ptr<Signal> signal_;

  absl::Mutex thread_mu_;
  std::thread thread_ ABSL_GUARDED_BY(thread_mu_);

  // Held by whoever takes events from the upstream watcher and applies them
  // (the dispatcher, or a Ring inline): one at a time, in the upstream's order.
  // Taken before mu_.
  absl::Mutex drain_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // An upstream error a Ring took and left to the dispatcher.
  EventPtr pending_ ABSL_GUARDED_BY(drain_mu_);

  mutable absl::Mutex mu_;
  ObjectSet objects_ ABSL_GUARDED_BY(mu_);
  void DropOldestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ring_bytes_ -= static_cast<int64_t>(ApproximateBytes(*At(start_)->object));
    At(start_) = nullptr;
    ++start_;
    removed_since_list_ = true;
  }

  // The ring: events [start_, end_) sit at index % capacity.
  std::vector<EventPtr> ring_ ABSL_GUARDED_BY(mu_);
  int64_t start_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t ring_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // ApproximateBytes of the ring's objects
  int64_t end_ ABSL_GUARDED_BY(mu_) = 0;
  bool removed_since_list_ ABSL_GUARDED_BY(mu_) = false;
  int64_t list_revision_ ABSL_GUARDED_BY(mu_) = 0;
  // The revision the cache reflects: its last event, list or upstream bookmark.
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<Watcher> upstream_ ABSL_GUARDED_BY(mu_);
  bool progress_supported_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const Subscribers> subscribers_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<Subscribers>();
  size_t live_after_sweep_ ABSL_GUARDED_BY(mu_) = 0;
  // Progress requests sent upstream, and answers received, since Install.
  int64_t progress_asked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t progress_answered_ ABSL_GUARDED_BY(mu_) = 0;
  struct UpstreamWaiter {
    std::weak_ptr<Subscriber> subscriber;
    int64_t request = 0;  // served by the answer to this request or a later one
  };
  std::vector<UpstreamWaiter> upstream_waiters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<Subscriber>> local_waiters_ ABSL_GUARDED_BY(mu_);
};

void Signal::Ring() {
  {
    absl::ReaderMutexLock lock(&link_mu_);
    if (cache_ != nullptr && cache_->DrainInline()) return;
  }
  Notify();
}

bool CachedWatcher::RequestProgress() {
  auto cache = cache_.lock();
  return cache && cache->RequestProgress(subscriber_);
}

class Cacher final : public DrivenCacher {
 public:
  Cacher(std::unique_ptr<Store> below, const CacherOptions& options, bool driven)
      : below_(std::move(below)), options_(options), driven_(driven) {}
  ~Cacher() override { Shutdown(); }
  Cacher(const Cacher&) = delete;
  Cacher& operator=(const Cacher&) = delete;

  absl::Status Start() {
    for (Kind kind : KnownKinds()) {
      auto cache = std::make_shared<KindCache>(below_.get(), kind, options_, driven_);
      if (absl::Status s = cache->Start(); !s.ok()) return s;
      caches_[Index(kind)] = std::move(cache);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ObjectPtr> Get(Kind kind, std::string_view name) override {
    return below_->Get(kind, name);
  }

  absl::StatusOr<std::vector<ObjectPtr>> GetAll(std::span<const ObjectKey> keys) override {
    return below_->GetAll(keys);
  }

  absl::StatusOr<ObjectPtr> GetWithFreshness(Kind kind, std::string_view name,
                                             const Freshness& freshness) override {
    if (KindCache* cache = Cache(kind)) {
      if (auto cached = cache->Get(name, freshness)) return *std::move(cached);
    }
    return below_->Get(kind, name);
  }

  absl::StatusOr<ListResult> List(Kind kind, const ListOptions& options) override {
    if (KindCache* cache = Cache(kind)) {
      if (auto cached = cache->List(options)) return *std::move(cached);
    }
    return below_->List(kind, options);
  }

  absl::StatusOr<WriteResult> Update(Kind kind, std::string_view name, const UpdateFn& fn,
                                     bool dry_run) override {
    return below_->Update(kind, name, fn, dry_run);
  }

  absl::StatusOr<std::unique_ptr<Watcher>> Watch(Kind kind, int64_t from_revision) override {
    if (KindCache* cache = Cache(kind)) return cache->Watch(from_revision);
    return below_->Watch(kind, from_revision);
  }

  int64_t CurrentRevision() override { return below_->CurrentRevision(); }
  int64_t OldestWatchableRevision() override { return below_->OldestWatchableRevision(); }

  int Dispatch() override {
    int applied = 0;
    for (auto& cache : caches_) {
      if (cache) applied += cache->Dispatch();
    }
    return applied;
  }

  void Shutdown() override {
    for (auto& cache : caches_) {
      if (cache) cache->Stop();
    }
    below_->Shutdown();
  }

 private:
  static size_t Index(Kind kind) { return static_cast<size_t>(kind); }
  // nullptr for a kind registered after Start: the store below serves it.
  KindCache* Cache(Kind kind) { return caches_[Index(kind)].get(); }

  const std::unique_ptr<Store> below_;
  const CacherOptions options_;
  const bool driven_;
  // Set by Start, before the cacher is shared; never changed after.
  std::shared_ptr<KindCache> caches_[kMaxKinds];
};

}  // namespace

namespace {

absl::StatusOr<std::unique_ptr<Cacher>> StartCacher(std::unique_ptr<Store> below,
                                                    const CacherOptions& options, bool driven) {
  if (options.capacity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the watch cache capacity must be at least 1, got ", options.capacity));
  }
  auto cacher = std::make_unique<Cacher>(std::move(below), options, driven);
  if (absl::Status s = cacher->Start(); !s.ok()) return s;
  return cacher;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> NewCacher(std::unique_ptr<Store> below,
                                                 const CacherOptions& options) {
  absl::StatusOr<std::unique_ptr<Cacher>> cacher =
      StartCacher(std::move(below), options, /*driven=*/false);
  if (!cacher.ok()) return cacher.status();
  return std::unique_ptr<Store>(*std::move(cacher));
}

absl::StatusOr<std::unique_ptr<DrivenCacher>> NewDrivenCacher(std::unique_ptr<Store> below,
                                                             const CacherOptions& options) {
  absl::StatusOr<std::unique_ptr<Cacher>> cacher =
      StartCacher(std::move(below), options, /*driven=*/true);
  if (!cacher.ok()) return cacher.status();
  return std::unique_ptr<DrivenCacher>(*std::move(cacher));
}

}  // namespace poolcoord::store
