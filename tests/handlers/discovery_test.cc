#define BOOST_TEST_MODULE discovery
#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>

#include "handlers/discovery.h"
#include "rapidjson/document.h"
#include "tests/handlers/handler_testing.h"

namespace poolcoord::handlers {
namespace {

constexpr char kAggV2[] = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
constexpr char kAggV2Beta1[] =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

using testing::HeaderOf;
using testing::S;
constexpr auto Parse = testing::ParseObject;

Request Get(std::string path, std::string accept = "", std::string if_none_match = "") {
  return testing::GetRequest(std::move(path), {}, std::move(accept), std::move(if_none_match));
}

bool HasString(const rapidjson::Value& array, std::string_view s) {
  for (const auto& item : array.GetArray()) {
    if (item.IsString() && item.GetString() == s) return true;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(accept_parsing)

BOOST_AUTO_TEST_CASE(parameters_in_any_order_with_spaces) {
  auto ranges = ParseAccept(
      "application/json ; as=APIGroupDiscoveryList ;v = v2; g=apidiscovery.k8s.io, text/plain");
  BOOST_REQUIRE_EQUAL(ranges.size(), 2u);
  BOOST_TEST(ranges[0].type == "application");
  BOOST_TEST(ranges[0].subtype == "json");
  BOOST_TEST(ranges[0].Param("g") == "apidiscovery.k8s.io");
  BOOST_TEST(ranges[0].Param("v") == "v2");
  BOOST_TEST(ranges[0].Param("as") == "APIGroupDiscoveryList");
  BOOST_TEST(!ranges[0].IsPlainJson());
  BOOST_TEST(ranges[1].subtype == "plain");
}

BOOST_AUTO_TEST_CASE(sorted_by_q_and_q_zero_dropped) {
  auto ranges = ParseAccept("text/plain;q=0.5, application/yaml;q=0, application/json");
  BOOST_REQUIRE_EQUAL(ranges.size(), 2u);
  BOOST_TEST(ranges[0].subtype == "json");
  BOOST_TEST(ranges[1].subtype == "plain");
  BOOST_TEST(ranges[1].q == 0.5);
}

BOOST_AUTO_TEST_CASE(empty_header_accepts_anything) {
  auto ranges = ParseAccept("");
  BOOST_REQUIRE_EQUAL(ranges.size(), 1u);
  BOOST_TEST(ranges[0].IsPlainJson());
}

BOOST_AUTO_TEST_CASE(plain_json_recognised) {
  BOOST_TEST(ParseAccept("application/json")[0].IsPlainJson());
  BOOST_TEST(ParseAccept("*/*")[0].IsPlainJson());
  BOOST_TEST(ParseAccept("application/*")[0].IsPlainJson());
  BOOST_TEST(ParseAccept("application/json;charset=utf-8")[0].IsPlainJson());
  BOOST_TEST(!ParseAccept("application/json;as=Table;v=v1;g=meta.k8s.io")[0].IsPlainJson());
  BOOST_TEST(!ParseAccept("application/yaml")[0].IsPlainJson());
}

BOOST_AUTO_TEST_CASE(if_none_match_forms) {
  BOOST_TEST(IfNoneMatchMatches("\"abc\"", "\"abc\""));
  BOOST_TEST(IfNoneMatchMatches("\"x\", W/\"abc\"", "\"abc\""));
  BOOST_TEST(IfNoneMatchMatches("*", "\"abc\""));
  BOOST_TEST(!IfNoneMatchMatches("\"abd\"", "\"abc\""));
  BOOST_TEST(!IfNoneMatchMatches("", "\"abc\""));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(aggregated_discovery)

BOOST_AUTO_TEST_CASE(v2_as_the_aggregator_asks) {
  Response r = ServeApiGroupList(Get("/apis", std::string(kAggV2) + "," + kAggV2Beta1));
  BOOST_TEST(r.status == 200);
  BOOST_TEST(HeaderOf(r, "Content-Type") == kAggV2);
  std::string etag = HeaderOf(r, "ETag");
  BOOST_TEST(etag.size() > 2);
  BOOST_TEST(etag.front() == '"');
  BOOST_TEST(etag.back() == '"');

  auto d = Parse(r.body);
  BOOST_TEST(S(d["kind"]) == "APIGroupDiscoveryList");
  BOOST_TEST(S(d["apiVersion"]) == "apidiscovery.k8s.io/v2");
  BOOST_REQUIRE_EQUAL(d["items"].Size(), 1u);
  const auto& group = d["items"][0];
  BOOST_TEST(S(group["metadata"]["name"]) == "coordination.pool");
  const auto& version = group["versions"][0];
  BOOST_TEST(S(version["version"]) == "v1alpha1");
  BOOST_TEST(S(version["freshness"]) == "Current");
  BOOST_REQUIRE_EQUAL(version["resources"].Size(), 2u);
  for (const auto& res : version["resources"].GetArray()) {
    std::string name = S(res["resource"]);
    BOOST_TEST_CONTEXT(name) {
      std::string kind = name == "poolleases" ? "PoolLease" : "DelegatedLease";
      std::string shortname = name == "poolleases" ? "pl" : "dl";
      BOOST_TEST(S(res["scope"]) == "Cluster");
      BOOST_TEST(S(res["responseKind"]["group"]) == "coordination.pool");
      BOOST_TEST(S(res["responseKind"]["version"]) == "v1alpha1");
      BOOST_TEST(S(res["responseKind"]["kind"]) == kind);
      BOOST_TEST(S(res["singularResource"]) == name.substr(0, name.size() - 1));
      BOOST_TEST(res["verbs"].Size() == 8u);
      for (const char* verb : {"create", "delete", "deletecollection", "get", "list", "patch",
                               "update", "watch"}) {
        BOOST_TEST(HasString(res["verbs"], verb), verb);
      }
      BOOST_TEST(HasString(res["shortNames"], shortname));
      BOOST_TEST(res["categories"].IsArray());
      BOOST_TEST(res["categories"].Size() == 0u);
      const auto& sub = res["subresources"][0];
      BOOST_TEST(S(sub["subresource"]) == "status");
      BOOST_TEST(S(sub["responseKind"]["kind"]) == kind);
      BOOST_TEST(sub["verbs"].Size() == 3u);
      BOOST_TEST(HasString(sub["verbs"], "patch"));
    }
  }
}

BOOST_AUTO_TEST_CASE(v2beta1_alone_with_reordered_parameters) {
  Response r = ServeApiGroupList(
      Get("/apis", "application/json; as=APIGroupDiscoveryList; v=v2beta1; g=apidiscovery.k8s.io"));
  BOOST_TEST(r.status == 200);
  BOOST_TEST(HeaderOf(r, "Content-Type") == kAggV2Beta1);
  auto d = Parse(r.body);
  BOOST_TEST(S(d["apiVersion"]) == "apidiscovery.k8s.io/v2beta1");
  BOOST_TEST(S(d["kind"]) == "APIGroupDiscoveryList");
}

BOOST_AUTO_TEST_CASE(v2_preferred_when_listed_second) {
  Response r = ServeApiGroupList(Get("/apis", std::string(kAggV2Beta1) + ", " + kAggV2));
  BOOST_TEST(HeaderOf(r, "Content-Type") == kAggV2);
}

BOOST_AUTO_TEST_CASE(v2_refused_with_q_zero_falls_to_v2beta1) {
  Response r = ServeApiGroupList(Get("/apis", std::string(kAggV2) + ";q=0," + kAggV2Beta1));
  BOOST_TEST(HeaderOf(r, "Content-Type") == kAggV2Beta1);
}

BOOST_AUTO_TEST_CASE(etag_gives_304_and_differs_between_versions) {
  Response v2 = ServeApiGroupList(Get("/apis", kAggV2));
  Response v2beta1 = ServeApiGroupList(Get("/apis", kAggV2Beta1));
  std::string etag = HeaderOf(v2, "ETag");
  BOOST_TEST(etag != HeaderOf(v2beta1, "ETag"));
  // Stable across calls: the aggregator keeps its cache.
  BOOST_TEST(HeaderOf(ServeApiGroupList(Get("/apis", kAggV2)), "ETag") == etag);

  Response cached = ServeApiGroupList(Get("/apis", kAggV2, etag));
  BOOST_TEST(cached.status == 304);
  BOOST_TEST(cached.body.empty());
  BOOST_TEST(HeaderOf(cached, "ETag") == etag);

  Response changed = ServeApiGroupList(Get("/apis", kAggV2, "\"something-else\""));
  BOOST_TEST(changed.status == 200);
  BOOST_TEST(!changed.body.empty());
  // The v2beta1 ETag does not validate the v2 document.
  BOOST_TEST(ServeApiGroupList(Get("/apis", kAggV2, HeaderOf(v2beta1, "ETag"))).status == 200);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(legacy_discovery)

BOOST_AUTO_TEST_CASE(api_group_list_for_plain_json_and_no_accept) {
  for (const char* accept : {"", "application/json", "application/json, */*", "*/*"}) {
    BOOST_TEST_CONTEXT(accept) {
      Response r = ServeApiGroupList(Get("/apis", accept));
      BOOST_TEST(r.status == 200);
      BOOST_TEST(HeaderOf(r, "Content-Type") == "application/json");
      auto d = Parse(r.body);
      BOOST_TEST(S(d["kind"]) == "APIGroupList");
      BOOST_TEST(S(d["apiVersion"]) == "v1");
      const auto& g = d["groups"][0];
      BOOST_TEST(S(g["name"]) == "coordination.pool");
      BOOST_TEST(S(g["versions"][0]["groupVersion"]) == "coordination.pool/v1alpha1");
      BOOST_TEST(S(g["preferredVersion"]["version"]) == "v1alpha1");
    }
  }
}

BOOST_AUTO_TEST_CASE(unacceptable_is_406_status) {
  for (const char* accept :
       {"application/yaml", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;"
                            "as=APIGroupDiscoveryList",
        "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"}) {
    BOOST_TEST_CONTEXT(accept) {
      Response r = ServeApiGroupList(Get("/apis", accept));
      BOOST_TEST(r.status == 406);
      auto d = Parse(r.body);
      BOOST_TEST(S(d["kind"]) == "Status");
      BOOST_TEST(S(d["reason"]) == "NotAcceptable");
      BOOST_TEST(d["code"].GetInt() == 406);
    }
  }
}

BOOST_AUTO_TEST_CASE(api_group) {
  Response r = ServeApiGroup(Get("/apis/coordination.pool", "application/json"));
  BOOST_TEST(r.status == 200);
  auto d = Parse(r.body);
  BOOST_TEST(S(d["kind"]) == "APIGroup");
  BOOST_TEST(S(d["apiVersion"]) == "v1");
  BOOST_TEST(S(d["name"]) == "coordination.pool");
  BOOST_TEST(S(d["preferredVersion"]["groupVersion"]) == "coordination.pool/v1alpha1");
  BOOST_TEST(ServeApiGroup(Get("/apis/coordination.pool", "application/yaml")).status == 406);
}

BOOST_AUTO_TEST_CASE(api_resource_list_without_accept) {
  Response r = ServeApiResourceList(Get("/apis/coordination.pool/v1alpha1"));
  BOOST_TEST(r.status == 200);
  BOOST_TEST(HeaderOf(r, "Content-Type") == "application/json");
  auto d = Parse(r.body);
  BOOST_TEST(S(d["kind"]) == "APIResourceList");
  BOOST_TEST(S(d["apiVersion"]) == "v1");
  BOOST_TEST(S(d["groupVersion"]) == "coordination.pool/v1alpha1");
  const auto& resources = d["resources"];
  BOOST_REQUIRE_EQUAL(resources.Size(), 4u);
  int seen = 0;
  for (const auto& e : resources.GetArray()) {
    std::string name = S(e["name"]);
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(e["namespaced"].IsFalse());
      BOOST_TEST(e.HasMember("kind"));
      if (name == "poolleases") {
        ++seen;
        BOOST_TEST(S(e["kind"]) == "PoolLease");
        BOOST_TEST(S(e["singularName"]) == "poollease");
        BOOST_TEST(HasString(e["shortNames"], "pl"));
        BOOST_TEST(HasString(e["verbs"], "deletecollection"));
        BOOST_TEST(e["categories"].Size() == 0u);
        BOOST_TEST(S(e["storageVersionHash"]) == "qYyaVUJb0RY=");
      } else if (name == "delegatedleases") {
        ++seen;
        BOOST_TEST(S(e["kind"]) == "DelegatedLease");
        BOOST_TEST(HasString(e["shortNames"], "dl"));
        BOOST_TEST(S(e["storageVersionHash"]) == "dVx/R75UCB0=");
      } else if (name == "poolleases/status" || name == "delegatedleases/status") {
        ++seen;
        BOOST_TEST(S(e["kind"]) == (name == "poolleases/status" ? "PoolLease" : "DelegatedLease"));
        BOOST_TEST(e["verbs"].Size() == 3u);
        BOOST_TEST(HasString(e["verbs"], "update"));
        BOOST_TEST(!HasString(e["verbs"], "list"));
      }
    }
  }
  BOOST_TEST(seen == 4);
  BOOST_TEST(ServeApiResourceList(Get("/apis/coordination.pool/v1alpha1", "text/html")).status ==
             406);
}

BOOST_AUTO_TEST_CASE(storage_version_hash_matches_kube_formula) {
  // base64(sha256("coordination.pool/v1alpha1/<Kind>")[:8]), computed independently.
  BOOST_TEST(StorageVersionHash("PoolLease") == "qYyaVUJb0RY=");
  BOOST_TEST(StorageVersionHash("DelegatedLease") == "dVx/R75UCB0=");
}

BOOST_AUTO_TEST_CASE(version_reports_kubernetes_1_32) {
  Response r = ServeVersion(Get("/version"));
  BOOST_TEST(r.status == 200);
  auto d = Parse(r.body);
  BOOST_TEST(S(d["major"]) == "1");
  BOOST_TEST(S(d["minor"]) == "32");
  BOOST_TEST(S(d["gitVersion"]) == "v1.32.0-poolcoord.0.1.0");
  BOOST_TEST(S(d["platform"]).rfind("linux/", 0) == 0u);
  BOOST_TEST(d.HasMember("buildDate"));
  auto other = Parse(ServeVersion(Get("/version"), "v0.2.0").body);
  BOOST_TEST(S(other["gitVersion"]) == "v1.32.0-poolcoord.0.2.0");
}

BOOST_AUTO_TEST_CASE(api_is_not_found) {
  Response r = ServeApiVersions(Get("/api"));
  BOOST_TEST(r.status == 404);
  auto d = Parse(r.body);
  BOOST_TEST(S(d["kind"]) == "Status");
  BOOST_TEST(S(d["reason"]) == "NotFound");
  BOOST_TEST(d["code"].GetInt() == 404);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::handlers
