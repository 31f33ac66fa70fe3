#define BOOST_TEST_MODULE field_set
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "handlers/field_set.h"

namespace poolcoord::handlers::ssa {
namespace {

FieldSet Parse(const std::string& json) {
  auto s = FieldSet::FromJson(json);
  BOOST_REQUIRE_MESSAGE(s.ok(), std::string(s.status().message()));
  return *s;
}

std::vector<std::string> Paths(const FieldSet& s) {
  std::vector<std::string> out;
  s.Iterate([&](const Path& p) { out.push_back(PathToString(p)); });
  return out;
}

BOOST_AUTO_TEST_SUITE(PathElements)

BOOST_AUTO_TEST_CASE(KeysAndStrings) {
  const PathElement f = PathElement::Field("spec");
  BOOST_TEST(f.ToFieldsV1Key() == "f:spec");
  BOOST_TEST(f.ToString() == ".spec");
  const PathElement k = PathElement::Key({{"uid", Scalar::String("u-1")}, {"name", Scalar::Int(3)}});
  // Key fields sorted by name, compact JSON as Go writes it.
  BOOST_TEST(k.ToFieldsV1Key() == R"(k:{"name":3,"uid":"u-1"})");
  BOOST_TEST(k.ToString() == R"([name=3,uid="u-1"])");
  const PathElement v = PathElement::Value(Scalar::String("a.io/x"));
  BOOST_TEST(v.ToFieldsV1Key() == R"(v:"a.io/x")");
  BOOST_TEST(v.ToString() == R"([="a.io/x"])");
  BOOST_TEST(PathElement::Index(3).ToFieldsV1Key() == "i:3");
  BOOST_TEST(PathElement::Index(3).ToString() == "[3]");
}

BOOST_AUTO_TEST_CASE(GoEscapesInValues) {
  // encoding/json is HTML-safe and writes \u00xx in lower case.
  const PathElement v = PathElement::Value(Scalar::String("a<b>&\"\x01\n"));
  BOOST_TEST(v.ToFieldsV1Key() == R"(v:"a\u003cb\u003e\u0026\"\u0001\n")");
}

BOOST_AUTO_TEST_CASE(ParseRoundTrip) {
  for (const char* key : {"f:spec", R"(k:{"uid":"u-1"})", R"(v:"x")", "v:3", "v:true", "v:null",
                          "i:7", R"(k:{"a":1,"b":"c"})"}) {
    auto pe = PathElement::FromFieldsV1Key(key);
    BOOST_REQUIRE(pe.ok());
    BOOST_TEST(pe->ToFieldsV1Key() == key);
  }
  BOOST_TEST(absl::IsNotFound(PathElement::FromFieldsV1Key("z:whatever").status()));
  for (const char* bad : {"spec", "k:{", "k:[1]", "v:{\"a\":1}", "i:x", ""}) {
    BOOST_TEST(absl::IsInvalidArgument(PathElement::FromFieldsV1Key(bad).status()), bad);
  }
}

BOOST_AUTO_TEST_CASE(OrderFieldsKeysValuesIndices) {
  std::vector<PathElement> v = {PathElement::Index(0), PathElement::Value(Scalar::Bool(true)),
                                PathElement::Value(Scalar::String("b")),
                                PathElement::Value(Scalar::Int(10)),
                                PathElement::Value(Scalar::Double(9.5)),
                                PathElement::Key({{"k", Scalar::String("a")}}),
                                PathElement::Field("z"), PathElement::Field("a")};
  std::sort(v.begin(), v.end());
  std::vector<std::string> got;
  for (const auto& pe : v) got.push_back(pe.ToFieldsV1Key());
  const std::vector<std::string> want = {"f:a",     "f:z",   R"(k:{"k":"a"})", "v:9.5",
                                         "v:10",    R"(v:"b")", "v:true",       "i:0"};
  BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Sets)

BOOST_AUTO_TEST_CASE(FieldsV1AsKubeApiserverWritesIt) {
  // kube-apiserver 1.32's entry for a create of a PoolLease with an annotation.
  const std::string kube =
      R"({"f:metadata":{"f:annotations":{".":{},"f:x":{}}},)"
      R"("f:spec":{".":{},"f:holderIdentity":{},"f:leaseDurationSeconds":{}}})";
  FieldSet s = Parse(kube);
  BOOST_TEST(s.ToJson() == kube);
  BOOST_TEST(s.Has(FieldPath({"spec"})));
  BOOST_TEST(s.Has(FieldPath({"spec", "holderIdentity"})));
  BOOST_TEST(s.Has(FieldPath({"metadata", "annotations"})));
  BOOST_TEST(!s.Has(FieldPath({"metadata"})));
  const std::vector<std::string> want = {".metadata.annotations", ".metadata.annotations.x", ".spec",
                                         ".spec.holderIdentity", ".spec.leaseDurationSeconds"};
  // Members of a level, then its children, each in order.
  std::vector<std::string> got = Paths(s);
  std::sort(got.begin(), got.end());
  BOOST_TEST(got == want, boost::test_tools::per_element());
  BOOST_TEST(s.Size() == 5u);
}

BOOST_AUTO_TEST_CASE(ListItemsAndEmptySet) {
  const std::string kube =
      R"({"f:metadata":{"f:finalizers":{"v:\"x.io/f1\"":{}},)"
      R"("f:ownerReferences":{"k:{\"uid\":\"u-1\"}":{}}}})";
  FieldSet s = Parse(kube);
  BOOST_TEST(s.ToJson() == kube);
  Path p = FieldPath({"metadata", "ownerReferences"});
  p.push_back(PathElement::Key({{"uid", Scalar::String("u-1")}}));
  BOOST_TEST(s.Has(p));
  BOOST_TEST(Parse("{}").Empty());
  BOOST_TEST(Parse("{}").ToJson() == "{}");
}

