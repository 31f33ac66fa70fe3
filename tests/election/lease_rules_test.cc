#define BOOST_TEST_MODULE lease_rules
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <vector>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/microtime.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "store/api_error.h"
#include "store/object.h"
#include "tests/expect_api_error.h"
#include "tests/rules_writes.h"

namespace pe = poolcoord::election;
namespace ps = poolcoord::store;
using std::chrono::microseconds;
using std::chrono::seconds;

namespace {

using namespace poolcoord::testing;  // NOLINT: the users and leases of tests/rules_writes.h

constexpr int64_t kSec = 1'000'000;

ps::Object Delegated(const std::string& node, const std::string& pool,
                     const std::string& delegate, int64_t renew_us) {
  return poolcoord::testing::DelegatedLeaseFor(node, pool, delegate, 40, renew_us);
}

// A tiny stand-in for Store::Update: server metadata and the current status are
// merged into the proposed object as the generic registry store does, then the
// rules run as the kinds' strategies call them (their field validation, which
// runs in between, has its tests in tests/handlers/lease_kinds_test.cc).
class World {
 public:
  explicit World(bool load_membership = true)
      : rules_(&clock_, &membership_,
               pe::LeaseRulesOptions{300, ForwarderUser().username, {"proxy"}}) {
    clock_.Advance(seconds(100));  // keep clear of monotonic 0
    if (load_membership) {
      BOOST_REQUIRE(membership_
                        .Replace("file", {{"hangzhou", {"hz-1", "hz-2", "hz-3", "hz-4"}},
                                          {"beijing", {"bj-1", "bj-2"}}})
                        .ok());
    }
  }

  class Reader : public ps::TxnReader {
   public:
    explicit Reader(World* w) : w_(w) {}
    ps::ObjectPtr Get(ps::Kind kind, std::string_view name) override {
      return w_->Current(kind, std::string(name));
    }

   private:
    World* w_;
  };

  ps::ObjectPtr Current(ps::Kind kind, const std::string& name) const {
    auto it = objects_.find({kind, name});
    return it == objects_.end() ? nullptr : it->second;
  }

  absl::Status Write(const poolcoord::base::UserInfo& user, ps::Object proposed) {
    ps::ObjectPtr current = Current(proposed.kind, proposed.metadata.name);
    if (current) {
      proposed.metadata.uid = current->metadata.uid;
      proposed.status = current->status;
      proposed.observed_monotonic_us = current->observed_monotonic_us;
    } else {
      proposed.metadata.uid = "uid-" + std::to_string(++uids_);
    }
    Reader reader(this);
    absl::Status s;
    if (proposed.kind == ps::Kind::kPoolLease) {
      s = rules_.AdmitPoolLeaseWrite(user, current, proposed);
    } else {
      s = rules_.CheckDelegatedLeaseWriter(user, proposed.metadata.name);
      if (s.ok()) s = rules_.AdmitDelegatedLeaseWrite(user, current, proposed, reader);
    }
    if (s.ok()) objects_[{proposed.kind, proposed.metadata.name}] = std::make_shared<ps::Object>(proposed);
    return s;
  }

  absl::Status Delete(const poolcoord::base::UserInfo& user, ps::Kind kind, const std::string& name) {
    ps::ObjectPtr current = Current(kind, name);
    BOOST_REQUIRE(current);
    Reader reader(this);
    absl::Status s = kind == ps::Kind::kPoolLease
                         ? rules_.AdmitPoolLeaseDelete(user, *current)
                         : rules_.AdmitDelegatedLeaseDelete(user, *current, reader);
    if (s.ok()) objects_.erase({kind, name});
    return s;
  }

  void Erase(ps::Kind kind, const std::string& name) { objects_.erase({kind, name}); }

  // The stored object with the write's own edits, as a client would send it back.
  ps::Object Copy(ps::Kind kind, const std::string& name) const {
    auto cur = Current(kind, name);
    BOOST_REQUIRE(cur);
    return *cur;
  }

  poolcoord::base::FakeClock clock_;
  pe::MembershipIndex membership_;
  pe::LeaseRules rules_;

