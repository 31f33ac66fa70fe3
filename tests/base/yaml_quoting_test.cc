#define BOOST_TEST_MODULE yaml_quoting
#include <boost/test/unit_test.hpp>

#include <string>

#include "base/yaml_quoting.h"

namespace poolcoord::base {
namespace {

// Names as Kubernetes objects carry them stay plain: the writers' output stays
// readable (`name: hz-1`, `apiVersion: coordination.pool/v1alpha1`).
BOOST_AUTO_TEST_CASE(NamesStayPlain) {
  for (const char* s : {"hz-1", "hangzhou", "coordination.pool/v1alpha1", "plain-name.x/y_z", "Pool",
                        "yesterday", "nullable", "n1", "Offline", "x"}) {
    BOOST_TEST(!YamlNeedsQuotes(s), s);
  }
}

// go-yaml v2 reads YAML 1.1: each of these, written plain, would come back as a
// bool, null, number or timestamp, or not parse as this string at all.
BOOST_AUTO_TEST_CASE(WhatReadsBackAsAnotherTypeIsQuoted) {
  for (const char* s : {"", "true", "True", "FALSE", "yes", "NO", "on", "Off", "y", "N", "null", "Null",
                        "~", "1", "-1", "+1", "1.5", ".5", "1e3", "0x1f", ".inf", "-.Inf", ".nan",
                        "2024-01-01", "2026-01-01T00:00:00.000000Z", "3f2a-uid", "123"}) {
    BOOST_TEST(YamlNeedsQuotes(s), '"' << s << '"');
  }
}

// Spaces, indicators and anything outside ASCII letters, digits and . _ / -
// are quoted rather than judged one by one against YAML's plain-scalar rules.
BOOST_AUTO_TEST_CASE(IndicatorsSpacesAndNonAsciiAreQuoted) {
  for (const char* s : {"a: b", "a #b", "#c", "- x", "-", "?", ":", "*a", "&a", "!x", "%x", "@x", "`x",
                        "{a}", "[a]", "'q'", "\"q\"", " lead", "trail ", "multi\nline", "tab\tx",
                        "h\u00e9", "\u5317\u4eac-1", "back\\slash", "system:node:hz-1", "a,b"}) {
    BOOST_TEST(YamlNeedsQuotes(s), '"' << s << '"');
  }
}

}  // namespace
}  // namespace poolcoord::base