BOOST_AUTO_TEST_CASE(InsertKeepsOrderAndUniqueness) {
  FieldSet s;
  s.Insert(FieldPath({"spec", "renewTime"}));
  s.Insert(FieldPath({"spec"}));
  s.Insert(FieldPath({"spec", "holderIdentity"}));
  s.Insert(FieldPath({"spec", "renewTime"}));
  s.Insert(Path{});  // nothing
  BOOST_TEST(s.ToJson() == R"({"f:spec":{".":{},"f:holderIdentity":{},"f:renewTime":{}}})");
  BOOST_TEST(s.Size() == 3u);
}

BOOST_AUTO_TEST_CASE(UnknownKindsSkippedBadOnesRefused) {
  BOOST_TEST(Parse(R"({"f:a":{},"x:future":{}})").ToJson() == R"({"f:a":{}})");
  for (const char* bad : {"[]", R"({"f:a":1})", R"({"spec":{}})", R"({".":1})", "{"}) {
    BOOST_TEST(!FieldSet::FromJson(std::string(bad)).ok(), bad);
  }
}

BOOST_AUTO_TEST_CASE(Algebra) {
  FieldSet a = Parse(R"({"f:spec":{".":{},"f:a":{},"f:b":{}},"f:x":{}})");
  FieldSet b = Parse(R"({"f:spec":{"f:b":{},"f:c":{}},"f:y":{}})");
  BOOST_TEST(a.Union(b).ToJson() ==
             R"({"f:spec":{".":{},"f:a":{},"f:b":{},"f:c":{}},"f:x":{},"f:y":{}})");
  BOOST_TEST(a.Intersection(b).ToJson() == R"({"f:spec":{"f:b":{}}})");
  BOOST_TEST(a.Difference(b).ToJson() == R"({"f:spec":{".":{},"f:a":{}},"f:x":{}})");
  // A member removes only itself from Difference, its subtree too from
  // RecursiveDifference.
  FieldSet spec = Parse(R"({"f:spec":{}})");
  BOOST_TEST(a.Difference(spec).ToJson() == R"({"f:spec":{"f:a":{},"f:b":{}},"f:x":{}})");
  BOOST_TEST(a.RecursiveDifference(spec).ToJson() == R"({"f:x":{}})");
  BOOST_TEST((a.Union(FieldSet()) == a));
  BOOST_TEST(a.Intersection(FieldSet()).Empty());
  BOOST_TEST(a.HasPrefix(FieldPath({"spec"})));
  BOOST_TEST(a.HasPrefix(FieldPath({"spec", "a"})));
  BOOST_TEST(!a.HasPrefix(FieldPath({"spec", "z"})));
  BOOST_TEST(!a.HasPrefix(FieldPath({"status"})));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Scan)

