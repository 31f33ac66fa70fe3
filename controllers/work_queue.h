// The queue a controller's workers take keys from, with client-go's workqueue
// semantics (k8s.io/client-go/util/workqueue: the rate-limiting, delaying
// queue), ordered by when each key is due:
// - a key is queued at most once: adding a queued key again keeps the earlier
//   due time and the more urgent priority;
// - a key is never handed to two workers at once: a key added while a worker
//   holds it is queued again when that worker calls Done (client-go's dirty
//   set), at the due time it was added with;
// - keys whose due time has come ("ready") come out by priority (0 first), then
//   by due time, the longest overdue first: a queue that falls behind serves
//   the oldest work first instead of client-go's first-in-first-out, and work
//   of a lower priority waits while work of a higher one is ready;
// - AddRateLimited queues a key after a per-key exponential backoff
//   (client-go's ItemExponentialFailureRateLimiter: base × 2^failures up to
//   max), Forget resets the key's failures.
// Due times are on the clock's monotonic time, in microseconds. The queued keys
// of each priority sit in an ordered set by due time: adding, taking and
// finding the next due key cost O(log n), with no scan of the waiting keys.
//
// Thread-safety: every method may be called from any thread. Get() blocks on
// real time (use it with a RealClock); TryGet() never blocks, for drivers that
// move a FakeClock themselves.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"

namespace poolcoord::controllers {

struct WorkQueueOptions {
  int64_t base_backoff_us = 100'000;   // the first retry of a failed key
  int64_t max_backoff_us = 5'000'000;  // the longest wait before a retry
};

class WorkQueue {
 public:
  static constexpr int kPriorities = 2;  // 0 (most urgent) .. kPriorities - 1
  static constexpr int64_t kNever = INT64_MAX;

  struct Item {
    std::string key;
    int priority = 0;
    int64_t due_us = 0;  // when it became due (the lateness is now - due_us)
  };

  // `clock` is not owned and must outlive the queue.
  explicit WorkQueue(const base::Clock* clock, WorkQueueOptions options = {});
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key`, due at `due_us` (Add: now). Out-of-range priorities are clamped.
  void AddAt(const std::string& key, int64_t due_us, int priority = 0);
  void Add(const std::string& key, int priority = 0);
  // AddAt only when `key` is neither queued nor held by a worker; true when added.
  bool AddIfAbsent(const std::string& key, int64_t due_us, int priority = 0);
  // Queues `key` after its backoff, counting one more failure.
  void AddRateLimited(const std::string& key, int priority = 0);
  // Resets the failures of `key` (its next AddRateLimited waits the base backoff).
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

  // Blocks until a key is ready, then hands it over (the caller must call Done);
  // nullopt once ShutDown was called.
  std::optional<Item> Get();
  // The next ready key now, or nullopt when none is ready (never blocks).
  std::optional<Item> TryGet();
  // The worker is done with `key`; queues it again when it was added meanwhile.
  void Done(const std::string& key);
  // Wakes every Get (they return nullopt) and refuses nothing else.
  void ShutDown();
  bool ShuttingDown() const;

  // The earliest due time among queued keys (kNever when none).
  int64_t NextDue() const;
  // How long (µs) the most overdue queued key of `priority` has been due, 0
  // when none is due: how far the workers are behind.
  int64_t Lag(int priority = 0) const;
  // Keys queued (not held by a worker), and held by workers.
  size_t Len() const;
  size_t Processing() const;
  // Whether `key` is queued or held.
  bool Contains(const std::string& key) const;

 private:
  enum class State { kQueued, kProcessing, kProcessingDirty };
  struct Entry {
    State state = State::kQueued;
    int priority = 0;
    int64_t due_us = 0;
  };
  using Waiting = std::set<std::pair<int64_t, std::string>>;

  void AddLocked(const std::string& key, int64_t due_us, int priority)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<Item> TakeReadyLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t NextDueLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const base::Clock* const clock_;
  const WorkQueueOptions options_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::array<Waiting, kPriorities> waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
  size_t processing_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace poolcoord::controllers
