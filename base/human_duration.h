// kubectl's age format (k8s.io/apimachinery/pkg/util/duration.HumanDuration),
// for Table cells and the kubectl plugin's output: "45s" below 2 minutes,
// "3m2s" below 10 minutes, "59m" below 3 hours, "2h5m" below 8 hours, "20h"
// below 2 days, "3d4h" below 8 days, "300d" below 2 years, "2y5d" below 8
// years, then "9y". Up to 1 s in the future counts as "0s" (clock skew); further
// in the future is "<invalid>". `duration_us` in microseconds.
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace poolcoord::base {

std::string HumanDuration(int64_t duration_us);

}  // namespace poolcoord::base