BOOST_AUTO_TEST_CASE(FindsMembersWithoutParsing) {
  const std::string s = R"({"f:metadata":{"f:labels":{"f:spec":{}}},"f:spec":{".":{},"f:holderIdentity":{},"f:renewTime":{}},"f:status":{}})";
  BOOST_TEST(*FieldsV1HasFieldPath(s, {"spec", "renewTime"}));
  BOOST_TEST(*FieldsV1HasFieldPath(s, {"spec", "holderIdentity"}));
  BOOST_TEST(*FieldsV1HasFieldPath(s, {"spec"}));  // "." makes spec a member
  BOOST_TEST(!*FieldsV1HasFieldPath(s, {"spec", "leaseDurationSeconds"}));
  BOOST_TEST(!*FieldsV1HasFieldPath(s, {"metadata"}));  // only a parent
  BOOST_TEST(*FieldsV1HasFieldPath(s, {"status"}));
  BOOST_TEST(!*FieldsV1HasFieldPath(s, {"renewTime"}));
  BOOST_TEST(!*FieldsV1HasFieldPath("{}", {"spec", "renewTime"}));
  // Agrees with the parsed set on what FieldSet writes.
  FieldSet parsed = Parse(s);
  for (auto path : {FieldPath({"spec", "renewTime"}), FieldPath({"spec"}), FieldPath({"metadata"}),
                    FieldPath({"metadata", "labels", "spec"})}) {
    std::vector<std::string_view> names;
    for (const auto& pe : path) names.push_back(pe.field());
    std::optional<bool> scanned =
        names.size() == 1   ? FieldsV1HasFieldPath(s, {names[0]})
        : names.size() == 2 ? FieldsV1HasFieldPath(s, {names[0], names[1]})
                            : FieldsV1HasFieldPath(s, {names[0], names[1], names[2]});
    BOOST_TEST(*scanned == parsed.Has(path), PathToString(path));
  }
}

BOOST_AUTO_TEST_CASE(ChildMembersInOnePass) {
  const std::string s = R"({"f:metadata":{"f:labels":{"f:spec":{}}},"f:spec":{".":{},"f:delegate":{},"f:x":{"f:y":{}},"f:renewTime":{".":{},"f:z":{}}},"f:status":{"f:a":{}}})";
  std::vector<std::string> got;
  BOOST_TEST(FieldsV1ChildMembers(s, "spec", [&](std::string_view f) { got.emplace_back(f); }));
  BOOST_TEST(got == (std::vector<std::string>{"delegate", "renewTime"}), boost::test_tools::per_element());
  got.clear();
  BOOST_TEST(FieldsV1ChildMembers(R"({"f:metadata":{}})", "spec", [&](std::string_view f) { got.emplace_back(f); }));
  BOOST_TEST(got.empty());
  BOOST_TEST(!FieldsV1ChildMembers(R"({"f:sp\u0065c":{}})", "spec", [](std::string_view) {}));
  BOOST_TEST(!FieldsV1ChildMembers("[]", "spec", [](std::string_view) {}));
}

BOOST_AUTO_TEST_CASE(UnsureOnAnythingElse) {
  // Escapes in keys, or text that is not FieldsV1: the caller must parse.
  BOOST_TEST(!FieldsV1HasFieldPath(R"({"f:sp\u0065c":{"f:renewTime":{}}})", {"spec", "renewTime"}));
  BOOST_TEST(!FieldsV1HasFieldPath("[1]", {"spec"}));
  BOOST_TEST(!FieldsV1HasFieldPath(R"({"f:spec":1})", {"spec", "renewTime"}));
  // Strings inside skipped values do not confuse the scan.
  BOOST_TEST((FieldsV1HasFieldPath(R"({"f:x":{"f:}":{}},"f:spec":{}})", {"spec"}) ==
              std::optional<bool>(true)));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers::ssa
