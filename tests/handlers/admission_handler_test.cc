#define BOOST_TEST_MODULE admission_handler
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "base/clock.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "handlers/admission_handler.h"
#include "rapidjson/document.h"
#include "store/memory_store.h"
#include "tests/rules_fixture.h"

namespace pe = poolcoord::election;
namespace ph = poolcoord::handlers;
namespace ps = poolcoord::store;
using std::chrono::seconds;

namespace {

using poolcoord::testing::kForwarder;
using poolcoord::testing::kProxy;

struct ReviewSpec {
  std::string api_version = "admission.k8s.io/v1";
  std::string uid = "0df28fbd-5f5f-4d0b-a1e5-1b2f1ab5c4d2";
  std::string node = "hz-3";
  std::string user = "system:node:hz-3";
  std::string group = "system:nodes";
  std::string operation = "UPDATE";
  std::string ns = "kube-node-lease";
  std::string kind_group = "coordination.k8s.io";
  std::string kind = "Lease";
  std::optional<std::string> annotation;
  std::optional<std::string> old_annotation;
  std::string renew = "2026-01-01T00:00:10.000000Z";
  std::string old_renew = "2026-01-01T00:00:00.000000Z";
  std::string metadata_extra;  // appended inside object metadata
};

std::string LeaseJson(const ReviewSpec& r, const std::optional<std::string>& ann,
                      const std::string& renew, const std::string& extra) {
  std::string md = "\"name\":\"" + r.node + "\",\"namespace\":\"" + r.ns +
                   "\",\"resourceVersion\":\"100\"";
  if (ann) md += ",\"annotations\":{\"openyurt.io/delegate-heartbeat\":\"" + *ann + "\"}";
  md += extra;
  return "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{" + md +
         "},\"spec\":{\"holderIdentity\":\"" + r.node +
         "\",\"leaseDurationSeconds\":40,\"renewTime\":\"" + renew + "\"}}";
}

std::string ReviewJson(const ReviewSpec& r) {
  std::string old = r.operation == "UPDATE"
                        ? LeaseJson(r, r.old_annotation, r.old_renew, r.metadata_extra)
                        : "null";
  return "{\"apiVersion\":\"" + r.api_version +
         "\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"" + r.uid +
         "\",\"kind\":{\"group\":\"" + r.kind_group + "\",\"version\":\"v1\",\"kind\":\"" + r.kind +
         "\"},\"resource\":{\"group\":\"coordination.k8s.io\",\"version\":\"v1\",\"resource\":"
         "\"leases\"},\"name\":\"" + r.node + "\",\"namespace\":\"" + r.ns +
         "\",\"operation\":\"" + r.operation + "\",\"userInfo\":{\"username\":\"" + r.user +
         "\",\"groups\":[\"" + r.group + "\",\"system:authenticated\"],\"extra\":{\"a\":[\"b\"]}},"
         "\"object\":" + LeaseJson(r, r.annotation, r.renew, r.metadata_extra) +
         ",\"oldObject\":" + old +
         ",\"dryRun\":false,\"options\":{\"kind\":\"UpdateOptions\",\"apiVersion\":\"meta.k8s.io/v1\"}}}";
}

struct Fixture : poolcoord::testing::RulesFixture {
  explicit Fixture(bool load = true) : RulesFixture(load) {}

  ph::Response Post(const std::string& body, const std::string& method = "POST") {
    ph::Request req;
    req.method = method;
    req.path = ph::kAdmissionPath;
    req.body = body;
    return ph::ServeAdmissionReview(req, {store.get(), &rules});
  }

  // Posts a review, checks the envelope every answer must have, returns response.
  rapidjson::Document Admit(const ReviewSpec& r) {
    ph::Response resp = Post(ReviewJson(r));
    BOOST_TEST(resp.status == 200, resp.body);
    rapidjson::Document d;
    d.Parse(resp.body.c_str());
    BOOST_REQUIRE(!d.HasParseError());
    BOOST_TEST(std::string(d["apiVersion"].GetString()) == r.api_version);
    BOOST_TEST(std::string(d["kind"].GetString()) == "AdmissionReview");
    BOOST_REQUIRE(d.HasMember("response"));
    const auto& response = d["response"];
    BOOST_TEST(std::string(response["uid"].GetString()) == r.uid);
    BOOST_TEST(!response.HasMember("patch"));
    BOOST_TEST(!response.HasMember("patchType"));
    return d;
  }

