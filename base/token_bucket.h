// A token bucket that limits a client's request rate, as client-go's
// flowcontrol.NewTokenBucketRateLimiter(qps, burst) limits a rest.Config's
// requests (kube-controller-manager's --kube-api-qps and --kube-api-burst):
// tokens accrue at `qps` per second up to `burst`; each request takes one.
// A request that finds the bucket empty waits for its token; tokens are handed
// out in the order they were asked for, so no caller starves.
//
//   TokenBucket limit(500, 1000, RealClock::Get());
//   limit.Wait();            // before each request
//
// qps <= 0 means no limit (every call returns at once), as client-go treats a
// negative QPS. Thread-safe.
#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"

namespace poolcoord::base {

class TokenBucket {
 public:
  // `clock` is not owned; nullptr means RealClock. burst < 1 counts as 1.
  TokenBucket(double qps, int burst, const Clock* clock = nullptr);
  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  // Takes the next token and returns how long (µs, on the clock's monotonic
  // time) the caller must wait before using it: 0 when one was ready.
  int64_t Reserve();
  // Reserve, then sleeps (real time) until the token is due.
  void Wait();

  double qps() const { return qps_; }
  int burst() const { return burst_; }

 private:
  const double qps_;
  const int burst_;
  const Clock* const clock_;
  absl::Mutex mu_;
  // Tokens in the bucket at `at_us` (may be negative: reserved ahead).
  double tokens_ ABSL_GUARDED_BY(mu_);
  int64_t at_us_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::base
