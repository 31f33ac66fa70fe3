#define BOOST_TEST_MODULE status_mapping
#include <boost/test/unit_test.hpp>

#include <string>

#include "absl/status/status.h"
#include "handlers/status_mapping.h"
#include "rapidjson/document.h"
#include "store/api_error.h"

namespace poolcoord::handlers {
namespace {

rapidjson::Document ParseBody(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.c_str());
  BOOST_REQUIRE_MESSAGE(!doc.HasParseError() && doc.IsObject(), "not a JSON object: " + body);
  return doc;
}

std::string HeaderOf(const Response& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "<none>";
}

BOOST_AUTO_TEST_SUITE(error_response)

BOOST_AUTO_TEST_CASE(not_found_exact_body) {
  Response r = ErrorResponse(store::NotFoundError("poolleases", "x"));
  BOOST_TEST(r.status == 404);
  BOOST_TEST(HeaderOf(r, "Content-Type") == "application/json");
  BOOST_TEST(HeaderOf(r, "Retry-After") == "<none>");
  BOOST_TEST(r.body ==
             R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
             R"("message":"poolleases.coordination.pool \"x\" not found","reason":"NotFound",)"
             R"("details":{"name":"x","group":"coordination.pool","kind":"poolleases"},"code":404})");
}

BOOST_AUTO_TEST_CASE(details_omitted_when_empty) {
  Response r = ErrorResponse(store::BadRequestError("bad selector"));
  BOOST_TEST(r.status == 400);
  BOOST_TEST(r.body ==
             R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
             R"("message":"bad selector","reason":"BadRequest","code":400})");
}

BOOST_AUTO_TEST_CASE(invalid_with_causes) {
  absl::Status s = store::InvalidError(
      "PoolLease", "p", {store::FieldInvalid("spec.leaseDurationSeconds", "0", "must be positive"),
                         store::FieldRequired("spec.holderIdentity")});
  Response r = ErrorResponse(s);
  BOOST_TEST(r.status == 422);
  rapidjson::Document doc = ParseBody(r.body);
  BOOST_TEST(doc["reason"].GetString() == std::string("Invalid"));
  BOOST_TEST(doc["code"].GetInt() == 422);
  const auto& causes = doc["details"]["causes"];
  BOOST_TEST_REQUIRE(causes.Size() == 2u);
  BOOST_TEST(causes[0]["reason"].GetString() == std::string("FieldValueInvalid"));
  BOOST_TEST(causes[0]["message"].GetString() ==
             std::string("Invalid value: 0: must be positive"));
  BOOST_TEST(causes[0]["field"].GetString() == std::string("spec.leaseDurationSeconds"));
  BOOST_TEST(causes[1]["reason"].GetString() == std::string("FieldValueRequired"));
  BOOST_TEST(!causes[0].HasMember("type"));
  BOOST_TEST(doc["details"]["kind"].GetString() == std::string("PoolLease"));
}

BOOST_AUTO_TEST_CASE(cause_fields_omitted_when_empty) {
  Response r = ErrorResponse(store::InternalError("boom"));
  BOOST_TEST(r.status == 500);
  BOOST_TEST(r.body.find(R"("details":{"causes":[{"message":"boom"}]})") != std::string::npos,
             r.body);
}

BOOST_AUTO_TEST_CASE(too_many_requests_has_retry_after) {
  Response r = ErrorResponse(store::TooManyRequestsError("slow down", 3));
  BOOST_TEST(r.status == 429);
  BOOST_TEST(HeaderOf(r, "Retry-After") == "3");
  rapidjson::Document doc = ParseBody(r.body);
  BOOST_TEST(doc["reason"].GetString() == std::string("TooManyRequests"));
  BOOST_TEST(doc["details"]["retryAfterSeconds"].GetInt() == 3);
  // Without a delay, 1 second, as the max-in-flight filter sends.
  Response zero = ErrorResponse(store::TooManyRequestsError("slow down", 0));
  BOOST_TEST(HeaderOf(zero, "Retry-After") == "1");
  BOOST_TEST(ParseBody(zero.body)["details"]["retryAfterSeconds"].GetInt() == 1);
}