 private:
  std::map<std::pair<ps::Kind, std::string>, ps::ObjectPtr> objects_;
  int uids_ = 0;
};

using poolcoord::testing::ExpectApiError;

ps::Object Takeover(const ps::Object& cur, const std::string& node, int32_t transitions) {
  ps::Object o = cur;
  o.spec.holder_identity = node;
  o.spec.lease_transitions = transitions;
  o.spec.acquire_time_us = 9000;
  return o;
}

// A World whose pool hangzhou is led by hz-1 (lease of 15 s, leaseTransitions 4).
struct Led : World {
  Led() {
    BOOST_REQUIRE(Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 4)).ok());
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(pool_lease)

BOOST_AUTO_TEST_CASE(member_acquires_and_server_stamps_its_times) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 0)).ok());
  auto cur = w.Current(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(cur->status.observed_time_us.value() == w.clock_.NowMicros());
  BOOST_TEST(cur->observed_monotonic_us == w.clock_.MonotonicMicros());
  BOOST_TEST(w.rules_.PoolLeaseLive(*cur));
  BOOST_TEST(w.rules_.RemainingMicros(*cur) == 15 * kSec);
}

BOOST_AUTO_TEST_CASE(non_member_and_non_node_forbidden) {
  World w;
  ExpectApiError(w.Write(NodeUser("bj-1"), HeldPoolLease("hangzhou", "bj-1", 15, 0)), 403, "",
                 "not a member of pool \"hangzhou\"");
  ExpectApiError(w.Write(NodeUser("stranger"), HeldPoolLease("hangzhou", "stranger", 15, 0)), 403, "",
                 "belongs to no pool");
  ExpectApiError(w.Write(ForwarderUser(), HeldPoolLease("hangzhou", "", 15, 0)), 403, "", "not a node");
  // A node name without the system:nodes group is not a node identity.
  poolcoord::base::UserInfo fake{"system:node:hz-1", "", {"system:authenticated"}, {}};
  ExpectApiError(w.Write(fake, HeldPoolLease("hangzhou", "hz-1", 15, 0)), 403);
}

BOOST_AUTO_TEST_CASE(acquiring_for_another_node_forbidden) {
  World w;
  ExpectApiError(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-2", 15, 0)), 403, "",
                 "for another node");
  BOOST_TEST(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "", 15, 0)).ok());  // unheld create
}

BOOST_AUTO_TEST_CASE(expiry_exactly_at_the_duration_on_the_monotonic_clock) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 10, 0)).ok());
  auto cur = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  w.clock_.StepWall(seconds(3600));  // a wall-clock step changes nothing
  w.clock_.Advance(microseconds(10 * kSec - 1));
  BOOST_TEST(w.rules_.PoolLeaseLive(cur));
  BOOST_TEST(w.rules_.RemainingMicros(cur) == 1);
  ExpectApiError(w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 1)), 409, "", "held by \"hz-1\"");
  w.clock_.Advance(microseconds(1));
  BOOST_TEST(!w.rules_.PoolLeaseLive(cur));
  BOOST_TEST(w.rules_.RemainingMicros(cur) == 0);
  BOOST_TEST(w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 1)).ok());
  BOOST_TEST(w.Current(ps::Kind::kPoolLease, "hangzhou")->spec.holder_identity.value() == "hz-2");
}

BOOST_AUTO_TEST_CASE(client_renew_time_never_decides_expiry) {
  World w;
  ps::Object o = HeldPoolLease("hangzhou", "hz-1", 10, 0);
  o.spec.renew_time_us = 1;  // 1970: a client clock far behind
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), o).ok());
  auto cur = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  ExpectApiError(w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 1)), 409);
}

BOOST_AUTO_TEST_CASE(live_lease_conflict_names_holder_and_time_left) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 0)).ok());
  auto cur = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  w.clock_.Advance(microseconds(2'700'000));
  absl::Status s = w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 1));
  BOOST_TEST(ps::ApiErrorFromStatus(s).reason == "Conflict");
  ExpectApiError(
      s, 409, "",
      "Operation cannot be fulfilled on poolleases.coordination.pool \"hangzhou\": poollease "
      "\"hangzhou\" is held by \"hz-1\" until " +
          poolcoord::base::FormatMicroTime(w.clock_.NowMicros() + 12'300'000) +
          " (12.3s from now, on the server's clock), and each renewal by \"hz-1\" moves that "
          "on; \"hz-2\" may acquire it only once it has expired or been released, with "
          "spec.holderIdentity \"hz-2\" and spec.leaseTransitions 1 (a rule of the lease, not a "
          "field manager conflict: --force-conflicts does not change it)");
}

