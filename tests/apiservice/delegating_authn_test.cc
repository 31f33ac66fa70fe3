#define BOOST_TEST_MODULE apiservice_delegating_authn
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "apiservice/delegating_authn.h"
#include "base/clock.h"
#include "cloud/errors.h"

namespace poolcoord::apiservice {
namespace {

using namespace std::chrono_literals;

// Stands in for kube-apiserver's TokenReview: records each request, answers from
// a token table, or fails when told to.
struct FakeCloud : cloud::TokenReviewInterface {
  std::vector<std::string> tokens_asked;
  bool unreachable = false;
  int http_status = 201;
  std::string status_error;

  absl::StatusOr<cloud::TokenReview> Create(const cloud::TokenReview& review) override {
    tokens_asked.push_back(review.token);
    if (unreachable) return absl::UnavailableError("connection refused");
    if (http_status != 201) {
      return cloud::StatusFromResponse(
          http_status, R"({"kind":"Status","apiVersion":"v1","status":"Failure",)"
                       R"("message":"forbidden","reason":"Forbidden","code":403})");
    }
    cloud::TokenReview answer = review;
    if (review.token == "good") {
      answer.authenticated = true;
      answer.user.username = "alice";
      answer.user.uid = "u-1";
      answer.user.groups = {"team-a", "team-b"};
      answer.user.extra["scopes"] = {"x", "y"};
    }
    answer.error = status_error;
    return answer;
  }
};

struct Fixture {
  Fixture() {
    WebhookTokenReviewerOptions o;
    o.clock = &clock;
    reviewer = std::make_unique<WebhookTokenReviewer>(&cloud, o);
  }
  base::FakeClock clock;
  FakeCloud cloud;
  std::unique_ptr<WebhookTokenReviewer> reviewer;
};

BOOST_FIXTURE_TEST_SUITE(TokenReviewShape, Fixture)

BOOST_AUTO_TEST_CASE(PostsATokenReviewAndReadsTheUser) {
  absl::StatusOr<TokenReviewResult> r = reviewer->Review("good");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST(cloud.tokens_asked == std::vector<std::string>{"good"});
  BOOST_TEST(r->authenticated);
  BOOST_TEST(r->user.username == "alice");
  BOOST_TEST(r->user.uid == "u-1");
  BOOST_TEST(r->user.groups == (std::vector<std::string>{"team-a", "team-b"}));
  BOOST_TEST(r->user.extra.at("scopes") == (std::vector<std::string>{"x", "y"}));
}

BOOST_AUTO_TEST_CASE(FailuresAreErrorsNotAnswers) {
  cloud.unreachable = true;
  BOOST_TEST(absl::IsUnavailable(reviewer->Review("good").status()));
  cloud.unreachable = false;
  cloud.http_status = 403;
  absl::StatusOr<TokenReviewResult> r = reviewer->Review("good");
  BOOST_TEST(absl::IsPermissionDenied(r.status()));
  BOOST_TEST(std::string(r.status().message()).find("HTTP 403") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(TokenReviewCache, Fixture)

BOOST_AUTO_TEST_CASE(AuthenticatedAnswersAreCachedTenSeconds) {
  BOOST_TEST(reviewer->Review("good")->authenticated);
  clock.Advance(9s);
  BOOST_TEST(reviewer->Review("good")->authenticated);
  BOOST_TEST(cloud.tokens_asked.size() == 1u);
  clock.Advance(1s + 1us);
  BOOST_TEST(reviewer->Review("good")->authenticated);
  BOOST_TEST(cloud.tokens_asked.size() == 2u);
}

BOOST_AUTO_TEST_CASE(UnauthenticatedAnswersAreCachedToo) {
  BOOST_TEST(!reviewer->Review("bad")->authenticated);
  clock.Advance(5s);
  BOOST_TEST(!reviewer->Review("bad")->authenticated);
  BOOST_TEST(cloud.tokens_asked.size() == 1u);
  clock.Advance(5s);
  BOOST_TEST(!reviewer->Review("bad")->authenticated);
  BOOST_TEST(cloud.tokens_asked.size() == 2u);
}

BOOST_AUTO_TEST_CASE(TokensAreCachedSeparately) {
  BOOST_TEST(reviewer->Review("good")->authenticated);
  BOOST_TEST(!reviewer->Review("bad")->authenticated);
  BOOST_TEST(reviewer->Review("good")->authenticated);
  BOOST_TEST(!reviewer->Review("bad")->authenticated);
  BOOST_TEST(cloud.tokens_asked == (std::vector<std::string>{"good", "bad"}));
}

BOOST_AUTO_TEST_CASE(ErrorsAreNotCached) {
  cloud.unreachable = true;
  BOOST_TEST(!reviewer->Review("good").ok());
  cloud.unreachable = false;
  BOOST_TEST(reviewer->Review("good")->authenticated);
  BOOST_TEST(cloud.tokens_asked.size() == 2u);
  // An answer that carries status.error is not cached either (cacheErrs=false).
  cloud.status_error = "webhook backend down";
  BOOST_TEST(reviewer->Review("bad")->error == "webhook backend down");
  BOOST_TEST(reviewer->Review("bad")->error == "webhook backend down");
  BOOST_TEST(cloud.tokens_asked.size() == 4u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