BOOST_AUTO_TEST_CASE(service_unavailable_retry_after_only_when_set) {
  Response plain = ErrorResponse(store::ServiceUnavailableError("not ready"));
  BOOST_TEST(plain.status == 503);
  BOOST_TEST(HeaderOf(plain, "Retry-After") == "<none>");
  store::ApiErrorInfo info;
  info.code = 503;
  info.reason = "ServiceUnavailable";
  info.message = "not leader";
  info.retry_after_seconds = 5;
  Response retry = ErrorResponse(store::MakeApiError(absl::StatusCode::kUnavailable, info));
  BOOST_TEST(HeaderOf(retry, "Retry-After") == "5");
}

BOOST_AUTO_TEST_CASE(plain_absl_codes_map_by_table) {
  struct Case {
    absl::Status status;
    int code;
    const char* reason;
  };
  const Case cases[] = {
      {absl::NotFoundError("n"), 404, "NotFound"},
      {absl::AlreadyExistsError("e"), 409, "AlreadyExists"},
      {absl::AbortedError("c"), 409, "Conflict"},
      {absl::InvalidArgumentError("i"), 400, "BadRequest"},
      {absl::OutOfRangeError("o"), 410, "Expired"},
      {absl::UnauthenticatedError("u"), 401, "Unauthorized"},
      {absl::PermissionDeniedError("p"), 403, "Forbidden"},
      {absl::UnavailableError("u"), 503, "ServiceUnavailable"},
      {absl::InternalError("x"), 500, "InternalError"},
  };
  for (const auto& c : cases) {
    Response r = ErrorResponse(c.status);
    BOOST_TEST(r.status == c.code, c.status);
    rapidjson::Document doc = ParseBody(r.body);
    BOOST_TEST(doc["reason"].GetString() == std::string(c.reason));
    BOOST_TEST(doc["code"].GetInt() == c.code);
    BOOST_TEST(doc["status"].GetString() == std::string("Failure"));
  }
}

BOOST_AUTO_TEST_CASE(ok_status_is_not_rendered_as_success) {
  Response r = ErrorResponse(absl::OkStatus());
  BOOST_TEST(r.status == 500);
  BOOST_TEST(ParseBody(r.body)["reason"].GetString() == std::string("InternalError"));
}

BOOST_AUTO_TEST_CASE(messages_are_escaped_and_valid_utf8) {
  Response r = ErrorResponse(store::BadRequestError("quote \" newline \n bad \xFF end"));
  rapidjson::Document doc = ParseBody(r.body);
  BOOST_TEST(doc["message"].GetString() ==
             std::string("quote \" newline \n bad \xEF\xBF\xBD end"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(status_json)

BOOST_AUTO_TEST_CASE(expired_for_watch_error_events) {
  std::string body = StatusJson(store::ExpiredError("too old resource version: 5 (20)"));
  BOOST_TEST(body ==
             R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
             R"json("message":"too old resource version: 5 (20)","reason":"Expired","code":410})json");
}

BOOST_AUTO_TEST_CASE(timeout_with_retry_and_cause) {
  rapidjson::Document doc = ParseBody(StatusJson(store::TimeoutError("too large", true)));
  BOOST_TEST(doc["code"].GetInt() == 504);
  BOOST_TEST(doc["details"]["retryAfterSeconds"].GetInt() == 1);
  BOOST_TEST(doc["details"]["causes"][0]["reason"].GetString() ==
             std::string("ResourceVersionTooLarge"));
}

BOOST_AUTO_TEST_CASE(success_status) {
  BOOST_TEST(SuccessStatusJson("x", "coordination.pool", "poolleases", "u-1") ==
             R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",)"
             R"("details":{"name":"x","group":"coordination.pool","kind":"poolleases",)"
             R"("uid":"u-1"}})");
  BOOST_TEST(SuccessStatusJson("", "", "", "") ==
             R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"})");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
