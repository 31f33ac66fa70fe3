#define BOOST_TEST_MODULE typed_json
#include <boost/test/unit_test.hpp>

#include <string>

#include "handlers/registry/registry.h"
#include "handlers/typed_json.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tests/handlers/handler_testing.h"

namespace poolcoord::handlers::ssa {
namespace {

const SchemaNode& PoolLease() { return registry::ForKind(store::Kind::kPoolLease).MergeSchema().root(); }

using testing::ParseJson;

std::string Text(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string Error(const std::string& config) {
  absl::Status s = Validate(ParseJson(config), PoolLease());
  return s.ok() ? "ok" : std::string(s.message());
}

BOOST_AUTO_TEST_SUITE(ValidateConfiguration)

BOOST_AUTO_TEST_CASE(MessagesAsKubeApiserverWordsThem) {
  BOOST_TEST(Error(R"({"spec":{"holderIdentity":"a","leaseDurationSeconds":3}})") == "ok");
  BOOST_TEST(Error(R"({"spec":{"foo":1}})") == ".spec.foo: field not declared in schema");
  BOOST_TEST(Error(R"({"zzz":1})") == ".zzz: field not declared in schema");
  BOOST_TEST(Error(R"({"spec":{"leaseDurationSeconds":"10"}})") ==
             ".spec.leaseDurationSeconds: expected numeric (int or float), got string");
  BOOST_TEST(Error(R"({"spec":{"holderIdentity":true}})") ==
             ".spec.holderIdentity: expected string, got bool");
  BOOST_TEST(Error(R"({"metadata":{"labels":{"a":1}}})") ==
             ".metadata.labels.a: expected string, got number");
  BOOST_TEST(Error(R"({"metadata":{"finalizers":["a.io/x","a.io/x"]}})") ==
             R"(.metadata.finalizers: duplicate entries for key [="a.io/x"])");
  BOOST_TEST(Error(R"({"metadata":{"ownerReferences":[{"uid":"u-1"},{"uid":"u-1","name":"x"}]}})") ==
             R"(.metadata.ownerReferences: duplicate entries for key [uid="u-1"])");
  BOOST_TEST(Error(R"({"metadata":{"ownerReferences":[{"name":"n1"}]}})") ==
             ".metadata.ownerReferences: element 0: associative list with keys has an element "
             "that omits key field \"uid\" (and doesn't have default value)");
  BOOST_TEST(Error(R"({"spec":[]})") == ".spec: expected map, got list");
  // Nulls are allowed anywhere (they mean "unset" to our decoder).
  BOOST_TEST(Error(R"({"spec":{"holderIdentity":null},"metadata":{"labels":null}})") == "ok");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(FieldSets)

BOOST_AUTO_TEST_CASE(WhatAnAppliedConfigurationOwns) {
  // As kube-apiserver recorded the apply of the same configuration.
  auto config = ParseJson(
      R"({"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":{"name":"t1",)"
      R"("labels":{"a":"1","b":"2"},"finalizers":["x.io/f1"],)"
      R"("ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n1","uid":"u-1"}]},)"
      R"("spec":{"holderIdentity":"a","leaseDurationSeconds":10}})");
  FieldSet set = ToFieldSet(config, PoolLease());
  BOOST_TEST(set.ToJson() ==
             R"({"f:apiVersion":{},"f:kind":{},"f:metadata":{"f:finalizers":{"v:\"x.io/f1\"":{}},)"
             R"("f:labels":{"f:a":{},"f:b":{}},"f:name":{},)"
             R"("f:ownerReferences":{"k:{\"uid\":\"u-1\"}":{}}},)"
             R"("f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{}}})");
  // An empty map is owned itself; null owns nothing.
  BOOST_TEST(ToFieldSet(ParseJson(R"({"spec":{},"metadata":{"labels":null}})"), PoolLease()).ToJson() ==
             R"({"f:spec":{}})");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Comparisons)

BOOST_AUTO_TEST_CASE(CreateAddsMapsAndLeaves) {
  auto empty = ParseJson(R"({"apiVersion":"v","kind":"PoolLease"})");
  auto obj = ParseJson(
      R"({"apiVersion":"v","kind":"PoolLease","metadata":{"name":"a","annotations":{"x":"1"}},)"
      R"("spec":{"holderIdentity":"h","leaseDurationSeconds":3}})");
  Comparison c = Compare(&empty, &obj, PoolLease());
  // The maps that appear are added too: FieldsV1 shows them as ".".
  BOOST_TEST(c.added.ToJson() ==
             R"({"f:metadata":{".":{},"f:annotations":{".":{},"f:x":{}},"f:name":{}},)"
             R"("f:spec":{".":{},"f:holderIdentity":{},"f:leaseDurationSeconds":{}}})");
  BOOST_TEST(c.removed.Empty());
  BOOST_TEST(c.modified.Empty());
  BOOST_TEST(!c.IsSame());
}

