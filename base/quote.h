// Go's string quoting (strconv.Quote, fmt's %q), as Kubernetes messages print
// names and values: `pod "a\"b" not found`, field.Invalid's value. And the UTF-8
// check it rests on, shared with the JSON writers that must never emit invalid
// UTF-8.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace poolcoord::base {

// `s` in double quotes, escaped as Go's strconv.Quote does: '"' and '\\'
// backslashed; \a \b \f \n \r \t \v; other ASCII controls and DEL as \xNN;
// bytes that are not valid UTF-8 as \xNN; runes Go does not print (C1 controls,
// format characters such as U+00AD, U+200B..U+200F, U+2028/U+2029, U+FEFF,
// private use) as \uNNNN. Other valid UTF-8 passes as it is (unassigned code
// points included: there are no Unicode tables here).
std::string GoQuote(std::string_view s);

// The length (1-4) of the valid UTF-8 sequence starting at s[i], or 0 when it is
// not valid (truncated, overlong, a surrogate, past U+10FFFF). Requires i < s.size().
size_t Utf8SequenceLength(std::string_view s, size_t i);

// `s` with each byte that starts no valid UTF-8 sequence replaced by U+FFFD, as
// Go's encoding/json writes such strings.
std::string ToValidUtf8(std::string_view s);

}  // namespace poolcoord::base
