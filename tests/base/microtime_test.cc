#define BOOST_TEST_MODULE microtime
#include <boost/test/unit_test.hpp>

#include <string>

#include "base/microtime.h"

#include <random>
#include <vector>

#include "absl/time/time.h"

namespace poolcoord::base {
namespace {

constexpr int64_t k2024 = 1704067200;  // 2024-01-01T00:00:00Z

BOOST_AUTO_TEST_SUITE(MicroTime)

BOOST_AUTO_TEST_CASE(FormatsExactlySixDigitsInUtc) {
  BOOST_TEST(FormatMicroTime(k2024 * 1'000'000) == "2024-01-01T00:00:00.000000Z");
  BOOST_TEST(FormatMicroTime(k2024 * 1'000'000 + 412339) == "2024-01-01T00:00:00.412339Z");
  BOOST_TEST(FormatMicroTime(k2024 * 1'000'000 + 1) == "2024-01-01T00:00:00.000001Z");
  BOOST_TEST(FormatMicroTime(0) == "1970-01-01T00:00:00.000000Z");
  BOOST_TEST(FormatMicroTime(-1) == "1969-12-31T23:59:59.999999Z");
}

BOOST_AUTO_TEST_CASE(RoundTrips) {
  for (int64_t us : {int64_t{0}, k2024 * 1'000'000 + 999999, int64_t{951782400123456},
                     int64_t{-1}}) {
    auto parsed = ParseMicroTime(FormatMicroTime(us));
    BOOST_REQUIRE(parsed.ok());
    BOOST_TEST(*parsed == us);
  }
}

BOOST_AUTO_TEST_CASE(AcceptsOffsets) {
  auto plus = ParseMicroTime("2024-01-01T02:30:00.000005+02:30");
  BOOST_REQUIRE(plus.ok());
  BOOST_TEST(*plus == k2024 * 1'000'000 + 5);
  auto minus = ParseMicroTime("2023-12-31T23:00:00.000000-01:00");
  BOOST_REQUIRE(minus.ok());
  BOOST_TEST(*minus == k2024 * 1'000'000);
}

BOOST_AUTO_TEST_CASE(LeapDay) {
  auto ok = ParseMicroTime("2024-02-29T00:00:00.000000Z");
  BOOST_REQUIRE(ok.ok());
  BOOST_TEST(*ok == (k2024 + 59 * 86400) * 1'000'000);
  BOOST_TEST(!ParseMicroTime("2023-02-29T00:00:00.000000Z").ok());
  BOOST_TEST(ParseMicroTime("2000-02-29T00:00:00.000000Z").ok());
  BOOST_TEST(!ParseMicroTime("1900-02-29T00:00:00.000000Z").ok());
}

BOOST_AUTO_TEST_CASE(RejectsOtherShapes) {
  for (const char* bad : {
           "2024-01-01T00:00:00Z",               // no fraction
           "2024-01-01T00:00:00.123Z",           // 3 digits
           "2024-01-01T00:00:00.1234567Z",       // 7 digits
           "2024-01-01T00:00:00.000000",         // no zone
           "2024-01-01 00:00:00.000000Z",        // space for T
           "2024-01-01t00:00:00.000000Z",        // lowercase t
           "2024-01-01T00:00:00.000000z",        // lowercase z
           "2024-01-01T00:00:00.000000+0200",    // offset without colon
           "2024-01-01T00:00:00.000000Z ",       // trailing space
           "2024-13-01T00:00:00.000000Z",        // month
           "2024-00-01T00:00:00.000000Z",        // month 0
           "2024-04-31T00:00:00.000000Z",        // day
           "2024-01-01T24:00:00.000000Z",        // hour
           "2024-01-01T00:60:00.000000Z",        // minute
           "2024-01-01T00:00:60.000000Z",        // second
           "2024-01-01T00:00:00.000000+24:00",   // offset hour
           "yesterday", "", "2024-1-01T00:00:00.000000Z"}) {
    auto r = ParseMicroTime(bad);
    BOOST_TEST(!r.ok(), "accepted " << bad);
    if (!r.ok()) {
      BOOST_TEST(r.status().code() == absl::StatusCode::kInvalidArgument);
      BOOST_TEST(!r.status().message().empty());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Time)

BOOST_AUTO_TEST_CASE(FormatsSeconds) {
  BOOST_TEST(FormatTime(k2024) == "2024-01-01T00:00:00Z");
  BOOST_TEST(FormatTime(k2024 + 3661) == "2024-01-01T01:01:01Z");
}

BOOST_AUTO_TEST_CASE(ParsesWithOptionalFractionTruncated) {
  auto plain = ParseTime("2024-01-01T00:00:00Z");
  BOOST_REQUIRE(plain.ok());
  BOOST_TEST(*plain == k2024);
  auto frac = ParseTime("2024-01-01T00:00:01.999Z");
  BOOST_REQUIRE(frac.ok());
  BOOST_TEST(*frac == k2024 + 1);
  auto micro = ParseTime("2024-01-01T00:00:00.000000Z");
  BOOST_REQUIRE(micro.ok());
  BOOST_TEST(*micro == k2024);
  auto offset = ParseTime("2024-01-01T08:00:00+08:00");
  BOOST_REQUIRE(offset.ok());
  BOOST_TEST(*offset == k2024);
}

BOOST_AUTO_TEST_CASE(Rejects) {
  for (const char* bad : {"2024-01-01T00:00:00", "2024-01-01T00:00:00.Z",
                          "2024-01-01T00:00:00.1234567890Z", "2024-02-30T00:00:00Z", "now"}) {
    BOOST_TEST(!ParseTime(bad).ok(), "accepted " << bad);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::base

// The hand-written formatter against absl's, over dates from 1900 to 2400 (leap
// years, centuries, the epoch, negative times).
BOOST_AUTO_TEST_CASE(fast_format_agrees_with_absl) {
  std::mt19937_64 rng(42);
  std::vector<int64_t> samples = {0, -1, 1, 951782400'000'000 /* 2000-02-29 */,
                                  -2208988800'000'000 /* 1900-01-01 */, 4107542399'999'999,
                                  13569465600'000'000 /* 2400-01-01 */};
  for (int i = 0; i < 20000; ++i) {
    samples.push_back(static_cast<int64_t>(rng() % 15778800000'000'000ULL) - 2208988800'000'000);
  }
  for (int64_t us : samples) {
    const std::string want = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixMicros(us),
                                              absl::UTCTimeZone());
    BOOST_TEST_CONTEXT(us) {
      BOOST_TEST(poolcoord::base::FormatMicroTime(us) == want);
      const int64_t s = us >= 0 ? us / 1'000'000 : -((-us + 999'999) / 1'000'000);
      BOOST_TEST(poolcoord::base::FormatTime(s) ==
                 absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(s), absl::UTCTimeZone()));
    }
  }
}

BOOST_AUTO_TEST_SUITE(HttpDate)

// The examples of RFC 9110 section 5.6.7, one instant in each of the three forms.
BOOST_AUTO_TEST_CASE(rfc_examples_in_all_three_forms) {
  using poolcoord::base::FormatHttpDate;
  using poolcoord::base::ParseHttpDate;
  constexpr int64_t k1994 = 784111777;  // 1994-11-06T08:49:37Z, a Sunday
  BOOST_TEST(FormatHttpDate(k1994) == "Sun, 06 Nov 1994 08:49:37 GMT");
  for (const char* text : {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                           "Sun Nov  6 08:49:37 1994"}) {
    auto t = ParseHttpDate(text);
    BOOST_TEST_REQUIRE(t.ok(), text << ": " << t.status());
    BOOST_TEST(*t == k1994, text);
  }
  BOOST_TEST(FormatHttpDate(0) == "Thu, 01 Jan 1970 00:00:00 GMT");
  BOOST_TEST(FormatHttpDate(-1) == "Wed, 31 Dec 1969 23:59:59 GMT");
  BOOST_TEST(FormatHttpDate(951782400) == "Tue, 29 Feb 2000 00:00:00 GMT");
  for (const char* bad : {"", "Sun, 06 Nov 1994 08:49:37", "Sun, 31 Feb 1994 08:49:37 GMT",
                          "Sun, 06 Nox 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                          "2024-01-01T00:00:00Z", "Sun, 6 Nov 1994 08:49:37 GMT"}) {
    BOOST_TEST(!ParseHttpDate(bad).ok(), "accepted " << bad);
  }
}

// Every format round-trips and agrees with absl's weekday and month names.
BOOST_AUTO_TEST_CASE(format_round_trips_and_agrees_with_absl) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const int64_t s = static_cast<int64_t>(rng() % 8'000'000'000ULL);  // 1970 .. 2223
    const std::string text = poolcoord::base::FormatHttpDate(s);
    BOOST_TEST_CONTEXT(s) {
      BOOST_TEST(text == absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", absl::FromUnixSeconds(s),
                                          absl::UTCTimeZone()));
      auto back = poolcoord::base::ParseHttpDate(text);
      BOOST_TEST_REQUIRE(back.ok());
      BOOST_TEST(*back == s);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
