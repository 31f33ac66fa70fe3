#define BOOST_TEST_MODULE managed_fields_entry
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "store/managed_fields_entry.h"
#include "store/object.h"
#include "store/object_codec.h"

namespace poolcoord::store {
namespace {

constexpr char kV[] = "coordination.pool/v1alpha1";

ManagedFieldsEntry Entry(std::string_view manager, std::string_view fields,
                         std::optional<int64_t> time = 1704067200) {
  return ManagedFieldsEntry(ManagedFieldsText{manager, "Update", kV, "FieldsV1", fields, ""}, time);
}

// The managedFields member of an object's JSON.
std::string ManagedFieldsJson(const ManagedFields& entries) {
  Object o;
  o.kind = Kind::kDelegatedLease;
  o.metadata.name = "n1";
  o.metadata.managed_fields = entries;
  const std::string json = EncodeObject(o);
  const size_t start = json.find("\"managedFields\":");
  BOOST_REQUIRE(start != std::string::npos);
  size_t end = start + 16, depth = 0;
  do {
    if (json[end] == '[' || json[end] == '{') ++depth;
    if (json[end] == ']' || json[end] == '}') --depth;
    ++end;
  } while (depth > 0);
  return json.substr(start + 16, end - start - 16);
}

BOOST_AUTO_TEST_CASE(EqualTextSharesOneRecordUntilTheLastEntryGoes) {
  const size_t before = ManagedFieldsRecordCount();
  {
    const std::string fields = R"({"f:spec":{"f:renewTime":{}}})";
    ManagedFieldsEntry a = Entry("test-sharing", fields, 1);
    ManagedFieldsEntry b = Entry("test-sharing", std::string(fields), 2);  // another buffer
    BOOST_TEST(ManagedFieldsRecordCount() == before + 1);
    BOOST_TEST(a.SameText(b));
    BOOST_TEST(a.fields_v1().data() == b.fields_v1().data());  // one copy of the text
    BOOST_TEST(!(a == b));                                      // the times differ
    b.time = 1;
    BOOST_TEST((a == b));
    ManagedFieldsEntry c = Entry("test-sharing-2", fields);
    BOOST_TEST(ManagedFieldsRecordCount() == before + 2);
    BOOST_TEST(!a.SameText(c));
    c.set_manager("test-sharing");  // the same text as a's now: a's record
    BOOST_TEST(c.SameText(a));
    BOOST_TEST(ManagedFieldsRecordCount() == before + 1);  // test-sharing-2's went with it
    std::vector<ManagedFieldsEntry> copies(1000, a);
    BOOST_TEST(ManagedFieldsRecordCount() == before + 1);
  }
  BOOST_TEST(ManagedFieldsRecordCount() == before);
}

BOOST_AUTO_TEST_CASE(EveryFieldTakesPartInTheText) {
  ManagedFieldsEntry base(ManagedFieldsText{"m", "Update", kV, "FieldsV1", "{}", ""});
  BOOST_TEST(base.manager() == "m");
  BOOST_TEST(base.operation() == "Update");
  BOOST_TEST(base.api_version() == kV);
  BOOST_TEST(base.fields_type() == "FieldsV1");
  BOOST_TEST(base.fields_v1() == "{}");
  BOOST_TEST(base.subresource().empty());
  BOOST_TEST(!base.time.has_value());
  auto changed = [&base](void (ManagedFieldsEntry::*set)(std::string_view), std::string_view v) {
    ManagedFieldsEntry e = base;
    (e.*set)(v);
    return !e.SameText(base) && !(e == base);
  };
  BOOST_TEST(changed(&ManagedFieldsEntry::set_manager, "m2"));
  BOOST_TEST(changed(&ManagedFieldsEntry::set_operation, "Apply"));
  BOOST_TEST(changed(&ManagedFieldsEntry::set_api_version, "v1"));
  BOOST_TEST(changed(&ManagedFieldsEntry::set_fields_type, "FieldsV2"));
  BOOST_TEST(changed(&ManagedFieldsEntry::set_fields_v1, R"({"f:a":{}})"));
  BOOST_TEST(changed(&ManagedFieldsEntry::set_subresource, "status"));
  // A field's text moved to another field is another entry.
  ManagedFieldsEntry x(ManagedFieldsText{"a", "", "", "", "", ""});
  ManagedFieldsEntry y(ManagedFieldsText{"", "a", "", "", "", ""});
  BOOST_TEST(!x.SameText(y));
  // All empty is the default entry (what JSON null and {} decode to).
  BOOST_TEST((ManagedFieldsEntry(ManagedFieldsText{}) == ManagedFieldsEntry()));
}

BOOST_AUTO_TEST_CASE(WrittenAsBeforeWithTheTimeLast) {
  // Keys in alphabetical order, empty strings left out, strings escaped as
  // RapidJSON's writer does, fieldsV1 as it is.
  ManagedFieldsEntry full(
      ManagedFieldsText{"ku\"be\n", "Update", kV, "FieldsV1", R"({"f:spec":{}})", "status"},
      1704067200);
  BOOST_TEST(ManagedFieldsJson({full}) ==
             R"([{"apiVersion":"coordination.pool/v1alpha1","fieldsType":"FieldsV1",)"
             R"("fieldsV1":{"f:spec":{}},"manager":"ku\"be\n","operation":"Update",)"
             R"("subresource":"status","time":"2024-01-01T00:00:00Z"}])");
  ManagedFieldsEntry time_only;
  time_only.time = 1704067201;
  ManagedFieldsEntry no_time(ManagedFieldsText{"m", "", "", "", "", ""});
  BOOST_TEST(ManagedFieldsJson({time_only, no_time, ManagedFieldsEntry()}) ==
             R"([{"time":"2024-01-01T00:00:01Z"},{"manager":"m"},{}])");
  // The same second twice, then another (each thread formats a second once).
  ManagedFieldsEntry later = full;
  later.time = 1704067260;
  BOOST_TEST(ManagedFieldsJson({full, full, later}).find(
                 R"("time":"2024-01-01T00:00:00Z"},{"apiVersion")") != std::string::npos);
  BOOST_TEST(ManagedFieldsJson({full, later}).find(R"("time":"2024-01-01T00:01:00Z"})") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(OwnerHintIsSharedAndNeverCompared) {
  ManagedFieldsEntry a = Entry("test-hint", "{}");
  ManagedFieldsEntry b = Entry("test-hint", "{}");
  BOOST_TEST(a.owner_hint() == 0u);
  a.set_owner_hint(7);
  BOOST_TEST(b.owner_hint() == 7u);
  BOOST_TEST((a == b));
  BOOST_TEST(ManagedFieldsJson({a}).find('7') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(OneEntryLivesInsideTheObject) {
  Object o;
  o.metadata.managed_fields.push_back(Entry("test-inline", "{}"));
  const auto* data = reinterpret_cast<const char*>(o.metadata.managed_fields.data());
  const auto* self = reinterpret_cast<const char*>(&o);
  BOOST_TEST((data >= self && data < self + sizeof(Object)));
  Object copy = o;  // and in the copy a write makes
  const auto* copy_data = reinterpret_cast<const char*>(copy.metadata.managed_fields.data());
  BOOST_TEST((copy_data >= reinterpret_cast<const char*>(&copy) &&
              copy_data < reinterpret_cast<const char*>(&copy) + sizeof(Object)));
  o.metadata.managed_fields.push_back(Entry("test-inline-2", "{}"));  // a second one: on the heap
  BOOST_TEST(o.metadata.managed_fields.size() == 2u);
  BOOST_TEST(o.metadata.managed_fields[0].manager() == "test-inline");
}

// Entries made, copied and dropped on several threads at once, from a handful of
// texts: every record found is alive, and every one goes with its last entry
// (ThreadSanitizer runs this too: scripts/check-tsan.sh).
BOOST_AUTO_TEST_CASE(ConcurrentEntriesKeepTheTableExact) {
  const size_t before = ManagedFieldsRecordCount();
  constexpr int kThreads = 4, kRounds = 5000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &wrong] {
      std::vector<ManagedFieldsEntry> held;
      for (int i = 0; i < kRounds; ++i) {
        const std::string manager = "test-thread-" + std::to_string((i + t) % 3);
        ManagedFieldsEntry e = Entry(manager, R"({"f:spec":{}})", i);
        if (e.manager() != manager || e.fields_v1() != R"({"f:spec":{}})") ++wrong;
        if (i % 7 == 0) held.push_back(e);
        if (held.size() > 20) held.erase(held.begin(), held.begin() + 10);
        ManagedFieldsEntry copy = e;
        copy.set_subresource(i % 2 ? "status" : "");
        if (copy.subresource() != (i % 2 ? "status" : "")) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(wrong.load() == 0);
  BOOST_TEST(ManagedFieldsRecordCount() == before);
}

}  // namespace
}  // namespace poolcoord::store
