#define BOOST_TEST_MODULE url
#include <boost/test/unit_test.hpp>

#include <string>
#include <utility>
#include <vector>

#include "handlers/http_types.h"
#include "handlers/url.h"

namespace poolcoord::handlers {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

BOOST_AUTO_TEST_SUITE(percent_decode)

BOOST_AUTO_TEST_CASE(decodes_escapes_in_either_case) {
  BOOST_TEST(PercentDecode("%41%2c%2C%7e", false) == "A,,~");
  BOOST_TEST(PercentDecode("a%20b", true) == "a b");
}

BOOST_AUTO_TEST_CASE(plus_is_space_only_when_asked) {
  BOOST_TEST(PercentDecode("a+b", true) == "a b");
  BOOST_TEST(PercentDecode("a+b", false) == "a+b");
  BOOST_TEST(PercentDecode("a%2Bb", true) == "a+b");
}

// Text with nothing to decode is copied whole (the fast path): every byte,
// NUL and non-ASCII included, and '+' only when it is no space.
BOOST_AUTO_TEST_CASE(text_without_escapes_is_copied_whole) {
  BOOST_TEST(PercentDecode("/apis/coordination.pool/v1alpha1/delegatedleases/p0-n1", false) ==
             "/apis/coordination.pool/v1alpha1/delegatedleases/p0-n1");
  BOOST_TEST(PercentDecode("", true) == "");
  BOOST_TEST(PercentDecode("a+b+", false) == "a+b+");
  const std::string raw("a\0\xff b", 5);
  BOOST_TEST(PercentDecode(raw, true) == raw);
  BOOST_TEST(PercentDecode("ab%", false) == "ab%");
}

BOOST_AUTO_TEST_CASE(malformed_escapes_stay_literal) {
  BOOST_TEST(PercentDecode("100%", true) == "100%");
  BOOST_TEST(PercentDecode("%4", true) == "%4");
  BOOST_TEST(PercentDecode("%zz%41", true) == "%zzA");
  BOOST_TEST(PercentDecode("%%41", true) == "%A");
}

BOOST_AUTO_TEST_CASE(decodes_to_arbitrary_bytes) {
  std::string decoded = PercentDecode("%00%FF", false);
  BOOST_TEST(decoded.size() == 2u);
  BOOST_TEST(decoded[0] == '\0');
  BOOST_TEST(static_cast<unsigned char>(decoded[1]) == 0xFF);
}

// `GET /apis/%zz` was a 404; Go rejects the path ("invalid URL escape"), so the
// transport answers 400 for whatever this finds.
BOOST_AUTO_TEST_CASE(invalid_escape_is_found) {
  BOOST_TEST(InvalidPercentEscape("/apis/%zz") == "%zz");
  BOOST_TEST(InvalidPercentEscape("/a%41/%4") == "%4");
  BOOST_TEST(InvalidPercentEscape("/a/%") == "%");
  BOOST_TEST(InvalidPercentEscape("/a%2x%zz") == "%2x");
  BOOST_TEST(InvalidPercentEscape("/a%41%2Fb%7e").empty());
  BOOST_TEST(InvalidPercentEscape("/apis/coordination.pool").empty());
  BOOST_TEST(InvalidPercentEscape("").empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(parse_query_string)

BOOST_AUTO_TEST_CASE(aggregator_reencoded_selector) {
  // What kube-apiserver's proxy sends for labelSelector="a in (x,y)".
  Pairs got = ParseQueryString("labelSelector=a+in+%28x%2Cy%29&limit=500");
  Pairs want = {{"labelSelector", "a in (x,y)"}, {"limit", "500"}};
  BOOST_TEST((got == want));
}

BOOST_AUTO_TEST_CASE(kubectl_encoded_field_selector) {
  Pairs got = ParseQueryString("fieldSelector=metadata.name%3Dp-1&watch=true");
  Pairs want = {{"fieldSelector", "metadata.name=p-1"}, {"watch", "true"}};
  BOOST_TEST((got == want));
}

BOOST_AUTO_TEST_CASE(edge_cases_of_pairs) {
  Pairs got = ParseQueryString("a&b=&=c&&x=1=2&k=1&k=2");
  Pairs want = {{"a", ""}, {"b", ""}, {"", "c"}, {"x", "1=2"}, {"k", "1"}, {"k", "2"}};
  BOOST_TEST((got == want));
  BOOST_TEST(ParseQueryString("").empty());
}

BOOST_AUTO_TEST_CASE(keys_are_decoded_too) {
  Pairs got = ParseQueryString("a%5Bb%5D+c=d");
  Pairs want = {{"a[b] c", "d"}};
  BOOST_TEST((got == want));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(percent_encode)

BOOST_AUTO_TEST_CASE(escapes_all_but_unreserved) {
  BOOST_TEST(PercentEncode("Az09-._~") == "Az09-._~");
  BOOST_TEST(PercentEncode("a b/c,d=e+f") == "a%20b%2Fc%2Cd%3De%2Bf");
  BOOST_TEST(PercentEncode("eyJydiI6MX0=") == "eyJydiI6MX0%3D");
}

BOOST_AUTO_TEST_CASE(round_trips_every_byte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  BOOST_TEST(PercentDecode(PercentEncode(all), true) == all);
  BOOST_TEST(PercentDecode(PercentEncode(all), false) == all);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(request)

BOOST_AUTO_TEST_CASE(header_returns_first_of_repeated_lines) {
  Request r;
  r.headers = {{"x-remote-group", "system:nodes"},
               {"x-remote-group", "system:authenticated"},
               {"content-type", "application/json"}};
  BOOST_TEST(r.Header("x-remote-group") == "system:nodes");
  BOOST_TEST(r.Header("content-type") == "application/json");
  BOOST_TEST(r.Header("Content-Type") == "application/json");
  BOOST_TEST(r.Header("accept").empty());
}

BOOST_AUTO_TEST_CASE(query_and_has_query) {
  Request r;
  r.query = {{"watch", "true"}, {"limit", ""}, {"watch", "false"}};
  BOOST_TEST(r.Query("watch") == "true");
  BOOST_TEST(r.HasQuery("limit"));
  BOOST_TEST(r.Query("limit").empty());
  BOOST_TEST(!r.HasQuery("continue"));
  BOOST_TEST(r.Query("continue").empty());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
