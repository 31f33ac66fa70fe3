#define BOOST_TEST_MODULE admission_rules
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "election/admission_rules.h"
#include "base/clock.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "store/memory_store.h"
#include "tests/rules_fixture.h"
#include "tests/store/forwarding_store.h"

namespace pe = poolcoord::election;
namespace ps = poolcoord::store;
using std::chrono::microseconds;
using std::chrono::seconds;

namespace {

using poolcoord::testing::NodeUser;

using poolcoord::testing::kForwarder;
using poolcoord::testing::kProxy;
constexpr int64_t kRenew = 1'767'225'600'000'000;

poolcoord::base::UserInfo User(const std::string& name, const std::string& group = "") {
  poolcoord::base::UserInfo u{name, "", {"system:authenticated"}, {}};
  if (!group.empty()) u.groups.push_back(group);
  return u;
}

struct Fixture : poolcoord::testing::RulesFixture {
  explicit Fixture(bool load = true) : RulesFixture(load) {}

  // An UPDATE of node `node`'s Lease by `user`, the old object without annotation.
  static pe::AdmissionAttributes Review(const std::string& node, const poolcoord::base::UserInfo& user,
                                        std::optional<std::string> annotation = "true",
                                        std::optional<std::string> old_annotation = std::nullopt) {
    pe::AdmissionAttributes a;
    a.operation = "UPDATE";
    a.name = node;
    a.namespace_name = pe::kNodeLeaseNamespace;
    a.user = user;
    a.object.present = true;
    a.object.delegate_annotation = annotation;
    a.object.holder_identity = node;
    a.object.renew_time_us = kRenew + 10'000'000;
    a.old_object.present = true;
    a.old_object.delegate_annotation = old_annotation;
    a.old_object.holder_identity = node;
    a.old_object.renew_time_us = kRenew;
    return a;
  }

  pe::AdmissionDecision Decide(const pe::AdmissionAttributes& a) {
    return pe::DecideDelegatedHeartbeat(a, rules, store.get());
  }

  void ExpectDenied(const pe::AdmissionAttributes& a, const std::string& in_message) {
    auto d = Decide(a);
    BOOST_TEST(!d.allowed);
    BOOST_TEST(d.message.find(in_message) != std::string::npos, d.message);
  }

};

struct Unloaded : Fixture {
  Unloaded() : Fixture(false) {}
};

// The fixture's memory store behind a wrapper that counts the reads the
// decision makes and can fail them, as an unreachable etcd would.
class CountingStore final : public poolcoord::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  int gets = 0, get_alls = 0;
  size_t last_keys = 0;
  bool fail = false;

  absl::StatusOr<ps::ObjectPtr> Get(ps::Kind kind, std::string_view name) override {
    ++gets;
    if (fail) return absl::UnavailableError("etcd unreachable: test");
    return below_->Get(kind, name);
  }
  absl::StatusOr<std::vector<ps::ObjectPtr>> GetAll(std::span<const ps::ObjectKey> keys) override {
    ++get_alls;
    last_keys = keys.size();
    if (fail) return absl::UnavailableError("etcd unreachable: test");
    return below_->GetAll(keys);
  }
};

