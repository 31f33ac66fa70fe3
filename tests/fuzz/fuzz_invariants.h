// What the fuzz targets share: an invariant check that aborts (libFuzzer
// reports an abort as a crash and keeps the input), and the machine's wall
// clock, which minted certificates' validity starts from. Test code only.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace poolcoord::fuzz {

inline void Check(bool cond, const char* what) {
  if (!cond) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

// Microseconds since the Unix epoch.
inline int64_t RealNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace poolcoord::fuzz
