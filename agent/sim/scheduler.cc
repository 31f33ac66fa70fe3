#include "agent/sim/scheduler.h"

#include <chrono>

namespace poolcoord::sim {

namespace {
constexpr int64_t kMonotonicStart = 1'000'000'000;  // 1,000 s
}  // namespace

Scheduler::Scheduler(uint64_t seed, int64_t start_wall_us)
    : clock_(start_wall_us - kMonotonicStart), start_(kMonotonicStart), rng_(seed), order_(Rng(seed).Split(1)) {
  clock_.Advance(std::chrono::microseconds(kMonotonicStart));
}

void Scheduler::At(int64_t at, std::function<void()> fn) {
  queue_.push(Event{std::max(at, now()), order_.Next(), seq_++, std::move(fn)});
}

void Scheduler::RunUntil(int64_t until) {
  while (!queue_.empty() && queue_.top().at < until) {
    // top() is const; the event leaves the queue at once, so moving it out is safe.
    Event e = std::move(const_cast<Event&>(queue_.top()));
    queue_.pop();
    if (e.at > now()) clock_.Advance(std::chrono::microseconds(e.at - now()));
    ++events_run_;
    e.fn();
  }
  if (until > now()) clock_.Advance(std::chrono::microseconds(until - now()));
}

}  // namespace poolcoord::sim
