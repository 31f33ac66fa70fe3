#define BOOST_TEST_MODULE api_error
#include <boost/test/unit_test.hpp>

#include <string>

#include "absl/status/status.h"
#include "store/api_error.h"

namespace poolcoord::store {
namespace {

BOOST_AUTO_TEST_SUITE(ApiError)

BOOST_AUTO_TEST_CASE(NotFoundCarriesDetails) {
  absl::Status s = NotFoundError("poolleases", "x");
  BOOST_TEST(s.code() == absl::StatusCode::kNotFound);
  BOOST_TEST(std::string(s.message()) == "poolleases.coordination.pool \"x\" not found");
  ApiErrorInfo info = ApiErrorFromStatus(s);
  BOOST_TEST(info.code == 404);
  BOOST_TEST(info.reason == "NotFound");
  BOOST_TEST(info.message == "poolleases.coordination.pool \"x\" not found");
  BOOST_TEST(info.name == "x");
  BOOST_TEST(info.group == "coordination.pool");
  BOOST_TEST(info.kind == "poolleases");
}

BOOST_AUTO_TEST_CASE(AlreadyExistsAndConflictStayDistinct) {
  ApiErrorInfo exists = ApiErrorFromStatus(AlreadyExistsError("delegatedleases", "n1"));
  BOOST_TEST(exists.code == 409);
  BOOST_TEST(exists.reason == "AlreadyExists");
  BOOST_TEST(exists.message == "delegatedleases.coordination.pool \"n1\" already exists");

  absl::Status stale = StaleResourceVersionError("poolleases", "x");
  BOOST_TEST(stale.code() == absl::StatusCode::kAborted);
  ApiErrorInfo conflict = ApiErrorFromStatus(stale);
  BOOST_TEST(conflict.code == 409);
  BOOST_TEST(conflict.reason == "Conflict");
  BOOST_TEST(conflict.message ==
             "Operation cannot be fulfilled on poolleases.coordination.pool \"x\": the object has "
             "been modified; please apply your changes to the latest version and try again");
  BOOST_TEST(conflict.kind == "poolleases");
}

BOOST_AUTO_TEST_CASE(InvalidSingleCause) {
  absl::Status s = InvalidError(
      "PoolLease", "x", {FieldInvalid("spec.leaseDurationSeconds", "0", "must be greater than 0")});
  BOOST_TEST(s.code() == absl::StatusCode::kInvalidArgument);
  ApiErrorInfo info = ApiErrorFromStatus(s);
  BOOST_TEST(info.code == 422);
  BOOST_TEST(info.reason == "Invalid");
  BOOST_TEST(info.message ==
             "PoolLease.coordination.pool \"x\" is invalid: spec.leaseDurationSeconds: Invalid "
             "value: 0: must be greater than 0");
  BOOST_TEST(info.kind == "PoolLease");
  BOOST_REQUIRE(info.causes.size() == 1u);
  BOOST_TEST(info.causes[0].type == "FieldValueInvalid");
  BOOST_TEST(info.causes[0].field == "spec.leaseDurationSeconds");
  BOOST_TEST(info.causes[0].message == "Invalid value: 0: must be greater than 0");
}

BOOST_AUTO_TEST_CASE(InvalidSeveralCausesAggregate) {
  ApiErrorInfo info = ApiErrorFromStatus(InvalidError(
      "DelegatedLease", "n1",
      {FieldRequired("spec.poolName"), FieldForbidden("spec.delegate", "must be the writer")}));
  BOOST_TEST(info.message ==
             "DelegatedLease.coordination.pool \"n1\" is invalid: [spec.poolName: Required value, "
             "spec.delegate: Forbidden: must be the writer]");
  BOOST_REQUIRE(info.causes.size() == 2u);
  BOOST_TEST(info.causes[0].type == "FieldValueRequired");
  BOOST_TEST(info.causes[1].type == "FieldValueForbidden");
}

BOOST_AUTO_TEST_CASE(FieldCauseWording) {
  BOOST_TEST(FieldRequired("a").message == "Required value");
  BOOST_TEST(FieldRequired("a", "needed").message == "Required value: needed");
  BOOST_TEST(FieldInvalid("a", "\"yesterday\"", "bad").message ==
             "Invalid value: \"yesterday\": bad");
  BOOST_TEST(FieldTooLong("a", "may not be longer than 5").message ==
             "Too long: may not be longer than 5");
  BOOST_TEST(FieldTooLong("a", "x").type == "FieldValueTooLong");
  auto ns = FieldNotSupported("a", "\"yes\"", "supported values: \"true\"");
  BOOST_TEST(ns.message == "Unsupported value: \"yes\": supported values: \"true\"");
  BOOST_TEST(ns.type == "FieldValueNotSupported");
}

BOOST_AUTO_TEST_CASE(CodesAndReasons) {
  struct Case {
    absl::Status status;
    absl::StatusCode code;
    int http;
    const char* reason;
  };
  const Case cases[] = {
      {BadRequestError("b"), absl::StatusCode::kInvalidArgument, 400, "BadRequest"},
      {UnauthorizedError(), absl::StatusCode::kUnauthenticated, 401, "Unauthorized"},
      {ForbiddenError("f"), absl::StatusCode::kPermissionDenied, 403, "Forbidden"},
      {MethodNotAllowedError("m"), absl::StatusCode::kFailedPrecondition, 405, "MethodNotAllowed"},
      {NotAcceptableError("n"), absl::StatusCode::kFailedPrecondition, 406, "NotAcceptable"},
      {ExpiredError("too old resource version: 5 (20)"), absl::StatusCode::kOutOfRange, 410,
       "Expired"},
      {RequestEntityTooLargeError("r"), absl::StatusCode::kResourceExhausted, 413,
       "RequestEntityTooLarge"},
      {UnsupportedMediaTypeError("u"), absl::StatusCode::kFailedPrecondition, 415,
       "UnsupportedMediaType"},
      {TooManyRequestsError("t", 3), absl::StatusCode::kResourceExhausted, 429, "TooManyRequests"},
      {InternalError("i"), absl::StatusCode::kInternal, 500, "InternalError"},
      {ServiceUnavailableError("s"), absl::StatusCode::kUnavailable, 503, "ServiceUnavailable"},
      {TimeoutError("t"), absl::StatusCode::kDeadlineExceeded, 504, "Timeout"},
  };
  for (const auto& c : cases) {
    BOOST_TEST(c.status.code() == c.code, c.reason);
    ApiErrorInfo info = ApiErrorFromStatus(c.status);
    BOOST_TEST(info.code == c.http, c.reason);
    BOOST_TEST(info.reason == c.reason);
  }
  BOOST_TEST(ApiErrorFromStatus(TooManyRequestsError("t", 3)).retry_after_seconds == 3);
  BOOST_TEST(ApiErrorFromStatus(ExpiredError("too old resource version: 5 (20)")).message ==
             "too old resource version: 5 (20)");
  BOOST_TEST(ApiErrorFromStatus(InternalError("boom")).message == "Internal error occurred: boom");
}

BOOST_AUTO_TEST_CASE(TimeoutResourceVersionTooLarge) {
  ApiErrorInfo plain = ApiErrorFromStatus(TimeoutError("slow"));
  BOOST_TEST(plain.causes.empty());
  ApiErrorInfo info =
      ApiErrorFromStatus(TimeoutError("Too large resource version: 9, current: 3", true));
  BOOST_TEST(info.code == 504);
  BOOST_TEST(info.message == "Timeout: Too large resource version: 9, current: 3");
  BOOST_REQUIRE(info.causes.size() == 1u);
  BOOST_TEST(info.causes[0].type == "ResourceVersionTooLarge");
}

BOOST_AUTO_TEST_CASE(PlainStatusWithoutPayload) {
  struct Case {
    absl::Status status;
    int http;
    const char* reason;
  };
  const Case cases[] = {
      {absl::NotFoundError("nf"), 404, "NotFound"},
      {absl::AlreadyExistsError("ae"), 409, "AlreadyExists"},
      {absl::AbortedError("ab"), 409, "Conflict"},
      {absl::InvalidArgumentError("ia"), 400, "BadRequest"},
      {absl::OutOfRangeError("or"), 410, "Expired"},
      {absl::UnauthenticatedError("ua"), 401, "Unauthorized"},
      {absl::PermissionDeniedError("pd"), 403, "Forbidden"},
      {absl::ResourceExhaustedError("re"), 429, "TooManyRequests"},
      {absl::UnavailableError("un"), 503, "ServiceUnavailable"},
      {absl::DeadlineExceededError("de"), 504, "Timeout"},
      {absl::InternalError("in"), 500, "InternalError"},
      {absl::UnknownError("uk"), 500, "InternalError"},
  };
  for (const auto& c : cases) {
    ApiErrorInfo info = ApiErrorFromStatus(c.status);
    BOOST_TEST(info.code == c.http, c.reason);
    BOOST_TEST(info.reason == c.reason);
    BOOST_TEST(info.message == std::string(c.status.message()));
  }
}

BOOST_AUTO_TEST_CASE(PayloadSurvivesAwkwardText) {
  ApiErrorInfo in;
  in.code = 418;
  in.reason = "Teapot";
  in.message = "12:34 \"quoted\"\nnewline \x01";
  in.name = "";
  in.uid = "u:1";
  in.causes = {{"T", "m:2", "f.g"}, {"", "", ""}};
  ApiErrorInfo out = ApiErrorFromStatus(MakeApiError(absl::StatusCode::kUnknown, in));
  BOOST_TEST(out.code == 418);
  BOOST_TEST(out.message == in.message);
  BOOST_TEST(out.uid == "u:1");
  BOOST_REQUIRE(out.causes.size() == 2u);
  BOOST_TEST(out.causes[0].message == "m:2");
  BOOST_TEST(out.causes[0].field == "f.g");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::store
