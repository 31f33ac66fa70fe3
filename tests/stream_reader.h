// Test helper: runs a handlers::StreamSource to its end on the calling thread,
// the way the transport drives it (Poll; on kWait sleep until woken or until
// *wake_at), for at most `limit`.
#pragma once

#include <chrono>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "handlers/http_types.h"

namespace poolcoord::testing {

struct StreamRead {
  std::string body;
  bool ended = false;  // the source returned kEnd (not cut off by `limit`)
  int chunks = 0;      // polls that returned bytes
};

inline StreamRead ReadStream(handlers::StreamSource& source, std::chrono::milliseconds limit) {
  using Clock = handlers::StreamSource::Clock;
  struct Wake {
    absl::Mutex mu;
    bool woken ABSL_GUARDED_BY(mu) = false;
  };
  auto state = std::make_shared<Wake>();
  StreamRead read;
  const Clock::time_point give_up = Clock::now() + limit;
  while (Clock::now() < give_up) {
    {
      absl::MutexLock lock(&state->mu);
      state->woken = false;
    }
    std::string out;
    Clock::time_point wake_at = Clock::time_point::max();
    auto step = source.Poll(&out, [state] {
      absl::MutexLock lock(&state->mu);
      state->woken = true;
    }, &wake_at);
    if (!out.empty()) ++read.chunks;
    read.body += out;
    if (step == handlers::StreamSource::Step::kEnd) {
      read.ended = true;
      return read;
    }
    if (step == handlers::StreamSource::Step::kWait) {
      const Clock::time_point until = std::min(wake_at, give_up);
      absl::MutexLock lock(&state->mu);
      state->mu.AwaitWithTimeout(absl::Condition(&state->woken),
                                 absl::FromChrono(std::max(until - Clock::now(), Clock::duration{})));
    }
  }
  source.Cancel();
  return read;
}

}  // namespace poolcoord::testing
