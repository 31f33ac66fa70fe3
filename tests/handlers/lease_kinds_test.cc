// The PoolLease and DelegatedLease strategies (handlers/registry/) with the lease
// rules, through the generic registry store over a memory store: their field
// validation (422), and where it stands among the rules' checks.
#define BOOST_TEST_MODULE lease_kinds
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/quote.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "handlers/registry/generic_store.h"
#include "handlers/registry/registry.h"
#include "store/api_error.h"
#include "store/memory_store.h"
#include "tests/expect_api_error.h"
#include "tests/rules_writes.h"

namespace pe = poolcoord::election;
namespace ph = poolcoord::handlers;
namespace ps = poolcoord::store;
namespace reg = poolcoord::handlers::registry;
using poolcoord::base::UserInfo;
using std::chrono::seconds;

namespace {

using namespace poolcoord::testing;  // NOLINT: the users and leases of tests/rules_writes.h

ps::Object Delegated(const std::string& node, const std::string& pool,
                     const std::string& delegate) {
  return poolcoord::testing::DelegatedLeaseFor(node, pool, delegate, 40, 5000);
}

// A server's registry in miniature: the real strategies and rules over a memory
// store. Pool hangzhou = hz-1..hz-4, beijing = bj-1, bj-2.
struct World {
  explicit World(bool load_membership = true)
      : store(ps::NewMemoryStore({})),
        rules(&clock, &membership, pe::LeaseRulesOptions{300, ForwarderUser().username, {"proxy"}}) {
    clock.Advance(seconds(100));
    if (load_membership) {
      BOOST_REQUIRE(membership
                        .Replace("file", {{"hangzhou", {"hz-1", "hz-2", "hz-3", "hz-4"}},
                                          {"beijing", {"bj-1", "bj-2"}}})
                        .ok());
    }
  }

  // Creates, or updates the stored object to `o` (a PUT).
  absl::Status Write(const UserInfo& user, const ps::Object& o, bool with_rules = true) {
    reg::GenericStore storage(reg::ForKind(o.kind), store.get(), &clock,
                           with_rules ? &rules : nullptr);
    std::vector<std::string> warnings;
    if (!store->Get(o.kind, o.metadata.name).ok()) {
      return storage.Create(user, std::make_shared<ps::Object>(o), false, &warnings).status();
    }
    return storage
        .Update(
            user, o.metadata.name, reg::Subresource::kMain,
            [&o](const ps::ObjectPtr& cur) -> absl::StatusOr<ps::MutableObjectPtr> {
              // A client that read what it replaces (an update says which state).
              auto next = std::make_shared<ps::Object>(o);
              if (next->metadata.resource_version == 0) {
                next->metadata.resource_version = cur->metadata.resource_version;
              }
              return next;
            },
            false, &warnings)
        .status();
  }

  poolcoord::base::FakeClock clock;
  pe::MembershipIndex membership;
  std::unique_ptr<ps::Store> store;
  pe::LeaseRules rules;
};

// hz-1 holds hangzhou.
struct Led : World {
  Led() { BOOST_REQUIRE(Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 4)).ok()); }
};

using poolcoord::testing::ExpectApiError;

}  // namespace

BOOST_AUTO_TEST_SUITE(pool_lease)

BOOST_AUTO_TEST_CASE(duration_bounds_apply_to_everyone) {
  World w;
  ExpectApiError(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 0, 0)), 422,
                 "spec.leaseDurationSeconds");
  ExpectApiError(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 301, 0)), 422,
                 "spec.leaseDurationSeconds", "must be between 1 and 300 seconds");
  ExpectApiError(w.Write(AdminUser(), HeldPoolLease("anything", "x", 1'000'000'000, 0)), 422,
                 "spec.leaseDurationSeconds");
  ExpectApiError(w.Write(AdminUser(), HeldPoolLease("anything", "x", 10, -1)), 422,
                 "spec.leaseTransitions");
  ps::Object no_duration = HeldPoolLease("hangzhou", "hz-1", 1, 0);
  no_duration.spec.lease_duration_seconds.reset();
  ExpectApiError(w.Write(NodeUser("hz-1"), no_duration), 422, "spec.leaseDurationSeconds");
  BOOST_TEST(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 300, 0)).ok());
  // Required also while nobody holds it, as the schema says, of a create with
  // `"spec": null` too.
  ps::Object unheld = HeldPoolLease("beijing", "", 1, 0);
  unheld.spec.lease_duration_seconds.reset();
  ExpectApiError(w.Write(NodeUser("bj-1"), unheld), 422, "spec.leaseDurationSeconds");
}

