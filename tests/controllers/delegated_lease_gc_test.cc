#define BOOST_TEST_MODULE delegated_lease_gc
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "controllers/delegated_lease_gc.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "store/memory_store.h"
#include "tests/rules_writes.h"
#include "tests/store/forwarding_store.h"

namespace pe = poolcoord::election;
namespace ps = poolcoord::store;
namespace pcn = poolcoord::controllers;
using std::chrono::microseconds;
using std::chrono::seconds;

namespace {

poolcoord::base::UserInfo Node(const std::string& name) { return poolcoord::testing::NodeUser(name); }

struct Fixture {
  Fixture() : rules(&clock, &membership, {}) {
    clock.Advance(seconds(100));
    BOOST_REQUIRE(membership.Replace("file", {{"hangzhou", {"hz-1", "hz-2", "hz-3"}}}).ok());
    store = ps::NewMemoryStore({});
    BOOST_REQUIRE(Write(poolcoord::testing::PoolLeaseFor("hangzhou", "hz-1")).ok());
  }

  absl::Status Write(const ps::Object& proposed) {
    return poolcoord::testing::WriteThroughRules(store.get(), rules, Node("hz-1"), proposed);
  }

  absl::Status Delegate(const std::string& node, int32_t duration) {
    return Write(poolcoord::testing::DelegatedLeaseFor(node, "hangzhou", "hz-1", duration,
                                                       clock.NowMicros()));
  }

  ps::ObjectPtr Get(const std::string& name) {
    auto got = store->Get(ps::Kind::kDelegatedLease, name);
    return got.ok() ? *got : nullptr;
  }

  poolcoord::base::FakeClock clock;
  pe::MembershipIndex membership;
  pe::LeaseRules rules;
  std::unique_ptr<ps::Store> store;
};

// The store below with a watch cache's view for reads at resourceVersion "0":
// records each List's freshness and, for kAny, answers `view` (a stale list)
// when one is set.
class CachedView final : public poolcoord::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  absl::StatusOr<ps::ListResult> List(ps::Kind kind, const ps::ListOptions& options) override {
    rules.push_back(options.freshness.rule);
    if (options.freshness.rule == ps::Freshness::Rule::kAny && view) return *view;
    return below_->List(kind, options);
  }

  std::vector<ps::Freshness::Rule> rules;
  std::optional<ps::ListResult> view;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(sweep, Fixture)

// With 1,000 DelegatedLeases on etcd3 a quorum list every second was ~7% of the
// server's CPU and delayed watch events: the sweep reads the
// cache (resourceVersion "0"); the store's atomic step decides.
BOOST_AUTO_TEST_CASE(lists_from_the_cache_and_a_stale_view_writes_nothing_wrong) {
  CachedView cached(store.get());
  pcn::DelegatedLeaseGc gc(&cached, &rules, absl::Seconds(60));
  BOOST_REQUIRE(Delegate("hz-2", 40).ok());
  auto stale = store->List(ps::Kind::kDelegatedLease, {});
  BOOST_REQUIRE(stale.ok());
  cached.view = *stale;

  // hz-2 renewed after the view was taken: the view says expired, the store not.
  clock.Advance(seconds(41));
  BOOST_REQUIRE(Delegate("hz-2", 40).ok());
  const int64_t rv = Get("hz-2")->metadata.resource_version;
  auto r = gc.SweepOnce();
  BOOST_TEST(r.marked_expired == 0);
  BOOST_TEST(r.deleted == 0);
  BOOST_TEST(!Get("hz-2")->status.expired);
  BOOST_TEST(Get("hz-2")->metadata.resource_version == rv);
  // Long past the GC period in the view, renewed in the store: not deleted.
  clock.Advance(seconds(39));
  BOOST_REQUIRE(Delegate("hz-2", 40).ok());
  clock.Advance(seconds(30));
  r = gc.SweepOnce();
  BOOST_TEST(r.deleted == 0);
  BOOST_TEST(Get("hz-2") != nullptr);
  BOOST_REQUIRE(cached.rules.size() == 2u);
  BOOST_TEST((cached.rules[0] == ps::Freshness::Rule::kAny));
  BOOST_TEST((cached.rules[1] == ps::Freshness::Rule::kAny));

  // A current view: expired leases are marked as before.
  cached.view.reset();
  clock.Advance(seconds(41));
  BOOST_TEST(gc.SweepOnce().marked_expired == 1);
  BOOST_TEST(Get("hz-2")->status.expired);
}

BOOST_AUTO_TEST_CASE(marks_expired_at_the_duration_then_deletes_after_the_period) {
  pcn::DelegatedLeaseGc gc(store.get(), &rules, absl::Seconds(60));
  BOOST_REQUIRE(Delegate("hz-2", 40).ok());
  BOOST_REQUIRE(Delegate("hz-3", 100).ok());

  clock.Advance(microseconds(40'000'000 - 1));
  auto r = gc.SweepOnce();
  BOOST_TEST(r.marked_expired == 0);
  BOOST_TEST(!Get("hz-2")->status.expired);

  clock.Advance(microseconds(1));
  const int64_t rv_before = Get("hz-2")->metadata.resource_version;
  r = gc.SweepOnce();
  BOOST_TEST(r.marked_expired == 1);
  BOOST_TEST(r.deleted == 0);
  BOOST_TEST(Get("hz-2")->status.expired);
  BOOST_TEST(Get("hz-2")->metadata.resource_version > rv_before);
  BOOST_TEST(!Get("hz-3")->status.expired);

  // Already marked: nothing more to write.
  r = gc.SweepOnce();
  BOOST_TEST(r.marked_expired == 0);

  clock.Advance(seconds(60));  // expired for exactly the period: kept
  r = gc.SweepOnce();
  BOOST_TEST(r.deleted == 0);
  BOOST_TEST(Get("hz-2") != nullptr);
  BOOST_TEST(Get("hz-3")->status.expired);  // 100 s ran out meanwhile
  clock.Advance(microseconds(1));
  r = gc.SweepOnce();
  BOOST_TEST(r.deleted == 1);
  BOOST_TEST(Get("hz-2") == nullptr);
  BOOST_TEST(Get("hz-3") != nullptr);
}

BOOST_AUTO_TEST_CASE(renewal_clears_the_mark) {
  pcn::DelegatedLeaseGc gc(store.get(), &rules, absl::Minutes(5));
  BOOST_REQUIRE(Delegate("hz-2", 10).ok());
  clock.Advance(seconds(11));
  BOOST_TEST(gc.SweepOnce().marked_expired == 1);
  BOOST_REQUIRE(Delegate("hz-2", 10).ok());
  BOOST_TEST(!Get("hz-2")->status.expired);
  BOOST_TEST(gc.SweepOnce().marked_expired == 0);
}

BOOST_AUTO_TEST_CASE(background_thread_sweeps_and_stops) {
  pcn::DelegatedLeaseGc gc(store.get(), &rules, absl::Seconds(1), absl::Milliseconds(20));
  BOOST_REQUIRE(Delegate("hz-2", 1).ok());
  clock.Advance(seconds(5));
  gc.Start();
  bool gone = false;
  for (int i = 0; i < 150 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gone = Get("hz-2") == nullptr;
  }
  gc.Stop();
  gc.Stop();
  BOOST_TEST(gone);
}

BOOST_AUTO_TEST_SUITE_END()
