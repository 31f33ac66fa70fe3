#define BOOST_TEST_MODULE apiservice_delegating_authz
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "apiservice/authenticator.h"
#include "apiservice/authorizer.h"
#include "apiservice/delegating_authz.h"
#include "base/clock.h"
#include "rapidjson/document.h"
#include "cloud/codec.h"
#include "store/api_error.h"
#include "tests/apiservice/request_info_testing.h"

namespace poolcoord::apiservice {
namespace {

using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

using testing::Info;
using testing::kBase;

base::UserInfo Alice() {
  base::UserInfo u;
  u.username = "alice";
  u.uid = "u-1";
  u.groups = {"team-a", kAuthenticatedGroup};
  u.extra["scopes.example.com"] = {"read", "write"};
  return u;
}

// Stands in for kube-apiserver's SubjectAccessReview: records each spec and
// answers with `decide`.
struct FakeCloud : cloud::SubjectAccessReviewInterface {
  std::vector<std::string> specs;
  bool unreachable = false;
  std::function<std::string(const rapidjson::Value& spec)> decide = [](const rapidjson::Value&) {
    return std::string(R"({"allowed":false})");
  };

  // The typed review goes over the wire as the codec writes it; the checks
  // below read that JSON, as kube-apiserver would.
  absl::StatusOr<cloud::SubjectAccessReview> Create(const cloud::SubjectAccessReview& review) override {
    const std::string body = cloud::EncodeSubjectAccessReview(review);
    rapidjson::Document d;
    d.Parse(body.data(), body.size());
    BOOST_REQUIRE(!d.HasParseError());
    BOOST_TEST(std::string(d["apiVersion"].GetString()) == "authorization.k8s.io/v1");
    BOOST_TEST(std::string(d["kind"].GetString()) == "SubjectAccessReview");
    specs.emplace_back(body);
    if (unreachable) return absl::UnavailableError("connection refused");
    return cloud::DecodeSubjectAccessReview(
        R"({"kind":"SubjectAccessReview","status":)" + decide(d["spec"]) + "}");
  }
};

struct Fixture {
  Fixture() {
    WebhookAccessReviewerOptions o;
    o.clock = &clock;
    reviewer = std::make_unique<WebhookAccessReviewer>(&cloud, o);
  }
  base::FakeClock clock;
  FakeCloud cloud;
  std::unique_ptr<WebhookAccessReviewer> reviewer;
};

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  BOOST_REQUIRE(!d.HasParseError());
  return d;
}

BOOST_AUTO_TEST_SUITE(SpecShape)

BOOST_AUTO_TEST_CASE(ResourceRequestCarriesResourceAttributes) {
  rapidjson::Document d =
      Parse(SubjectAccessReviewSpec(Alice(), Info("PUT", kBase + "/delegatedleases/hz-1/status")));
  BOOST_TEST(!d.HasMember("nonResourceAttributes"));
  const rapidjson::Value& ra = d["resourceAttributes"];
  BOOST_TEST(std::string(ra["verb"].GetString()) == "update");
  BOOST_TEST(std::string(ra["group"].GetString()) == "coordination.pool");
  BOOST_TEST(std::string(ra["version"].GetString()) == "v1alpha1");
  BOOST_TEST(std::string(ra["resource"].GetString()) == "delegatedleases");
  BOOST_TEST(std::string(ra["subresource"].GetString()) == "status");
  BOOST_TEST(std::string(ra["name"].GetString()) == "hz-1");
  BOOST_TEST(!ra.HasMember("namespace"));  // cluster-scoped: omitted, as omitempty does
  BOOST_TEST(std::string(d["user"].GetString()) == "alice");
  BOOST_TEST(std::string(d["uid"].GetString()) == "u-1");
  BOOST_TEST(d["groups"].Size() == 2u);
  BOOST_TEST(std::string(d["groups"][1].GetString()) == "system:authenticated");
  BOOST_TEST(d["extra"]["scopes.example.com"].Size() == 2u);
}

BOOST_AUTO_TEST_CASE(ListCarriesNoNameAndNamespacedCarriesNamespace) {
  rapidjson::Document list = Parse(SubjectAccessReviewSpec(Alice(), Info("GET", kBase + "/poolleases")));
  BOOST_TEST(std::string(list["resourceAttributes"]["verb"].GetString()) == "list");
  BOOST_TEST(!list["resourceAttributes"].HasMember("name"));
  BOOST_TEST(!list["resourceAttributes"].HasMember("subresource"));
  rapidjson::Document core = Parse(
      SubjectAccessReviewSpec(Alice(), Info("GET", "/api/v1/namespaces/kube-system/configmaps/x")));
  BOOST_TEST(std::string(core["resourceAttributes"]["namespace"].GetString()) == "kube-system");
  BOOST_TEST(!core["resourceAttributes"].HasMember("group"));  // the core group is ""
  BOOST_TEST(std::string(core["resourceAttributes"]["version"].GetString()) == "v1");
}

BOOST_AUTO_TEST_CASE(NonResourceRequestCarriesPathAndLowercaseVerb) {
  base::UserInfo bare;
  bare.username = "bob";
  rapidjson::Document d = Parse(SubjectAccessReviewSpec(bare, Info("POST", "/debug/flags")));
  BOOST_TEST(!d.HasMember("resourceAttributes"));
  BOOST_TEST(std::string(d["nonResourceAttributes"]["path"].GetString()) == "/debug/flags");
  BOOST_TEST(std::string(d["nonResourceAttributes"]["verb"].GetString()) == "post");
  BOOST_TEST(!d.HasMember("groups"));
  BOOST_TEST(!d.HasMember("extra"));
  BOOST_TEST(!d.HasMember("uid"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(ReviewCache, Fixture)

BOOST_AUTO_TEST_CASE(AllowedAnswersAreCachedTenSeconds) {
  cloud.decide = [](const rapidjson::Value&) { return std::string(R"({"allowed":true})"); };
  RequestInfo list = Info("GET", kBase + "/poolleases");
  BOOST_TEST(reviewer->Review(Alice(), list)->allowed);
  clock.Advance(9s);
  BOOST_TEST(reviewer->Review(Alice(), list)->allowed);
  BOOST_TEST(cloud.specs.size() == 1u);
  clock.Advance(1s);
  BOOST_TEST(reviewer->Review(Alice(), list)->allowed);
  BOOST_TEST(cloud.specs.size() == 2u);
}

BOOST_AUTO_TEST_CASE(DeniedAnswersAreCachedTenSeconds) {
  cloud.decide = [](const rapidjson::Value&) {
    return std::string(R"({"allowed":false,"denied":true,"reason":"policy says no"})");
  };
  RequestInfo del = Info("DELETE", kBase + "/poolleases/p");
  absl::StatusOr<AccessReviewResult> r = reviewer->Review(Alice(), del);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->denied);
  BOOST_TEST(r->reason == "policy says no");
  clock.Advance(9s);
  BOOST_TEST(reviewer->Review(Alice(), del)->denied);
  BOOST_TEST(cloud.specs.size() == 1u);
  clock.Advance(2s);
  BOOST_TEST(reviewer->Review(Alice(), del)->denied);
  BOOST_TEST(cloud.specs.size() == 2u);
}

BOOST_AUTO_TEST_CASE(DifferentAttributesAreDifferentQuestions) {
  RequestInfo list = Info("GET", kBase + "/poolleases");
  RequestInfo get = Info("GET", kBase + "/poolleases/p");
  base::UserInfo bob = Alice();
  bob.username = "bob";
  (void)reviewer->Review(Alice(), list);
  (void)reviewer->Review(Alice(), get);
  (void)reviewer->Review(bob, list);
  (void)reviewer->Review(Alice(), list);
  BOOST_TEST(cloud.specs.size() == 3u);
}

BOOST_AUTO_TEST_CASE(ErrorsAreNotCachedAndContradictionsAreErrors) {
  cloud.unreachable = true;
  RequestInfo list = Info("GET", kBase + "/poolleases");
  BOOST_TEST(absl::IsUnavailable(reviewer->Review(Alice(), list).status()));
  cloud.unreachable = false;
  BOOST_TEST(!reviewer->Review(Alice(), list)->allowed);
  BOOST_TEST(cloud.specs.size() == 2u);
  cloud.decide = [](const rapidjson::Value&) {
    return std::string(R"({"allowed":true,"denied":true})");
  };
  BOOST_TEST(absl::IsInternal(reviewer->Review(Alice(), Info("GET", kBase + "/poolleases/q")).status()));
}

BOOST_AUTO_TEST_SUITE_END()

// The Authorizer with a reviewer: built-in rules first, the review for the rest.
struct AuthorizerFixture : Fixture {
  AuthorizerFixture()
      : authz(AuthorizerOptions{{"/healthz", "/readyz", "/livez"},
                                "system:serviceaccount:kube-system:poolcoord",
                                {"openyurt:yurt-coordinator:node-lease-proxy-client"},
                                reviewer.get()}) {}
  Authorizer authz;
};

BOOST_FIXTURE_TEST_SUITE(AuthorizerDelegation, AuthorizerFixture)

BOOST_AUTO_TEST_CASE(BuiltInDecisionsNeverAskTheCloud) {
  base::UserInfo admin;
  admin.username = "admin";
  admin.groups = {"system:masters", kAuthenticatedGroup};
  base::UserInfo node;
  node.username = "system:node:hz-1";
  node.groups = {"system:nodes", kAuthenticatedGroup};
  BOOST_TEST(authz.Authorize(admin, Info("DELETE", kBase + "/poolleases/p")).ok());
  BOOST_TEST(authz.Authorize(node, Info("PUT", kBase + "/poolleases/p")).ok());
  BOOST_TEST(authz.Authorize(Alice(), Info("GET", "/apis")).ok());
  BOOST_TEST(authz.Authorize(AnonymousUser(), Info("GET", "/healthz")).ok());
  BOOST_TEST(cloud.specs.empty());
}

BOOST_AUTO_TEST_CASE(TheReviewDecidesTheRest) {
  cloud.decide = [](const rapidjson::Value& spec) {
    bool list = spec.HasMember("resourceAttributes") &&
                std::string(spec["resourceAttributes"]["verb"].GetString()) == "list";
    return std::string(list ? R"({"allowed":true})"
                            : R"({"allowed":false,"reason":"no RBAC policy matched"})");
  };
  BOOST_TEST(authz.Authorize(Alice(), Info("GET", kBase + "/poolleases")).ok());
  absl::Status denied = authz.Authorize(Alice(), Info("DELETE", kBase + "/poolleases/p"));
  store::ApiErrorInfo e = store::ApiErrorFromStatus(denied);
  BOOST_TEST(e.code == 403);
  BOOST_TEST(e.reason == "Forbidden");
  BOOST_TEST(e.message ==
             "poolleases.coordination.pool \"p\" is forbidden: User \"alice\" cannot delete "
             "resource \"poolleases\" in API group \"coordination.pool\" at the cluster scope: "
             "no RBAC policy matched");
  BOOST_TEST(cloud.specs.size() == 2u);
}

BOOST_AUTO_TEST_CASE(AFailedReviewRefusesWith500) {
  cloud.unreachable = true;
  absl::Status st = authz.Authorize(Alice(), Info("GET", kBase + "/poolleases"));
  store::ApiErrorInfo e = store::ApiErrorFromStatus(st);
  BOOST_TEST(e.code == 500);
  BOOST_TEST(e.reason == "InternalError");
  BOOST_TEST(e.message.find("Internal Server Error: \"" + kBase + "/poolleases\": ") == 0u);
  BOOST_TEST(e.message.find("connection refused") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
