#include "base/microtime.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/string_view.h"

namespace poolcoord::base {
namespace {


absl::Status Bad(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("cannot parse \"", Av(text), "\": ", Av(why)));
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil); valid for every year we accept (0000-9999).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// A cursor over the text; every Take* consumes exactly what it matched.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}
  bool Digits(int n, int64_t* out) {
    if (s_.size() < static_cast<size_t>(n)) return false;
    int64_t v = 0;
    for (int i = 0; i < n; ++i) {
      char c = s_[i];
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    s_.remove_prefix(n);
    *out = v;
    return true;
  }
  // Consumes a run of digits (at most `max`), returning how many.
  int DigitRun(int max, int64_t* value) {
    int n = 0;
    int64_t v = 0;
    while (n < static_cast<int>(s_.size()) && n < max + 1 && s_[n] >= '0' && s_[n] <= '9') {
      v = v * 10 + (s_[n] - '0');
      ++n;
    }
    if (n > max) return -1;
    s_.remove_prefix(n);
    *value = v;
    return n;
  }
  bool Char(char c) {
    if (s_.empty() || s_[0] != c) return false;
    s_.remove_prefix(1);
    return true;
  }
  bool Peek(char c) const { return !s_.empty() && s_[0] == c; }
  bool Done() const { return s_.empty(); }

 private:
  std::string_view s_;
};

struct Parsed {
  int64_t seconds = 0;   // since the epoch, UTC
  int64_t fraction_us = 0;
};

// Parses "YYYY-MM-DDTHH:MM:SS[.f]" + zone. `fraction`: 6 requires exactly six
// digits (MicroTime), 0 allows an optional 1-9 digit fraction (Time).
absl::StatusOr<Parsed> ParseRfc3339(std::string_view text, int fraction) {
  Scanner sc(text);
  int64_t year, month, day, hour, minute, second;
  if (!sc.Digits(4, &year) || !sc.Char('-') || !sc.Digits(2, &month) || !sc.Char('-') ||
      !sc.Digits(2, &day) || !sc.Char('T') || !sc.Digits(2, &hour) || !sc.Char(':') ||
      !sc.Digits(2, &minute) || !sc.Char(':') || !sc.Digits(2, &second)) {
    return Bad(text, "want RFC 3339 \"YYYY-MM-DDTHH:MM:SS\"");
  }
  if (month < 1 || month > 12) return Bad(text, "month out of range");
  if (day < 1 || day > DaysInMonth(year, month)) return Bad(text, "day out of range");
  if (hour > 23) return Bad(text, "hour out of range");
  if (minute > 59) return Bad(text, "minute out of range");
  if (second > 59) return Bad(text, "second out of range");

  Parsed out;
  if (fraction == 6) {
    int64_t frac = 0;
    if (!sc.Char('.')) return Bad(text, "want exactly 6 fractional digits (MicroTime)");
    int n = sc.DigitRun(6, &frac);
    if (n != 6) return Bad(text, "want exactly 6 fractional digits (MicroTime)");
    out.fraction_us = frac;
  } else if (sc.Char('.')) {
    int64_t frac = 0;
    int n = sc.DigitRun(9, &frac);
    if (n < 1) return Bad(text, "want 1 to 9 fractional digits");
  }

  int64_t offset_seconds = 0;
  if (sc.Char('Z')) {
    // UTC
  } else if (sc.Peek('+') || sc.Peek('-')) {
    const bool negative = sc.Peek('-');
    sc.Char(negative ? '-' : '+');
    int64_t oh, om;
    if (!sc.Digits(2, &oh) || !sc.Char(':') || !sc.Digits(2, &om)) {
      return Bad(text, "want time zone \"Z\" or \"+hh:mm\"");
    }
    if (oh > 23 || om > 59) return Bad(text, "time zone offset out of range");
    offset_seconds = (oh * 3600 + om * 60) * (negative ? -1 : 1);
  } else {
    return Bad(text, "want time zone \"Z\" or \"+hh:mm\"");
  }
  if (!sc.Done()) return Bad(text, "extra text after the time zone");

  out.seconds = DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second -
                offset_seconds;
  return out;
}

}  // namespace

namespace {

// Civil UTC date-time of a count of seconds since the epoch, on the proleptic
// Gregorian calendar (the eras-of-400-years method). Formatting sits on every
// encoded object, so it avoids the time-zone machinery of absl::FormatTime.
struct Civil {
  int64_t year;
  int month, day, hour, minute, second;
};

Civil CivilFromSeconds(int64_t seconds) {
  int64_t days = seconds / 86400;
  int64_t secs = seconds % 86400;
  if (secs < 0) {
    secs += 86400;
    --days;
  }
  days += 719468;  // shift the epoch to 0000-03-01
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;                                // [0, 146096]
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);           // [0, 365]
  const int64_t mp = (5 * doy + 2) / 153;                                // March = 0
  Civil c;
  c.day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.year = yoe + era * 400 + (c.month <= 2 ? 1 : 0);
  c.hour = static_cast<int>(secs / 3600);
  c.minute = static_cast<int>(secs / 60 % 60);
  c.second = static_cast<int>(secs % 60);
  return c;
}