  bool Allowed(const ReviewSpec& r) { return Admit(r)["response"]["allowed"].GetBool(); }

};

struct Unloaded : Fixture {
  Unloaded() : Fixture(false) {}
};

ReviewSpec As(const std::string& node, const std::string& user, const std::string& group,
              std::optional<std::string> annotation = "true") {
  ReviewSpec r;
  r.node = node;
  r.user = user;
  r.group = group;
  r.annotation = std::move(annotation);
  return r;
}

void ExpectStatus400(const ph::Response& resp) {
  BOOST_TEST(resp.status == 400, resp.body);
  rapidjson::Document d;
  d.Parse(resp.body.c_str());
  BOOST_REQUIRE(!d.HasParseError());
  BOOST_TEST(std::string(d["kind"].GetString()) == "Status");
  BOOST_TEST(d["code"].GetInt() == 400);
  BOOST_TEST(std::string(d["reason"].GetString()) == "BadRequest");
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(envelope, Fixture)

BOOST_AUTO_TEST_CASE(denied_v1_review_echoes_uid_and_api_version) {
  BOOST_REQUIRE(Lead("hangzhou", "hz-1", 0).ok());
  ReviewSpec r = As("hz-3", "system:node:hz-3", "system:nodes");  // node adds the annotation
  auto d = Admit(r);
  const auto& resp = d["response"];
  BOOST_TEST(!resp["allowed"].GetBool());
  BOOST_TEST(resp["status"]["code"].GetInt() == 403);
  BOOST_TEST(std::string(resp["status"]["reason"].GetString()) == "Forbidden");
  BOOST_TEST(std::string(resp["status"]["message"].GetString()).find("may not add") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(v1beta1_answered_in_v1beta1) {
  ReviewSpec r = As("hz-3", "system:node:hz-3", "system:nodes", std::nullopt);
  r.api_version = "admission.k8s.io/v1beta1";
  BOOST_TEST(Allowed(r));
  r.annotation = "true";
  auto d = Admit(r);  // denied, still in v1beta1
  BOOST_TEST(!d["response"]["allowed"].GetBool());
}

BOOST_AUTO_TEST_CASE(bad_input_is_400_status) {
  ExpectStatus400(Post("{]"));
  ExpectStatus400(Post(""));
  ExpectStatus400(Post("[1,2]"));
  ExpectStatus400(Post(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})"));
  ExpectStatus400(
      Post(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}})"));
  ExpectStatus400(Post(
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}})"));
  ExpectStatus400(Post(
      R"({"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"u"}})"));
  ExpectStatus400(
      Post(R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}})"));
  ExpectStatus400(Post(std::string("{\"a\":\"\0\"", 9)));
}

BOOST_AUTO_TEST_CASE(malformed_object_with_uid_answered_as_review) {
  ReviewSpec r = As("hz-3", "system:node:hz-3", "system:nodes");
  std::string body = ReviewJson(r);
  const std::string needle = "\"openyurt.io/delegate-heartbeat\":\"true\"";
  body.replace(body.find(needle), needle.size(), "\"openyurt.io/delegate-heartbeat\":true");
  ph::Response resp = Post(body);
  BOOST_TEST(resp.status == 200);
  rapidjson::Document d;
  d.Parse(resp.body.c_str());
  BOOST_TEST(std::string(d["response"]["uid"].GetString()) == r.uid);
  BOOST_TEST(!d["response"]["allowed"].GetBool());
  BOOST_TEST(d["response"]["status"]["code"].GetInt() == 400);
}

BOOST_AUTO_TEST_CASE(method_and_size_limits) {
  BOOST_TEST(Post("", "GET").status == 405);
  std::string big(ph::kMaxAdmissionReviewBytes + 1, ' ');
  BOOST_TEST(Post(big).status == 413);
  // A review just under the limit is read whole.
  ReviewSpec r = As("hz-3", "system:node:hz-3", "system:nodes", std::nullopt);
  r.metadata_extra = ",\"labels\":{\"pad\":\"" + std::string(1024 * 1024, 'x') + "\"}";
  BOOST_TEST(ReviewJson(r).size() < ph::kMaxAdmissionReviewBytes);
  BOOST_TEST(Allowed(r));
}

