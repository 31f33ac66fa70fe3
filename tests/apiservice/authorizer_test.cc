#define BOOST_TEST_MODULE apiservice_authorizer
#include <boost/test/unit_test.hpp>

#include "apiservice/authenticator.h"
#include "apiservice/authorizer.h"
#include "store/api_error.h"
#include "tests/apiservice/request_info_testing.h"

namespace poolcoord::apiservice {
namespace {

base::UserInfo User(std::string name, std::vector<std::string> groups) {
  base::UserInfo u;
  u.username = std::move(name);
  u.groups = std::move(groups);
  u.groups.push_back(kAuthenticatedGroup);
  return u;
}

using testing::Info;
using testing::kBase;

struct Fixture {
  Fixture()
      : authz(AuthorizerOptions{{"/healthz", "/readyz", "/livez", "/debug/*"},
                                "system:serviceaccount:kube-system:poolcoord",
                                {"openyurt:yurt-coordinator:node-lease-proxy-client"}}) {}
  bool Allowed(const base::UserInfo& u, const RequestInfo& i) {
    return authz.Authorize(u, i).ok();
  }
  Authorizer authz;
};

BOOST_FIXTURE_TEST_SUITE(AuthorizerTest, Fixture)

BOOST_AUTO_TEST_CASE(MastersMayDoEverything) {
  base::UserInfo admin = User("admin", {"system:masters"});
  BOOST_TEST(Allowed(admin, Info("DELETE", kBase + "/poolleases")));
  BOOST_TEST(Allowed(admin, Info("PUT", kBase + "/delegatedleases/n/status")));
  BOOST_TEST(Allowed(admin, Info("GET", "/api/v1/pods")));
  BOOST_TEST(Allowed(admin, Info("POST", "/anything")));
}

BOOST_AUTO_TEST_CASE(AuthenticatedUsersReadDiscoveryOnly) {
  base::UserInfo u = User("system:aggregator", {});
  for (const std::string& path : {std::string("/apis"), std::string("/apis/coordination.pool"),
                                  kBase, std::string("/api"), std::string("/openapi/v2"),
                                  std::string("/openapi/v3/apis/coordination.pool/v1alpha1"),
                                  std::string("/version"), std::string("/metrics"),
                                  std::string("/readyz")}) {
    BOOST_TEST(Allowed(u, Info("GET", path)), path);
  }
  BOOST_TEST(!Allowed(u, Info("POST", "/apis")));
  BOOST_TEST(!Allowed(u, Info("GET", kBase + "/poolleases")));
  BOOST_TEST(!Allowed(u, Info("GET", "/secret-path")));
}

BOOST_AUTO_TEST_CASE(AnonymousReachesPublicPathsOnly) {
  base::UserInfo anon = AnonymousUser();
  BOOST_TEST(Allowed(anon, Info("GET", "/healthz")));
  BOOST_TEST(Allowed(anon, Info("GET", "/readyz/ping")));
  BOOST_TEST(Allowed(anon, Info("GET", "/version")));
  BOOST_TEST(Allowed(anon, Info("GET", "/metrics")));
  BOOST_TEST(Allowed(anon, Info("POST", "/validate-delegated-heartbeat")));
  BOOST_TEST(Allowed(anon, Info("GET", "/debug/pprof")));  // always-allow prefix
  BOOST_TEST(!Allowed(anon, Info("GET", "/apis")));
  BOOST_TEST(!Allowed(anon, Info("GET", kBase + "/poolleases")));
}

BOOST_AUTO_TEST_CASE(NodesMayUseBothResources) {
  base::UserInfo node = User("system:node:hz-1", {"system:nodes"});
  BOOST_TEST(Allowed(node, Info("POST", kBase + "/poolleases")));
  BOOST_TEST(Allowed(node, Info("PUT", kBase + "/poolleases/hangzhou")));
  BOOST_TEST(Allowed(node, Info("DELETE", kBase + "/delegatedleases/hz-2")));
  BOOST_TEST(Allowed(node, Info("GET", kBase + "/delegatedleases", {{"watch", "1"}})));
  BOOST_TEST(!Allowed(node, Info("GET", "/api/v1/pods")));
  BOOST_TEST(!Allowed(node, Info("GET", kBase + "/namespaces/x/poolleases")));
}

BOOST_AUTO_TEST_CASE(ForwarderAndLeaseProxy) {
  base::UserInfo fwd = User("system:serviceaccount:kube-system:poolcoord", {});
  BOOST_TEST(Allowed(fwd, Info("GET", kBase + "/delegatedleases")));
  BOOST_TEST(Allowed(fwd, Info("GET", kBase + "/poolleases/p", {})));
  // It keeps its record on the cloud Lease: nothing of ours to write.
  BOOST_TEST(!Allowed(fwd, Info("PATCH", kBase + "/delegatedleases/n/status")));
  BOOST_TEST(!Allowed(fwd, Info("PUT", kBase + "/delegatedleases/n/status")));
  BOOST_TEST(!Allowed(fwd, Info("PUT", kBase + "/delegatedleases/n")));
  BOOST_TEST(!Allowed(fwd, Info("PUT", kBase + "/poolleases/p/status")));
  BOOST_TEST(!Allowed(fwd, Info("POST", kBase + "/delegatedleases")));

  base::UserInfo proxy = User("openyurt:yurt-coordinator:node-lease-proxy-client", {});
  BOOST_TEST(Allowed(proxy, Info("GET", kBase + "/poolleases", {{"watch", "true"}})));
  BOOST_TEST(!Allowed(proxy, Info("PUT", kBase + "/poolleases/p")));
}

BOOST_AUTO_TEST_CASE(ForbiddenMessagesAreKubeApiservers) {
  base::UserInfo u = User("u", {});
  absl::Status st = authz.Authorize(u, Info("GET", kBase + "/poolleases"));
  store::ApiErrorInfo e = store::ApiErrorFromStatus(st);
  BOOST_TEST(e.code == 403);
  BOOST_TEST(e.reason == "Forbidden");
  BOOST_TEST(e.message ==
             "poolleases.coordination.pool is forbidden: User \"u\" cannot list resource "
             "\"poolleases\" in API group \"coordination.pool\" at the cluster scope");
  BOOST_TEST(e.group == "coordination.pool");
  BOOST_TEST(e.kind == "poolleases");

  e = store::ApiErrorFromStatus(authz.Authorize(u, Info("PUT", kBase + "/delegatedleases/n1/status")));
  BOOST_TEST(e.message ==
             "delegatedleases.coordination.pool \"n1\" is forbidden: User \"u\" cannot update "
             "resource \"delegatedleases/status\" in API group \"coordination.pool\" at the "
             "cluster scope");
  BOOST_TEST(e.name == "n1");

  e = store::ApiErrorFromStatus(authz.Authorize(u, Info("GET", "/x")));
  BOOST_TEST(e.message == "forbidden: User \"u\" cannot get path \"/x\"");

  e = store::ApiErrorFromStatus(authz.Authorize(u, Info("GET", "/api/v1/namespaces/ns/pods")));
  BOOST_TEST(e.message ==
             "pods is forbidden: User \"u\" cannot list resource \"pods\" in API group \"\" in "
             "the namespace \"ns\"");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
