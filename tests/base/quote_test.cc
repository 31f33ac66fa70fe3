#define BOOST_TEST_MODULE quote
#include <boost/test/unit_test.hpp>

#include <string>

#include "base/quote.h"

namespace poolcoord::base {
namespace {

// Expected values are what Go's strconv.Quote prints for the same bytes.
BOOST_AUTO_TEST_CASE(QuotesAsGoDoes) {
  BOOST_TEST(GoQuote("abc") == "\"abc\"");
  BOOST_TEST(GoQuote("") == "\"\"");
  BOOST_TEST(GoQuote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  BOOST_TEST(GoQuote("\a\b\f\n\r\t\v") == "\"\\a\\b\\f\\n\\r\\t\\v\"");
  BOOST_TEST(GoQuote(std::string("\x01\x1f\x7f", 3)) == "\"\\x01\\x1f\\x7f\"");
  BOOST_TEST(GoQuote(std::string("a\0b", 3)) == "\"a\\x00b\"");
  BOOST_TEST(GoQuote("h\xC3\xA9") == "\"h\xC3\xA9\"");            // é printed
  BOOST_TEST(GoQuote("\xF0\x9F\x98\x80") == "\"\xF0\x9F\x98\x80\"");  // U+1F600 printed
  BOOST_TEST(GoQuote("\xFF") == "\"\\xff\"");                      // not UTF-8
  BOOST_TEST(GoQuote("\xC3") == "\"\\xc3\"");                      // truncated sequence
  BOOST_TEST(GoQuote("\xC0\xAF") == "\"\\xc0\\xaf\"");             // overlong '/'
  BOOST_TEST(GoQuote("\xC2\x85") == "\"\\u0085\"");                // C1 control (NEL)
  BOOST_TEST(GoQuote("\xE2\x80\xA8") == "\"\\u2028\"");            // line separator
  BOOST_TEST(GoQuote("\xEF\xBB\xBF") == "\"\\ufeff\"");            // BOM
  BOOST_TEST(GoQuote("\xF3\xB0\x80\x80") == "\"\\U000f0000\"");    // plane-15 private use
}

BOOST_AUTO_TEST_CASE(ToValidUtf8ReplacesBadBytes) {
  BOOST_TEST(ToValidUtf8("ok \xC3\xA9") == "ok \xC3\xA9");
  BOOST_TEST(ToValidUtf8("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
  BOOST_TEST(ToValidUtf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

}  // namespace
}  // namespace poolcoord::base
