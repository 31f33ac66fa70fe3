#define BOOST_TEST_MODULE patch
#include <boost/test/unit_test.hpp>

#include <string>

#include "handlers/patch.h"
#include "handlers/registry/registry.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {
namespace {

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  BOOST_REQUIRE_MESSAGE(!doc.HasParseError(), "bad JSON in test: " + json);
  return doc;
}

std::string Dump(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value.Accept(writer);
  return buffer.GetString();
}

// Applies a merge patch and returns the compact result.
std::string Merge(const std::string& target, const std::string& patch) {
  rapidjson::Document doc = Parse(target);
  rapidjson::Document p = Parse(patch);
  BOOST_REQUIRE(ApplyMergePatch(doc, p, doc.GetAllocator()).ok());
  return Dump(doc);
}

BOOST_AUTO_TEST_SUITE(merge_patch)

// RFC 7386 Appendix A, every example, in order.
BOOST_AUTO_TEST_CASE(rfc7386_appendix_a) {
  struct Case {
    const char* target;
    const char* patch;
    const char* result;
  };
  const Case cases[] = {
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"a":"foo"})", R"(null)", R"(null)"},
      {R"({"a":"foo"})", R"("bar")", R"("bar")"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
  };
  for (const auto& c : cases) {
    BOOST_TEST(Merge(c.target, c.patch) == c.result, c.target << " + " << c.patch);
  }
}

// The example of RFC 7386 section 3.
BOOST_AUTO_TEST_CASE(rfc7386_section3_example) {
  std::string target =
      R"({"title":"Goodbye!","author":{"givenName":"John","familyName":"Doe"},)"
      R"("tags":["example","sample"],"content":"This will be unchanged"})";
  std::string patch =
      R"({"title":"Hello!","phoneNumber":"+01-123-456-7890","author":{"familyName":null},)"
      R"("tags":["example"]})";
  BOOST_TEST(Merge(target, patch) ==
             R"({"title":"Hello!","author":{"givenName":"John"},"tags":["example"],)"
             R"("content":"This will be unchanged","phoneNumber":"+01-123-456-7890"})");
}

BOOST_AUTO_TEST_CASE(kubectl_label_patch) {
  std::string target = R"({"metadata":{"name":"p","labels":{"x":"1"}},"spec":{"a":1}})";
  BOOST_TEST(Merge(target, R"({"metadata":{"labels":{"a":"b","x":null}}})") ==
             R"({"metadata":{"name":"p","labels":{"a":"b"}},"spec":{"a":1}})");
}

BOOST_AUTO_TEST_CASE(patch_into_a_nested_value) {
  rapidjson::Document doc = Parse(R"({"spec":{"a":1,"b":2}})");
  rapidjson::Document p = Parse(R"({"b":null,"c":3})");
  BOOST_REQUIRE(ApplyMergePatch(doc["spec"], p, doc.GetAllocator()).ok());
  BOOST_TEST(Dump(doc) == R"({"spec":{"a":1,"c":3}})");
}

BOOST_AUTO_TEST_SUITE_END()

// ---- JSON patch ----

struct Outcome {
  int code = 200;  // 200: applied
  std::string message;
  std::string doc;  // the document afterwards
};

Outcome Json(const std::string& target, const std::string& ops) {
  rapidjson::Document doc = Parse(target);
  rapidjson::Document p = Parse(ops);
  absl::Status status = ApplyJsonPatch(doc, p);
  Outcome out;
  if (!status.ok()) {
    store::ApiErrorInfo info = store::ApiErrorFromStatus(status);
    out.code = info.code;
    out.message = info.message;
    if (info.code == 422) BOOST_TEST(info.reason == "Invalid");
    if (info.code == 400) BOOST_TEST(info.reason == "BadRequest");
  }
  out.doc = Dump(doc);
  return out;
}

BOOST_AUTO_TEST_SUITE(json_patch)