BOOST_AUTO_TEST_CASE(realistic_review_with_managed_fields) {
  std::string mf = ",\"managedFields\":[";
  for (int i = 0; i < 40; ++i) {
    if (i) mf += ",";
    mf += "{\"manager\":\"kubelet-" + std::to_string(i) +
          "\",\"operation\":\"Update\",\"apiVersion\":\"coordination.k8s.io/v1\",\"time\":"
          "\"2026-01-01T00:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:spec\":{"
          "\"f:holderIdentity\":{},\"f:renewTime\":{}}}}";
  }
  mf += "],\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"hz-3\","
        "\"uid\":\"a3f9\"}]";
  ReviewSpec r = As("hz-3", "system:node:hz-3", "system:nodes", std::nullopt);
  r.metadata_extra = mf;
  BOOST_TEST(ReviewJson(r).size() > 8192u);
  BOOST_TEST(Allowed(r));
}

BOOST_AUTO_TEST_CASE(not_a_node_lease_allowed_with_warning) {
  ReviewSpec r = As("cm", "mallory", "x");
  r.kind_group = "";
  r.kind = "ConfigMap";
  auto d = Admit(r);
  BOOST_TEST(d["response"]["allowed"].GetBool());
  BOOST_REQUIRE(d["response"].HasMember("warnings"));
  BOOST_TEST(std::string(d["response"]["warnings"][0].GetString()).find(
                 "poolcoord checked nothing") == 0u);

  ReviewSpec other_ns = As("hz-3", "mallory", "x");
  other_ns.ns = "kube-system";
  auto d2 = Admit(other_ns);
  BOOST_TEST(d2["response"]["allowed"].GetBool());
  BOOST_TEST(std::string(d2["response"]["warnings"][0].GetString()).find("kube-system") !=
             std::string::npos);

  ReviewSpec del = As("hz-3", "mallory", "x");
  del.operation = "DELETE";
  auto d3 = Admit(del);
  BOOST_TEST(d3["response"]["allowed"].GetBool());
  BOOST_TEST(d3["response"].HasMember("warnings"));
}

// The exact bytes of an answer: what the rapidjson Writer wrote before, now
// written into one buffer.
BOOST_AUTO_TEST_CASE(answers_byte_for_byte) {
  ReviewSpec plain = As("hz-3", "system:node:hz-3", "system:nodes", std::nullopt);
  ph::Response resp = Post(ReviewJson(plain));
  BOOST_TEST(resp.status == 200);
  BOOST_TEST(resp.body == "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                          "\"response\":{\"uid\":\"0df28fbd-5f5f-4d0b-a1e5-1b2f1ab5c4d2\","
                          "\"allowed\":true}}");
  BOOST_REQUIRE(resp.headers.size() == 1u);
  BOOST_TEST(resp.headers[0].first == "Content-Type");
  BOOST_TEST(resp.headers[0].second == "application/json");

  ReviewSpec lonely = As("lonely", kProxy, "g");
  lonely.api_version = "admission.k8s.io/v1beta1";
  resp = Post(ReviewJson(lonely));
  BOOST_TEST(resp.body ==
             "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\","
             "\"response\":{\"uid\":\"0df28fbd-5f5f-4d0b-a1e5-1b2f1ab5c4d2\",\"allowed\":false,"
             "\"status\":{\"metadata\":{},\"status\":\"Failure\",\"message\":\"node \\\"lonely\\\" "
             "belongs to no pool, so its heartbeat cannot be delegated; add it to a pool or remove "
             "the annotation openyurt.io/delegate-heartbeat\",\"reason\":\"Forbidden\",\"code\":403}}}");

  ReviewSpec cm = As("cm", "mallory", "x");
  cm.kind_group = "";
  cm.kind = "ConfigMap";
  resp = Post(ReviewJson(cm));
  BOOST_TEST(resp.body ==
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
             "\"response\":{\"uid\":\"0df28fbd-5f5f-4d0b-a1e5-1b2f1ab5c4d2\",\"allowed\":true,"
             "\"warnings\":[\"poolcoord checked nothing: core/ConfigMap is not a "
             "coordination.k8s.io Lease\"]}}");
}