BOOST_AUTO_TEST_CASE(UpdateModifiesRemovesAndListItems) {
  auto a = ParseJson(R"({"metadata":{"labels":{"a":"1","b":"2"},"finalizers":["x","y"]},)"
                R"("spec":{"holderIdentity":"h","renewTime":"t1"}})");
  auto b = ParseJson(R"({"metadata":{"labels":{"a":"1","c":"3"},"finalizers":["y","z"]},)"
                R"("spec":{"holderIdentity":"h","renewTime":"t2"}})");
  Comparison c = Compare(&a, &b, PoolLease());
  BOOST_TEST(c.modified.ToJson() == R"({"f:spec":{"f:renewTime":{}}})");
  BOOST_TEST(c.added.ToJson() ==
             R"({"f:metadata":{"f:finalizers":{"v:\"z\"":{}},"f:labels":{"f:c":{}}}})");
  BOOST_TEST(c.removed.ToJson() ==
             R"({"f:metadata":{"f:finalizers":{"v:\"x\"":{}},"f:labels":{"f:b":{}}}})");
  BOOST_TEST(Compare(&a, &a, PoolLease()).IsSame());
}

BOOST_AUTO_TEST_CASE(AtomicItemsAreLeaves) {
  auto a = ParseJson(R"({"metadata":{"ownerReferences":[{"uid":"u","name":"a"}]}})");
  auto b = ParseJson(R"({"metadata":{"ownerReferences":[{"uid":"u","name":"b"}]}})");
  Comparison c = Compare(&a, &b, PoolLease());
  BOOST_TEST(c.modified.ToJson() == R"({"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u\"}":{}}}})");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Merging)

BOOST_AUTO_TEST_CASE(GranularMapsMergeLeavesTakeTheConfig) {
  auto live = ParseJson(R"({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"holderIdentity":"h","renewTime":"t"}})");
  auto config = ParseJson(R"({"metadata":{"labels":{"b":"3","c":"4"}},"spec":{"holderIdentity":"k"}})");
  rapidjson::Document out;
  rapidjson::Value merged = Merge(&live, &config, PoolLease(), out.GetAllocator());
  BOOST_TEST(Text(merged) ==
             R"({"metadata":{"labels":{"a":"1","b":"3","c":"4"}},"spec":{"holderIdentity":"k","renewTime":"t"}})");
  // A null map in the configuration leaves the live one alone.
  auto nulls = ParseJson(R"({"metadata":{"labels":null}})");
  BOOST_TEST(Text(Merge(&live, &nulls, PoolLease(), out.GetAllocator())) == Text(live));
  // Nothing live: the configuration as it is.
  BOOST_TEST(Text(Merge(nullptr, &config, PoolLease(), out.GetAllocator())) == Text(config));
}

BOOST_AUTO_TEST_CASE(ListsKeepLiveOrderAndPlaceNewItems) {
  rapidjson::Document out;
  auto merge = [&](const char* live, const char* config) {
    auto l = ParseJson(live), c = ParseJson(config);
    return Text(Merge(&l, &c, PoolLease(), out.GetAllocator()));
  };
  // The orders kube-apiserver 1.32 produced for the same two applies.
  BOOST_TEST(merge(R"({"metadata":{"finalizers":["a","b","c"]}})",
                   R"({"metadata":{"finalizers":["b","x"]}})") ==
             R"({"metadata":{"finalizers":["a","b","c","x"]}})");
  BOOST_TEST(merge(R"({"metadata":{"finalizers":["a","b"]}})",
                   R"({"metadata":{"finalizers":["x","a"]}})") ==
             R"({"metadata":{"finalizers":["x","a","b"]}})");
  // Shared items in a different order follow the configuration.
  BOOST_TEST(merge(R"({"metadata":{"finalizers":["a","b"]}})",
                   R"({"metadata":{"finalizers":["b","a"]}})") ==
             R"({"metadata":{"finalizers":["b","a"]}})");
  // Map-list items merge by key; each reference is atomic.
  BOOST_TEST(merge(R"({"metadata":{"ownerReferences":[{"uid":"1","name":"a","kind":"K"},{"uid":"2","name":"b"}]}})",
                   R"({"metadata":{"ownerReferences":[{"uid":"1","name":"z"}]}})") ==
             R"({"metadata":{"ownerReferences":[{"uid":"1","name":"z"},{"uid":"2","name":"b"}]}})");
}

BOOST_AUTO_TEST_CASE(RemoveItemsDropsMembers) {
  auto v = ParseJson(R"({"metadata":{"labels":{"a":"1","b":"2"},"finalizers":["x","y"]},"spec":{"holderIdentity":"h","renewTime":"t"}})");
  FieldSet remove;
  remove.Insert(FieldPath({"metadata", "labels", "a"}));
  remove.Insert(FieldPath({"spec", "renewTime"}));
  Path fin = FieldPath({"metadata", "finalizers"});
  fin.push_back(PathElement::Value(Scalar::String("y")));
  remove.Insert(fin);
  RemoveItems(v, remove, PoolLease(), v.GetAllocator());
  BOOST_TEST(Text(v) ==
             R"({"metadata":{"labels":{"b":"2"},"finalizers":["x"]},"spec":{"holderIdentity":"h"}})");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers::ssa
