// Process logging to stderr, one line per fact, in klog's header format
// ("I1130 02:17:00.123456 <text>"), so operators read it like kube-apiserver's.
//
// Thread-safe: each line is written with one write(2) call.
#pragma once

#include <atomic>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace poolcoord::base {

// The -v / --v verbosity; VLogEnabled(n) is true when n <= it.
void SetLogVerbosity(int level);
bool VLogEnabled(int level);

// severity: 'I', 'W' or 'E'.
void LogLine(char severity, std::string_view text);

template <typename... Args>
void LogInfo(const Args&... args) {
  LogLine('I', absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  LogLine('W', absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine('E', absl::StrCat(args...));
}

}  // namespace poolcoord::base