// What the review's strings decode to is what is echoed, escaped as RapidJSON's
// Writer escapes (short forms, \u00XX in upper case, other bytes as they are).
BOOST_AUTO_TEST_CASE(escaped_uid_echoed_decoded_and_re_escaped) {
  ReviewSpec r = As("hz-3", "system:node:hz-3", "system:nodes", std::nullopt);
  r.uid = "a\\u0000b\\\"c\\\\d\\ne\\u001ff\\/g\\ud83d\\ude00h\\u00e9\\t\\b\\f\\r";
  ph::Response resp = Post(ReviewJson(r));
  BOOST_TEST(resp.status == 200, resp.body);
  BOOST_TEST(resp.body.find("\"uid\":\"a\\u0000b\\\"c\\\\d\\ne\\u001Ff/g\xF0\x9F\x98\x80h\xC3\xA9"
                            "\\t\\b\\f\\r\"") != std::string::npos,
             resp.body);
  rapidjson::Document d;
  d.Parse(resp.body.c_str(), resp.body.size());
  BOOST_REQUIRE(!d.HasParseError());
  const auto& uid = d["response"]["uid"];
  BOOST_TEST(std::string(uid.GetString(), uid.GetStringLength()) ==
             std::string("a\0b\"c\\d\ne\x1f" "f/g\xF0\x9F\x98\x80h\xC3\xA9\t\b\f\r", 24));
}

// Only the first member of a name counts, whatever its type (rapidjson's
// FindMember, which the DOM decoder used); later duplicates change nothing.
BOOST_AUTO_TEST_CASE(first_member_of_a_name_wins) {
  ReviewSpec r = As("bj-2", kProxy, "g");
  const std::string body = ReviewJson(r);
  auto with = [&](const std::string& needle, const std::string& replacement) {
    std::string b = body;
    const size_t at = b.find(needle);
    BOOST_REQUIRE(at != std::string::npos);
    b.replace(at, needle.size(), replacement);
    return b;
  };
  // A uid that is a number first: no uid.
  ExpectStatus400(Post(with("\"uid\":\"", "\"uid\":7,\"uid\":\"")));
  // apiVersion/kind of the review: the first.
  ExpectStatus400(Post(with("{\"apiVersion\":\"admission.k8s.io/v1\"",
                            "{\"apiVersion\":\"v1\",\"apiVersion\":\"admission.k8s.io/v1\"")));
  BOOST_TEST(Post(with("{\"apiVersion\":\"admission.k8s.io/v1\"",
                       "{\"apiVersion\":\"admission.k8s.io/v1\",\"apiVersion\":7"))
                 .status == 200);
  // The first annotation value is the one checked.
  auto d = [&](const std::string& b) {
    ph::Response resp = Post(b);
    BOOST_TEST(resp.status == 200, resp.body);
    rapidjson::Document doc;
    doc.Parse(resp.body.c_str());
    BOOST_REQUIRE(!doc.HasParseError());
    return std::make_pair(doc["response"]["allowed"].GetBool(),
                          doc["response"].HasMember("status")
                              ? std::string(doc["response"]["status"]["message"].GetString())
                              : std::string());
  };
  auto [allowed, message] = d(with("\"annotations\":{", "\"annotations\":{\"openyurt.io/delegate-heartbeat\":\"yes\","));
  BOOST_TEST(!allowed);
  BOOST_TEST(message.find("has the value \"yes\"") != std::string::npos, message);
  // A second "object" is not read: the first one (annotated "true") decides.
  std::tie(allowed, message) =
      d(with(",\"oldObject\":", ",\"object\":{\"metadata\":{\"annotations\":{\"openyurt.io/delegate-heartbeat\":\"no\"}}},\"oldObject\":"));
  BOOST_TEST(allowed, message);
  // A second userInfo does not replace the first.
  std::tie(allowed, message) = d(with(",\"object\":", ",\"userInfo\":{\"username\":\"x\",\"groups\":[\"system:masters\"]},\"object\":"));
  BOOST_TEST(allowed, message);  // still the proxy user, beijing ungoverned
  BOOST_REQUIRE(Lead("beijing", "bj-1", 0).ok());
  std::tie(allowed, message) = d(with(",\"object\":", ",\"userInfo\":{\"username\":\"x\",\"groups\":[\"system:masters\"]},\"object\":"));
  BOOST_TEST(!allowed);
  BOOST_TEST(message.find("governed") != std::string::npos, message);
  // request.kind that is not an object: the object's own apiVersion and kind say
  // what it is.
  std::tie(allowed, message) = d(with("\"kind\":{\"group\":\"coordination.k8s.io\",\"version\":\"v1\",\"kind\":\"Lease\"}",
                                      "\"kind\":\"Lease\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"ConfigMap\"}"));
  BOOST_TEST(!allowed);  // read as a Lease: the governed-pool denial
}

