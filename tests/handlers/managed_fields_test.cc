#define BOOST_TEST_MODULE managed_fields
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "handlers/registry/registry.h"
#include "handlers/managed_fields.h"
#include "tests/handlers/handler_testing.h"

namespace poolcoord::handlers::ssa {
namespace {

constexpr char kV[] = "coordination.pool/v1alpha1";

const registry::Strategy& PoolLeases() { return registry::ForKind(store::Kind::kPoolLease); }
const SchemaNode& PoolLease() { return PoolLeases().MergeSchema().root(); }

using testing::ParseJson;

FieldSet Set(const std::string& json) {
  auto s = FieldSet::FromJson(json);
  BOOST_REQUIRE(s.ok());
  return *s;
}

store::ManagedFieldsEntry Entry(std::string manager, std::string op, std::string fields,
                                std::optional<int64_t> time = 100, std::string subresource = "") {
  return store::ManagedFieldsEntry(
      store::ManagedFieldsText{manager, op, kV, "FieldsV1", fields, subresource}, time);
}

Manager Updater(std::string name, std::string fields, int64_t time) {
  Manager m;
  m.name = std::move(name);
  m.api_version = kV;
  m.fields = Set(fields);
  m.time = time;
  return m;
}

// One Update operation from `before` to `after`, as the field manager runs it.
void Update(const std::string& before, const std::string& after, const std::string& manager,
            int64_t now, Managers& managers, std::string_view subresource = "") {
  auto a = ParseJson(before), b = ParseJson(after);
  // The PoolLease strategy's reset fields, as the REST handlers pass them.
  const FieldSet& reset = PoolLeases().ResetFields(
      subresource == "status" ? registry::Subresource::kStatus : registry::Subresource::kMain);
  RecordUpdate(FilterComparison(Compare(&a, &b, PoolLease()), subresource, reset), manager, kV,
               std::string(subresource), now, managers);
}

const Manager* Find(const Managers& ms, std::string_view name) {
  for (const Manager& m : ms) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

BOOST_AUTO_TEST_SUITE(Identity)

BOOST_AUTO_TEST_CASE(IdentifierAndDescription) {
  Manager u = Updater("m2", "{}", 1);
  BOOST_TEST(u.Identifier() == R"({"manager":"m2","operation":"Update","apiVersion":"coordination.pool/v1alpha1"})");
  BOOST_TEST(u.Describe() == R"("m2" using coordination.pool/v1alpha1)");
  u.subresource = "status";
  BOOST_TEST(u.Describe() == R"("m2" with subresource "status" using coordination.pool/v1alpha1)");
  Manager a;
  a.name = "m1";
  a.operation = Operation::kApply;
  a.api_version = kV;
  // Appliers are one manager whatever apiVersion they applied.
  BOOST_TEST(a.Identifier() == R"({"manager":"m1","operation":"Apply"})");
  BOOST_TEST(a.Describe() == R"("m1")");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Entries)

BOOST_AUTO_TEST_CASE(DecodeRefusesWhatKubeApiserverRefuses) {
  BOOST_TEST(DecodeManagers({Entry("m", "Update", R"({"f:spec":{}})")}).ok());
  auto bad_op = Entry("m", "Bogus", "{}");
  BOOST_TEST(std::string(DecodeManagers({bad_op}).status().message()) ==
             "operation must be `Apply` or `Update`");
  auto no_version = Entry("m", "Update", "{}");
  no_version.set_api_version("");
  BOOST_TEST(std::string(DecodeManagers({no_version}).status().message()) == "apiVersion must not be empty");
  auto no_type = Entry("m", "Update", "{}");
  no_type.set_fields_type("");
  BOOST_TEST(std::string(DecodeManagers({no_type}).status().message()) ==
             "missing fieldsType in managed fields entry 0");
  auto bad_set = Entry("m", "Update", R"({"spec":{}})");
  BOOST_TEST(!DecodeManagers({bad_set}).ok());
  auto not_object = Entry("m", "Update", R"("x")");
  BOOST_TEST(!DecodeManagers({not_object}).ok());
}

BOOST_AUTO_TEST_CASE(EncodeSortsAsKubeApiserver) {
  Managers ms;
  ms.push_back(Updater("b", R"({"f:x":{}})", 50));
  ms.push_back(Updater("a", R"({"f:y":{}})", 50));
  ms.push_back(Updater("z", R"({"f:z":{}})", 10));
  Manager apply;
  apply.name = "late";
  apply.operation = Operation::kApply;
  apply.api_version = kV;
  apply.fields = Set(R"({"f:w":{}})");  // no time: counts as 0
  ms.push_back(apply);
  ms.push_back(Updater("empty", "{}", 1));  // an empty set is no entry
  auto entries = EncodeManagers(ms);
  std::vector<std::string> order;
  for (const auto& e : entries) order.push_back(std::string(e.manager()));
  BOOST_TEST(order == (std::vector<std::string>{"late", "z", "a", "b"}), boost::test_tools::per_element());
  BOOST_TEST(entries[0].operation() == "Apply");
  BOOST_TEST(!entries[0].time.has_value());
  // Equal text is one shared record: encoding the same managers again shares it.
  auto again = EncodeManagers(ms);
  BOOST_TEST(again[0].SameText(entries[0]));
  BOOST_TEST(again[0].fields_v1().data() == entries[0].fields_v1().data());
  auto back = DecodeManagers(entries);
  BOOST_REQUIRE(back.ok());
  BOOST_TEST(back->size() == 4u);
}

BOOST_AUTO_TEST_CASE(BaseManagersFollowDecodeLiveOrNew) {
  store::ManagedFields live = {Entry("live", "Update", R"({"f:spec":{}})")};
  store::ManagedFields sent = {Entry("sent", "Update", R"({"f:spec":{}})")};
  BOOST_TEST(BaseManagers(&live, sent, false)[0].name == "sent");
  BOOST_TEST(BaseManagers(&live, {}, false)[0].name == "live");          // none sent
  BOOST_TEST(BaseManagers(&live, sent, true)[0].name == "live");         // subresource
  BOOST_TEST(BaseManagers(&live, {store::ManagedFieldsEntry{}}, false).empty());  // [{}] resets
  BOOST_TEST(BaseManagers(&live, {Entry("x", "Bogus", "{}")}, false)[0].name == "live");
  store::ManagedFields broken = {Entry("x", "Bogus", "{}")};
  BOOST_TEST(BaseManagers(&broken, {}, false).empty());  // unreadable live: none
  BOOST_TEST(BaseManagers(nullptr, {}, false).empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Updates)

BOOST_AUTO_TEST_CASE(CreateThenOthersTakeWhatTheyChange) {
  Managers ms;
  // kube-apiserver's entry for POST {"metadata":{"annotations":{"x":..}},"spec":{...}}.
  Update(R"({"apiVersion":"v","kind":"PoolLease"})",
         R"({"apiVersion":"v","kind":"PoolLease","metadata":{"name":"a","uid":"u","annotations":{"x":"1"}},)"
         R"("spec":{"holderIdentity":"h","leaseDurationSeconds":3},"status":{"observedTime":"t"}})",
         "cr", 100, ms);
  BOOST_REQUIRE(ms.size() == 1u);
  BOOST_TEST(ms[0].fields.ToJson() ==
             R"({"f:metadata":{"f:annotations":{".":{},"f:x":{}}},)"
             R"("f:spec":{".":{},"f:holderIdentity":{},"f:leaseDurationSeconds":{}}})");
  BOOST_TEST(*ms[0].time == 100);
  // m2 changes the holder: it owns it now, cr does not.
  Update(R"({"spec":{"holderIdentity":"h","leaseDurationSeconds":3}})",
         R"({"spec":{"holderIdentity":"k","leaseDurationSeconds":3}})", "m2", 200, ms);
  BOOST_TEST(Find(ms, "cr")->fields.ToJson() == R"({"f:metadata":{"f:annotations":{".":{},"f:x":{}}},"f:spec":{".":{},"f:leaseDurationSeconds":{}}})");
  BOOST_TEST(Find(ms, "m2")->fields.ToJson() == R"({"f:spec":{"f:holderIdentity":{}}})");
  // Writing the same values changes nothing, not even the time.
  Update(R"({"spec":{"holderIdentity":"k"}})", R"({"spec":{"holderIdentity":"k"}})", "m3", 300, ms);
  BOOST_TEST(Find(ms, "m3") == nullptr);
  // Removing a field: nobody owns it; the remover gets no entry for it.
  Update(R"({"spec":{"holderIdentity":"k","leaseDurationSeconds":3}})", R"({"spec":{"leaseDurationSeconds":3}})",
         "m4", 400, ms);
  BOOST_TEST(Find(ms, "m2") == nullptr);  // its only field is gone: no entry
  BOOST_TEST(Find(ms, "m4") == nullptr);
  // The same manager again: its sets merge, its time moves.
  Update(R"({"spec":{}})", R"({"spec":{"renewTime":"t1"}})", "cr", 500, ms);
  BOOST_TEST(Find(ms, "cr")->fields.Has(FieldPath({"spec", "renewTime"})));
  BOOST_TEST(Find(ms, "cr")->fields.Has(FieldPath({"metadata", "annotations", "x"})));
  BOOST_TEST(*Find(ms, "cr")->time == 500);
}

BOOST_AUTO_TEST_CASE(StatusBelongsToTheSubresource) {
  Managers ms;
  Update(R"({"spec":{"a":1},"status":{}})", R"({"spec":{"holderIdentity":"x"},"status":{"observedTime":"t"}})",
         "main", 1, ms);
  BOOST_TEST(Find(ms, "main")->fields.ToJson() == R"({"f:spec":{"f:holderIdentity":{}}})");
  Update(R"({"spec":{},"status":{}})",
         R"({"spec":{"holderIdentity":"y"},"status":{"expired":true,"observedTime":"t"}})",
         "st", 2, ms, "status");
  BOOST_REQUIRE(Find(ms, "st") != nullptr);
  // observedTime is reset by the server on every write, /status too: nobody's.
  BOOST_TEST(Find(ms, "st")->fields.ToJson() == R"({"f:status":{"f:expired":{}}})");
  BOOST_TEST(Find(ms, "st")->subresource == "status");
}

BOOST_AUTO_TEST_CASE(CapMergesTheOldestIntoAncientChanges) {
  // As kube-apiserver did for cr + u00..u11 written in one second: cr, u00, u01,
  // u02 become "ancient-changes", ten Update entries stay.
  Managers ms;
  ms.push_back(Updater("cr", R"({"f:spec":{".":{},"f:leaseDurationSeconds":{}}})", 100));
  for (int i = 0; i < 12; ++i) {
    char name[8];
    std::snprintf(name, sizeof(name), "u%02d", i);
    ms.push_back(Updater(name, "{\"f:metadata\":{\"f:labels\":{\"f:l" + std::to_string(i) + "\":{}}}}", 100));
  }
  Manager apply;
  apply.name = "m1";
  apply.operation = Operation::kApply;
  apply.api_version = kV;
  apply.fields = Set(R"({"f:spec":{"f:holderIdentity":{}}})");
  ms.push_back(apply);
  CapUpdateManagers(ms, 10);
  size_t updaters = 0;
  for (const Manager& m : ms) updaters += m.operation == Operation::kUpdate;
  BOOST_TEST(updaters == 10u);
  const Manager* ancient = Find(ms, kAncientChangesManager);
  BOOST_REQUIRE(ancient);
  BOOST_TEST(ancient->fields.ToJson() ==
             R"({"f:metadata":{"f:labels":{"f:l0":{},"f:l1":{},"f:l2":{}}},"f:spec":{".":{},"f:leaseDurationSeconds":{}}})");
  for (const char* gone : {"cr", "u00", "u01", "u02"}) BOOST_TEST(Find(ms, gone) == nullptr, gone);
  BOOST_TEST(Find(ms, "u11") != nullptr);
  BOOST_TEST(Find(ms, "m1") != nullptr);  // appliers are never merged
  // Below the cap nothing moves.
  Managers few = {Updater("a", R"({"f:x":{}})", 1)};
  CapUpdateManagers(few, 10);
  BOOST_TEST(few.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(UserAgents)

BOOST_AUTO_TEST_CASE(AsKubeApiserverDerivesThem) {
  // Each answer is what kube-apiserver 1.32 recorded for the same User-Agent.
  BOOST_TEST(ManagerFromUserAgent("curl/7.88.1") == "curl");
  BOOST_TEST(ManagerFromUserAgent("kubectl/v1.32.6 (linux/amd64) kubernetes/abc") == "kubectl");
  BOOST_TEST(ManagerFromUserAgent("Mozilla 5.0") == "Mozilla 5.0");
  BOOST_TEST(ManagerFromUserAgent("") == "unknown");
  BOOST_TEST(ManagerFromUserAgent("/x") == "unknown");
  BOOST_TEST(ManagerFromUserAgent("a\tb/2") == "ab");
  BOOST_TEST(ManagerFromUserAgent("\xE9/1") == "\xEF\xBF\xBD");  // invalid UTF-8: U+FFFD
  BOOST_TEST(ManagerFromUserAgent(std::string(200, 'x') + "/1") == std::string(128, 'x'));
  BOOST_TEST(ManagerFromUserAgent("caf\xC3\xA9\xC2\xA0x") == "caf\xC3\xA9x");  // no-break space dropped
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers::ssa