// A newcomer's hz-2, not the leader, tried to write a DelegatedLease and
// followed each refusal's advice: 403 said only the holder of the PoolLease may
// write, acquiring it was 409 "retry after it expires" (kubectl apply adds "use
// --force-conflicts", which changed nothing), and nothing said hz-1 keeps it
// live by renewing or which leaseTransitions an acquisition needs. Each refusal
// now says who holds the lease until when, and what hz-2 can do; doing exactly
// that leads out.
BOOST_FIXTURE_TEST_CASE(a_follower_led_out_by_the_refusals, Led) {
  const std::string until = poolcoord::base::FormatMicroTime(clock_.NowMicros() + 15 * kSec);
  absl::Status s = Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 5000));
  BOOST_TEST(ps::ApiErrorFromStatus(s).reason == "Forbidden");
  ExpectApiError(
      s, 403, "",
      "delegatedleases.coordination.pool \"hz-3\" is forbidden: node \"hz-2\" is not the leader "
      "of pool \"hangzhou\", and only the pool's leader (the holder of its live poollease) may "
      "write its nodes' delegatedleases: poollease \"hangzhou\" is held by \"hz-1\" until " +
          until +
          " (15.0s from now, on the server's clock), and each renewal by \"hz-1\" moves that on; "
          "\"hz-2\" may acquire it only once it has expired or been released, with "
          "spec.holderIdentity \"hz-2\" and spec.leaseTransitions 5; then it may write them");
  // Acquiring while hz-1 keeps it live: the same facts, 409.
  ps::Object take = Takeover(Copy(ps::Kind::kPoolLease, "hangzhou"), "hz-2", 5);
  ExpectApiError(Write(NodeUser("hz-2"), take), 409, "", "\"hz-2\" may acquire it only once");
  // Once it has expired, the refusal says it may acquire it now...
  clock_.Advance(seconds(16));
  ExpectApiError(Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 5000)), 403, "",
                 "poollease \"hangzhou\" held by \"hz-1\" expired 1.0s ago and nobody has taken "
                 "it since; \"hz-2\" may acquire it now, with spec.holderIdentity \"hz-2\" and "
                 "spec.leaseTransitions 5; then it may write them");
  // ... and doing what it says works, and then so does the DelegatedLease.
  BOOST_REQUIRE(Write(NodeUser("hz-2"), take).ok());
  BOOST_TEST(Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 5000)).ok());
  // The deposed hz-1 is told the same about hz-2, and how to get back.
  ExpectApiError(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 6000)), 403, "",
                 "poollease \"hangzhou\" is held by \"hz-2\" until");
  // A leader whose own lease expired is told to renew it, which works.
  clock_.Advance(seconds(16));
  ExpectApiError(Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 6000)), 403, "",
                 "its poollease \"hangzhou\" expired 1.0s ago; nobody has taken it since, so "
                 "\"hz-2\" may renew it");
  ps::Object renew = Copy(ps::Kind::kPoolLease, "hangzhou");
  renew.spec.renew_time_us = *renew.spec.renew_time_us + 1;
  BOOST_REQUIRE(Write(NodeUser("hz-2"), renew).ok());
  BOOST_TEST(Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 6000)).ok());
  // No PoolLease at all: create it.
  ExpectApiError(Write(NodeUser("bj-1"), Delegated("bj-2", "beijing", "bj-1", 5000)), 403, "",
                 "pool \"beijing\" has no poollease; \"bj-1\" may create poollease \"beijing\" "
                 "with spec.holderIdentity \"bj-1\"");
}

BOOST_AUTO_TEST_CASE(takeover_transitions_exactly_plus_one) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 5, 3)).ok());
  auto cur = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  w.clock_.Advance(seconds(6));
  ExpectApiError(w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 3)), 422, "spec.leaseTransitions");
  ExpectApiError(w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 5)), 422, "spec.leaseTransitions");
  ExpectApiError(w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 2)), 422, "spec.leaseTransitions");
  BOOST_TEST(w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 4)).ok());
}

BOOST_AUTO_TEST_CASE(renewal_keeps_transitions_and_acquire_time) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 2)).ok());
  auto cur = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  for (int32_t t : {1, 3}) {
    ps::Object o = cur;
    o.spec.lease_transitions = t;
    ExpectApiError(w.Write(NodeUser("hz-1"), o), 422, "spec.leaseTransitions");
  }
  ps::Object moved = cur;
  moved.spec.acquire_time_us = *cur.spec.acquire_time_us + 1;
  ExpectApiError(w.Write(NodeUser("hz-1"), moved), 422, "spec.acquireTime");
  ps::Object renew = cur;
  renew.spec.renew_time_us = 5000;
  BOOST_TEST(w.Write(NodeUser("hz-1"), renew).ok());
}