BOOST_AUTO_TEST_CASE(add) {
  BOOST_TEST(Json(R"({"a":1})", R"([{"op":"add","path":"/b","value":{"c":[]}}])").doc ==
             R"({"a":1,"b":{"c":[]}})");
  // add replaces an existing member
  BOOST_TEST(Json(R"({"a":1})", R"([{"op":"add","path":"/a","value":2}])").doc == R"({"a":2})");
  // array insert, append with "-", insert at the end index
  BOOST_TEST(Json(R"({"l":[1,3]})", R"([{"op":"add","path":"/l/1","value":2}])").doc ==
             R"({"l":[1,2,3]})");
  BOOST_TEST(Json(R"({"l":[1,3]})", R"([{"op":"add","path":"/l/0","value":0}])").doc ==
             R"({"l":[0,1,3]})");
  BOOST_TEST(Json(R"({"l":[1]})", R"([{"op":"add","path":"/l/-","value":2}])").doc ==
             R"({"l":[1,2]})");
  BOOST_TEST(Json(R"({"l":[1]})", R"([{"op":"add","path":"/l/1","value":2}])").doc ==
             R"({"l":[1,2]})");
  // the whole document
  BOOST_TEST(Json(R"({"a":1})", R"([{"op":"add","path":"","value":[true]}])").doc == "[true]");
  // null is a value like any other
  BOOST_TEST(Json(R"({})", R"([{"op":"add","path":"/a","value":null}])").doc == R"({"a":null})");
}

BOOST_AUTO_TEST_CASE(add_failures_are_422) {
  Outcome missing_parent = Json(R"({"a":1})", R"([{"op":"add","path":"/x/y","value":1}])");
  BOOST_TEST(missing_parent.code == 422);
  BOOST_TEST(Json(R"({"l":[1]})", R"([{"op":"add","path":"/l/2","value":1}])").code == 422);
  BOOST_TEST(Json(R"({"l":[1]})", R"([{"op":"add","path":"/l/01","value":1}])").code == 422);
  BOOST_TEST(Json(R"({"a":1})", R"([{"op":"add","path":"/a/b","value":1}])").code == 422);
}

BOOST_AUTO_TEST_CASE(remove) {
  BOOST_TEST(Json(R"({"a":1,"b":2,"c":3})", R"([{"op":"remove","path":"/b"}])").doc ==
             R"({"a":1,"c":3})");
  BOOST_TEST(Json(R"({"l":[1,2,3]})", R"([{"op":"remove","path":"/l/1"}])").doc ==
             R"({"l":[1,3]})");
  Outcome missing = Json(R"({"a":1})", R"([{"op":"remove","path":"/spec/x"}])");
  BOOST_TEST(missing.code == 422);
  BOOST_TEST(missing.message == "remove operation failed: path \"/spec/x\" does not exist");
  BOOST_TEST(Json(R"({"l":[1]})", R"([{"op":"remove","path":"/l/1"}])").code == 422);
  BOOST_TEST(Json(R"({"l":[1]})", R"([{"op":"remove","path":"/l/-"}])").code == 422);
}

BOOST_AUTO_TEST_CASE(replace) {
  std::string lease = R"({"spec":{"leaseDurationSeconds":15,"holderIdentity":"n1"}})";
  BOOST_TEST(
      Json(lease, R"([{"op":"replace","path":"/spec/leaseDurationSeconds","value":33}])").doc ==
      R"({"spec":{"leaseDurationSeconds":33,"holderIdentity":"n1"}})");
  BOOST_TEST(Json(lease, R"([{"op":"replace","path":"","value":{}}])").doc == "{}");
  Outcome missing = Json(lease, R"([{"op":"replace","path":"/spec/x","value":1}])");
  BOOST_TEST(missing.code == 422);
  BOOST_TEST(missing.doc == lease);
}

