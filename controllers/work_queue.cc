#include "controllers/work_queue.h"

#include <algorithm>

namespace poolcoord::controllers {

WorkQueue::WorkQueue(const base::Clock* clock, WorkQueueOptions options)
    : clock_(clock), options_(options) {}

void WorkQueue::AddLocked(const std::string& key, int64_t due_us, int priority) {
  priority = std::clamp(priority, 0, kPriorities - 1);
  auto [it, inserted] = entries_.try_emplace(key, Entry{State::kQueued, priority, due_us});
  Entry& e = it->second;
  if (inserted) {
    waiting_[priority].emplace(due_us, key);
    changed_.Signal();
    return;
  }
  const int64_t due = std::min(e.due_us, due_us);
  const int prio = std::min(e.priority, priority);
  if (e.state == State::kProcessing) {
    e = Entry{State::kProcessingDirty, priority, due_us};
    return;
  }
  if (e.state == State::kProcessingDirty || (due == e.due_us && prio == e.priority)) {
    e.due_us = due;
    e.priority = prio;
    return;
  }
  waiting_[e.priority].erase({e.due_us, key});
  e.due_us = due;
  e.priority = prio;
  waiting_[prio].emplace(due, key);
  changed_.Signal();
}

void WorkQueue::AddAt(const std::string& key, int64_t due_us, int priority) {
  absl::MutexLock l(&mu_);
  AddLocked(key, due_us, priority);
}

void WorkQueue::Add(const std::string& key, int priority) {
  AddAt(key, clock_->MonotonicMicros(), priority);
}

bool WorkQueue::AddIfAbsent(const std::string& key, int64_t due_us, int priority) {
  absl::MutexLock l(&mu_);
  if (entries_.contains(key)) return false;
  AddLocked(key, due_us, priority);
  return true;
}

void WorkQueue::AddRateLimited(const std::string& key, int priority) {
  absl::MutexLock l(&mu_);
  const int failures = failures_[key]++;
  int64_t backoff = options_.base_backoff_us;
  for (int i = 0; i < failures && backoff < options_.max_backoff_us; ++i) backoff *= 2;
  AddLocked(key, clock_->MonotonicMicros() + std::min(backoff, options_.max_backoff_us), priority);
}

void WorkQueue::Forget(const std::string& key) {
  absl::MutexLock l(&mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) const {
  absl::MutexLock l(&mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<WorkQueue::Item> WorkQueue::TakeReadyLocked(int64_t now) {
  for (int p = 0; p < kPriorities; ++p) {
    Waiting& w = waiting_[p];
    if (w.empty() || w.begin()->first > now) continue;
    auto node = w.extract(w.begin());
    Entry& e = entries_.at(node.value().second);
    e.state = State::kProcessing;
    ++processing_;
    return Item{std::move(node.value().second), p, node.value().first};
  }
  return std::nullopt;
}

int64_t WorkQueue::NextDueLocked() const {
  int64_t next = kNever;
  for (const Waiting& w : waiting_) {
    if (!w.empty()) next = std::min(next, w.begin()->first);
  }
  return next;
}

std::optional<WorkQueue::Item> WorkQueue::Get() {
  absl::MutexLock l(&mu_);
  while (!shutting_down_) {
    const int64_t now = clock_->MonotonicMicros();
    if (std::optional<Item> item = TakeReadyLocked(now)) return item;
    const int64_t next = NextDueLocked();
    if (next == kNever) {
      changed_.Wait(&mu_);
    } else {
      changed_.WaitWithTimeout(&mu_, absl::Microseconds(next - now));
    }
  }
  return std::nullopt;
}

std::optional<WorkQueue::Item> WorkQueue::TryGet() {
  absl::MutexLock l(&mu_);
  if (shutting_down_) return std::nullopt;
  return TakeReadyLocked(clock_->MonotonicMicros());
}

void WorkQueue::Done(const std::string& key) {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.state == State::kQueued) return;
  --processing_;
  if (it->second.state == State::kProcessing) {
    entries_.erase(it);
    return;
  }
  it->second.state = State::kQueued;
  waiting_[it->second.priority].emplace(it->second.due_us, key);
  changed_.Signal();
}

void WorkQueue::ShutDown() {
  absl::MutexLock l(&mu_);
  shutting_down_ = true;
  changed_.SignalAll();
}

bool WorkQueue::ShuttingDown() const {
  absl::MutexLock l(&mu_);
  return shutting_down_;
}

int64_t WorkQueue::NextDue() const {
  absl::MutexLock l(&mu_);
  return NextDueLocked();
}

int64_t WorkQueue::Lag(int priority) const {
  absl::MutexLock l(&mu_);
  const Waiting& w = waiting_[std::clamp(priority, 0, kPriorities - 1)];
  if (w.empty()) return 0;
  return std::max<int64_t>(0, clock_->MonotonicMicros() - w.begin()->first);
}

size_t WorkQueue::Len() const {
  absl::MutexLock l(&mu_);
  return entries_.size() - processing_;
}

size_t WorkQueue::Processing() const {
  absl::MutexLock l(&mu_);
  return processing_;
}

bool WorkQueue::Contains(const std::string& key) const {
  absl::MutexLock l(&mu_);
  return entries_.contains(key);
}

}  // namespace poolcoord::controllers
