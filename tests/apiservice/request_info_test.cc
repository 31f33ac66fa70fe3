#define BOOST_TEST_MODULE apiservice_request_info
#include <boost/test/unit_test.hpp>

#include "apiservice/request_info.h"

namespace poolcoord::apiservice {
namespace {

handlers::Request Req(std::string method, std::string path,
                      std::vector<std::pair<std::string, std::string>> query = {}) {
  handlers::Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.query = std::move(query);
  return r;
}

constexpr char kBase[] = "/apis/coordination.pool/v1alpha1";

BOOST_AUTO_TEST_SUITE(ResolveRequestInfoTest)

BOOST_AUTO_TEST_CASE(ResourceVerbs) {
  struct Case {
    const char* method;
    std::string path;
    std::vector<std::pair<std::string, std::string>> query;
    const char* verb;
    const char* name;
    const char* subresource;
  };
  std::string base = kBase;
  for (const Case& c : std::vector<Case>{
           {"GET", base + "/poolleases", {}, "list", "", ""},
           {"GET", base + "/poolleases", {{"watch", "true"}}, "watch", "", ""},
           {"GET", base + "/poolleases", {{"watch", "1"}}, "watch", "", ""},
           {"GET", base + "/poolleases", {{"watch", "false"}}, "list", "", ""},
           {"GET", base + "/poolleases", {{"watch", "0"}}, "list", "", ""},
           {"GET", base + "/watch/poolleases", {}, "watch", "", ""},
           {"GET", base + "/watch/poolleases/p1", {}, "watch", "p1", ""},
           {"GET", base + "/poolleases/p1", {}, "get", "p1", ""},
           {"HEAD", base + "/poolleases/p1", {}, "get", "p1", ""},
           {"GET", base + "/poolleases/p1/status", {}, "get", "p1", "status"},
           {"POST", base + "/poolleases", {}, "create", "", ""},
           {"PUT", base + "/delegatedleases/n1", {}, "update", "n1", ""},
           {"PUT", base + "/delegatedleases/n1/status", {}, "update", "n1", "status"},
           {"PATCH", base + "/delegatedleases/n1", {}, "patch", "n1", ""},
           {"DELETE", base + "/delegatedleases/n1", {}, "delete", "n1", ""},
           {"DELETE", base + "/delegatedleases", {}, "deletecollection", "", ""},
           {"GET", base + "/poolleases", {{"fieldSelector", "metadata.name=p9"}}, "list", "p9", ""},
           {"GET", base + "/poolleases",
            {{"watch", "true"}, {"fieldSelector", "metadata.name==p9"}}, "watch", "p9", ""},
       }) {
    RequestInfo info = ResolveRequestInfo(Req(c.method, c.path, c.query));
    BOOST_TEST_CONTEXT(c.method << " " << c.path) {
      BOOST_TEST(info.is_resource_request);
      BOOST_TEST(info.api_prefix == "apis");
      BOOST_TEST(info.api_group == "coordination.pool");
      BOOST_TEST(info.api_version == "v1alpha1");
      BOOST_TEST(info.verb == c.verb);
      BOOST_TEST(info.name == c.name);
      BOOST_TEST(info.subresource == c.subresource);
      BOOST_TEST(info.namespace_ == "");
      BOOST_TEST(info.resource == (c.path.find("delegated") != std::string::npos
                                       ? "delegatedleases"
                                       : "poolleases"));
    }
  }
}

BOOST_AUTO_TEST_CASE(NamespacedPaths) {
  RequestInfo info = ResolveRequestInfo(
      Req("GET", std::string(kBase) + "/namespaces/ns1/poolleases/p1"));
  BOOST_TEST(info.is_resource_request);
  BOOST_TEST(info.namespace_ == "ns1");
  BOOST_TEST(info.resource == "poolleases");
  BOOST_TEST(info.name == "p1");
  // The namespace object itself, and its status subresource.
  info = ResolveRequestInfo(Req("GET", "/api/v1/namespaces/ns1/status"));
  BOOST_TEST(info.api_group == "");
  BOOST_TEST(info.resource == "namespaces");
  BOOST_TEST(info.name == "ns1");
  BOOST_TEST(info.subresource == "status");
}

BOOST_AUTO_TEST_CASE(NonResourcePaths) {
  for (const char* path : {"/", "/apis", "/apis/coordination.pool", "/apis/coordination.pool/v1alpha1",
                           "/api", "/api/v1", "/healthz", "/readyz/ping", "/openapi/v2", "/version"}) {
    RequestInfo info = ResolveRequestInfo(Req("GET", path));
    BOOST_TEST(!info.is_resource_request, path);
    BOOST_TEST(info.verb == "get", path);
    BOOST_TEST(info.path == path);
  }
  RequestInfo info = ResolveRequestInfo(Req("POST", "/validate-delegated-heartbeat"));
  BOOST_TEST(!info.is_resource_request);
  BOOST_TEST(info.verb == "post");
  // A bare /watch with nothing after it names no resource.
  info = ResolveRequestInfo(Req("GET", std::string(kBase) + "/watch"));
  BOOST_TEST(!info.is_resource_request);
}

BOOST_AUTO_TEST_CASE(CoreGroupPaths) {
  RequestInfo info = ResolveRequestInfo(Req("GET", "/api/v1/pods"));
  BOOST_TEST(info.is_resource_request);
  BOOST_TEST(info.api_prefix == "api");
  BOOST_TEST(info.api_group == "");
  BOOST_TEST(info.api_version == "v1");
  BOOST_TEST(info.resource == "pods");
  BOOST_TEST(info.verb == "list");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