BOOST_AUTO_TEST_CASE(groups_keep_string_elements_only) {
  BOOST_REQUIRE(Lead("beijing", "bj-1", 0).ok());
  ReviewSpec r = As("bj-2", "mallory", "PLACEHOLDER");
  auto groups = [&](const std::string& json) {
    std::string b = ReviewJson(r);
    const std::string needle = "[\"PLACEHOLDER\",\"system:authenticated\"]";
    b.replace(b.find(needle), needle.size(), json);
    ph::Response resp = Post(b);
    BOOST_TEST(resp.status == 200, resp.body);
    rapidjson::Document doc;
    doc.Parse(resp.body.c_str());
    return doc["response"]["allowed"].GetBool();
  };
  BOOST_TEST(groups("[7,null,{\"a\":\"system:masters\"},[\"system:masters\"],\"system:masters\"]"));
  BOOST_TEST(!groups("[7,null,{\"a\":\"system:masters\"},[\"system:masters\"]]"));
  BOOST_TEST(!groups("{\"0\":\"system:masters\"}"));
  BOOST_TEST(!groups("\"system:masters\""));
}

BOOST_AUTO_TEST_CASE(name_and_namespace_fall_back_as_before) {
  ReviewSpec r = As("bj-2", kProxy, "g");
  std::string b = ReviewJson(r);
  // No metadata.name in the object: request.name names the Lease.
  const std::string name = "\"name\":\"bj-2\",\"namespace\":\"kube-node-lease\",\"resourceVersion\"";
  const size_t at = b.find(name);
  BOOST_REQUIRE(at != std::string::npos);
  b.replace(at, name.size(), "\"namespace\":\"kube-node-lease\",\"resourceVersion\"");
  BOOST_TEST(Post(b).body.find("\"allowed\":true") != std::string::npos);
  // No request.namespace: the object's metadata.namespace.
  const std::string req_ns = "\"name\":\"bj-2\",\"namespace\":\"kube-node-lease\",\"operation\"";
  const size_t at2 = b.find(req_ns);
  BOOST_REQUIRE(at2 != std::string::npos);
  b.replace(at2, req_ns.size(), "\"name\":\"bj-2\",\"operation\"");
  const std::string answer = Post(b).body;
  BOOST_TEST(answer.find("\"allowed\":true") != std::string::npos, answer);
  BOOST_TEST(answer.find("warnings") == std::string::npos, answer);  // checked, in kube-node-lease
}