BOOST_AUTO_TEST_CASE(holder_renews_after_expiry_keeping_its_term) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 2, 7)).ok());
  auto cur = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  w.clock_.Advance(seconds(30));
  BOOST_TEST(!w.rules_.PoolLeaseLive(cur));
  // Writing it back unchanged, or with a label, renews nothing.
  ps::Object labelled = cur;
  labelled.metadata.labels.Set("team", "ops");
  BOOST_TEST(w.Write(NodeUser("hz-1"), labelled).ok());
  BOOST_TEST(!w.rules_.PoolLeaseLive(*w.Current(ps::Kind::kPoolLease, "hangzhou")));
  ps::Object renew = cur;
  renew.spec.renew_time_us = *cur.spec.renew_time_us + 30 * kSec;
  BOOST_TEST(w.Write(NodeUser("hz-1"), renew).ok());
  auto renewed = w.Current(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(renewed->spec.lease_transitions.value() == 7);
  BOOST_TEST(w.rules_.PoolLeaseLive(*renewed));
}

// `kubectl label pl hangzhou team=ops` on a PoolLease expired 3m15s ago made it
// live again ("in 15s"), and `kubectl annotate dl hz-3 note=x` an expired
// DelegatedLease: every accepted write restamped status.observedTime. Only a
// renewal or an acquisition does (a create, a change of renewTime or of
// holderIdentity), whoever writes.
BOOST_AUTO_TEST_CASE(only_a_renewal_or_an_acquisition_stamps_observed_time) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 0)).ok());
  const ps::Object created = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  BOOST_REQUIRE(created.status.observed_time_us.has_value());
  w.clock_.Advance(seconds(195));
  for (const poolcoord::base::UserInfo& who : {NodeUser("hz-1"), AdminUser()}) {
    ps::Object labelled = w.Copy(ps::Kind::kPoolLease, "hangzhou");
    labelled.metadata.labels.Set("team", who.username);
    labelled.spec.lease_duration_seconds = 20;  // another spec field: no renewal either
    BOOST_REQUIRE(w.Write(who, labelled).ok());
    auto now = w.Current(ps::Kind::kPoolLease, "hangzhou");
    BOOST_TEST((now->status.observed_time_us == created.status.observed_time_us));
    BOOST_TEST(now->observed_monotonic_us == created.observed_monotonic_us);
    BOOST_TEST(!w.rules_.PoolLeaseLive(*now));
  }
  // A release (holderIdentity changes) is the server's time of the last change of hands.
  ps::Object released = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  released.spec.holder_identity = "";
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), released).ok());
  auto after = w.Current(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(*after->status.observed_time_us == *created.status.observed_time_us + 195 * kSec);
}

BOOST_AUTO_TEST_CASE(release_then_immediate_takeover) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 60, 0)).ok());
  ps::Object release = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  release.spec.holder_identity = "";
  release.spec.lease_duration_seconds = 1;
  ps::Object bad_release = release;
  bad_release.spec.lease_transitions = 1;
  ExpectApiError(w.Write(NodeUser("hz-1"), bad_release), 422, "spec.leaseTransitions");
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), release).ok());
  auto cur = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(!w.rules_.PoolLeaseLive(cur));
  BOOST_TEST(w.Write(NodeUser("hz-2"), Takeover(cur, "hz-2", 1)).ok());
}

BOOST_AUTO_TEST_CASE(releasing_another_nodes_live_lease_conflicts) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 60, 0)).ok());
  ps::Object o = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  o.spec.holder_identity = "";
  ExpectApiError(w.Write(NodeUser("hz-2"), o), 409, "", "held by \"hz-1\"");
  w.clock_.Advance(seconds(60));
  BOOST_TEST(w.Write(NodeUser("hz-2"), o).ok());  // expired: clearing it is harmless
}

BOOST_AUTO_TEST_CASE(masters_exempt_from_identity_and_takeover_rules) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 60, 0)).ok());
  ps::Object o = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  o.spec.holder_identity = "someone";
  o.spec.lease_transitions = 42;
  BOOST_TEST(w.Write(AdminUser(), o).ok());  // a live lease repaired by an admin
  BOOST_TEST(w.Write(AdminUser(), HeldPoolLease("not-a-pool", "racer-1", 15, 0)).ok());
}

BOOST_AUTO_TEST_CASE(membership_not_loaded_is_unavailable) {
  World w(/*load_membership=*/false);
  ExpectApiError(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 0)), 503, "", "retry");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(delegated_lease)

