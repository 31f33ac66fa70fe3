#define BOOST_TEST_MODULE field_manager
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>

#include "handlers/field_manager.h"
#include "handlers/managed_fields.h"
#include "handlers/registry/registry.h"
#include "store/api_error.h"
#include "store/object_codec.h"
#include "tests/handlers/handler_testing.h"

namespace poolcoord::handlers {
namespace {

using store::Kind;
using store::Object;

constexpr int64_t kT0 = 1704067200;  // 2024-01-01T00:00:00Z

Object Lease() {
  Object o;
  o.kind = Kind::kDelegatedLease;
  o.metadata.name = "n1";
  o.metadata.uid = "uid-1";
  o.metadata.resource_version = 7;
  o.metadata.annotations = {{"openyurt.io/delegate-heartbeat", "true"}};
  o.spec.holder_identity = "n1";
  o.spec.lease_duration_seconds = 40;
  o.spec.renew_time_us = kT0 * 1000000;
  o.spec.pool_name = "hz";
  o.spec.delegate = "hz-1";
  return o;
}

FieldManagerRequest As(std::string manager, int64_t now, std::string subresource = "") {
  FieldManagerRequest r;
  r.kind = Kind::kDelegatedLease;
  r.schema = &registry::ForKind(Kind::kDelegatedLease).MergeSchema().root();
  r.manager = std::move(manager);
  r.subresource = std::move(subresource);
  r.now_s = now;
  return r;
}

const store::ManagedFieldsEntry* EntryOf(const Object& o, std::string_view manager) {
  for (const auto& e : o.metadata.managed_fields) {
    if (e.manager() == manager) return &e;
  }
  return nullptr;
}

// A created lease, as the agent's create leaves it.
Object Created() {
  Object o = Lease();
  RecordUpdate(nullptr, o, As("poolcoord-agent", kT0));
  return o;
}

BOOST_AUTO_TEST_SUITE(Updates)

BOOST_AUTO_TEST_CASE(CreateRecordsEveryFieldTheClientSet) {
  Object o = Created();
  BOOST_REQUIRE(o.metadata.managed_fields.size() == 1u);
  const auto& e = o.metadata.managed_fields[0];
  BOOST_TEST(e.manager() == "poolcoord-agent");
  BOOST_TEST(e.operation() == "Update");
  BOOST_TEST(e.api_version() == "coordination.pool/v1alpha1");
  BOOST_TEST(e.fields_type() == "FieldsV1");
  BOOST_TEST(*e.time == kT0);
  BOOST_TEST(e.subresource().empty());
  BOOST_TEST(e.fields_v1() ==
             R"({"f:metadata":{"f:annotations":{".":{},"f:openyurt.io/delegate-heartbeat":{}}},)"
             R"("f:spec":{".":{},"f:delegate":{},"f:holderIdentity":{},"f:leaseDurationSeconds":{},)"
             R"("f:poolName":{},"f:renewTime":{}}})");
}

BOOST_AUTO_TEST_CASE(RenewalOnlyMovesTheTime) {
  const Object live = Created();
  Object next = live;
  next.spec.renew_time_us = *live.spec.renew_time_us + 5000000;
  RecordUpdate(&live, next, As("poolcoord-agent", kT0 + 5));
  BOOST_REQUIRE(next.metadata.managed_fields.size() == 1u);
  BOOST_TEST(*next.metadata.managed_fields[0].time == kT0 + 5);
  BOOST_TEST(next.metadata.managed_fields[0].fields_v1() == live.metadata.managed_fields[0].fields_v1());
  // What the entry owns is cached beside it (never compared or sent): the next
  // renewal of the stored object reads no fieldsV1, and answers the same.
  BOOST_TEST(next.metadata.managed_fields[0].owner_hint() != 0u);
  BOOST_TEST(next.metadata.managed_fields[0].SameText(live.metadata.managed_fields[0]));
  Object again = next;
  again.spec.renew_time_us = *next.spec.renew_time_us + 5000000;
  RecordUpdate(&next, again, As("poolcoord-agent", kT0 + 10));
  BOOST_TEST(*again.metadata.managed_fields[0].time == kT0 + 10);
  BOOST_TEST(again.metadata.managed_fields[0].fields_v1() == live.metadata.managed_fields[0].fields_v1());
  BOOST_TEST(store::EncodeObject(again).find("owner") == std::string::npos);
  // Nothing changed: nothing moves.
  Object same = live;
  RecordUpdate(&live, same, As("poolcoord-agent", kT0 + 9));
  BOOST_TEST((same.metadata.managed_fields == live.metadata.managed_fields));
}

// The fast path and the general one agree: the general path runs when the
// request sends entries of its own (here the same ones, in another order).
void ExpectBothPathsAgree(const Object& live, Object next, const FieldManagerRequest& r) {
  Object fast = next;
  RecordUpdate(&live, fast, r);
  Object general = next;
  std::reverse(general.metadata.managed_fields.begin(), general.metadata.managed_fields.end());
  if (general.metadata.managed_fields == live.metadata.managed_fields) {
    // One entry: send it with a time the general path ignores in the comparison.
    general.metadata.managed_fields.push_back(general.metadata.managed_fields.back());
  }
  RecordUpdate(&live, general, r);
  BOOST_TEST(store::EncodeObject(fast) == store::EncodeObject(general));
}

BOOST_AUTO_TEST_CASE(FastAndGeneralPathsAgree) {
  Object live = Created();
  // Another writer owns the holder.
  Object other = live;
  other.spec.holder_identity = "n2";
  RecordUpdate(&live, other, As("kubectl-edit", kT0 + 1));
  live = other;
  BOOST_TEST(EntryOf(live, "kubectl-edit") != nullptr);

  Object renew = live;
  renew.spec.renew_time_us = *renew.spec.renew_time_us + 1;
  ExpectBothPathsAgree(live, renew, As("poolcoord-agent", kT0 + 2));   // owned: time only
  Object take = live;
  take.spec.holder_identity = "n1";
  ExpectBothPathsAgree(live, take, As("poolcoord-agent", kT0 + 3));    // owned by another
  Object fresh = live;
  fresh.spec.renew_time_us = *fresh.spec.renew_time_us + 2;
  ExpectBothPathsAgree(live, fresh, As("new-writer", kT0 + 4));        // a new manager
  Object drop = live;
  drop.spec.delegate.reset();
  ExpectBothPathsAgree(live, drop, As("poolcoord-agent", kT0 + 5));    // a removal
  Object label = renew;
  label.metadata.labels = {{"x", "y"}};
  ExpectBothPathsAgree(live, label, As("poolcoord-agent", kT0 + 6));   // metadata too
}

BOOST_AUTO_TEST_CASE(TakingAFieldMovesItsOwnership) {
  Object live = Created();
  Object next = live;
  next.spec.renew_time_us = *live.spec.renew_time_us + 1;
  RecordUpdate(&live, next, As("forwarder", kT0 + 1));
  BOOST_TEST(EntryOf(next, "forwarder")->fields_v1() == R"({"f:spec":{"f:renewTime":{}}})");
  BOOST_TEST(EntryOf(next, "poolcoord-agent")->fields_v1().find("renewTime") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(SentEntriesWinAndAnEmptyOneResets) {
  Object live = Created();
  Object next = live;
  next.metadata.managed_fields = {store::ManagedFieldsEntry{}};
  RecordUpdate(&live, next, As("x", kT0 + 1));
  BOOST_TEST(next.metadata.managed_fields.empty());
  Object edited = live;
  edited.metadata.managed_fields[0].set_manager("renamed");
  RecordUpdate(&live, edited, As("x", kT0 + 1));
  BOOST_TEST(EntryOf(edited, "renamed") != nullptr);
  BOOST_TEST(EntryOf(edited, "poolcoord-agent") == nullptr);
}

BOOST_AUTO_TEST_CASE(StatusWritesOwnOnlyStatus) {
  Object live = Created();
  Object next = live;
  next.status.expired = true;
  RecordUpdate(&live, next, As("forwarder", kT0 + 1, "status"));
  const auto* e = EntryOf(next, "forwarder");
  BOOST_REQUIRE(e);
  BOOST_TEST(e->subresource() == "status");
  BOOST_TEST(e->fields_v1() == R"({"f:status":{".":{},"f:expired":{}}})");
}

BOOST_AUTO_TEST_CASE(ManagersFromRequests) {
  BOOST_TEST(RequestManager("kubectl-edit", "kubectl/v1.32") == "kubectl-edit");
  BOOST_TEST(RequestManager("", "kubectl/v1.32 (linux/amd64)") == "kubectl");
  BOOST_TEST(RequestManager("", "") == "unknown");
  BOOST_TEST(RequestManager("m\xFF", "") == "m\xEF\xBF\xBD");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Applies)

using testing::ParseJson;

std::string Check(const std::string& config, std::string_view name = "n1") {
  absl::Status s = CheckApplyConfiguration(ParseJson(config), Kind::kDelegatedLease,
                                           registry::ForKind(Kind::kDelegatedLease).MergeSchema().root(), name);
  return s.ok() ? "ok" : std::to_string(store::ApiErrorFromStatus(s).code) + " " + std::string(s.message());
}

BOOST_AUTO_TEST_CASE(ConfigurationsRefusedAsKubeApiserverRefusesThem) {
  const std::string head = R"({"apiVersion":"coordination.pool/v1alpha1","kind":"DelegatedLease",)";
  BOOST_TEST(Check(head + R"("metadata":{"name":"n1"},"spec":{"renewTime":"x"}})") == "ok");
  BOOST_TEST(Check("[1,2]") ==
             "400 error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
             "unmarshal array into Go value of type map[string]interface {}");
  BOOST_TEST(Check("null") == "400 invalid object type: /, Kind=");
  BOOST_TEST(Check(R"({"apiVersion":"coordination.pool/v1","kind":"DelegatedLease"})") ==
             "400 invalid object type: coordination.pool/v1, Kind=DelegatedLease");
  BOOST_TEST(Check(R"({"apiVersion":"v1","kind":"Lease"})") == "400 invalid object type: /v1, Kind=Lease");
  BOOST_TEST(Check(head + R"("metadata":{"name":"n1","managedFields":[{"manager":"x"}]}})") ==
             "400 metadata.managedFields must be nil");
  BOOST_TEST(Check(head + R"("metadata":{"name":"n1"},"spec":{"acquireTime":"x"}})") ==
             "400 failed to create typed patch object (/n1; coordination.pool/v1alpha1, "
             "Kind=DelegatedLease): .spec.acquireTime: field not declared in schema");
  BOOST_TEST(Check(head + R"("metadata":{"name":"other"}})") ==
             "400 the name of the object (other) does not match the name on the URL (n1)");
}

BOOST_AUTO_TEST_CASE(ApplyCreatesThenConflicts) {
  const auto config = ParseJson(
      R"({"apiVersion":"coordination.pool/v1alpha1","kind":"DelegatedLease","metadata":{"name":"n1"},)"
      R"("spec":{"holderIdentity":"n1","leaseDurationSeconds":40}})");
  auto created = ApplyConfiguration(nullptr, config, As("m1", kT0), false);
  BOOST_REQUIRE(created.ok());
  BOOST_TEST(created->changed);
  const Object& o = *created->object;
  BOOST_TEST(*o.spec.lease_duration_seconds == 40);
  BOOST_REQUIRE(o.metadata.managed_fields.size() == 1u);
  BOOST_TEST(o.metadata.managed_fields[0].operation() == "Apply");
  BOOST_TEST(o.metadata.managed_fields[0].fields_v1() ==
             R"({"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{}}})");

  auto again = ApplyConfiguration(&o, config, As("m1", kT0 + 1), false);
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(!again->changed);

  const auto other = ParseJson(
      R"({"apiVersion":"coordination.pool/v1alpha1","kind":"DelegatedLease","metadata":{"name":"n1"},)"
      R"("spec":{"leaseDurationSeconds":20}})");
  auto conflict = ApplyConfiguration(&o, other, As("m2", kT0 + 2), false);
  BOOST_TEST(absl::IsAborted(conflict.status()));
  BOOST_TEST(std::string(conflict.status().message()) ==
             "Apply failed with 1 conflict: conflict with \"m1\": .spec.leaseDurationSeconds");
  auto forced = ApplyConfiguration(&o, other, As("m2", kT0 + 2), true);
  BOOST_REQUIRE(forced.ok());
  BOOST_TEST(*forced->object->spec.lease_duration_seconds == 20);
  BOOST_TEST(*forced->object->spec.holder_identity == "n1");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
