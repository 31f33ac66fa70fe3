// Kubernetes' two wire formats for instants (k8s.io/apimachinery/pkg/apis/meta/v1
// micro_time.go and time.go), and HTTP's Date header (RFC 9110 section 5.6.7).
//
// MicroTime: RFC 3339 with exactly 6 fractional digits, emitted in UTC, e.g.
// "2024-01-01T00:00:00.000000Z". Go parses it with the fixed layout
// "2006-01-02T15:04:05.000000Z07:00", so other fraction widths do not parse there;
// we reject them too, so that nothing we accept breaks a Go client on the way out.
// Time: RFC 3339 to the second, emitted in UTC ("2024-01-01T00:00:00Z"); parsing
// accepts an optional fraction, which is truncated.
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace poolcoord::base {

// `us`: microseconds since the Unix epoch -> "YYYY-MM-DDTHH:MM:SS.ffffffZ".
std::string FormatMicroTime(int64_t us);

// Microseconds since the Unix epoch. Accepts exactly
// "YYYY-MM-DDTHH:MM:SS.ffffff" followed by "Z" or "+hh:mm"/"-hh:mm". Anything
// else (other fraction widths, no fraction, out-of-range components such as
// month 13 or Feb 30, trailing bytes) is InvalidArgument with the reason in the
// message. The status is plain absl (no API-error payload): callers turn it into
// a field cause.
absl::StatusOr<int64_t> ParseMicroTime(std::string_view text);

// `seconds` since the Unix epoch -> "YYYY-MM-DDTHH:MM:SSZ".
std::string FormatTime(int64_t seconds);
// FormatTime(seconds) appended to *out, without a string of its own.
void AppendTime(int64_t seconds, std::string* out);

// Seconds since the Unix epoch. Accepts RFC 3339 with an optional fraction of
// 1-9 digits (dropped, as metav1.Time does) and "Z" or a "±hh:mm" offset.
// InvalidArgument otherwise.
absl::StatusOr<int64_t> ParseTime(std::string_view text);

// `seconds` since the Unix epoch -> the HTTP date, IMF-fixdate:
// "Mon, 01 Jan 2024 00:00:00 GMT" (what Go's net/http sends in every Date header).
std::string FormatHttpDate(int64_t seconds);

// Seconds since the Unix epoch of an HTTP date in any of the three forms a
// recipient must accept (RFC 9110 section 5.6.7, as Go's http.ParseTime):
// IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850 "Sunday, 06-Nov-94
// 08:49:37 GMT" and asctime "Sun Nov  6 08:49:37 1994". InvalidArgument otherwise.
absl::StatusOr<int64_t> ParseHttpDate(std::string_view text);

}  // namespace poolcoord::base
