#define BOOST_TEST_MODULE apiservice_authentication_config
#include <boost/test/unit_test.hpp>

#include "apiservice/authentication_config.h"

namespace poolcoord::apiservice {
namespace {

using Strings = std::vector<std::string>;

// The ConfigMap as kube-apiserver 1.32 writes it (data values are strings).
const char kConfigMap[] = R"({
  "apiVersion": "v1", "kind": "ConfigMap",
  "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system",
               "resourceVersion": "42"},
  "data": {
    "client-ca-file": "-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n",
    "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\nproxy\n-----END CERTIFICATE-----\n",
    "requestheader-allowed-names": "[\"front-proxy-client\",\"aggregator\"]",
    "requestheader-username-headers": "[\"X-Remote-User\"]",
    "requestheader-group-headers": "[\"X-Remote-Group\"]",
    "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
    "requestheader-uid-headers": "[]"
  }
})";

BOOST_AUTO_TEST_SUITE(JsonStringList)

BOOST_AUTO_TEST_CASE(ParsesArraysAndEmptyText) {
  BOOST_TEST(*ParseJsonStringList(R"(["a","b c"])") == (Strings{"a", "b c"}));
  BOOST_TEST(ParseJsonStringList("")->empty());
  BOOST_TEST(ParseJsonStringList("[]")->empty());
}

BOOST_AUTO_TEST_CASE(RejectsAnythingElse) {
  for (const char* bad : {"X-Remote-User", "\"X-Remote-User\"", "[1]", "{\"a\":1}", "[\"a\""}) {
    absl::StatusOr<Strings> r = ParseJsonStringList(bad);
    BOOST_TEST(absl::IsInvalidArgument(r.status()), bad);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ConfigMapParsing)

BOOST_AUTO_TEST_CASE(ReadsEveryKey) {
  absl::StatusOr<AuthenticationConfigMap> c = ParseAuthenticationConfigMap(kConfigMap);
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->exists);
  BOOST_TEST(c->resource_version == "42");
  BOOST_TEST(c->client_ca_pem.find("client") != std::string::npos);
  BOOST_TEST(c->requestheader_client_ca_pem.find("proxy") != std::string::npos);
  BOOST_TEST(c->requestheader_allowed_names == (Strings{"front-proxy-client", "aggregator"}));
  BOOST_TEST(c->requestheader_username_headers == Strings{"X-Remote-User"});
  BOOST_TEST(c->requestheader_group_headers == Strings{"X-Remote-Group"});
  BOOST_TEST(c->requestheader_extra_headers_prefix == Strings{"X-Remote-Extra-"});
  BOOST_TEST(c->requestheader_uid_headers.empty());
}

BOOST_AUTO_TEST_CASE(MissingKeysAreEmpty) {
  absl::StatusOr<AuthenticationConfigMap> c = ParseAuthenticationConfigMap(
      R"({"metadata":{"name":"extension-apiserver-authentication"},
          "data":{"client-ca-file":"pem"}})");
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(c->client_ca_pem == "pem");
  BOOST_TEST(c->requestheader_client_ca_pem.empty());
  BOOST_TEST(c->requestheader_allowed_names.empty());
  BOOST_TEST(c->requestheader_username_headers.empty());
  absl::StatusOr<AuthenticationConfigMap> bare =
      ParseAuthenticationConfigMap(R"({"metadata":{"name":"x"}})");
  BOOST_REQUIRE(bare.ok());
  BOOST_TEST(bare->exists);
  BOOST_TEST(bare->client_ca_pem.empty());
}

BOOST_AUTO_TEST_CASE(AMalformedListNamesItsKey) {
  absl::StatusOr<AuthenticationConfigMap> c = ParseAuthenticationConfigMap(
      R"({"data":{"requestheader-group-headers":"X-Remote-Group"}})");
  BOOST_REQUIRE(absl::IsInvalidArgument(c.status()));
  BOOST_TEST(std::string(c.status().message()).find("requestheader-group-headers") !=
             std::string::npos);
  BOOST_TEST(absl::IsInvalidArgument(ParseAuthenticationConfigMap("not json").status()));
}

BOOST_AUTO_TEST_CASE(SameContentIgnoresTheResourceVersion) {
  AuthenticationConfigMap a = *ParseAuthenticationConfigMap(kConfigMap);
  AuthenticationConfigMap b = a;
  b.resource_version = "43";
  BOOST_TEST(a.SameContent(b));
  b.requestheader_allowed_names.push_back("other");
  BOOST_TEST(!a.SameContent(b));
  BOOST_TEST(!a.SameContent(AuthenticationConfigMap{}));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
