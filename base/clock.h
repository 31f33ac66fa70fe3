// Time sources for the rules, so tests can move time (Envoy's TimeSource idea).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace poolcoord::base {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch (wall clock; for timestamps shown to people).
  virtual int64_t NowMicros() const = 0;
  // Microseconds on a monotonic clock with an arbitrary origin (for expiry).
  virtual int64_t MonotonicMicros() const = 0;
};

class RealClock : public Clock {
 public:
  int64_t NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t MonotonicMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static const RealClock* Get() {
    static const RealClock clock;
    return &clock;
  }
};

// A clock that moves only when told; wall and monotonic move together.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t wall_us = 1'767'225'600'000'000 /* 2026-01-01 */)
      : wall_us_(wall_us) {}
  int64_t NowMicros() const override { return wall_us_.load() + offset_us_.load(); }
  int64_t MonotonicMicros() const override { return offset_us_.load(); }
  void Advance(std::chrono::microseconds d) { offset_us_ += d.count(); }
  // Moves only the wall clock (a clock step), not the monotonic one.
  void StepWall(std::chrono::microseconds d) { wall_us_ += d.count(); }

 private:
  std::atomic<int64_t> wall_us_;
  std::atomic<int64_t> offset_us_{0};
};

}  // namespace poolcoord::base
