// The generic registry store with a kind of the tests' own: the points where it
// calls a strategy, in which order, and what it does with the answers
// (handlers/registry/strategy.h gives the contract).
#define BOOST_TEST_MODULE generic_store
#include <boost/test/unit_test.hpp>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "handlers/registry/generic_store.h"
#include "handlers/registry/registry.h"
#include "store/api_error.h"
#include "store/memory_store.h"

namespace ph = poolcoord::handlers;
namespace ps = poolcoord::store;
namespace reg = poolcoord::handlers::registry;
using poolcoord::base::UserInfo;

namespace {

constexpr ps::ResourceInfo kWidgetInfo{
    ps::Kind{6}, "widgets", "widget", "Widget", "wg",
    poolcoord::api::kSpecHolderIdentity | poolcoord::api::kSpecLeaseDurationSeconds, "WidgetSpec", "WidgetStatus"};

// Logs every call; validation refuses holderIdentity "bad"; admission refuses
// holderIdentity "denied"; Canonicalize lower-cases "UPPER" to "upper".
class Widgets : public reg::Strategy {
 public:
  bool allow_create_on_update = false;
  bool allow_unconditional_update = true;
  mutable std::vector<std::string> calls;

  const ps::ResourceInfo& Info() const override { return kWidgetInfo; }
  void PrepareForCreate(const reg::WriteContext&, ps::Object& o) const override {
    calls.push_back("PrepareForCreate");
    o.status = {};
  }
  std::vector<ps::FieldCause> Validate(const reg::WriteContext&, const ps::Object& o) const override {
    calls.push_back("Validate");
    return Check(o);
  }
  std::vector<std::string> WarningsOnCreate(const reg::WriteContext&, const ps::Object&) const override {
    calls.push_back("WarningsOnCreate");
    return {"spec.holderIdentity: created"};
  }
  void Canonicalize(ps::Object& o) const override {
    calls.push_back("Canonicalize");
    if (o.spec.holder_identity == "UPPER") o.spec.holder_identity = "upper";
  }
  bool AllowCreateOnUpdate() const override { return allow_create_on_update; }
  bool AllowUnconditionalUpdate() const override { return allow_unconditional_update; }
  void PrepareForUpdate(const reg::WriteContext&, reg::Subresource sub, ps::Object& o,
                        const ps::Object& old) const override {
    calls.push_back(sub == reg::Subresource::kMain ? "PrepareForUpdate" : "PrepareForUpdate(status)");
    if (sub == reg::Subresource::kMain) {
      o.status = old.status;
    } else {
      o.spec = old.spec;
    }
  }
  std::vector<ps::FieldCause> ValidateUpdate(const reg::WriteContext&, const ps::Object& o,
                                             const ps::Object&) const override {
    calls.push_back("ValidateUpdate");
    return Check(o);
  }
  std::vector<std::string> WarningsOnUpdate(const reg::WriteContext&, const ps::Object&,
                                            const ps::Object&) const override {
    calls.push_back("WarningsOnUpdate");
    return {"spec.holderIdentity: updated"};
  }
  absl::Status CheckWriter(const reg::WriteContext&, const ps::Object&) const override {
    calls.push_back("CheckWriter");
    return absl::OkStatus();
  }
  absl::Status Admit(const reg::WriteContext&, const ps::ObjectPtr&, ps::Object& o,
                     ps::TxnReader&) const override {
    calls.push_back("Admit");
    if (o.spec.holder_identity == "denied") return ps::ForbiddenError("denied by the test");
    return absl::OkStatus();
  }
  absl::Status AdmitStatusUpdate(const reg::WriteContext&, const ps::Object&, ps::Object&) const override {
    calls.push_back("AdmitStatusUpdate");
    return absl::OkStatus();
  }
  absl::Status AdmitDelete(const reg::WriteContext&, const ps::Object&, ps::TxnReader&) const override {
    calls.push_back("AdmitDelete");
    return absl::OkStatus();
  }
  std::span<const ph::TableColumn> Columns() const override { return {}; }
  void WriteCells(ps::JsonWriter&, const ps::Object&, int64_t) const override {}
  std::vector<ph::openapi::Definition> Definitions() const override { return {}; }
  // Lease-shaped: the PoolLease schema covers every field a widget has.
  const ph::ssa::Schema& MergeSchema() const override {
    return reg::ForKind(ps::Kind::kPoolLease).MergeSchema();
  }