struct Counted : Fixture {
  CountingStore counting{store.get()};
  pe::AdmissionDecision DecideCounted(const pe::AdmissionAttributes& a) {
    return pe::DecideDelegatedHeartbeat(a, rules, &counting);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(validity, Fixture)

BOOST_AUTO_TEST_CASE(no_annotation_passes_whoever_writes) {
  BOOST_TEST(Decide(Review("hz-3", NodeUser("hz-3"), std::nullopt)).allowed);
  BOOST_TEST(Decide(Review("lonely", User("mallory"), std::nullopt)).allowed);
  // Dropping an existing annotation is a write without it.
  BOOST_TEST(Decide(Review("hz-3", NodeUser("hz-3"), std::nullopt, "true")).allowed);
}

BOOST_AUTO_TEST_CASE(value_must_be_exactly_true) {
  BOOST_TEST(Decide(Review("bj-2", User(kProxy))).allowed);  // "true" passes
  for (const char* v : {"", "True", "TRUE", "1", "yes", "true "}) {
    auto a = Review("bj-2", User(kProxy), std::string(v));
    BOOST_TEST_CONTEXT(v) { ExpectDenied(a, "must be exactly \"true\""); }
  }
}

BOOST_AUTO_TEST_CASE(holder_must_be_the_lease_name) {
  auto a = Review("bj-2", User(kProxy));
  a.object.holder_identity = "bj-1";
  ExpectDenied(a, "must equal the Lease's name");
  a.object.holder_identity.reset();
  ExpectDenied(a, "must equal the Lease's name");
}

BOOST_AUTO_TEST_CASE(node_must_be_in_a_pool) {
  ExpectDenied(Review("lonely", User(kProxy)), "belongs to no pool");
  ExpectDenied(Review("lonely", User("admin", "system:masters")), "belongs to no pool");
}

BOOST_AUTO_TEST_CASE(renew_time_not_before_the_old_one) {
  auto a = Review("bj-2", User(kProxy));
  a.object.renew_time_us = a.old_object.renew_time_us;
  BOOST_TEST(Decide(a).allowed);  // equal passes
  a.object.renew_time_us = *a.old_object.renew_time_us - 1;
  ExpectDenied(a, "goes backwards");
  a.object.renew_time_us.reset();
  a.object.renew_time_invalid = true;
  ExpectDenied(a, "not a MicroTime");
}

BOOST_AUTO_TEST_CASE(masters_exempt_from_identity_only) {
  BOOST_REQUIRE(Lead("hangzhou", "hz-1", 0).ok());
  BOOST_TEST(Decide(Review("hz-3", User("admin", "system:masters"))).allowed);
  ExpectDenied(Review("hz-3", User("admin", "system:masters"), "True"), "exactly");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(not_loaded, Unloaded)

BOOST_AUTO_TEST_CASE(annotated_denied_with_retry_plain_allowed) {
  ExpectDenied(Review("bj-2", User(kProxy)), "retry");
  BOOST_TEST(Decide(Review("bj-2", NodeUser("bj-2"), std::nullopt)).allowed);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(requesters, Fixture)

BOOST_AUTO_TEST_CASE(node_itself_may_keep_or_drop_never_add_or_change) {
  ExpectDenied(Review("hz-3", NodeUser("hz-3")), "may not add");
  auto create = Review("hz-3", NodeUser("hz-3"));
  create.operation = "CREATE";
  create.old_object = {};
  ExpectDenied(create, "may not add");
  BOOST_TEST(Decide(Review("hz-3", NodeUser("hz-3"), "true", "true")).allowed);  // kept
  ExpectDenied(Review("hz-3", NodeUser("hz-3"), "true", "yes"), "may not change");
  // Another node is "anyone else".
  ExpectDenied(Review("hz-3", NodeUser("hz-1")), "may not set");
}

// A returning node's kubelet writes back the forwarder's annotation with its own,
// earlier clock: denying it would lock the node out of its own heartbeat.
BOOST_AUTO_TEST_CASE(kubelet_write_back_passes_with_backwards_clock_or_no_pool) {
  auto a = Review("hz-3", NodeUser("hz-3"), "true", "true");
  a.object.renew_time_us = *a.old_object.renew_time_us - 5'000'000;
  BOOST_TEST(Decide(a).allowed);
  BOOST_TEST(Decide(Review("lonely", NodeUser("lonely"), "true", "true")).allowed);
  // The exemption covers only the node itself keeping the value it read.
  auto other = Review("hz-3", User(kProxy), "true", "true");
  other.object.renew_time_us = *other.old_object.renew_time_us - 1;
  ExpectDenied(other, "goes backwards");
}

BOOST_AUTO_TEST_CASE(proxy_identity_governed_vs_ungoverned) {
  BOOST_TEST(Decide(Review("bj-2", User(kProxy))).allowed);  // no PoolLease for beijing
  BOOST_REQUIRE(Lead("beijing", "bj-1", 0).ok());
  ExpectDenied(Review("bj-2", User(kProxy)), "governed by poolcoord");
  // An unheld PoolLease still governs the pool.
  poolcoord::base::UserInfo admin = User("admin", "system:masters");
  BOOST_REQUIRE(Lead("hangzhou", "", 0, &admin).ok());
  ExpectDenied(Review("hz-3", User(kProxy)), "governed");
}

BOOST_AUTO_TEST_CASE(forwarder_needs_a_current_delegation) {
  ExpectDenied(Review("hz-3", User(kForwarder)), "not governed");
  BOOST_REQUIRE(Lead("hangzhou", "hz-1", 0).ok());
  ExpectDenied(Review("hz-3", User(kForwarder)), "has no DelegatedLease");
  BOOST_REQUIRE(Delegate("hz-3", "hangzhou", "hz-1").ok());
  BOOST_TEST(Decide(Review("hz-3", User(kForwarder))).allowed);
  ExpectDenied(Review("hz-4", User(kForwarder)), "has no DelegatedLease");

  // The leader's term ends: its lease expires (15 s) and hz-2 takes over.
  clock.Advance(seconds(15));
  ExpectDenied(Review("hz-3", User(kForwarder)), "no live holder");
  auto cur = store->Get(ps::Kind::kPoolLease, "hangzhou");
  BOOST_REQUIRE(cur.ok());
  ps::Object take = **cur;
  take.spec.holder_identity = "hz-2";
  take.spec.lease_transitions = 1;
  BOOST_REQUIRE(Write(NodeUser("hz-2"), take).ok());
  ExpectDenied(Review("hz-3", User(kForwarder)), "earlier leader term");
  BOOST_REQUIRE(Delegate("hz-3", "hangzhou", "hz-2").ok());
  BOOST_TEST(Decide(Review("hz-3", User(kForwarder))).allowed);
}

BOOST_AUTO_TEST_CASE(forwarder_denied_once_the_delegated_lease_expires) {
  BOOST_REQUIRE(Lead("hangzhou", "hz-1", 0).ok());
  BOOST_REQUIRE(Delegate("hz-3", "hangzhou", "hz-1").ok());
  // Keep the leader live while the 40 s DelegatedLease runs out.
  for (int i = 0; i < 4; ++i) {
    clock.Advance(seconds(10));
    ps::Object renewal = **store->Get(ps::Kind::kPoolLease, "hangzhou");
    renewal.spec.renew_time_us = clock.NowMicros();  // a renewal: writing it back renews nothing
    BOOST_REQUIRE(Write(NodeUser("hz-1"), renewal).ok());
  }
  ExpectDenied(Review("hz-3", User(kForwarder)), "expired");
}

// "The node itself" is exactly system:node:<the Lease's name>: a longer or
// shorter node name, or another prefix, is someone else.
BOOST_AUTO_TEST_CASE(node_itself_is_the_exact_node_identity) {
  BOOST_TEST(Decide(Review("hz-3", NodeUser("hz-3"), "true", "true")).allowed);
  for (const char* username : {"system:node:hz-33", "system:node:hz-", "system:node:", "system:nodehz-3",
                               "xsystem:node:hz-3", "hz-3"}) {
    BOOST_TEST_CONTEXT(username) {
      poolcoord::base::UserInfo u = NodeUser("hz-3");
      u.username = username;
      ExpectDenied(Review("hz-3", u, "true", "true"), "may not set");
      ExpectDenied(Review("hz-3", u), "may not set");
    }
  }
  // Every denial still names the annotation.
  ExpectDenied(Review("hz-3", NodeUser("hz-3")), "may not add the annotation openyurt.io/delegate-heartbeat");
  ExpectDenied(Review("hz-3", User(kProxy), "yes"),
               "annotation openyurt.io/delegate-heartbeat has the value \"yes\"");
}

BOOST_AUTO_TEST_CASE(anyone_else_denied_naming_who_may) {
  ExpectDenied(Review("bj-2", User("mallory")), "--forwarder-user");
  ExpectDenied(Review("bj-2", User("mallory")), "--lease-proxy-users");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(store_reads, Counted)

// The forwarder's verdict reads the PoolLease and the DelegatedLease together:
// one consistent read (one etcd round trip), not two.
BOOST_AUTO_TEST_CASE(forwarder_reads_both_leases_in_one_read) {
  BOOST_REQUIRE(Lead("hangzhou", "hz-1", 0).ok());
  BOOST_REQUIRE(Delegate("hz-3", "hangzhou", "hz-1").ok());
  BOOST_TEST(DecideCounted(Review("hz-3", User(kForwarder))).allowed);
  BOOST_TEST(counting.get_alls == 1);
  BOOST_TEST(counting.last_keys == 2u);
  BOOST_TEST(counting.gets == 0);
  // The proxy needs the PoolLease alone; the node itself and anyone else nothing.
  ExpectDenied(Review("hz-3", User(kProxy)), "governed");
  BOOST_TEST(DecideCounted(Review("bj-2", User(kProxy))).allowed);
  BOOST_TEST(counting.last_keys == 1u);
  const int before = counting.get_alls;
  DecideCounted(Review("hz-3", User("mallory")));
  DecideCounted(Review("hz-3", NodeUser("hz-3"), "true", "true"));
  BOOST_TEST(counting.get_alls == before);
}

// A store that cannot answer denies with "retry": before, a failed read was
// taken for an absent PoolLease, so a lease-proxy user passed for a governed
// pool whenever etcd could not be read.
BOOST_AUTO_TEST_CASE(an_unreadable_store_denies_with_retry) {
  BOOST_REQUIRE(Lead("beijing", "bj-1", 0).ok());
  BOOST_REQUIRE(Lead("hangzhou", "hz-1", 0).ok());
  BOOST_REQUIRE(Delegate("hz-3", "hangzhou", "hz-1").ok());
  counting.fail = true;
  for (const auto& review : {Review("bj-2", User(kProxy)), Review("hz-3", User(kForwarder))}) {
    auto d = DecideCounted(review);
    BOOST_TEST(!d.allowed);
    BOOST_TEST(d.message.find("cannot be read now (etcd unreachable: test); retry") !=
                   std::string::npos,
               d.message);
  }
  counting.fail = false;
  BOOST_TEST(DecideCounted(Review("hz-3", User(kForwarder))).allowed);
}

BOOST_AUTO_TEST_SUITE_END()