BOOST_FIXTURE_TEST_CASE(leader_writes_and_server_stamps, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  auto dl = Current(ps::Kind::kDelegatedLease, "hz-3");
  auto pl = Current(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(dl->metadata.labels.at(pe::kPoolLabel) == "hangzhou");
  BOOST_TEST(dl->status.observed_time_us.value() == clock_.NowMicros());
  BOOST_TEST(dl->observed_monotonic_us == clock_.MonotonicMicros());
  BOOST_TEST(!dl->status.expired);
  BOOST_REQUIRE(dl->status.leader_term.has_value());
  BOOST_TEST(dl->status.leader_term->pool_lease_uid == pl->metadata.uid);
  BOOST_TEST(dl->status.leader_term->lease_transitions == 4);
  BOOST_TEST(rules_.DelegationCurrent(*dl, pl.get()));
}

BOOST_FIXTURE_TEST_CASE(only_the_current_leader_writes, Led) {
  ExpectApiError(Write(NodeUser("hz-2"), Delegated("hz-4", "hangzhou", "hz-2", 5000)), 403, "",
                 "held by \"hz-1\"");
  ExpectApiError(Write(NodeUser("bj-1"), Delegated("hz-4", "hangzhou", "bj-1", 5000)), 403, "",
                 "belongs to pool \"beijing\"");
  // The leader of hangzhou writing for a node of beijing.
  ExpectApiError(Write(NodeUser("hz-1"), Delegated("bj-2", "beijing", "hz-1", 5000)), 403, "",
                 "not to pool \"beijing\"");
  ExpectApiError(Write(ForwarderUser(), Delegated("hz-4", "hangzhou", "x", 5000)), 403, "",
                 "not a node");
  // Pool without a PoolLease.
  ExpectApiError(Write(NodeUser("bj-1"), Delegated("bj-2", "beijing", "bj-1", 5000)), 403, "",
                 "has no poollease");
}

BOOST_FIXTURE_TEST_CASE(released_pool_has_no_leader, Led) {
  ps::Object release = Copy(ps::Kind::kPoolLease, "hangzhou");
  release.spec.holder_identity = "";
  BOOST_REQUIRE(Write(NodeUser("hz-1"), release).ok());
  ExpectApiError(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)), 403, "",
                 "not held by anyone");
}

BOOST_FIXTURE_TEST_CASE(renew_time_monotonic_within_a_term_only, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  BOOST_TEST(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());  // equal
  absl::Status s = Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 4999));
  ExpectApiError(s, 409, "", "written in this term");
  BOOST_TEST(ps::ApiErrorFromStatus(s).reason == "Conflict");
  // A new term (takeover after expiry) starts fresh, even with a clock far behind.
  clock_.Advance(seconds(15));
  BOOST_REQUIRE(Write(NodeUser("hz-2"), Takeover(Copy(ps::Kind::kPoolLease, "hangzhou"), "hz-2", 5)).ok());
  BOOST_TEST(Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 10)).ok());
  ExpectApiError(Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 9)), 409);
  // Masters are exempt from the order check.
  BOOST_TEST(Write(AdminUser(), Delegated("hz-3", "hangzhou", "hz-2", 1)).ok());
}

BOOST_FIXTURE_TEST_CASE(deposed_leader_fenced_on_its_very_next_request, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  auto old_term = Copy(ps::Kind::kPoolLease, "hangzhou");
  clock_.Advance(seconds(15));
  BOOST_REQUIRE(Write(NodeUser("hz-2"), Takeover(old_term, "hz-2", 5)).ok());
  ExpectApiError(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 6000)), 403, "",
                 "held by \"hz-2\"");
  // And hz-1 cannot renew its way back: the lease is now live for hz-2.
  ExpectApiError(Write(NodeUser("hz-1"), old_term), 409, "", "held by \"hz-2\"");
  auto dl = Current(ps::Kind::kDelegatedLease, "hz-3");
  auto pl = Current(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(!rules_.DelegationCurrent(*dl, pl.get()));  // written in the old term
}

BOOST_FIXTURE_TEST_CASE(expired_leader_fenced_until_it_renews, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  clock_.Advance(microseconds(15 * kSec - 1));
  BOOST_TEST(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5001)).ok());
  clock_.Advance(microseconds(1));
  ExpectApiError(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5002)), 403, "",
                 "expired");
  auto dl = Current(ps::Kind::kDelegatedLease, "hz-3");
  BOOST_TEST(!rules_.DelegationCurrent(*dl, Current(ps::Kind::kPoolLease, "hangzhou").get()));
  // The holder renews after expiry: the same term continues, order still enforced.
  ps::Object renew = Copy(ps::Kind::kPoolLease, "hangzhou");
  renew.spec.renew_time_us = *renew.spec.renew_time_us + 15 * kSec;
  BOOST_REQUIRE(Write(NodeUser("hz-1"), renew).ok());
  ExpectApiError(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)), 409);
  BOOST_TEST(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5002)).ok());
}

