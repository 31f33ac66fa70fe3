#define BOOST_TEST_MODULE apiservice_delegating_authn
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "apiservice/delegating_authn.h"
#include "base/clock.h"
#include "rapidjson/document.h"

namespace poolcoord::apiservice {
namespace {

using namespace std::chrono_literals;

// Stands in for kube-apiserver's TokenReview: records each request, answers from
// a token table, or fails when told to.
struct FakeCloud {
  std::vector<std::string> tokens_asked;
  std::vector<std::string> paths;
  bool unreachable = false;
  int http_status = 201;
  std::string status_error;

  ReviewPoster Poster() {
    return [this](std::string_view path, std::string_view body)
               -> absl::StatusOr<store::KubeResponse> {
      paths.emplace_back(path);
      rapidjson::Document d;
      d.Parse(body.data(), body.size());
      BOOST_REQUIRE(!d.HasParseError());
      BOOST_TEST(std::string(d["apiVersion"].GetString()) == "authentication.k8s.io/v1");
      BOOST_TEST(std::string(d["kind"].GetString()) == "TokenReview");
      std::string token = d["spec"]["token"].GetString();
      tokens_asked.push_back(token);
      if (unreachable) return absl::UnavailableError("connection refused");
      if (http_status != 201) {
        return store::KubeResponse{http_status,
                                   R"({"kind":"Status","apiVersion":"v1","status":"Failure",)"
                                   R"("message":"forbidden","reason":"Forbidden","code":403})"};
      }
      if (token == "good") {
        return store::KubeResponse{
            201, R"({"kind":"TokenReview","status":{"authenticated":true,"user":{)"
                 R"("username":"alice","uid":"u-1","groups":["team-a","team-b"],)"
                 R"("extra":{"scopes":["x","y"]}}}})"};
      }
      std::string err = status_error.empty() ? "" : ",\"error\":\"" + status_error + "\"";
      return store::KubeResponse{201, R"({"kind":"TokenReview","status":{"authenticated":false)" +
                                          err + "}}"};
    };
  }
};

struct Fixture {
  Fixture() {
    WebhookTokenReviewerOptions o;
    o.clock = &clock;
    reviewer = std::make_unique<WebhookTokenReviewer>(cloud.Poster(), o);
  }
  base::FakeClock clock;
  FakeCloud cloud;
  std::unique_ptr<WebhookTokenReviewer> reviewer;
};

BOOST_FIXTURE_TEST_SUITE(TokenReviewShape, Fixture)

BOOST_AUTO_TEST_CASE(PostsATokenReviewAndReadsTheUser) {
  absl::StatusOr<TokenReviewResult> r = reviewer->Review("good");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST(cloud.paths == std::vector<std::string>{"/apis/authentication.k8s.io/v1/tokenreviews"});
  BOOST_TEST(r->authenticated);
  BOOST_TEST(r->user.username == "alice");
  BOOST_TEST(r->user.uid == "u-1");
  BOOST_TEST(r->user.groups == (std::vector<std::string>{"team-a", "team-b"}));
  BOOST_TEST(r->user.extra.at("scopes") == (std::vector<std::string>{"x", "y"}));
}

BOOST_AUTO_TEST_CASE(BodyEscapesTheToken) {
  std::string body = WebhookTokenReviewer::RequestBody("a\"b\\c");
  rapidjson::Document d;
  d.Parse(body.c_str());
  BOOST_REQUIRE(!d.HasParseError());
  BOOST_TEST(std::string(d["spec"]["token"].GetString()) == "a\"b\\c");
  BOOST_TEST(!d["spec"].HasMember("audiences"));
}

BOOST_AUTO_TEST_CASE(FailuresAreErrorsNotAnswers) {
  cloud.unreachable = true;
  BOOST_TEST(absl::IsUnavailable(reviewer->Review("good").status()));
  cloud.unreachable = false;
  cloud.http_status = 403;
  absl::StatusOr<TokenReviewResult> r = reviewer->Review("good");
  BOOST_TEST(absl::IsPermissionDenied(r.status()));
  BOOST_TEST(std::string(r.status().message()).find("HTTP 403") != std::string::npos);
  BOOST_TEST(absl::IsInvalidArgument(WebhookTokenReviewer::ParseResponse("<html>").status()));
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
