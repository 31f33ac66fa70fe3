#define BOOST_TEST_MODULE table
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include "handlers/table.h"
#include "rapidjson/document.h"
#include "tests/handlers/handler_testing.h"

namespace poolcoord::handlers {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kNow = 1'767'225'600LL * kSecond;  // 2026-01-01T00:00:00Z

constexpr char kTableAccept[] =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json";

Request WithAccept(std::string accept) {
  Request r;
  r.method = "GET";
  r.path = "/apis/coordination.pool/v1alpha1/poolleases";
  r.headers.emplace_back("accept", std::move(accept));
  return r;
}

using testing::S;
constexpr auto Parse = testing::ParseObject;

store::ObjectPtr PoolLease() {
  auto o = std::make_shared<store::Object>();
  o->kind = store::Kind::kPoolLease;
  o->metadata.name = "hangzhou";
  o->metadata.uid = "7c1e0000-0000-0000-0000-000000000001";
  o->metadata.resource_version = 42;
  o->metadata.generation = 1;
  o->metadata.creation_timestamp = (kNow - 3 * kMinute - 2 * kSecond) / kSecond;
  o->metadata.labels["env"] = "test";
  o->spec.holder_identity = "hz-1";
  o->spec.lease_duration_seconds = 15;
  o->spec.renew_time_us = kNow - 5 * kSecond - 300'000;
  o->spec.lease_transitions = 3;
  return o;
}

store::ObjectPtr DelegatedLease() {
  auto o = std::make_shared<store::Object>();
  o->kind = store::Kind::kDelegatedLease;
  o->metadata.name = "hz-2";
  o->metadata.resource_version = 43;
  o->metadata.creation_timestamp = (kNow - 2 * kDay - 3 * kHour) / kSecond;
  o->spec.holder_identity = "hz-2";
  o->spec.pool_name = "hangzhou";
  o->status.expired = true;
  return o;
}

std::vector<std::string> ColumnNames(const rapidjson::Value& table) {
  std::vector<std::string> names;
  for (const auto& c : table["columnDefinitions"].GetArray()) names.push_back(S(c["name"]));
  return names;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(human_duration)

BOOST_AUTO_TEST_CASE(boundaries_as_kubectl_prints_them) {
  BOOST_TEST(HumanDuration(-2 * kSecond) == "<invalid>");
  BOOST_TEST(HumanDuration(-1 * kSecond - 500'000) == "0s");  // skew tolerated
  BOOST_TEST(HumanDuration(-kSecond) == "0s");
  BOOST_TEST(HumanDuration(0) == "0s");
  BOOST_TEST(HumanDuration(999'999) == "0s");
  BOOST_TEST(HumanDuration(5 * kSecond) == "5s");
  BOOST_TEST(HumanDuration(119 * kSecond) == "119s");
  BOOST_TEST(HumanDuration(120 * kSecond) == "2m");
  BOOST_TEST(HumanDuration(3 * kMinute + 2 * kSecond) == "3m2s");
  BOOST_TEST(HumanDuration(9 * kMinute + 59 * kSecond) == "9m59s");
  BOOST_TEST(HumanDuration(10 * kMinute + 30 * kSecond) == "10m");
  BOOST_TEST(HumanDuration(179 * kMinute) == "179m");
  BOOST_TEST(HumanDuration(3 * kHour) == "3h");
  BOOST_TEST(HumanDuration(3 * kHour + 5 * kMinute) == "3h5m");
  BOOST_TEST(HumanDuration(7 * kHour + 59 * kMinute) == "7h59m");
  BOOST_TEST(HumanDuration(8 * kHour + 59 * kMinute) == "8h");
  BOOST_TEST(HumanDuration(47 * kHour) == "47h");
  BOOST_TEST(HumanDuration(48 * kHour) == "2d");
  BOOST_TEST(HumanDuration(2 * kDay + 3 * kHour) == "2d3h");
  BOOST_TEST(HumanDuration(7 * kDay + 23 * kHour) == "7d23h");
  BOOST_TEST(HumanDuration(8 * kDay + 5 * kHour) == "8d");
  BOOST_TEST(HumanDuration(729 * kDay) == "729d");
  BOOST_TEST(HumanDuration(730 * kDay) == "2y");
  BOOST_TEST(HumanDuration(731 * kDay) == "2y1d");
  BOOST_TEST(HumanDuration(8 * 365 * kDay) == "8y");
  BOOST_TEST(HumanDuration(10 * 365 * kDay + 100 * kDay) == "10y");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(negotiation)

BOOST_AUTO_TEST_CASE(kubectl_get_wants_table) {
  BOOST_TEST(WantsTable(WithAccept(kTableAccept)));
  BOOST_TEST(WantsTable(WithAccept("application/json; g=meta.k8s.io ;as=Table; v=v1beta1")));
}

BOOST_AUTO_TEST_CASE(plain_json_first_or_foreign_group_is_not_table) {
  BOOST_TEST(!WantsTable(WithAccept("application/json")));
  BOOST_TEST(!WantsTable(WithAccept("")));
  BOOST_TEST(!WantsTable(WithAccept("application/json,application/json;as=Table;v=v1;g=meta.k8s.io")));
  BOOST_TEST(!WantsTable(WithAccept("application/json;as=Table;v=v1;g=example.com")));
  BOOST_TEST(!WantsTable(WithAccept("application/json;as=Table;v=v2;g=meta.k8s.io")));
  BOOST_TEST(!WantsTable(WithAccept("application/json;as=Table;v=v1;g=meta.k8s.io;q=0")));
  // q moves the plain range ahead.
  BOOST_TEST(!WantsTable(
      WithAccept("application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5,application/json")));
}

BOOST_AUTO_TEST_CASE(metadata_client_wants_partial_object_metadata) {
  std::string list_accept =
      "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
      "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
  std::string get_accept =
      "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
      "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
  BOOST_TEST(WantsPartialObjectMetadata(WithAccept(list_accept), true));
  BOOST_TEST(!WantsPartialObjectMetadata(WithAccept(list_accept), false));
  BOOST_TEST(WantsPartialObjectMetadata(WithAccept(get_accept), false));
  BOOST_TEST(!WantsPartialObjectMetadata(WithAccept(get_accept), true));
  BOOST_TEST(!WantsTable(WithAccept(get_accept)));
  BOOST_TEST(!WantsPartialObjectMetadata(WithAccept("application/json"), false));
  // Only the protobuf form: we cannot serve it.
  BOOST_TEST(!WantsPartialObjectMetadata(
      WithAccept("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
      false));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(render_table)

BOOST_AUTO_TEST_CASE(pool_lease_columns_and_cells) {
  auto d = Parse(RenderTable(store::Kind::kPoolLease, {PoolLease()}, "42", "", true, kNow));
  BOOST_TEST(S(d["kind"]) == "Table");
  BOOST_TEST(S(d["apiVersion"]) == "meta.k8s.io/v1");
  BOOST_TEST(S(d["metadata"]["resourceVersion"]) == "42");
  BOOST_TEST(!d["metadata"].HasMember("continue"));
  std::vector<std::string> expected{"Name", "Holder", "Transitions", "Renewed", "Age"};
  BOOST_TEST(ColumnNames(d) == expected, boost::test_tools::per_element());
  const auto& cols = d["columnDefinitions"];
  BOOST_TEST(S(cols[0]["format"]) == "name");
  BOOST_TEST(cols[2]["priority"].GetInt() == 1);
  BOOST_TEST(S(cols[2]["type"]) == "integer");
  for (const auto& c : cols.GetArray()) {
    if (S(c["name"]) != "Transitions") BOOST_TEST(c["priority"].GetInt() == 0);
    BOOST_TEST(!S(c["description"]).empty());
  }
  BOOST_REQUIRE_EQUAL(d["rows"].Size(), 1u);
  const auto& cells = d["rows"][0]["cells"];
  BOOST_REQUIRE_EQUAL(cells.Size(), 5u);
  BOOST_TEST(S(cells[0]) == "hangzhou");
  BOOST_TEST(S(cells[1]) == "hz-1");
  BOOST_TEST(cells[2].GetInt() == 3);
  BOOST_TEST(S(cells[3]) == "5s");
  BOOST_TEST(S(cells[4]) == "3m2s");
  const auto& object = d["rows"][0]["object"];
  BOOST_TEST(S(object["kind"]) == "PartialObjectMetadata");
  BOOST_TEST(S(object["apiVersion"]) == "meta.k8s.io/v1");
  BOOST_TEST(S(object["metadata"]["name"]) == "hangzhou");
  BOOST_TEST(S(object["metadata"]["resourceVersion"]) == "42");
  BOOST_TEST(!object.HasMember("spec"));
}

BOOST_AUTO_TEST_CASE(delegated_lease_columns_and_missing_values) {
  auto d = Parse(RenderTable(store::Kind::kDelegatedLease, {DelegatedLease()}, "43", "Metadata",
                             true, kNow));
  std::vector<std::string> expected{"Name", "Pool", "Delegate", "Renewed", "Expired", "Age"};
  BOOST_TEST(ColumnNames(d) == expected, boost::test_tools::per_element());
  BOOST_TEST(d["columnDefinitions"][4]["priority"].GetInt() == 1);
  const auto& cells = d["rows"][0]["cells"];
  BOOST_TEST(S(cells[0]) == "hz-2");
  BOOST_TEST(S(cells[1]) == "hangzhou");
  BOOST_TEST(S(cells[2]) == "<none>");     // no delegate
  BOOST_TEST(S(cells[3]) == "<unknown>");  // no renewTime
  BOOST_TEST(cells[4].IsTrue());
  BOOST_TEST(S(cells[5]) == "2d3h");
}

BOOST_AUTO_TEST_CASE(include_object_variants) {
  auto full = Parse(RenderTable(store::Kind::kPoolLease, {PoolLease()}, "42", "Object", true, kNow));
  const auto& object = full["rows"][0]["object"];
  BOOST_TEST(S(object["kind"]) == "PoolLease");
  BOOST_TEST(S(object["apiVersion"]) == "coordination.pool/v1alpha1");
  BOOST_TEST(S(object["spec"]["holderIdentity"]) == "hz-1");

  auto none = Parse(RenderTable(store::Kind::kPoolLease, {PoolLease()}, "42", "None", true, kNow));
  BOOST_TEST(!none["rows"][0].HasMember("object"));
  BOOST_TEST(none["rows"][0]["cells"].Size() == 5u);
}

BOOST_AUTO_TEST_CASE(later_watch_tables_have_no_column_definitions) {
  auto d = Parse(RenderTable(store::Kind::kPoolLease, {PoolLease()}, "42", "", false, kNow));
  BOOST_TEST(d["columnDefinitions"].IsArray());
  BOOST_TEST(d["columnDefinitions"].Size() == 0u);
  BOOST_TEST(d["rows"].Size() == 1u);
}

BOOST_AUTO_TEST_CASE(empty_list_and_continue) {
  auto d = Parse(RenderTable(store::Kind::kPoolLease, {}, "7", "", true, kNow, "tok", 4));
  BOOST_TEST(d["rows"].IsArray());
  BOOST_TEST(d["rows"].Size() == 0u);
  BOOST_TEST(S(d["metadata"]["continue"]) == "tok");
  BOOST_TEST(d["metadata"]["remainingItemCount"].GetInt64() == 4);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(partial_object_metadata)

BOOST_AUTO_TEST_CASE(single) {
  auto d = Parse(RenderPartialObjectMetadata(*PoolLease()));
  BOOST_TEST(S(d["kind"]) == "PartialObjectMetadata");
  BOOST_TEST(S(d["apiVersion"]) == "meta.k8s.io/v1");
  BOOST_TEST(S(d["metadata"]["name"]) == "hangzhou");
  BOOST_TEST(S(d["metadata"]["labels"]["env"]) == "test");
  BOOST_TEST(!d.HasMember("spec"));
}

BOOST_AUTO_TEST_CASE(list) {
  auto d = Parse(RenderPartialObjectMetadataList({PoolLease(), DelegatedLease()}, "50", "next", 3));
  BOOST_TEST(S(d["kind"]) == "PartialObjectMetadataList");
  BOOST_TEST(S(d["apiVersion"]) == "meta.k8s.io/v1");
  BOOST_TEST(S(d["metadata"]["resourceVersion"]) == "50");
  BOOST_TEST(S(d["metadata"]["continue"]) == "next");
  BOOST_TEST(d["metadata"]["remainingItemCount"].GetInt64() == 3);
  BOOST_REQUIRE_EQUAL(d["items"].Size(), 2u);
  BOOST_TEST(S(d["items"][1]["kind"]) == "PartialObjectMetadata");
  BOOST_TEST(S(d["items"][1]["metadata"]["name"]) == "hz-2");

  auto empty = Parse(RenderPartialObjectMetadataList({}, "50", "", 0));
  BOOST_TEST(empty["items"].IsArray());
  BOOST_TEST(empty["items"].Size() == 0u);
  BOOST_TEST(!empty["metadata"].HasMember("continue"));
  BOOST_TEST(!empty["metadata"].HasMember("remainingItemCount"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::handlers