// "YYYY-MM-DDTHH:MM:SS" into `out` (years outside 0..9999 fall back to absl).
bool AppendCivil(const Civil& c, std::string* out) {
  if (c.year < 0 || c.year > 9999) return false;
  char buf[20];
  auto two = [](char* p, int v) {
    p[0] = static_cast<char>('0' + v / 10);
    p[1] = static_cast<char>('0' + v % 10);
  };
  const int y = static_cast<int>(c.year);
  buf[0] = static_cast<char>('0' + y / 1000);
  buf[1] = static_cast<char>('0' + y / 100 % 10);
  buf[2] = static_cast<char>('0' + y / 10 % 10);
  buf[3] = static_cast<char>('0' + y % 10);
  buf[4] = '-';
  two(buf + 5, c.month);
  buf[7] = '-';
  two(buf + 8, c.day);
  buf[10] = 'T';
  two(buf + 11, c.hour);
  buf[13] = ':';
  two(buf + 14, c.minute);
  buf[16] = ':';
  two(buf + 17, c.second);
  out->append(buf, 19);
  return true;
}

}  // namespace

std::string FormatMicroTime(int64_t us) {
  int64_t seconds = us / 1'000'000;
  int64_t fraction = us % 1'000'000;
  if (fraction < 0) {
    fraction += 1'000'000;
    --seconds;
  }
  std::string out;
  out.reserve(27);
  if (!AppendCivil(CivilFromSeconds(seconds), &out)) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixMicros(us), absl::UTCTimeZone());
  }
  char frac[8] = {'.', '0', '0', '0', '0', '0', '0', 'Z'};
  for (int i = 6; i >= 1; --i) {
    frac[i] = static_cast<char>('0' + fraction % 10);
    fraction /= 10;
  }
  out.append(frac, 8);
  return out;
}

absl::StatusOr<int64_t> ParseMicroTime(std::string_view text) {
  auto parsed = ParseRfc3339(text, 6);
  if (!parsed.ok()) return parsed.status();
  return parsed->seconds * 1'000'000 + parsed->fraction_us;
}

std::string FormatTime(int64_t seconds) {
  std::string out;
  out.reserve(20);
  AppendTime(seconds, &out);
  return out;
}

void AppendTime(int64_t seconds, std::string* out) {
  if (!AppendCivil(CivilFromSeconds(seconds), out)) {
    out->append(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(seconds),
                                 absl::UTCTimeZone()));
    return;
  }
  out->push_back('Z');
}

absl::StatusOr<int64_t> ParseTime(std::string_view text) {
  auto parsed = ParseRfc3339(text, 0);
  if (!parsed.ok()) return parsed.status();
  return parsed->seconds;
}

namespace {

constexpr const char* kWeekdays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

int MonthIndex(std::string_view m) {
  for (int i = 0; i < 12; ++i) {
    if (m == kMonths[i]) return i + 1;
  }
  return 0;
}

bool Digits(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 4) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// "HH:MM:SS" -> seconds of the day.
bool ClockTime(std::string_view s, int64_t* out) {
  int64_t h, m, sec;
  if (s.size() != 8 || s[2] != ':' || s[5] != ':' || !Digits(s.substr(0, 2), &h) ||
      !Digits(s.substr(3, 2), &m) || !Digits(s.substr(6, 2), &sec) || h > 23 || m > 59 ||
      sec > 60) {
    return false;
  }
  *out = h * 3600 + m * 60 + std::min<int64_t>(sec, 59);
  return true;
}

std::vector<std::string_view> Fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::string FormatHttpDate(int64_t seconds) {
  const Civil c = CivilFromSeconds(seconds);
  int64_t days = seconds / 86400 - (seconds % 86400 < 0 ? 1 : 0);
  const int weekday = static_cast<int>(((days % 7) + 7 + 4) % 7);  // 1970-01-01 was a Thursday
  return absl::StrFormat("%s, %02d %s %04d %02d:%02d:%02d GMT", kWeekdays[weekday], c.day,
                         kMonths[c.month - 1], c.year, c.hour, c.minute, c.second);
}

absl::StatusOr<int64_t> ParseHttpDate(std::string_view text) {
  const std::vector<std::string_view> f = Fields(text);
  int64_t year = 0, month = 0, day = 0, tod = 0;
  bool ok = false;
  if (f.size() == 6 && f[0].size() == 4 && f[0].back() == ',' && f[5] == "GMT") {
    // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
    month = MonthIndex(f[2]);
    ok = Digits(f[1], &day) && f[1].size() == 2 && month != 0 && Digits(f[3], &year) &&
         f[3].size() == 4 && ClockTime(f[4], &tod);
  } else if (f.size() == 4 && f[0].size() > 4 && f[0].back() == ',' && f[3] == "GMT") {
    // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT; two-digit years as Go reads them.
    std::string_view d = f[1];
    if (d.size() == 9 && d[2] == '-' && d[6] == '-') {
      month = MonthIndex(d.substr(3, 3));
      ok = Digits(d.substr(0, 2), &day) && month != 0 && Digits(d.substr(7, 2), &year) &&
           ClockTime(f[2], &tod);
      year += year >= 69 ? 1900 : 2000;
    }
  } else if (f.size() == 5 && f[0].size() == 3) {
    // asctime: Sun Nov  6 08:49:37 1994
    month = MonthIndex(f[1]);
    ok = month != 0 && Digits(f[2], &day) && f[2].size() <= 2 && ClockTime(f[3], &tod) &&
         Digits(f[4], &year) && f[4].size() == 4;
  }
  if (!ok || day < 1 || day > DaysInMonth(year, month)) {
    return Bad(text, "want an HTTP date such as \"Sun, 06 Nov 1994 08:49:37 GMT\"");
  }
  return DaysFromCivil(year, month, day) * 86400 + tod;
}

}  // namespace poolcoord::base