BOOST_AUTO_TEST_CASE(move_and_copy) {
  BOOST_TEST(Json(R"({"a":{"b":1},"c":{}})", R"([{"op":"move","from":"/a/b","path":"/c/d"}])").doc ==
             R"({"a":{},"c":{"d":1}})");
  BOOST_TEST(Json(R"({"l":[1,2,3]})", R"([{"op":"move","from":"/l/0","path":"/l/-"}])").doc ==
             R"({"l":[2,3,1]})");
  BOOST_TEST(Json(R"({"a":1})", R"([{"op":"move","from":"/a","path":"/a"}])").doc == R"({"a":1})");
  BOOST_TEST(Json(R"({"a":{"b":1}})", R"([{"op":"move","from":"/a","path":"/a/b/c"}])").code ==
             422);
  BOOST_TEST(Json(R"({"a":1})", R"([{"op":"move","from":"/x","path":"/y"}])").code == 422);
  BOOST_TEST(Json(R"({"a":{"b":[1]}})", R"([{"op":"copy","from":"/a","path":"/c"}])").doc ==
             R"({"a":{"b":[1]},"c":{"b":[1]}})");
  BOOST_TEST(Json(R"({"a":1})", R"([{"op":"copy","from":"/x","path":"/y"}])").code == 422);
}

BOOST_AUTO_TEST_CASE(test_operation) {
  std::string lease = R"({"spec":{"leaseDurationSeconds":33,"tags":["a",{"b":1}]}})";
  BOOST_TEST(Json(lease, R"([{"op":"test","path":"/spec/leaseDurationSeconds","value":33}])").code ==
             200);
  // Numbers compare by value; objects regardless of member order.
  BOOST_TEST(Json(lease, R"([{"op":"test","path":"/spec/leaseDurationSeconds","value":33.0}])")
                 .code == 200);
  BOOST_TEST(
      Json(R"({"o":{"a":1,"b":2}})", R"([{"op":"test","path":"/o","value":{"b":2,"a":1}}])").code ==
      200);
  Outcome failed =
      Json(lease, R"([{"op":"test","path":"/spec/leaseDurationSeconds","value":1}])");
  BOOST_TEST(failed.code == 422);
  BOOST_TEST(failed.message ==
             "test operation failed: path \"/spec/leaseDurationSeconds\": found 33, expected 1");
  BOOST_TEST(Json(lease, R"([{"op":"test","path":"/spec/missing","value":null}])").code == 422);
  BOOST_TEST(Json(lease, R"([{"op":"test","path":"/spec/tags/1/b","value":"1"}])").code == 422);
}

BOOST_AUTO_TEST_CASE(failed_patch_leaves_document_unchanged) {
  std::string target = R"({"a":1,"b":2})";
  Outcome out = Json(target, R"([{"op":"remove","path":"/a"},{"op":"add","path":"/c","value":3},)"
                             R"({"op":"test","path":"/b","value":3}])");
  BOOST_TEST(out.code == 422);
  BOOST_TEST(out.doc == target);
}

