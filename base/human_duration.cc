#include "base/human_duration.h"

#include "absl/strings/str_cat.h"

namespace poolcoord::base {

std::string HumanDuration(int64_t duration_us) {
  // Integer division truncates toward zero, as Go's int(d.Seconds()) does.
  const int64_t seconds = duration_us / 1'000'000;
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return absl::StrCat(seconds, "s");
  const int64_t minutes = seconds / 60;
  if (minutes < 10) {
    const int64_t s = seconds % 60;
    return s == 0 ? absl::StrCat(minutes, "m") : absl::StrCat(minutes, "m", s, "s");
  }
  if (minutes < 180) return absl::StrCat(minutes, "m");
  const int64_t hours = minutes / 60;
  if (hours < 8) {
    const int64_t m = minutes % 60;
    return m == 0 ? absl::StrCat(hours, "h") : absl::StrCat(hours, "h", m, "m");
  }
  if (hours < 48) return absl::StrCat(hours, "h");
  if (hours < 24 * 8) {
    const int64_t h = hours % 24;
    return h == 0 ? absl::StrCat(hours / 24, "d") : absl::StrCat(hours / 24, "d", h, "h");
  }
  if (hours < 24 * 365 * 2) return absl::StrCat(hours / 24, "d");
  if (hours < 24 * 365 * 8) {
    const int64_t d = (hours / 24) % 365;
    return d == 0 ? absl::StrCat(hours / 24 / 365, "y")
                  : absl::StrCat(hours / 24 / 365, "y", d, "d");
  }
  return absl::StrCat(hours / 24 / 365, "y");
}

}  // namespace poolcoord::base
