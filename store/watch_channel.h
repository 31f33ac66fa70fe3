// The bounded event queue between a store and one watcher, shared by the memory
// and etcd3 stores.
//
// A watcher that falls `limit` events behind is closed rather than buffered
// without bound (the consumer then gets one kError event with no object and
// re-lists, as kube-apiserver's watch cache drops slow watchers). Thread-safe:
// the store pushes from its writer threads, the watch handler pops from its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace poolcoord::store {

class WatchChannel {
 public:
  explicit WatchChannel(size_t limit) : limit_(limit) {}

  // A live event. Returns false once the channel is closed, also when this push
  // found it full (the consumer fell behind): the store then forgets it.
  bool Push(EventPtr event) {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    if (queue_.size() >= limit_) {
      CloseLocked();
      return false;
    }
    queue_.push_back(std::move(event));
    return true;
  }

  // Replayed history at registration: already bounded by the history size.
  void PushReplay(EventPtr event) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(event));
  }

  void Close() {
    absl::MutexLock lock(&mu_);
    CloseLocked();
  }

  bool Closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

  // The next event, waiting up to `timeout`; nullptr on timeout. Once closed:
  // one kError event (no object), then nullptr.
  EventPtr Next(std::chrono::milliseconds timeout) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &WatchChannel::Ready), absl::FromChrono(timeout));
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

 private:
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || closed_; }
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    closed_ = true;
    // Undelivered events are useless once the stream breaks: the client re-lists.
    queue_.clear();
  }

  const size_t limit_;
  mutable absl::Mutex mu_;
  std::deque<EventPtr> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool error_delivered_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace poolcoord::store