BOOST_AUTO_TEST_CASE(pointer_escapes) {
  std::string labels = R"({"metadata":{"labels":{"apps.openyurt.io/nodepool":"hz","a~b":"x"}}})";
  BOOST_TEST(
      Json(labels, R"([{"op":"remove","path":"/metadata/labels/apps.openyurt.io~1nodepool"}])").doc ==
      R"({"metadata":{"labels":{"a~b":"x"}}})");
  BOOST_TEST(Json(labels, R"([{"op":"replace","path":"/metadata/labels/a~0b","value":"y"}])").doc ==
             R"({"metadata":{"labels":{"apps.openyurt.io/nodepool":"hz","a~b":"y"}}})");
  // "~01" is "~1" literally, not "/".
  BOOST_TEST(Json(R"({"~1":1})", R"([{"op":"test","path":"/~01","value":1}])").code == 200);
  // The empty key is a valid token.
  BOOST_TEST(Json(R"({"":{"":2}})", R"([{"op":"test","path":"//","value":2}])").code == 200);
}

BOOST_AUTO_TEST_CASE(malformed_patches_are_400) {
  std::string target = R"({"a":1})";
  const char* bad[] = {
      R"({"op":"add","path":"/a","value":1})",        // not an array
      R"([1])",                                       // op not an object
      R"([{"path":"/a"}])",                           // no op
      R"([{"op":"frobnicate","path":"/a"}])",         // unknown op
      R"([{"op":"remove"}])",                         // no path
      R"([{"op":"remove","path":5}])",                // path not a string
      R"([{"op":"add","path":"/b"}])",                // no value
      R"([{"op":"replace","path":"/a"}])",            // no value
      R"([{"op":"test","path":"/a"}])",               // no value
      R"([{"op":"move","path":"/b"}])",               // no from
      R"([{"op":"copy","from":"a","path":"/b"}])",    // from without '/'
      R"([{"op":"remove","path":"a"}])",              // pointer without '/'
      R"([{"op":"remove","path":"/a~2"}])",           // bad escape
      R"([{"op":"remove","path":"/a~"}])",            // dangling escape
      // A malformed op anywhere is reported before any op is applied.
      R"([{"op":"remove","path":"/missing"},{"op":"nope","path":"/a"}])",
  };
  for (const char* ops : bad) {
    Outcome out = Json(target, ops);
    BOOST_TEST(out.code == 400, ops);
    BOOST_TEST(out.doc == target, ops);
  }
  BOOST_TEST(Json(target, R"([{"op":"frobnicate","path":"/a"}])").message.find("\"frobnicate\"") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(too_many_operations_are_413) {
  std::string ops = "[";
  for (size_t i = 0; i <= kMaxJsonPatchOperations; ++i) {
    ops += i ? "," : "";
    ops += R"({"op":"test","path":"/a","value":1})";
  }
  ops += "]";
  BOOST_TEST(Json(R"({"a":1})", ops).code == 413);
  BOOST_TEST(Json(R"({"a":1})", R"([])").code == 200);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(spec_merge_patch_fast_path)

// The kind's own merge patch (registry::Strategy::FastMergePatch).
store::MutableObjectPtr FastMergePatch(const store::Object& current,
                                               const rapidjson::Value& patch) {
  return registry::ForKind(current.kind).FastMergePatch(current, patch);
}

constexpr char kDelegated[] = R"({"apiVersion":"coordination.pool/v1alpha1","kind":"DelegatedLease",
  "metadata":{"name":"n1","uid":"u-1","resourceVersion":"7","labels":{"apps.openyurt.io/nodepool":"p"},
  "annotations":{"a":"b"},"managedFields":[{"manager":"kubectl","operation":"Update"}]},
  "spec":{"holderIdentity":"n0","leaseDurationSeconds":40,"renewTime":"2026-11-30T05:00:00.000000Z",
  "poolName":"p","delegate":"n0"},
  "status":{"observedTime":"2026-11-30T05:00:00.100000Z"}})";
constexpr char kPool[] = R"({"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease",
  "metadata":{"name":"p","uid":"u-2","resourceVersion":"9"},
  "spec":{"holderIdentity":"n0","leaseDurationSeconds":15,"acquireTime":"2026-11-30T04:00:00.000000Z",
  "renewTime":"2026-11-30T05:00:00.000000Z","leaseTransitions":3}})";

store::ObjectPtr Stored(const char* json, store::Kind kind) {
  auto obj = store::DecodeObjectJson(json, kind, nullptr);
  BOOST_REQUIRE_MESSAGE(obj.ok(), obj.status().ToString());
  (*obj)->observed_monotonic_us = 12345;
  return *obj;
}

// What the general path makes of the patch: encode, merge, decode, with the
// server-owned parts carried over as PrepareUpdate does.
std::string GeneralPath(const store::Object& current, const std::string& patch) {
  rapidjson::Document doc = Parse(store::EncodeObject(current));
  rapidjson::Document p = Parse(patch);
  BOOST_REQUIRE(ApplyMergePatch(doc, p, doc.GetAllocator()).ok());
  auto decoded = store::DecodeObject(doc, current.kind, nullptr);
  BOOST_REQUIRE_MESSAGE(decoded.ok(), decoded.status().ToString());
  (*decoded)->status = current.status;
  (*decoded)->observed_monotonic_us = current.observed_monotonic_us;
  return store::EncodeForStorage(**decoded);
}

BOOST_AUTO_TEST_CASE(renewal_patches_match_the_general_path) {
  struct Case {
    const char* object;
    store::Kind kind;
    const char* patch;
  };
  const Case cases[] = {
      {kDelegated, store::Kind::kDelegatedLease, R"({"spec":{"renewTime":"2026-11-30T05:00:10.123456Z"}})"},
      {kDelegated, store::Kind::kDelegatedLease,
       R"({"spec":{"holderIdentity":"n3","leaseDurationSeconds":20,"renewTime":"2026-11-30T05:00:10.000001Z"}})"},
      // Repeated keys: the last one wins on both paths.
      {kDelegated, store::Kind::kDelegatedLease,
       R"({"spec":{"renewTime":"2026-11-30T05:00:01.000000Z","renewTime":"2026-11-30T05:00:02.000000Z"}})"},
      {kDelegated, store::Kind::kDelegatedLease, R"({"spec":{"holderIdentity":""}})"},
      {kPool, store::Kind::kPoolLease,
       R"({"spec":{"holderIdentity":"n1","acquireTime":"2026-11-30T05:01:00.000000Z","renewTime":"2026-11-30T05:01:00.000000Z","leaseTransitions":4}})"},
      {kPool, store::Kind::kPoolLease, R"({"spec":{"leaseDurationSeconds":-1}})"},
  };
  for (const Case& c : cases) {
    store::ObjectPtr current = Stored(c.object, c.kind);
    rapidjson::Document patch = Parse(c.patch);
    store::MutableObjectPtr fast = FastMergePatch(*current, patch);
    BOOST_REQUIRE_MESSAGE(fast != nullptr, std::string("no fast path for ") + c.patch);
    BOOST_TEST(store::EncodeForStorage(*fast) == GeneralPath(*current, c.patch), c.patch);
  }
}

BOOST_AUTO_TEST_CASE(other_patches_take_the_general_path) {
  store::ObjectPtr delegated = Stored(kDelegated, store::Kind::kDelegatedLease);
  store::ObjectPtr pool = Stored(kPool, store::Kind::kPoolLease);
  const char* general_only[] = {
      R"({})",
      R"({"spec":{}})",
      R"({"spec":null})",
      R"({"spec":{"renewTime":null}})",                                 // deletes the field
      R"({"spec":{"renewTime":"2026-11-30T05:00:10Z"}})",               // not a MicroTime: 422 there
      R"({"spec":{"renewTime":5}})",                                    // wrong type: 400 there
      R"({"spec":{"leaseDurationSeconds":15.0}})",
      R"({"spec":{"leaseDurationSeconds":1099511627776}})",             // out of int32: 400 there
      R"({"spec":{"holderIdentity":7}})",
      R"({"spec":{"poolName":"q"}})",
      R"({"spec":{"acquireTime":"2026-11-30T05:01:00.000000Z"}})",      // not a DelegatedLease field
      R"({"spec":{"leaseTransitions":1}})",
      R"({"spec":{"renewTime":"2026-11-30T05:00:10.000000Z","foo":1}})",
      R"({"metadata":{"labels":{"x":"y"}}})",
      R"({"spec":{"renewTime":"2026-11-30T05:00:10.000000Z"},"metadata":{"resourceVersion":"7"}})",
      R"({"status":{"expired":true}})",
      R"([])",
  };
  for (const char* p : general_only) {
    rapidjson::Document patch = Parse(p);
    BOOST_TEST(FastMergePatch(*delegated, patch) == nullptr, p);
  }
  rapidjson::Document pool_field = Parse(R"({"spec":{"poolName":"q"}})");
  BOOST_TEST(FastMergePatch(*pool, pool_field) == nullptr);
  // spec.proof: only an object of strings, and never on a PoolLease.
  for (const char* p : {R"({"spec":{"proof":null}})", R"({"spec":{"proof":"x"}})",
                        R"({"spec":{"proof":{"heartbeat":7}}})",
                        R"({"spec":{"proof":{"heartbeat":"a","signature":"b"}}})"}) {
    rapidjson::Document patch = Parse(p);
    BOOST_TEST(FastMergePatch(*delegated, patch) == nullptr, p);
  }
  rapidjson::Document pool_proof = Parse(R"({"spec":{"proof":{"heartbeat":"a"}}})");
  BOOST_TEST(FastMergePatch(*pool, pool_proof) == nullptr);
}

// Only a DelegatedLease patch that carries a proof has something for Precheck.
BOOST_AUTO_TEST_CASE(only_a_patch_with_a_proof_is_prechecked) {
  const registry::Strategy& delegated = registry::ForKind(store::Kind::kDelegatedLease);
  const registry::Strategy& pool = registry::ForKind(store::Kind::kPoolLease);
  rapidjson::Document with_proof = Parse(R"({"spec":{"proof":{"heartbeat":"a","certificate":"b"}}})");
  BOOST_TEST(delegated.MergePatchPrechecks(with_proof));
  BOOST_TEST(!pool.MergePatchPrechecks(with_proof));
  for (const char* p : {R"({"spec":{"renewTime":"2026-11-30T05:00:10.123456Z"}})",
                        R"({"spec":{"proof":null}})", R"({"spec":7})", R"({})"}) {
    rapidjson::Document patch = Parse(p);
    BOOST_TEST(!delegated.MergePatchPrechecks(patch), p);
  }
}

// A renewal with its delegation proof takes the fast path too, and
// gives the object (and the write-only proof) the general path gives.
BOOST_AUTO_TEST_CASE(renewal_with_a_proof_matches_the_general_path) {
  store::ObjectPtr current = Stored(kDelegated, store::Kind::kDelegatedLease);
  for (const char* p :
       {R"({"spec":{"renewTime":"2026-11-30T05:00:10.123456Z","proof":{"heartbeat":"UENIQg==","certificate":"MIIB"}}})",
        R"({"spec":{"proof":{"certificate":"MIIB"}}})", R"({"spec":{"proof":{}}})"}) {
    rapidjson::Document patch = Parse(p);
    store::MutableObjectPtr fast = FastMergePatch(*current, patch);
    BOOST_REQUIRE_MESSAGE(fast != nullptr, std::string("no fast path for ") + p);
    BOOST_TEST(store::EncodeForStorage(*fast) == GeneralPath(*current, p), p);
    rapidjson::Document doc = Parse(store::EncodeObject(*current));
    rapidjson::Document merge = Parse(p);
    BOOST_REQUIRE(ApplyMergePatch(doc, merge, doc.GetAllocator()).ok());
    auto general = store::DecodeObject(doc, current->kind, nullptr);
    BOOST_REQUIRE(general.ok());
    BOOST_TEST(store::DelegationOf(*fast).proof.has_value());
    BOOST_TEST((store::DelegationOf(*fast).proof == store::DelegationOf(**general).proof), p);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers

// The input that showed it: each copy of /spec into itself doubles the document.
BOOST_AUTO_TEST_CASE(self_copies_are_bounded) {
  std::string ops = "[{\"op\":\"add\",\"path\":\"/spec/x\",\"value\":\"" + std::string(100, 'a') + "\"}";
  for (int i = 0; i < 40; ++i) {
    ops += ",{\"op\":\"copy\",\"from\":\"/spec\",\"path\":\"/spec/y" + std::to_string(i) + "\"}";
  }
  ops += "]";
  rapidjson::Document doc;
  doc.Parse("{\"spec\":{}}");
  rapidjson::Document patch;
  patch.Parse(ops.c_str());
  absl::Status s = poolcoord::handlers::ApplyJsonPatch(doc, patch);
  BOOST_TEST(!s.ok());
  BOOST_TEST(poolcoord::store::ApiErrorFromStatus(s).code == 413);
}
