#include "base/token_bucket.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace poolcoord::base {

TokenBucket::TokenBucket(double qps, int burst, const Clock* clock)
    : qps_(qps),
      burst_(std::max(burst, 1)),
      clock_(clock != nullptr ? clock : RealClock::Get()),
      tokens_(burst_),
      at_us_(clock_->MonotonicMicros()) {}

int64_t TokenBucket::Reserve() {
  if (qps_ <= 0) return 0;
  absl::MutexLock l(&mu_);
  const int64_t now = clock_->MonotonicMicros();
  if (now > at_us_) {
    tokens_ = std::min<double>(burst_, tokens_ + (now - at_us_) * qps_ / 1e6);
    at_us_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return 0;
  // The deficit is paid back at qps: this token is due when it is.
  return static_cast<int64_t>(-tokens_ * 1e6 / qps_);
}

void TokenBucket::Wait() {
  const int64_t wait_us = Reserve();
  if (wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
}

}  // namespace poolcoord::base