 private:
  static std::vector<ps::FieldCause> Check(const ps::Object& o) {
    if (o.spec.holder_identity != "bad") return {};
    return {ps::FieldInvalid("spec.holderIdentity", "\"bad\"", "is bad")};
  }
};

ps::MutableObjectPtr Widget(const std::string& name, const std::string& holder) {
  auto o = std::make_shared<ps::Object>();
  o->kind = kWidgetInfo.kind;
  o->metadata.name = name;
  o->spec.holder_identity = holder;
  o->status.expired = true;  // clients may not set status: PrepareForCreate drops it
  return o;
}

struct Fixture {
  Fixture()
      : store(ps::NewMemoryStore({})),
        rules(&clock, &membership, {}),
        with_rules(widgets, store.get(), &clock, &rules),
        without_rules(widgets, store.get(), &clock, nullptr) {
    BOOST_REQUIRE(ps::RegisterResource(&kWidgetInfo));
  }

  absl::StatusOr<ps::WriteResult> Put(const reg::GenericStore& s, ps::MutableObjectPtr o,
                                      reg::Subresource sub = reg::Subresource::kMain,
                                      reg::UpdateOptions options = {}) {
    return s.Update(
        admin, o->metadata.name, sub,
        [o](const ps::ObjectPtr&) -> absl::StatusOr<ps::MutableObjectPtr> {
          return std::make_shared<ps::Object>(*o);
        },
        false, &warnings, options);
  }

