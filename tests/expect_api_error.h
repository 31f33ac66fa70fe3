// ExpectApiError: a Boost.Test check that a Status is the Kubernetes error a
// client would get (HTTP code, first cause's field, words of the message), for
// the tests of the lease rules and of the kinds' strategies. Call from the test
// thread only.
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>

#include "absl/status/status.h"
#include "store/api_error.h"

namespace poolcoord::testing {

// Asserts the HTTP code, and the field of the first cause when given.
inline void ExpectApiError(const absl::Status& s, int code, const std::string& field = "",
                           const std::string& in_message = "") {
  BOOST_REQUIRE_MESSAGE(!s.ok(), "expected HTTP " << code << ", got OK");
  store::ApiErrorInfo info = store::ApiErrorFromStatus(s);
  BOOST_TEST(info.code == code, s.message());
  if (!field.empty()) {
    BOOST_REQUIRE_MESSAGE(!info.causes.empty(), "no causes: " << s.message());
    BOOST_TEST(info.causes.front().field == field, s.message());
  }
  if (!in_message.empty()) {
    BOOST_TEST(info.message.find(in_message) != std::string::npos, info.message);
  }
}

}  // namespace poolcoord::testing