// `kubectl annotate dl hz-3 note=x` (system:masters, which bypass proofs) on an
// expired DelegatedLease made it live again, and a forwarder renewed the node's
// cloud Lease from it. A write that does not change renewTime renews nothing.
BOOST_FIXTURE_TEST_CASE(annotating_an_expired_delegation_renews_nothing, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  const ps::Object written = Copy(ps::Kind::kDelegatedLease, "hz-3");
  clock_.Advance(seconds(41));
  ps::Object annotated = written;
  annotated.metadata.annotations["note"] = "x";
  BOOST_REQUIRE(Write(AdminUser(), annotated).ok());
  auto dl = Current(ps::Kind::kDelegatedLease, "hz-3");
  BOOST_TEST(dl->metadata.annotations.at("note") == "x");
  BOOST_TEST((dl->status.observed_time_us == written.status.observed_time_us));
  BOOST_TEST(dl->observed_monotonic_us == written.observed_monotonic_us);
  BOOST_TEST(rules_.RemainingMicros(*dl) < 0);
  // A new renewTime from system:masters is a renewal, as from the leader.
  ps::Object renewed = *dl;
  renewed.spec.renew_time_us = 6000;
  BOOST_REQUIRE(Write(AdminUser(), renewed).ok());
  BOOST_TEST(rules_.RemainingMicros(*Current(ps::Kind::kDelegatedLease, "hz-3")) == 40 * kSec);
}

BOOST_FIXTURE_TEST_CASE(recreated_pool_lease_is_a_new_term, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  Erase(ps::Kind::kPoolLease, "hangzhou");
  BOOST_REQUIRE(Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 4)).ok());  // same count
  BOOST_TEST(!rules_.DelegationCurrent(*Current(ps::Kind::kDelegatedLease, "hz-3"),
                                       Current(ps::Kind::kPoolLease, "hangzhou").get()));
  BOOST_TEST(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 1)).ok());
}

BOOST_FIXTURE_TEST_CASE(delegation_current_follows_the_delegated_lease_expiry, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  auto dl = Current(ps::Kind::kDelegatedLease, "hz-3");
  // Keep the pool lease live while the DelegatedLease (40 s) runs out.
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(seconds(10));
    BOOST_REQUIRE(Write(NodeUser("hz-1"), Copy(ps::Kind::kPoolLease, "hangzhou")).ok());
  }
  auto pl = Current(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(rules_.RemainingMicros(*dl) == 0);
  BOOST_TEST(!rules_.DelegationCurrent(*dl, pl.get()));
  BOOST_TEST(!rules_.DelegationCurrent(*dl, nullptr));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(delete_and_status)

BOOST_FIXTURE_TEST_CASE(delegated_lease_delete, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  ExpectApiError(Delete(NodeUser("hz-2"), ps::Kind::kDelegatedLease, "hz-3"), 403, "", "node itself");
  ExpectApiError(Delete(ForwarderUser(), ps::Kind::kDelegatedLease, "hz-3"), 403);
  BOOST_TEST(Delete(NodeUser("hz-3"), ps::Kind::kDelegatedLease, "hz-3").ok());
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  BOOST_TEST(Delete(NodeUser("hz-1"), ps::Kind::kDelegatedLease, "hz-3").ok());
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  clock_.Advance(seconds(15));  // the leader's lease expired: no longer the leader
  ExpectApiError(Delete(NodeUser("hz-1"), ps::Kind::kDelegatedLease, "hz-3"), 403);
  BOOST_TEST(Delete(AdminUser(), ps::Kind::kDelegatedLease, "hz-3").ok());
}

BOOST_FIXTURE_TEST_CASE(pool_lease_delete, Led) {
  ExpectApiError(Delete(NodeUser("bj-1"), ps::Kind::kPoolLease, "hangzhou"), 403);
  ExpectApiError(Delete(NodeUser("hz-2"), ps::Kind::kPoolLease, "hangzhou"), 409, "", "held by \"hz-1\"");
  clock_.Advance(seconds(15));
  BOOST_TEST(Delete(NodeUser("hz-2"), ps::Kind::kPoolLease, "hangzhou").ok());  // expired
  BOOST_REQUIRE(Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 0)).ok());
  BOOST_TEST(Delete(NodeUser("hz-1"), ps::Kind::kPoolLease, "hangzhou").ok());  // the holder
  BOOST_REQUIRE(Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 0)).ok());
  BOOST_TEST(Delete(AdminUser(), ps::Kind::kPoolLease, "hangzhou").ok());
}

