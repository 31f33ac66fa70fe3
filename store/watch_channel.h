// The bounded event queue between a store and one watcher, shared by the memory
// and etcd3 stores and the watch cache.
//
// A watcher that falls `limit` events behind is closed rather than buffered
// without bound (the consumer then gets one kError event with no object and
// re-lists, as kube-apiserver's watch cache drops slow watchers). Thread-safe:
// the store pushes from its writer threads; the consumer pops, blocking (Next)
// or armed for a wake-up call (TryNext + NotifyWhenReady).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace poolcoord::store {

// The kBookmark event of Watcher::RequestProgress: an object of `kind` with only
// metadata.resourceVersion, at `revision`.
inline EventPtr BookmarkEvent(Kind kind, int64_t revision) {
  auto marker = std::make_shared<Object>();
  marker->kind = kind;
  marker->metadata.resource_version = revision;
  auto event = std::make_shared<Event>();
  event->type = EventType::kBookmark;
  event->object = std::move(marker);
  event->revision = revision;
  return event;
}

class WatchChannel {
 public:
  explicit WatchChannel(size_t limit) : limit_(limit) {}

  // A live event. Returns false once the channel is closed, also when this push
  // found it full (the consumer fell behind): the store then forgets it.
  bool Push(EventPtr event) {
    std::function<void()> wake;
    const bool pushed = Push(std::move(event), &wake);
    if (wake) wake();  // outside our lock: it may post to an executor
    return pushed;
  }

  // As Push, but the consumer's wake-up (if one was armed) is handed to the
  // caller in `*wake` instead of run, so that a store can run it after its own
  // lock is released (a wake-up is a futex call or a post to an executor: the
  // next writer should not wait behind it).
  bool Push(EventPtr event, std::function<void()>* wake) {
    bool pushed = false;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return false;
      if (queue_.size() >= limit_) {
        CloseLocked();
      } else {
        queue_.push_back(std::move(event));
        pushed = true;
      }
      *wake = std::move(wake_);
      wake_ = nullptr;
    }
    return pushed;
  }

  // Replayed history at registration: already bounded by the history size.
  void PushReplay(EventPtr event) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(event));
  }

  void Close() {
    std::function<void()> wake;
    {
      absl::MutexLock lock(&mu_);
      CloseLocked();
      wake = std::move(wake_);
      wake_ = nullptr;
    }
    if (wake) wake();
  }

  bool Closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

  // The next event, waiting up to `timeout`; nullptr on timeout. Once closed:
  // one kError event (no object), then nullptr.
  EventPtr Next(std::chrono::milliseconds timeout) {
    absl::MutexLock lock(&mu_);
    waiting_in_next_.fetch_add(1, std::memory_order_relaxed);
    mu_.AwaitWithTimeout(absl::Condition(this, &WatchChannel::Ready), absl::FromChrono(timeout));
    waiting_in_next_.fetch_sub(1, std::memory_order_relaxed);
    return PopLocked();
  }

  // How many threads of this process are in Next of any channel: counted from
  // before the wait, under the channel's lock, so a push or close that comes
  // once a thread is counted finds it waiting (or its channel ready). What a
  // test waits for before it acts on a blocked Next.
  static int WaitingInNext() { return waiting_in_next_.load(std::memory_order_relaxed); }

  // Next without waiting.
  EventPtr TryNext() {
    absl::MutexLock lock(&mu_);
    return PopLocked();
  }

  // `wake` runs once, on the pushing (or closing) thread, when TryNext has
  // something; false (wake dropped) when it has something already.
  bool NotifyWhenReady(std::function<void()> wake) {
    absl::MutexLock lock(&mu_);
    if (!queue_.empty() || (closed_ && !error_delivered_)) return false;
    wake_ = std::move(wake);
    return true;
  }

 private:
  EventPtr PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!queue_.empty()) {
      EventPtr event = std::move(queue_.front());
      queue_.pop_front();
      return event;
    }
    if (closed_ && !error_delivered_) {
      error_delivered_ = true;
      auto error = std::make_shared<Event>();
      error->type = EventType::kError;
      return error;
    }
    return nullptr;
  }

  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || closed_; }
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    closed_ = true;
    // Undelivered events are useless once the stream breaks: the client re-lists.
    queue_.clear();
  }

  static inline std::atomic<int> waiting_in_next_{0};
  const size_t limit_;
  mutable absl::Mutex mu_;
  std::deque<EventPtr> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool error_delivered_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::store
