// Percent-encoding helpers for request paths, query strings and the URLs and
// continue tokens we build.
//
// kube-apiserver's aggregator re-encodes the query string with Go's
// url.Values.Encode() before proxying (KA pkg/apiserver/handler_proxy.go), so a
// selector arrives as `labelSelector=a+in+%28x%2Cy%29`: spaces as '+', the rest as
// %XX. Queries are therefore decoded as application/x-www-form-urlencoded.
// All functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace poolcoord::handlers {

// Decodes %XX escapes (either hex case). A '%' not followed by two hex digits is
// kept literally, as is everything else; '+' becomes a space only when
// `plus_is_space` (query strings, not paths).
std::string PercentDecode(std::string_view text, bool plus_is_space);

// The first '%' not followed by two hex digits, with what follows it (at most 3
// characters: "%zz", "%4", "%"), or "" when every escape is well formed. Go's
// url.ParseRequestURI rejects such a path ("invalid URL escape").
std::string_view InvalidPercentEscape(std::string_view text);

// Splits a raw query string (no leading '?') into key/value pairs in order, as
// application/x-www-form-urlencoded: pairs separated by '&', key and value by the
// first '='; a pair without '=' has value ""; empty pairs are skipped; both sides
// are PercentDecode'd with '+' as a space. A key may repeat.
std::vector<std::pair<std::string, std::string>> ParseQueryString(std::string_view raw);

// Escapes every byte except the RFC 3986 unreserved set (A-Z a-z 0-9 - . _ ~) as
// %XX (upper-case hex). Space becomes %20, never '+', so the result is safe both
// in a path segment and in a query value (continue tokens, names in links).
std::string PercentEncode(std::string_view text);

}  // namespace poolcoord::handlers
