// What the handlers' unit tests share: a GET Request as the transport hands it
// over (header names lower-cased), a Response's header, and a body that must be
// a JSON object. Call from the test thread only (BOOST_REQUIRE on failure).
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "handlers/http_types.h"
#include "rapidjson/document.h"

namespace poolcoord::handlers::testing {

// GET `path` with `query`, and the Accept and If-None-Match headers when not empty.
inline Request GetRequest(std::string path, std::vector<std::pair<std::string, std::string>> query = {},
                          std::string accept = "", std::string if_none_match = "") {
  Request r;
  r.method = "GET";
  r.path = std::move(path);
  r.query = std::move(query);
  if (!accept.empty()) r.headers.emplace_back("accept", std::move(accept));
  if (!if_none_match.empty()) r.headers.emplace_back("if-none-match", std::move(if_none_match));
  return r;
}

// The first value of header `name` (exact case, as the handlers set it); "" when absent.
inline std::string HeaderOf(const Response& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

// `text` parsed (any JSON value); the test stops, naming it, when it is not JSON.
inline rapidjson::Document ParseJson(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  BOOST_REQUIRE_MESSAGE(!d.HasParseError(), "not JSON: " << text);
  return d;
}

// `body` parsed; the test stops unless it is a JSON object.
inline rapidjson::Document ParseObject(const std::string& body) {
  rapidjson::Document d;
  d.Parse(body.c_str(), body.size());
  BOOST_REQUIRE_MESSAGE(!d.HasParseError() && d.IsObject(), "not a JSON object: " << body);
  return d;
}

// A JSON value that must be a string, or a marker that fails the comparison.
inline std::string S(const rapidjson::Value& v) {
  return v.IsString() ? v.GetString() : "<not a string>";
}

}  // namespace poolcoord::handlers::testing