BOOST_FIXTURE_TEST_CASE(status_writes, Led) {
  BOOST_REQUIRE(Write(NodeUser("hz-1"), Delegated("hz-3", "hangzhou", "hz-1", 5000)).ok());
  ps::Object current = Copy(ps::Kind::kDelegatedLease, "hz-3");
  ps::Object repaired = current;
  repaired.status.expired = true;
  repaired.observed_monotonic_us = 0;  // clients cannot touch it
  BOOST_TEST(rules_.AdmitStatusWrite(AdminUser(), current, repaired).ok());
  BOOST_TEST(repaired.observed_monotonic_us == current.observed_monotonic_us);
  // observedTime is the server's, whoever writes /status: 2099 as admin made
  // kubectl pool show "in 72y" while the server let another node take over.
  ps::Object forged = current;
  forged.status.observed_time_us = 4'070'908'800'000'000;  // 2099-01-01T00:00:00Z
  BOOST_TEST(rules_.AdmitStatusWrite(AdminUser(), current, forged).ok());
  BOOST_TEST((forged.status.observed_time_us == current.status.observed_time_us));
  // The rules stamp status; no node and no component writes it.
  for (const poolcoord::base::UserInfo& who : {ForwarderUser(), NodeUser("hz-1")}) {
    ExpectApiError(rules_.AdmitStatusWrite(who, current, repaired), 403, "",
                   "only system:masters may repair it");
  }
}

BOOST_AUTO_TEST_SUITE_END()

// Newcomer findings of session 5: renewTime far in the future, renewTime going
// backwards on a PoolLease, a node moved out of its pool deleting there.
BOOST_AUTO_TEST_SUITE(renew_time_and_membership)

int64_t At(const char* micro_time) {
  auto us = poolcoord::base::ParseMicroTime(micro_time);
  BOOST_REQUIRE(us.ok());
  return *us;
}

// The server's wall clock at `micro_time` (the monotonic clock, which judges
// expiry, does not move).
void SetWall(poolcoord::base::FakeClock& clock, const char* micro_time) {
  clock.StepWall(microseconds(At(micro_time) - clock.NowMicros()));
}

BOOST_AUTO_TEST_CASE(a_leader_clock_ahead_blocks_no_later_renewal_of_the_term) {
  World w;
  SetWall(w.clock_, "2026-12-02T04:00:00.000000Z");
  ps::Object pl = HeldPoolLease("hangzhou", "hz-2", 15, 0);
  pl.spec.renew_time_us = At("2026-12-02T04:00:00.000000Z");
  BOOST_REQUIRE(w.Write(NodeUser("hz-2"), pl).ok());
  BOOST_REQUIRE(
      w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", At("2026-12-02T04:00:00.000000Z")))
          .ok());
  // kubectl patch dl hz-3 --type=merge -p '{"spec":{"renewTime":"2099-12-02T03:00:00.000000Z"}}'
  // was 200, and every later renewal 409 "... must not go backwards" for the rest of the term.
  const int64_t far = At("2099-12-02T03:00:00.000000Z");
  BOOST_REQUIRE(w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", far)).ok());
  // The next renewal with the real time goes through: the stored 2099 counts only
  // up to the server's time of that write (04:00:00).
  SetWall(w.clock_, "2026-12-02T04:00:41.000000Z");
  BOOST_TEST(
      w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", At("2026-12-02T04:00:41.000000Z")))
          .ok());
  // A leader clock 5 minutes ahead renews, and renews again.
  SetWall(w.clock_, "2026-12-02T04:01:00.000000Z");
  BOOST_TEST(
      w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", At("2026-12-02T04:06:00.000000Z")))
          .ok());
  SetWall(w.clock_, "2026-12-02T04:01:10.000000Z");
  BOOST_TEST(
      w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", At("2026-12-02T04:06:10.000000Z")))
          .ok());
  // Once NTP fixes it, the truthful time is taken (after the server's time of the
  // last renewal) ...
  SetWall(w.clock_, "2026-12-02T04:01:20.000000Z");
  BOOST_TEST(
      w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", At("2026-12-02T04:01:20.000000Z")))
          .ok());
  // ... and evidence older than both the stored value and the server's time of
  // it is still 409.
  absl::Status back =
      w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", At("2026-12-02T04:01:00.000000Z")));
  ExpectApiError(back, 409, "", "must not go backwards within one leader term");
}

// A PoolLease's renewTime is the holder's, informational, as a Lease's is for
// client-go: the server judges expiry from its own time of the renewal, and the
// holder is alive whatever its clock says. No rule orders or bounds it, so a
// holder whose clock stepped back keeps leading, and a far-future value blocks
// nothing (the DelegatedLease rule's reason to bound its renewTime).
BOOST_AUTO_TEST_CASE(pool_lease_renew_time_is_informational) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), HeldPoolLease("hangzhou", "hz-1", 15, 3)).ok());
  ps::Object renew = w.Copy(ps::Kind::kPoolLease, "hangzhou");
  renew.spec.renew_time_us = 5000;
  BOOST_REQUIRE(w.Write(NodeUser("hz-1"), renew).ok());
  w.clock_.Advance(seconds(5));
  // As holder: PATCH {"spec":{"renewTime":"<older than stored>"}}: 200, a renewal
  // (the holder wrote it now), as kube-apiserver takes a Lease's.
  renew.spec.renew_time_us = 4999;
  BOOST_TEST(w.Write(NodeUser("hz-1"), renew).ok());
  BOOST_TEST((w.Current(ps::Kind::kPoolLease, "hangzhou")->status.observed_time_us ==
              w.clock_.NowMicros()));
  // Far ahead, then the real time again: nothing blocks the next renewal.
  renew.spec.renew_time_us = At("2099-12-02T03:00:00.000000Z");
  BOOST_TEST(w.Write(NodeUser("hz-1"), renew).ok());
  renew.spec.renew_time_us = w.clock_.NowMicros();
  BOOST_TEST(w.Write(NodeUser("hz-1"), renew).ok());
}

