// scripts/check-tsan.sh's proof that its ThreadSanitizer build can fail: two threads
// add to one counter, under an absl::Mutex ("locked": TSan must stay silent, which it
// does only when abseil itself is instrumented) or with no lock ("racy": TSan must
// report). Not a unit test; built only with POOLCOORD_ABSL_SOURCE_DIR.
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace {

absl::Mutex mu;
long counter = 0;

void Add(bool locked) {
  for (int i = 0; i < 10000; ++i) {
    if (locked) {
      absl::MutexLock lock(&mu);
      ++counter;
    } else {
      ++counter;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "locked") != 0 && std::strcmp(argv[1], "racy") != 0)) {
    std::fprintf(stderr, "usage: %s locked|racy\n", argv[0]);
    return 2;
  }
  const bool locked = std::strcmp(argv[1], "locked") == 0;
  std::thread a(Add, locked), b(Add, locked);
  a.join();
  b.join();
  std::printf("%ld\n", counter);
  return 0;
}
