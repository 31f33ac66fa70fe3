#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace poolcoord::base {
namespace {
std::atomic<int> g_verbosity{0};
}  // namespace

void SetLogVerbosity(int level) { g_verbosity.store(level, std::memory_order_relaxed); }

bool VLogEnabled(int level) { return level <= g_verbosity.load(std::memory_order_relaxed); }

void LogLine(char severity, std::string_view text) {
  std::string line(1, severity);
  line += absl::FormatTime("%m%d %H:%M:%E6S ", absl::Now(), absl::LocalTimeZone());
  line.append(text.data(), text.size());
  line += '\n';
  // One write(2) keeps concurrent lines whole; a short write to stderr is not retried.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace poolcoord::base
