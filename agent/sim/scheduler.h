// The deterministic simulation's one scheduler, clock and source of chance
// (FoundationDB's way: one process, no threads, no wall clock, no sockets).
//
// Time is simulated: a base::FakeClock that only the scheduler moves, to the
// due time of each event it runs, in microseconds. Events due at the same
// microsecond run in an order drawn from the seed. Every random choice of a
// run comes from the scheduler's Rng or from streams split off it, so the
// same seed replays the same run, event for event.
//
// Thread-safety: none; one thread drives everything.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "base/clock.h"

namespace poolcoord::sim {

// splitmix64: small, fast, and the same numbers on every platform (the
// standard library's distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // [lo, hi], both inclusive.
  int64_t UniformInt(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Chance(double p) { return p > 0 && Uniform() < p; }
  // An independent stream for one purpose (its draws do not shift the
  // others'): the same parent seed and `stream` give the same stream.
  Rng Split(uint64_t stream) const { return Rng(Rng(state_ ^ (stream * 0xd1b54a32d192ed03ULL)).Next()); }
  void Fill(unsigned char* bytes, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
      uint64_t v = Next();
      for (size_t j = i; j < n && j < i + 8; ++j, v >>= 8) bytes[j] = static_cast<unsigned char>(v);
    }
  }

 private:
  uint64_t state_;
};

class Scheduler {
 public:
  // The simulated clock starts at `start_wall_us` (wall) and a monotonic time
  // of 1,000 s (clear of 0, which some components read as "never").
  Scheduler(uint64_t seed, int64_t start_wall_us);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The true time, as the server and the modelled cloud read it.
  const base::FakeClock* clock() const { return &clock_; }
  // Monotonic µs now.
  int64_t now() const { return clock_.MonotonicMicros(); }
  int64_t start() const { return start_; }

  // Runs `fn` at monotonic `at` (now when earlier).
  void At(int64_t at, std::function<void()> fn);
  void After(int64_t delay_us, std::function<void()> fn) { At(now() + delay_us, std::move(fn)); }
  // Runs every event due before `until`, in order, then moves the clock to
  // `until`. Events that events schedule run too when due in time.
  void RunUntil(int64_t until);

  Rng& rng() { return rng_; }
  int64_t events_run() const { return events_run_; }

 private:
  struct Event {
    int64_t at;
    uint64_t tiebreak;  // drawn from the seed: the order of same-time events
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const {
      if (at != o.at) return at > o.at;
      if (tiebreak != o.tiebreak) return tiebreak > o.tiebreak;
      return seq > o.seq;
    }
  };
  base::FakeClock clock_;
  int64_t start_;
  Rng rng_;
  Rng order_;
  uint64_t seq_ = 0;
  int64_t events_run_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
};

// A node's clock over the simulated time: the true wall clock plus its skew
// and every step it took (a jump); monotonic time is the true one, as a
// machine's steady clock does not jump.
class NodeClock : public base::Clock {
 public:
  NodeClock(const base::Clock* truth, int64_t offset_us) : truth_(truth), offset_us_(offset_us) {}
  int64_t NowMicros() const override { return truth_->NowMicros() + offset_us_; }
  int64_t MonotonicMicros() const override { return truth_->MonotonicMicros(); }
  void Step(int64_t delta_us) { offset_us_ += delta_us; }
  int64_t offset_us() const { return offset_us_; }

 private:
  const base::Clock* const truth_;
  int64_t offset_us_;
};

}  // namespace poolcoord::sim