BOOST_AUTO_TEST_CASE(validation_comes_before_the_rules) {
  World w;
  // A stranger with a bad duration hears about the duration first, as before the split.
  ExpectApiError(w.Write(NodeUser("stranger"), HeldPoolLease("hangzhou", "stranger", 0, 0)), 422,
                 "spec.leaseDurationSeconds");
  ExpectApiError(w.Write(NodeUser("stranger"), HeldPoolLease("hangzhou", "stranger", 15, 0)), 403);
}

BOOST_AUTO_TEST_CASE(max_duration_follows_the_flag) {
  World w;
  pe::LeaseRules strict(&w.clock, &w.membership, pe::LeaseRulesOptions{60, "", {}});
  reg::GenericStore storage(reg::ForKind(ps::Kind::kPoolLease), w.store.get(), &w.clock, &strict);
  std::vector<std::string> warnings;
  auto r = storage.Create(NodeUser("hz-1"), std::make_shared<ps::Object>(HeldPoolLease("hangzhou", "hz-1", 61, 0)),
                       false, &warnings);
  ExpectApiError(r.status(), 422, "spec.leaseDurationSeconds", "between 1 and 60 seconds");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(delegated_lease)

BOOST_FIXTURE_TEST_CASE(each_field_checked_with_its_own_cause, Led) {
  struct Case {
    const char* what;
    std::function<void(ps::Object&)> edit;
    const char* field;
  };
  std::vector<Case> cases = {
      {"no annotation", [](ps::Object& o) { o.metadata.annotations.clear(); },
       "metadata.annotations"},
      {"annotation True",
       [](ps::Object& o) { o.metadata.annotations[pe::kDelegateAnnotation] = "True"; },
       "metadata.annotations"},
      {"annotation empty",
       [](ps::Object& o) { o.metadata.annotations[pe::kDelegateAnnotation] = ""; },
       "metadata.annotations"},
      {"holder other", [](ps::Object& o) { o.spec.holder_identity = "hz-2"; },
       "spec.holderIdentity"},
      {"holder missing", [](ps::Object& o) { o.spec.holder_identity.reset(); },
       "spec.holderIdentity"},
      {"pool missing", [](ps::Object& o) { o.spec.pool_name.reset(); }, "spec.poolName"},
      {"pool wrong", [](ps::Object& o) { o.spec.pool_name = "beijing"; }, "spec.poolName"},
      {"delegate other", [](ps::Object& o) { o.spec.delegate = "hz-2"; }, "spec.delegate"},
      {"delegate missing", [](ps::Object& o) { o.spec.delegate.reset(); }, "spec.delegate"},
      {"renewTime missing", [](ps::Object& o) { o.spec.renew_time_us.reset(); },
       "spec.renewTime"},
      {"duration missing", [](ps::Object& o) { o.spec.lease_duration_seconds.reset(); },
       "spec.leaseDurationSeconds"},
      {"duration too long", [](ps::Object& o) { o.spec.lease_duration_seconds = 301; },
       "spec.leaseDurationSeconds"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      ps::Object o = Delegated("hz-3", "hangzhou", "hz-1");
      c.edit(o);
      absl::Status s = Write(NodeUser("hz-1"), o);
      ExpectApiError(s, 422, c.field);
      BOOST_TEST(ps::ApiErrorFromStatus(s).causes.size() == 1u);
    }
  }
  ExpectApiError(Write(NodeUser("hz-1"), Delegated("lonely", "hangzhou", "hz-1")), 422,
                 "spec.poolName", "belongs to no pool");
  // All bad fields at once, in one 422.
  ps::Object bad = Delegated("hz-3", "beijing", "hz-2");
  bad.metadata.annotations.clear();
  absl::Status s = Write(NodeUser("hz-1"), bad);
  ExpectApiError(s, 422, "metadata.annotations");
  BOOST_TEST(ps::ApiErrorFromStatus(s).causes.size() == 3u);
  // Validity binds masters too; the delegate check does not.
  ps::Object by_admin = Delegated("hz-3", "hangzhou", "someone");
  by_admin.metadata.annotations.clear();
  ExpectApiError(Write(AdminUser(), by_admin), 422, "metadata.annotations");
  BOOST_TEST(Write(AdminUser(), Delegated("hz-3", "hangzhou", "someone")).ok());
  // An update is checked as a create is.
  ps::Object renewed = Delegated("hz-3", "hangzhou", "hz-1");
  BOOST_REQUIRE(Write(NodeUser("hz-1"), renewed).ok());
  renewed.spec.holder_identity = "hz-4";
  ExpectApiError(Write(NodeUser("hz-1"), renewed), 422, "spec.holderIdentity");
}

BOOST_FIXTURE_TEST_CASE(who_writes_is_checked_before_what, Led) {
  // Not a node: 403 before the fields are judged (delegate "x" is not the writer).
  ExpectApiError(Write(ForwarderUser(), Delegated("hz-4", "hangzhou", "x")), 403, "", "not a node");
  ps::Object no_annotation = Delegated("hz-4", "hangzhou", "x");
  no_annotation.metadata.annotations.clear();
  ExpectApiError(Write(ForwarderUser(), no_annotation), 403, "", "not a node");
  // A valid object from a follower: the rules' 403.
  ExpectApiError(Write(NodeUser("hz-2"), Delegated("hz-4", "hangzhou", "hz-2")), 403, "",
                 "held by \"hz-1\"");
}

// A follower's DelegatedLease without spec.delegate was told the field "must be
// the writing leader, "hz-2"", as if hz-2 led; filled in, the rules then said
// it does not. The field's check says only what it checks.
BOOST_FIXTURE_TEST_CASE(delegate_cause_says_what_it_checks, Led) {
  ps::Object o = Delegated("hz-4", "hangzhou", "hz-2");
  o.spec.delegate.reset();
  absl::Status s = Write(NodeUser("hz-2"), o);
  ExpectApiError(s, 422, "spec.delegate");
  BOOST_TEST(ps::ApiErrorFromStatus(s).causes.front().message ==
             "Required value: must name the node that writes it, \"hz-2\"");
  o.spec.delegate = "hz-1";
  s = Write(NodeUser("hz-2"), o);
  ExpectApiError(s, 422, "spec.delegate");
  BOOST_TEST(s.message() ==
             "DelegatedLease.coordination.pool \"hz-4\" is invalid: spec.delegate: Invalid value: "
             "\"hz-1\": must name the node that writes it, \"hz-2\"");
}

BOOST_AUTO_TEST_CASE(membership_not_loaded_is_unavailable_before_validation) {
  World w(/*load_membership=*/false);
  ps::Object invalid = Delegated("hz-3", "hangzhou", "hz-1");
  invalid.spec.pool_name.reset();
  ExpectApiError(w.Write(NodeUser("hz-1"), invalid), 503, "", "retry");
}

BOOST_AUTO_TEST_CASE(without_rules_fields_are_still_validated) {
  World w;
  ps::Object o = Delegated("hz-3", "hangzhou", "hz-1");
  o.metadata.annotations.clear();
  ExpectApiError(w.Write(AdminUser(), o, /*with_rules=*/false), 422, "metadata.annotations");
  // No membership to compare spec.poolName with, no admission: a valid object passes.
  BOOST_TEST(w.Write(AdminUser(), Delegated("hz-3", "nowhere", "hz-1"), false).ok());
  auto stored = w.store->Get(ps::Kind::kDelegatedLease, "hz-3");
  BOOST_REQUIRE(stored.ok());
  BOOST_TEST(!(*stored)->status.observed_time_us.has_value());  // nobody stamped it
}

BOOST_FIXTURE_TEST_CASE(the_rules_stamp_an_accepted_write, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1")).ok());
  auto dl = store->Get(ps::Kind::kDelegatedLease, "hz-3");
  BOOST_REQUIRE(dl.ok());
  BOOST_TEST((*dl)->metadata.labels.at(pe::kPoolLabel) == "hangzhou");
  BOOST_TEST((*dl)->status.observed_time_us.value() == clock.NowMicros());
  BOOST_TEST((*dl)->status.leader_term.has_value());
}

// Verifiable delegation's fields: status.challenges and status.proof are the server's, like
// the rest of status; spec.proof is write-only.
BOOST_FIXTURE_TEST_CASE(delegation_status_is_the_servers_and_proofs_are_not_stored, Led) {
  // The server's issuer put a challenge on the lease.
  BOOST_REQUIRE(store
                    ->Update(ps::Kind::kPoolLease, "hangzhou",
                             [](const ps::ObjectPtr& cur, ps::TxnReader&)
                                 -> absl::StatusOr<ps::MutableObjectPtr> {
                               auto next = std::make_shared<ps::Object>(*cur);
                               ps::MutableDelegation(*next).challenges = {{"c1", 7}};
                               return next;
                             })
                    .ok());
  // The holder renews with a body that carries other challenges: they are kept.
  ps::Object renew = HeldPoolLease("hangzhou", "hz-1", 15, 4);
  ps::MutableDelegation(renew).challenges = {{"forged", 1}};
  BOOST_REQUIRE(Write(NodeUser("hz-1"), renew).ok());
  auto pl = store->Get(ps::Kind::kPoolLease, "hangzhou");
  BOOST_REQUIRE(pl.ok());
  BOOST_REQUIRE(ps::DelegationOf(**pl).challenges.size() == 1u);
  BOOST_TEST(ps::DelegationOf(**pl).challenges[0].value == "c1");
  // A create cannot bring any.
  ps::Object fresh = HeldPoolLease("beijing", "bj-1", 15, 0);
  ps::MutableDelegation(fresh).challenges = {{"forged", 1}};
  BOOST_REQUIRE(Write(NodeUser("bj-1"), fresh).ok());
  auto bj = store->Get(ps::Kind::kPoolLease, "beijing");
  BOOST_TEST(ps::DelegationOf(**bj).challenges.empty());
  // spec.proof (no proof check configured here) and a client's status.proof are
  // not stored.
  ps::Object dl = Delegated("hz-3", "hangzhou", "hz-1");
  ps::MutableDelegation(dl).proof = ps::DelegationProof{"aGI=", "Y2VydA=="};
  ps::MutableDelegation(dl).accepted_proof = ps::AcceptedProof{"00", 99, "x"};
  BOOST_REQUIRE(Write(NodeUser("hz-1"), dl).ok());
  auto stored = store->Get(ps::Kind::kDelegatedLease, "hz-3");
  BOOST_REQUIRE(stored.ok());
  BOOST_TEST(!(*stored)->delegation);
  BOOST_TEST((*stored)->metadata.generation == 1);
}

// PATCH .../poolleases/hangzhou/status {"status":{"observedTime":"2099-01-01T00:00:00.000000Z"}}
// as admin was stored: kubectl pool showed "in 72y". The server's time of the
// last renewal is its own, through the main resource and through /status: the
// strategy keeps it (LeaseStrategy::PrepareForUpdate), without the rules'
// admission, which keeps it too.
BOOST_FIXTURE_TEST_CASE(observed_time_is_never_the_clients, Led) {
  const int64_t observed = (*store->Get(ps::Kind::kPoolLease, "hangzhou"))->status.observed_time_us.value();
  const int64_t far_future = 4'070'908'800'000'000;  // 2099-01-01T00:00:00Z
  reg::GenericStore pool_leases(reg::ForKind(ps::Kind::kPoolLease), store.get(), &clock, nullptr);
  for (reg::Subresource sub : {reg::Subresource::kStatus, reg::Subresource::kMain}) {
    std::vector<std::string> warnings;
    auto r = pool_leases.Update(
        AdminUser(), "hangzhou", sub,
        [&](const ps::ObjectPtr& cur) -> absl::StatusOr<ps::MutableObjectPtr> {
          auto next = std::make_shared<ps::Object>(*cur);
          next->status.observed_time_us = far_future;
          next->metadata.labels.Set("sub", sub == reg::Subresource::kStatus ? "status" : "main");
          return next;
        },
        false, &warnings);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    BOOST_TEST(r->object->status.observed_time_us.value_or(0) == observed);
    BOOST_TEST((*store->Get(ps::Kind::kPoolLease, "hangzhou"))->status.observed_time_us.value_or(0) ==
               observed);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// Newcomer findings of session 5 (admin credentials): what a PoolLease's name and
// holderIdentity may be.
BOOST_AUTO_TEST_SUITE(pool_lease_names)

constexpr char kSubdomainMessage[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

BOOST_AUTO_TEST_CASE(a_pool_lease_name_is_a_pool_name) {
  World w;
  // 64 characters was accepted; pool names are label values (at most 63).
  const std::string name64(64, 'p');
  absl::Status s = w.Write(AdminUser(), HeldPoolLease(name64, "", 15, 0));
  ExpectApiError(s, 422, "metadata.name");
  BOOST_TEST(ps::ApiErrorFromStatus(s).causes.front().message ==
             "Invalid value: \"" + name64 + "\": must be no more than 63 characters");
  BOOST_TEST(w.Write(AdminUser(), HeldPoolLease(std::string(63, 'p'), "", 15, 0)).ok());
  // A pool without members may have a PoolLease (created before its nodes are
  // labelled); only its members can ever acquire it.
  BOOST_TEST(w.Write(AdminUser(), HeldPoolLease("shenzhen", "", 15, 0)).ok());
}

BOOST_AUTO_TEST_CASE(generated_pool_lease_names_obey_the_pool_name_rule) {
  World w;
  reg::GenericStore storage(reg::ForKind(ps::Kind::kPoolLease), w.store.get(), &w.clock, &w.rules);
  std::vector<std::string> warnings;
  // generateName "bj-" made bj-px5g5, as kube-apiserver would (a pool of that name may
  // get members later).
  ps::Object gen = HeldPoolLease("", "", 15, 0);
  gen.metadata.generate_name = "bj-";
  auto r = storage.Create(AdminUser(), std::make_shared<ps::Object>(gen), false, &warnings);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->object->metadata.name.size() == 8u);
  BOOST_TEST(r->object->metadata.name.rfind("bj-", 0) == 0u);
  // A long prefix is cut to 58 characters, as apiserver's name generator does, so
  // the name stays a pool name.
  gen.metadata.generate_name = std::string(70, 'g');
  r = storage.Create(AdminUser(), std::make_shared<ps::Object>(gen), false, &warnings);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->object->metadata.name.size() == 63u);
}

BOOST_AUTO_TEST_CASE(holder_identity_is_a_node_name) {
  World w;
  // U+FFFD and NUL in holderIdentity were accepted.
  const std::string replacement = "hz-1\xEF\xBF\xBD";
  const std::string nul = std::string("hz-1") + '\0';
  for (const std::string& holder : {replacement, nul, std::string("HZ-1"), std::string("hz_1")}) {
    absl::Status s = w.Write(AdminUser(), HeldPoolLease("hangzhou", holder, 15, 0));
    ExpectApiError(s, 422, "spec.holderIdentity");
    BOOST_TEST(ps::ApiErrorFromStatus(s).causes.front().message ==
               "Invalid value: " + poolcoord::base::GoQuote(holder) + ": " + kSubdomainMessage);
  }
  BOOST_TEST(ps::ApiErrorFromStatus(w.Write(AdminUser(), HeldPoolLease("hangzhou", nul, 15, 0)))
                 .causes.front()
                 .message.find("\"hz-1\\x00\"") != std::string::npos);
  // A node name (dots allowed), or empty: released.
  BOOST_TEST(w.Write(AdminUser(), HeldPoolLease("hangzhou", "hz-1.edge.example", 15, 0)).ok());
  BOOST_TEST(w.Write(AdminUser(), HeldPoolLease("beijing", "", 15, 0)).ok());
}

BOOST_AUTO_TEST_SUITE_END()