  UserInfo admin{"admin", "", {"system:masters"}, {}};
  poolcoord::base::FakeClock clock;
  poolcoord::election::MembershipIndex membership;
  std::unique_ptr<ps::Store> store;
  poolcoord::election::LeaseRules rules;
  Widgets widgets;
  reg::GenericStore with_rules;
  reg::GenericStore without_rules;
  std::vector<std::string> warnings;
};

int Code(const absl::Status& s) { return ps::ApiErrorFromStatus(s).code; }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(generic_store, Fixture)

BOOST_AUTO_TEST_CASE(create_calls_the_strategy_in_order_and_stamps_server_metadata) {
  auto r = with_rules.Create(admin, Widget("a", "UPPER"), false, &warnings);
  BOOST_REQUIRE(r.ok());
  const std::vector<std::string> want = {"PrepareForCreate", "CheckWriter",  "Validate",
                                         "WarningsOnCreate", "Canonicalize", "Admit"};
  BOOST_TEST(widgets.calls == want, boost::test_tools::per_element());
  BOOST_TEST(warnings == std::vector<std::string>{"spec.holderIdentity: created"},
             boost::test_tools::per_element());
  const ps::Object& o = *r->object;
  BOOST_TEST(o.spec.holder_identity.value() == "upper");  // canonicalized before storing
  BOOST_TEST(!o.status.expired);
  BOOST_TEST(o.metadata.uid.size() == 36u);
  BOOST_TEST(o.metadata.generation == 1);
  BOOST_TEST(o.metadata.creation_timestamp == clock.NowMicros() / 1000000);
}

BOOST_AUTO_TEST_CASE(without_rules_only_admission_is_skipped) {
  BOOST_REQUIRE(without_rules.Create(admin, Widget("a", "denied"), false, &warnings).ok());
  const std::vector<std::string> want = {"PrepareForCreate", "Validate", "WarningsOnCreate",
                                         "Canonicalize"};
  BOOST_TEST(widgets.calls == want, boost::test_tools::per_element());
  auto bad = without_rules.Create(admin, Widget("b", "bad"), false, &warnings);
  BOOST_TEST(Code(bad.status()) == 422);
}

BOOST_AUTO_TEST_CASE(refusals_store_nothing_and_name_the_kind) {
  auto invalid = with_rules.Create(admin, Widget("a", "bad"), false, &warnings);
  BOOST_TEST(Code(invalid.status()) == 422);
  BOOST_TEST(std::string(invalid.status().message()).find("Widget.coordination.pool \"a\" is invalid") !=
             std::string::npos, invalid.status().message());
  BOOST_TEST(warnings.empty());
  auto denied = with_rules.Create(admin, Widget("a", "denied"), false, &warnings);
  BOOST_TEST(Code(denied.status()) == 403);
  BOOST_TEST(!store->Get(kWidgetInfo.kind, "a").ok());
  BOOST_REQUIRE(with_rules.Create(admin, Widget("a", "ok"), false, &warnings).ok());
  BOOST_TEST(Code(with_rules.Create(admin, Widget("a", "ok"), false, &warnings).status()) == 409);
}

BOOST_AUTO_TEST_CASE(update_calls_the_strategy_in_order) {
  BOOST_REQUIRE(with_rules.Create(admin, Widget("a", "x"), false, &warnings).ok());
  widgets.calls.clear();
  warnings.clear();
  auto r = Put(with_rules, Widget("a", "y"));
  BOOST_REQUIRE(r.ok());
  const std::vector<std::string> want = {"PrepareForUpdate", "CheckWriter",  "ValidateUpdate",
                                         "WarningsOnUpdate", "Canonicalize", "Admit"};
  BOOST_TEST(widgets.calls == want, boost::test_tools::per_element());
  BOOST_TEST(warnings == std::vector<std::string>{"spec.holderIdentity: updated"},
             boost::test_tools::per_element());
  BOOST_TEST(r->object->metadata.generation == 2);
  BOOST_TEST(Code(Put(with_rules, Widget("a", "bad")).status()) == 422);
}

BOOST_AUTO_TEST_CASE(status_update_changes_status_alone) {
  BOOST_REQUIRE(with_rules.Create(admin, Widget("a", "x"), false, &warnings).ok());
  widgets.calls.clear();
  auto next = Widget("a", "changed");
  next->status.expired = true;
  next->metadata.labels.Set("through", "status");
  auto r = Put(with_rules, next, reg::Subresource::kStatus);
  BOOST_REQUIRE(r.ok());
  const std::vector<std::string> want = {"PrepareForUpdate(status)", "AdmitStatusUpdate"};
  BOOST_TEST(widgets.calls == want, boost::test_tools::per_element());
  BOOST_TEST(r->object->status.expired);
  // The kind's status strategy kept spec, the generic store the stored metadata.
  BOOST_TEST(r->object->spec.holder_identity.value() == "x");
  BOOST_TEST(r->object->metadata.labels.empty());
  BOOST_TEST(r->object->metadata.generation == 1);
}

BOOST_AUTO_TEST_CASE(create_on_update_only_when_the_kind_allows_it) {
  BOOST_TEST(Code(Put(with_rules, Widget("new", "x")).status()) == 404);
  widgets.allow_create_on_update = true;
  BOOST_TEST(Code(Put(with_rules, Widget("new", "x"), reg::Subresource::kStatus).status()) == 404);
  widgets.calls.clear();
  auto r = Put(with_rules, Widget("new", "x"));
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->created);
  BOOST_TEST(r->object->metadata.generation == 1);
  BOOST_TEST(!r->object->status.expired);
  const std::vector<std::string> want = {"PrepareForCreate", "CheckWriter",  "Validate",
                                         "WarningsOnCreate", "Canonicalize", "Admit"};
  BOOST_TEST(widgets.calls == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(unconditional_update_only_when_the_kind_allows_it) {
  auto created = with_rules.Create(admin, Widget("a", "x"), false, &warnings);
  BOOST_REQUIRE(created.ok());
  widgets.allow_unconditional_update = false;
  auto blind = Put(with_rules, Widget("a", "y"));
  BOOST_TEST(Code(blind.status()) == 422);
  BOOST_TEST(std::string(blind.status().message()).find("must be specified for an update") !=
             std::string::npos);
  auto read = Widget("a", "y");
  read->metadata.resource_version = created->object->metadata.resource_version;
  BOOST_TEST(Put(with_rules, read).ok());
  BOOST_TEST(Code(Put(with_rules, read).status()) == 409);  // now stale
}

BOOST_AUTO_TEST_CASE(delete_with_finalizers_marks_then_the_last_removal_deletes) {
  auto held = Widget("a", "x");
  held->metadata.finalizers = {"example.com/hold"};
  BOOST_REQUIRE(with_rules.Create(admin, held, false, &warnings).ok());
  widgets.calls.clear();
  auto marked = with_rules.Delete(admin, "a", {}, false);
  BOOST_REQUIRE(marked.ok());
  BOOST_TEST(widgets.calls == std::vector<std::string>{"AdmitDelete"}, boost::test_tools::per_element());
  BOOST_TEST(marked->object->metadata.deletion_timestamp.has_value());
  BOOST_TEST(store->Get(kWidgetInfo.kind, "a").ok());
  auto released = Widget("a", "x");
  auto r = Put(with_rules, released);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->deleted);
  BOOST_TEST(!store->Get(kWidgetInfo.kind, "a").ok());
}

// As kube-apiserver warns on a custom resource: a create's finalizers without a
// domain, an update's added ones, before the kind's own warnings; nothing on a
// refused write or through /status.
BOOST_AUTO_TEST_CASE(finalizers_without_a_domain_are_warned_of) {
  const std::string kPlain =
      ": prefer a domain-qualified finalizer name to avoid accidental conflicts with other "
      "finalizer writers";
  auto held = Widget("a", "x");
  held->metadata.finalizers = {"hold", "example.com/hold"};
  BOOST_REQUIRE(with_rules.Create(admin, held, false, &warnings).ok());
  BOOST_TEST(warnings == (std::vector<std::string>{"metadata.finalizers: \"hold\"" + kPlain,
                                                   "spec.holderIdentity: created"}),
             boost::test_tools::per_element());
  warnings.clear();
  auto more = Widget("a", "x");
  more->metadata.finalizers = {"hold", "example.com/hold", "more"};
  BOOST_REQUIRE(Put(with_rules, more).ok());
  BOOST_TEST(warnings == (std::vector<std::string>{"metadata.finalizers: \"more\"" + kPlain,
                                                   "spec.holderIdentity: updated"}),
             boost::test_tools::per_element());
  warnings.clear();
  auto refused = Widget("a", "bad");
  refused->metadata.finalizers = {"hold", "example.com/hold", "more", "refused"};
  BOOST_TEST(Code(Put(with_rules, refused).status()) == 422);
  BOOST_TEST(warnings.empty());
  BOOST_TEST(Code(with_rules.Create(admin, Widget("b", "bad"), false, &warnings).status()) == 422);
  BOOST_TEST(warnings.empty());
  BOOST_REQUIRE(Put(with_rules, refused, reg::Subresource::kStatus).ok());
  BOOST_TEST(warnings.empty());
  auto dry = Widget("c", "x");
  dry->metadata.finalizers = {"dry"};
  BOOST_REQUIRE(with_rules.Create(admin, dry, true, &warnings).ok());
  BOOST_TEST(warnings.front() == "metadata.finalizers: \"dry\"" + kPlain);
}

BOOST_AUTO_TEST_CASE(dry_run_checks_everything_and_stores_nothing) {
  auto r = with_rules.Create(admin, Widget("a", "x"), true, &warnings);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(widgets.calls.back() == "Admit");
  BOOST_TEST(!store->Get(kWidgetInfo.kind, "a").ok());
  BOOST_TEST(Code(with_rules.Create(admin, Widget("a", "denied"), true, &warnings).status()) == 403);
}

BOOST_AUTO_TEST_CASE(create_if_missing_creates_whatever_the_kind_allows) {
  // An apply patch creates a missing object although a PUT may not.
  const reg::UpdateOptions apply{.create_if_missing = true};
  BOOST_TEST(Code(Put(with_rules, Widget("new", "x"), reg::Subresource::kStatus, apply).status()) == 404);
  widgets.calls.clear();
  auto r = Put(with_rules, Widget("new", "x"), reg::Subresource::kMain, apply);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->created);
  BOOST_TEST(r->object->metadata.generation == 1);
  BOOST_TEST(widgets.calls.front() == "PrepareForCreate");
  BOOST_TEST(Code(Put(with_rules, Widget("other", "x")).status()) == 404);  // PUT still may not
  auto again = Put(with_rules, Widget("new", "y"), reg::Subresource::kMain, apply);
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(!again->created);
}

