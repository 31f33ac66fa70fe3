#define BOOST_TEST_MODULE openapi
#include <boost/test/unit_test.hpp>

#include <openssl/sha.h>

#include <cstdio>
#include <ctime>
#include <set>
#include <string>
#include <vector>

#include "handlers/openapi.h"
#include "rapidjson/document.h"
#include "tests/handlers/handler_testing.h"

namespace poolcoord::handlers {
namespace {

constexpr char kGvPath[] = "/openapi/v3/apis/coordination.pool/v1alpha1";
constexpr char kBase[] = "/apis/coordination.pool/v1alpha1";

using testing::HeaderOf;
using testing::S;
constexpr auto Parse = testing::ParseObject;

Request Get(std::string path, std::vector<std::pair<std::string, std::string>> query = {},
            std::string accept = "application/json", std::string if_none_match = "") {
  return testing::GetRequest(std::move(path), std::move(query), std::move(accept),
                             std::move(if_none_match));
}

// Every "$ref" value anywhere below `v`.
void CollectRefs(const rapidjson::Value& v, std::vector<std::string>* refs) {
  if (v.IsObject()) {
    for (const auto& m : v.GetObject()) {
      if (std::string_view(m.name.GetString()) == "$ref" && m.value.IsString()) {
        refs->push_back(m.value.GetString());
      } else {
        CollectRefs(m.value, refs);
      }
    }
  } else if (v.IsArray()) {
    for (const auto& item : v.GetArray()) CollectRefs(item, refs);
  }
}

bool HasGvk(const rapidjson::Value& gvk, const char* kind) {
  return gvk.IsObject() && S(gvk["group"]) == "coordination.pool" &&
         S(gvk["version"]) == "v1alpha1" && S(gvk["kind"]) == kind;
}

bool ListHasGvk(const rapidjson::Value& schema, const char* kind) {
  if (!schema.HasMember("x-kubernetes-group-version-kind")) return false;
  const auto& list = schema["x-kubernetes-group-version-kind"];
  if (!list.IsArray()) return false;
  for (const auto& g : list.GetArray()) {
    if (HasGvk(g, kind)) return true;
  }
  return false;
}

std::set<std::string> ParamNames(const rapidjson::Value& op) {
  std::set<std::string> names;
  if (!op.HasMember("parameters")) return names;
  for (const auto& p : op["parameters"].GetArray()) names.insert(S(p["name"]));
  return names;
}

std::string UpperHexSha256(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  std::string hex;
  char buf[3];
  for (unsigned char c : digest) {
    std::snprintf(buf, sizeof(buf), "%02X", c);
    hex += buf;
  }
  return hex;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(openapi_v2)

BOOST_AUTO_TEST_CASE(swagger_document_shape) {
  Response r = ServeOpenApiV2(Get("/openapi/v2"));
  BOOST_TEST(r.status == 200);
  BOOST_TEST(HeaderOf(r, "Content-Type") == "application/json");
  auto d = Parse(r.body);
  BOOST_TEST(S(d["swagger"]) == "2.0");
  const auto& paths = d["paths"];
  for (const char* plural : {"poolleases", "delegatedleases"}) {
    std::string base = std::string(kBase) + "/" + plural;
    for (const std::string& p : {base, base + "/{name}", base + "/{name}/status"}) {
      BOOST_TEST_CONTEXT(p) { BOOST_TEST(paths.HasMember(p.c_str())); }
    }
  }
  const auto& item = paths[(std::string(kBase) + "/poolleases/{name}").c_str()];
  const auto& patch = item["patch"];
  std::set<std::string> consumes;
  for (const auto& c : patch["consumes"].GetArray()) consumes.insert(S(c));
  BOOST_TEST(consumes.count("application/json-patch+json") == 1u);
  BOOST_TEST(consumes.count("application/merge-patch+json") == 1u);
  BOOST_TEST(consumes.count("application/strategic-merge-patch+json") == 0u);
  BOOST_TEST(consumes.count("application/apply-patch+yaml") == 1u);
  BOOST_TEST(S(patch["x-kubernetes-action"]) == "patch");
  BOOST_TEST(HasGvk(patch["x-kubernetes-group-version-kind"], "PoolLease"));
  BOOST_TEST(ParamNames(patch).count("fieldValidation") == 1u);

  const auto& list = paths[(std::string(kBase) + "/delegatedleases").c_str()]["get"];
  BOOST_TEST(S(list["x-kubernetes-action"]) == "list");
  BOOST_TEST(ParamNames(list).count("watch") == 1u);
  BOOST_TEST(S(list["responses"]["200"]["schema"]["$ref"]) ==
             "#/definitions/pool.coordination.v1alpha1.DelegatedLeaseList");

  const auto& defs = d["definitions"];
  for (const char* kind : {"PoolLease", "PoolLeaseList", "DelegatedLease", "DelegatedLeaseList"}) {
    std::string name = std::string("pool.coordination.v1alpha1.") + kind;
    BOOST_TEST_CONTEXT(name) {
      BOOST_REQUIRE(defs.HasMember(name.c_str()));
      BOOST_TEST(ListHasGvk(defs[name.c_str()], kind));
    }
  }
}

BOOST_AUTO_TEST_CASE(every_ref_resolves_to_a_definition) {
  auto d = Parse(ServeOpenApiV2(Get("/openapi/v2")).body);
  std::vector<std::string> refs;
  CollectRefs(d["paths"], &refs);
  CollectRefs(d["definitions"], &refs);
  BOOST_TEST(refs.size() > 20u);
  for (const std::string& ref : refs) {
    BOOST_TEST_CONTEXT(ref) {
      BOOST_REQUIRE(ref.rfind("#/definitions/", 0) == 0u);
      BOOST_TEST(d["definitions"].HasMember(ref.substr(14).c_str()));
    }
  }
}

BOOST_AUTO_TEST_CASE(etag_and_304) {
  Response r = ServeOpenApiV2(Get("/openapi/v2"));
  std::string etag = HeaderOf(r, "ETag");
  BOOST_REQUIRE(etag.size() > 2);
  BOOST_TEST(etag.front() == '"');
  BOOST_TEST(etag.back() == '"');
  Response cached = ServeOpenApiV2(Get("/openapi/v2", {}, "application/json", etag));
  BOOST_TEST(cached.status == 304);
  BOOST_TEST(cached.body.empty());
  BOOST_TEST(HeaderOf(cached, "ETag") == etag);
  BOOST_TEST(ServeOpenApiV2(Get("/openapi/v2", {}, "application/json", "\"old\"")).status == 200);
}

BOOST_AUTO_TEST_CASE(unsupported_accept_is_406) {
  Response r = ServeOpenApiV2(
      Get("/openapi/v2", {}, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"));
  BOOST_TEST(r.status == 406);
  BOOST_TEST(S(Parse(r.body)["reason"]) == "NotAcceptable");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(openapi_v3)

BOOST_AUTO_TEST_CASE(root_lists_only_our_group_version) {
  Response r = ServeOpenApiV3Root(Get("/openapi/v3", {}, "application/json, */*"));
  BOOST_TEST(r.status == 200);
  auto d = Parse(r.body);
  BOOST_REQUIRE_EQUAL(d.MemberCount(), 1u);
  BOOST_REQUIRE_EQUAL(d["paths"].MemberCount(), 1u);
  const auto& entry = d["paths"]["apis/coordination.pool/v1alpha1"];
  BOOST_TEST(S(entry["serverRelativeURL"]) == std::string(kGvPath) + "?hash=" + OpenApiV3Hash());
  std::string etag = HeaderOf(r, "ETag");
  BOOST_TEST(ServeOpenApiV3Root(Get("/openapi/v3", {}, "", etag)).status == 304);
}

BOOST_AUTO_TEST_CASE(hash_is_the_digest_of_the_document) {
  Response r = ServeOpenApiV3GroupVersion(Get(kGvPath));
  BOOST_TEST(r.status == 200);
  BOOST_TEST(OpenApiV3Hash() == UpperHexSha256(r.body));
  BOOST_TEST(HeaderOf(r, "ETag") == "\"" + OpenApiV3Hash() + "\"");
  // Without a hash the URL is not immutable.
  BOOST_TEST(HeaderOf(r, "Cache-Control").empty());
}

BOOST_AUTO_TEST_CASE(current_hash_is_immutable_for_a_year) {
  Response r = ServeOpenApiV3GroupVersion(Get(kGvPath, {{"hash", OpenApiV3Hash()}}));
  BOOST_TEST(r.status == 200);
  BOOST_TEST(HeaderOf(r, "Content-Type") == "application/json");
  BOOST_TEST(HeaderOf(r, "Cache-Control") == "public, immutable");
  std::string expires = HeaderOf(r, "Expires");
  // "Thu, 01 Jan 2027 00:00:00 GMT": next year's date.
  BOOST_REQUIRE_EQUAL(expires.size(), 29u);
  BOOST_TEST(expires.substr(26) == "GMT");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  int year = std::stoi(expires.substr(12, 4));
  BOOST_TEST((year == tm.tm_year + 1900 + 1 || year == tm.tm_year + 1900 + 2));
  // Stable: the same request gives the same URL and body.
  BOOST_TEST(ServeOpenApiV3GroupVersion(Get(kGvPath, {{"hash", OpenApiV3Hash()}})).body == r.body);

  Response cached =
      ServeOpenApiV3GroupVersion(Get(kGvPath, {{"hash", OpenApiV3Hash()}}, "application/json",
                                     "\"" + OpenApiV3Hash() + "\""));
  BOOST_TEST(cached.status == 304);
  BOOST_TEST(cached.body.empty());
  BOOST_TEST(HeaderOf(cached, "Cache-Control") == "public, immutable");
}

BOOST_AUTO_TEST_CASE(stale_hash_redirects_to_current) {
  Response r = ServeOpenApiV3GroupVersion(Get(kGvPath, {{"hash", "0123ABCD"}}));
  BOOST_TEST(r.status == 301);
  BOOST_TEST(HeaderOf(r, "Location") == std::string(kGvPath) + "?hash=" + OpenApiV3Hash());
  BOOST_TEST(HeaderOf(r, "Cache-Control").empty());
}

BOOST_AUTO_TEST_CASE(unsupported_accept_is_406) {
  BOOST_TEST(ServeOpenApiV3GroupVersion(Get(kGvPath, {}, "application/yaml")).status == 406);
  BOOST_TEST(ServeOpenApiV3Root(Get("/openapi/v3", {}, "text/html")).status == 406);
}

BOOST_AUTO_TEST_CASE(patch_operations_for_kubectl_apply) {
  auto d = Parse(ServeOpenApiV3GroupVersion(Get(kGvPath)).body);
  BOOST_TEST(S(d["openapi"]) == "3.0.0");
  int patches = 0;
  for (const auto& path : d["paths"].GetObject()) {
    if (!path.value.HasMember("patch")) continue;
    ++patches;
    const auto& op = path.value["patch"];
    BOOST_TEST_CONTEXT(path.name.GetString()) {
      std::set<std::string> params = ParamNames(op);
      for (const char* p : {"fieldValidation", "fieldManager", "dryRun", "force"}) {
        BOOST_TEST(params.count(p) == 1u, p);
      }
      std::set<std::string> types;
      for (const auto& c : op["requestBody"]["content"].GetObject()) types.insert(c.name.GetString());
      std::set<std::string> expected{"application/json-patch+json", "application/merge-patch+json",
                                     "application/apply-patch+yaml"};
      BOOST_TEST(types == expected, boost::test_tools::per_element());
      BOOST_TEST(S(op["x-kubernetes-action"]) == "patch");
    }
  }
  BOOST_TEST(patches == 4);  // {name} and {name}/status of both resources
}

BOOST_AUTO_TEST_CASE(every_operation_carries_gvk_object_and_action) {
  auto d = Parse(ServeOpenApiV3GroupVersion(Get(kGvPath)).body);
  int ops = 0;
  for (const auto& path : d["paths"].GetObject()) {
    std::string p = path.name.GetString();
    BOOST_TEST(p.rfind(std::string(kBase) + "/", 0) == 0u);
    const char* kind = p.find("delegatedleases") != std::string::npos ? "DelegatedLease"
                                                                        : "PoolLease";
    for (const auto& op : path.value.GetObject()) {
      std::string method = op.name.GetString();
      if (method == "parameters") continue;
      ++ops;
      BOOST_TEST_CONTEXT(p << " " << method) {
        BOOST_TEST(HasGvk(op.value["x-kubernetes-group-version-kind"], kind));
        BOOST_TEST(op.value["x-kubernetes-action"].IsString());
      }
    }
  }
  // Per resource: list/create/deletecollection, get/put/patch/delete, status
  // get/put/patch, watchlist, watch.
  BOOST_TEST(ops == 2 * 12);
}

BOOST_AUTO_TEST_CASE(schemas_have_list_gvk_and_fragment_refs) {
  auto d = Parse(ServeOpenApiV3GroupVersion(Get(kGvPath)).body);
  const auto& schemas = d["components"]["schemas"];
  for (const char* kind : {"PoolLease", "PoolLeaseList", "DelegatedLease", "DelegatedLeaseList"}) {
    std::string name = std::string("pool.coordination.v1alpha1.") + kind;
    BOOST_TEST_CONTEXT(name) {
      BOOST_REQUIRE(schemas.HasMember(name.c_str()));
      BOOST_TEST(ListHasGvk(schemas[name.c_str()], kind));
    }
  }
  std::vector<std::string> refs;
  CollectRefs(d, &refs);
  BOOST_TEST(refs.size() > 20u);
  for (const std::string& ref : refs) {
    BOOST_TEST_CONTEXT(ref) {
      BOOST_REQUIRE(ref.rfind("#/components/schemas/", 0) == 0u);
      BOOST_TEST(schemas.HasMember(ref.substr(21).c_str()));
    }
  }
}

BOOST_AUTO_TEST_CASE(spec_fields_documented_for_kubectl_explain) {
  auto d = Parse(ServeOpenApiV3GroupVersion(Get(kGvPath)).body);
  const auto& schemas = d["components"]["schemas"];
  const auto& lease = schemas["pool.coordination.v1alpha1.PoolLease"];
  BOOST_TEST(!S(lease["description"]).empty());
  BOOST_TEST(S(lease["properties"]["spec"]["allOf"][0]["$ref"]) ==
             "#/components/schemas/pool.coordination.v1alpha1.PoolLeaseSpec");
  BOOST_TEST(!S(lease["properties"]["spec"]["description"]).empty());

  const auto& spec = schemas["pool.coordination.v1alpha1.PoolLeaseSpec"]["properties"];
  for (const char* field :
       {"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions"}) {
    BOOST_TEST_CONTEXT(field) {
      BOOST_REQUIRE(spec.HasMember(field));
      BOOST_TEST(S(spec[field]["description"]).size() > 40u);
    }
  }
  BOOST_TEST(S(spec["leaseDurationSeconds"]["format"]) == "int32");
  BOOST_TEST(S(spec["leaseTransitions"]["format"]) == "int32");
  BOOST_TEST(S(spec["renewTime"]["allOf"][0]["$ref"]) ==
             "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime");
  const auto& micro = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"];
  BOOST_TEST(S(micro["type"]) == "string");
  BOOST_TEST(S(micro["format"]) == "date-time");

  const auto& dspec = schemas["pool.coordination.v1alpha1.DelegatedLeaseSpec"]["properties"];
  for (const char* field : {"holderIdentity", "leaseDurationSeconds", "renewTime", "poolName",
                            "delegate"}) {
    BOOST_TEST(dspec.HasMember(field), field);
  }
  const auto& dstatus = schemas["pool.coordination.v1alpha1.DelegatedLeaseStatus"]["properties"];
  for (const char* field : {"observedTime", "expired", "leaderTerm"}) {
    BOOST_TEST(dstatus.HasMember(field), field);
  }
  const auto& term = schemas["pool.coordination.v1alpha1.LeaderTerm"]["properties"];
  BOOST_TEST(term.HasMember("poolLeaseUID"));
  BOOST_TEST(term.HasMember("leaseTransitions"));

  // Every property of every schema is described.
  for (const auto& schema : schemas.GetObject()) {
    if (!schema.value.HasMember("properties")) continue;
    for (const auto& prop : schema.value["properties"].GetObject()) {
      BOOST_TEST_CONTEXT(schema.name.GetString() << "." << prop.name.GetString()) {
        BOOST_TEST(!S(prop.value["description"]).empty());
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::handlers