BOOST_AUTO_TEST_CASE(a_node_moved_out_of_its_pool_neither_writes_nor_deletes_there) {
  World w;
  BOOST_REQUIRE(w.Write(NodeUser("hz-2"), HeldPoolLease("hangzhou", "hz-2", 15, 0)).ok());
  BOOST_REQUIRE(w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 5000)).ok());
  // hz-2 moves from hangzhou to beijing while its hangzhou PoolLease is live.
  BOOST_REQUIRE(w.membership_
                    .Replace("file", {{"hangzhou", {"hz-1", "hz-3", "hz-4"}},
                                      {"beijing", {"bj-1", "bj-2", "hz-2"}}})
                    .ok());
  BOOST_REQUIRE(w.rules_.PoolLeaseLive(*w.Current(ps::Kind::kPoolLease, "hangzhou")));
  ExpectApiError(w.Write(NodeUser("hz-2"), Delegated("hz-3", "hangzhou", "hz-2", 6000)), 403, "",
                 "belongs to pool \"beijing\"");
  // `kubectl --user hz-2 delete dl hz-3` succeeded.
  absl::Status s = w.Delete(NodeUser("hz-2"), ps::Kind::kDelegatedLease, "hz-3");
  ExpectApiError(s, 403, "", "belongs to pool \"beijing\"");
  BOOST_TEST(ps::ApiErrorFromStatus(s).message ==
             "delegatedleases.coordination.pool \"hz-3\" is forbidden: node \"hz-2\" belongs to "
             "pool \"beijing\", not to pool \"hangzhou\" of node \"hz-3\"; a node moved out of a "
             "pool leads it no more, though it still holds poollease \"hangzhou\", so it may not "
             "delete it (only the node itself or the pool's leader may)");
  BOOST_TEST(!w.rules_.LeadsPool("hz-2", "hangzhou", w.Current(ps::Kind::kPoolLease, "hangzhou").get()));
  // Back in hangzhou, it leads again: both rules agree.
  BOOST_REQUIRE(w.membership_
                    .Replace("file", {{"hangzhou", {"hz-1", "hz-2", "hz-3", "hz-4"}},
                                      {"beijing", {"bj-1", "bj-2"}}})
                    .ok());
  BOOST_TEST(w.rules_.LeadsPool("hz-2", "hangzhou", w.Current(ps::Kind::kPoolLease, "hangzhou").get()));
  BOOST_TEST(w.Delete(NodeUser("hz-2"), ps::Kind::kDelegatedLease, "hz-3").ok());
}

BOOST_AUTO_TEST_SUITE_END()