// kubectl patch pl y1 --type merge -p '{}' (and a PUT of the object as read)
// printed "patched", bumped resourceVersion and sent a watch event each time;
// kube-apiserver answers "patched (no change)" and writes nothing.
BOOST_AUTO_TEST_CASE(an_unchanged_object_is_checked_but_not_written) {
  auto created = with_rules.Create(admin, Widget("a", "x"), false, &warnings);
  BOOST_REQUIRE(created.ok());
  const int64_t rv = created->object->metadata.resource_version;
  const reg::UpdateOptions skip;
  widgets.calls.clear();
  auto same = Put(with_rules, Widget("a", "x"), reg::Subresource::kMain, skip);
  BOOST_REQUIRE(same.ok());
  BOOST_TEST(same->object->metadata.resource_version == rv);
  BOOST_TEST(!same->created);
  BOOST_TEST(widgets.calls.front() == "PrepareForUpdate");  // judged all the same
  BOOST_TEST((*store->Get(kWidgetInfo.kind, "a"))->metadata.resource_version == rv);
  // Refusals still refuse.
  auto denied = Widget("a", "x");
  denied->metadata.uid = "another";
  BOOST_TEST(Code(Put(with_rules, denied, reg::Subresource::kMain, skip).status()) == 409);
  // Each field a client writes is a change: spec, labels, managedFields.
  auto labelled = Widget("a", "x");
  labelled->metadata.labels = {{"k", "v"}};
  auto l = Put(with_rules, labelled, reg::Subresource::kMain, skip);
  BOOST_REQUIRE(l.ok());
  BOOST_TEST(l->object->metadata.resource_version > rv);
  auto managed = Widget("a", "x");
  managed->metadata.labels = {{"k", "v"}};
  managed->metadata.managed_fields.emplace_back();
  managed->metadata.managed_fields.back().set_manager("m");
  auto m = Put(with_rules, managed, reg::Subresource::kMain, skip);
  BOOST_REQUIRE(m.ok());
  BOOST_TEST(m->object->metadata.resource_version > l->object->metadata.resource_version);
  // The same again writes nothing.
  auto again = Put(with_rules, managed);
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(again->object->metadata.resource_version == m->object->metadata.resource_version);
  // On /status, a status equal to the stored one is no change either.
  auto same_status = std::make_shared<ps::Object>(*m->object);
  same_status->spec.holder_identity = "ignored on /status";
  auto status_same = Put(with_rules, same_status, reg::Subresource::kStatus);
  BOOST_REQUIRE(status_same.ok());
  BOOST_TEST(status_same->object->metadata.resource_version ==
             m->object->metadata.resource_version);
}

BOOST_AUTO_TEST_CASE(status_update_keeps_the_managed_fields_it_was_given) {
  BOOST_REQUIRE(with_rules.Create(admin, Widget("a", "x"), false, &warnings).ok());
  auto next = Widget("a", "changed");
  next->status.expired = true;
  next->metadata.managed_fields.emplace_back();
  next->metadata.managed_fields.back().set_manager("status-writer");
  next->metadata.managed_fields.back().set_subresource("status");
  auto r = Put(with_rules, next, reg::Subresource::kStatus);
  BOOST_REQUIRE(r.ok());
  BOOST_REQUIRE(r->object->metadata.managed_fields.size() == 1u);
  BOOST_TEST(r->object->metadata.managed_fields[0].manager() == "status-writer");
  BOOST_TEST(r->object->spec.holder_identity.value() == "x");
}

BOOST_AUTO_TEST_SUITE_END()
