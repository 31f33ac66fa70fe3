// Synchronising with a thread that blocks in Watcher::Next: the tests of every
// store (memory, etcd3, watch cache) wait for it explicitly before they act on
// a blocked Next, instead of sleeping and hoping it got there.
#pragma once

#include <chrono>
#include <thread>

#include "store/watch_channel.h"

namespace poolcoord::testing {

// True once `n` threads of this process wait in Next (store::WatchChannel::WaitingInNext);
// false after `limit`, which only a thread that never got there reaches.
inline bool UntilWaitingInNext(int n, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (store::WatchChannel::WaitingInNext() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace poolcoord::testing