// Malformed JSON answered as before: rapidjson's message and offset; nesting
// deeper than 512 levels, anywhere in the body (even past a NUL that ends the
// JSON), rejected as store::CheckJsonNesting words it.
BOOST_AUTO_TEST_CASE(malformed_json_rejected_as_before) {
  auto message = [&](const std::string& body) {
    ph::Response resp = Post(body);
    ExpectStatus400(resp);
    rapidjson::Document d;
    d.Parse(resp.body.c_str());
    return std::string(d["message"].GetString());
  };
  BOOST_TEST(message("{]") ==
             "malformed AdmissionReview: Missing a name for object member. at offset 1");
  BOOST_TEST(message("") == "malformed AdmissionReview: The document is empty. at offset 0");
  BOOST_TEST(message("{} x") ==
             "malformed AdmissionReview: The document root must not be followed by other values. "
             "at offset 3");
  BOOST_TEST(message("\"x\"") == "malformed AdmissionReview: not a JSON object");

  ReviewSpec r = As("bj-2", kProxy, "g");
  const std::string review = ReviewJson(r);
  // Control bytes inside a string, 0x01..0x1f, wherever they fall in a 16-byte block.
  for (int c : {0x01, 0x19, 0x1a, 0x1f}) {
    for (int pad = 0; pad < 20; ++pad) {
      std::string b = review;
      const std::string at = "\"resourceVersion\":\"";
      const size_t pos = b.find(at) + at.size() + pad;
      b.insert(b.find(at) + at.size(), std::string(pad, 'a') + static_cast<char>(c));
      BOOST_TEST_CONTEXT(c << " after " << pad) {
        BOOST_TEST(message(b) == "malformed AdmissionReview: Invalid escape character in string. "
                                 "at offset " + std::to_string(pos));
      }
    }
  }
  // A UTF-8 byte order mark is skipped as rapidjson's EncodedInputStream skipped it
  // (EF, BB, BF, each if there), offsets still counted from the first byte.
  BOOST_TEST(Post("\xEF\xBB\xBF" + review).status == 200);
  BOOST_TEST(Post("\xBF" + review).status == 200);
  BOOST_TEST(message("\xEF\xBB{]") ==
             "malformed AdmissionReview: Missing a name for object member. at offset 3");
  BOOST_TEST(message(std::string("\xEF\r\0\xDA", 4)) ==
             "malformed AdmissionReview: The document is empty. at offset 2");
  BOOST_TEST(message("\xBF\xEF{}") == "malformed AdmissionReview: Invalid value. at offset 1");
  // NUL ends the JSON (rapidjson reads no further), as before.
  BOOST_TEST(Post(review + std::string(1, '\0') + "garbage").status == 200);

  const std::string deep512 =
      review.substr(0, review.size() - 1) + ",\"x\":" + std::string(511, '[') + std::string(511, ']') + "}";
  BOOST_TEST(Post(deep512).status == 200);
  const std::string deep513 =
      review.substr(0, review.size() - 1) + ",\"x\":" + std::string(512, '[') + std::string(512, ']') + "}";
  const std::string too_deep = "the request body nests arrays or objects deeper than 512 levels";
  BOOST_TEST(message(deep513) == too_deep);
  BOOST_TEST(message(std::string(100000, '[')) == too_deep);
  BOOST_TEST(message("{]" + std::string(600, '[')) == too_deep);  // checked first, as before
  BOOST_TEST(message(review + std::string(1, '\0') + std::string(600, '[')) == too_deep);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(rules, Fixture)

BOOST_AUTO_TEST_CASE(plain_kubelet_renewal_allowed) {
  BOOST_TEST(Allowed(As("hz-3", "system:node:hz-3", "system:nodes", std::nullopt)));
  ReviewSpec create = As("hz-3", "system:node:hz-3", "system:nodes", std::nullopt);
  create.operation = "CREATE";
  BOOST_TEST(Allowed(create));
}

BOOST_AUTO_TEST_CASE(renew_time_equal_passes_one_microsecond_earlier_denied) {
  ReviewSpec r = As("bj-2", kProxy, "openyurt:yurt-coordinator");
  r.renew = r.old_renew = "2026-01-01T00:00:10.000000Z";
  BOOST_TEST(Allowed(r));
  r.renew = "2026-01-01T00:00:09.999999Z";
  BOOST_TEST(!Allowed(r));
  r.renew = "2026-01-01T00:00:10Z";  // not a MicroTime
  BOOST_TEST(!Allowed(r));
}

BOOST_AUTO_TEST_CASE(annotation_values) {
  for (const char* v : {"", "True", "1", "yes"}) {
    BOOST_TEST_CONTEXT(v) { BOOST_TEST(!Allowed(As("bj-2", kProxy, "g", std::string(v)))); }
  }
  BOOST_TEST(Allowed(As("bj-2", kProxy, "g", "true")));
}

BOOST_AUTO_TEST_CASE(proxy_identity_governed_and_ungoverned) {
  BOOST_TEST(Allowed(As("bj-2", kProxy, "openyurt:yurt-coordinator")));
  BOOST_REQUIRE(Lead("beijing", "bj-1", 0).ok());
  BOOST_TEST(!Allowed(As("bj-2", kProxy, "openyurt:yurt-coordinator")));
}

BOOST_AUTO_TEST_CASE(node_outside_pools_denied) {
  BOOST_TEST(!Allowed(As("lonely-node", kProxy, "openyurt:yurt-coordinator")));
}

BOOST_AUTO_TEST_CASE(forwarder_before_and_after_its_leaders_term_ends) {
  BOOST_REQUIRE(Lead("hangzhou", "hz-1", 0).ok());
  BOOST_REQUIRE(Delegate("hz-3", "hangzhou", "hz-1").ok());
  BOOST_TEST(Allowed(As("hz-3", kForwarder, "system:serviceaccounts")));
  BOOST_TEST(!Allowed(As("hz-4", kForwarder, "system:serviceaccounts")));
  clock.Advance(seconds(15));  // hz-1's term ends on expiry
  BOOST_TEST(!Allowed(As("hz-3", kForwarder, "system:serviceaccounts")));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(membership_not_loaded, Unloaded)

BOOST_AUTO_TEST_CASE(annotated_denied_with_retry_plain_allowed) {
  auto d = Admit(As("bj-2", kProxy, "g"));
  BOOST_TEST(!d["response"]["allowed"].GetBool());
  BOOST_TEST(std::string(d["response"]["status"]["message"].GetString()).find("retry") !=
             std::string::npos);
  BOOST_TEST(Allowed(As("bj-2", "system:node:bj-2", "system:nodes", std::nullopt)));
}

BOOST_AUTO_TEST_SUITE_END()
