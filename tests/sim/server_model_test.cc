// The server's parts in one process (agent/sim/server_model.h): the API's
// answers to what agents send come from the lease rules over the store, and
// the driven forwarder renews a delegated node's Lease in the modelled cloud
// when its time comes, with nothing running between the steps.
#define BOOST_TEST_MODULE server_model
#include "agent/sim/server_model.h"

#include <boost/test/unit_test.hpp>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "agent/sim/cloud_model.h"
#include "base/clock.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "base/microtime.h"
#include "election/lease_marks.h"

namespace pc = poolcoord::cloud;
namespace ps = poolcoord::sim;
using std::chrono::seconds;

namespace {

constexpr int64_t kSecond = 1'000'000;

std::string PoolLeaseJson(const std::string& holder, int transitions, int64_t renew_us,
                          const std::string& rv = "") {
  return absl::StrCat(R"({"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease",)",
                      R"("metadata":{"name":"hangzhou")",
                      rv.empty() ? "" : absl::StrCat(R"(,"resourceVersion":")", rv, R"(")"),
                      R"(},"spec":{"holderIdentity":")", holder,
                      R"(","leaseDurationSeconds":15,"leaseTransitions":)", transitions,
                      R"(,"renewTime":")", poolcoord::base::FormatMicroTime(renew_us), R"("}})");
}

std::string DelegatedLeaseJson(const std::string& node, const std::string& leader, int64_t renew_us,
                               const std::string& rv = "") {
  return absl::StrCat(R"({"apiVersion":"coordination.pool/v1alpha1","kind":"DelegatedLease",)",
                      R"("metadata":{"name":")", node,
                      R"(","annotations":{"openyurt.io/delegate-heartbeat":"true"})",
                      rv.empty() ? "" : absl::StrCat(R"(,"resourceVersion":")", rv, R"(")"),
                      R"(},"spec":{"holderIdentity":")", node,
                      R"(","leaseDurationSeconds":7,"poolName":"hangzhou","delegate":")", leader,
                      R"(","renewTime":")", poolcoord::base::FormatMicroTime(renew_us), R"("}})");
}

struct World {
  explicit World(bool with_cloud = false)
      : clock(1'800'000'000 * kSecond),
        cloud({{"hz-1", {}, "10.0.0.1"}, {"hz-2", {}, "10.0.0.2"}, {"hz-3", {}, "10.0.0.3"}},
              &clock) {
    clock.Advance(seconds(1000));
    ps::ServerModelOptions o;
    o.clock = &clock;
    o.pools = {{"hangzhou", {"hz-1", "hz-2", "hz-3"}}};
    o.proofs.mode = poolcoord::election::ProofMode::kOff;
    if (with_cloud) {
      o.cloud = {cloud.NodeLeases(), cloud.Nodes(), cloud.Events()};
    }
    auto m = ps::ServerModel::Start(std::move(o));
    BOOST_REQUIRE_MESSAGE(m.ok(), m.status().ToString());
    server = *std::move(m);
  }
  // hz-1 takes hangzhou's PoolLease; returns its resourceVersion.
  std::string Lead() {
    auto r = server->Create(ps::NodeUser("hz-1"), poolcoord::store::Kind::kPoolLease,
                            PoolLeaseJson("hz-1", 0, clock.NowMicros()));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return pc::DecodeLease(*r)->metadata.resource_version;
  }
  poolcoord::base::FakeClock clock;
  ps::CloudModel cloud;
  std::unique_ptr<ps::ServerModel> server;
};

}  // namespace

BOOST_AUTO_TEST_CASE(PoolLeaseWritesAnswerAsTheRulesSay) {
  World w;
  const std::string rv = w.Lead();
  auto got = w.server->Get(poolcoord::store::Kind::kPoolLease, "hangzhou");
  BOOST_REQUIRE(got.ok());
  auto lease = pc::DecodeLease(*got);
  BOOST_REQUIRE(lease.ok());
  BOOST_TEST(lease->spec.holder_identity.value_or("") == "hz-1");
  BOOST_TEST(!lease->metadata.uid.empty());
  BOOST_TEST(lease->status.observed_time_us.has_value());  // the rules stamped the renewal

  // The holder renews with the version it read; the same version again is stale.
  w.clock.Advance(seconds(2));
  auto renewed = w.server->Update(ps::NodeUser("hz-1"), poolcoord::store::Kind::kPoolLease,
                                  "hangzhou", PoolLeaseJson("hz-1", 0, w.clock.NowMicros(), rv));
  BOOST_REQUIRE_MESSAGE(renewed.ok(), renewed.status().ToString());
  BOOST_TEST(pc::DecodeLease(*renewed)->metadata.uid == lease->metadata.uid);
  BOOST_TEST(pc::IsConflict(w.server
                                ->Update(ps::NodeUser("hz-1"), poolcoord::store::Kind::kPoolLease,
                                         "hangzhou", PoolLeaseJson("hz-1", 0, w.clock.NowMicros(), rv))
                                .status()));
  // Another member may not take a live lease: 409 from the rules, with the
  // version it read.
  const std::string now_rv = pc::DecodeLease(*renewed)->metadata.resource_version;
  absl::Status taken = w.server
                           ->Update(ps::NodeUser("hz-2"), poolcoord::store::Kind::kPoolLease,
                                    "hangzhou", PoolLeaseJson("hz-2", 1, w.clock.NowMicros(), now_rv))
                           .status();
  BOOST_TEST(pc::CodeOf(taken) == 409, taken.ToString());
  // Nor create one that exists.
  BOOST_TEST(pc::IsAlreadyExists(w.server
                                     ->Create(ps::NodeUser("hz-2"), poolcoord::store::Kind::kPoolLease,
                                              PoolLeaseJson("hz-2", 0, w.clock.NowMicros()))
                                     .status()));
  // Once it expired on the server's clock, the takeover is accepted.
  w.clock.Advance(seconds(16));
  BOOST_TEST(w.server
                 ->Update(ps::NodeUser("hz-2"), poolcoord::store::Kind::kPoolLease, "hangzhou",
                          PoolLeaseJson("hz-2", 1, w.clock.NowMicros(), now_rv))
                 .ok());
}

BOOST_AUTO_TEST_CASE(OnlyTheLeaderWritesDelegatedLeasesInItsTerm) {
  World w;
  w.Lead();
  auto refused = w.server->Create(ps::NodeUser("hz-3"), poolcoord::store::Kind::kDelegatedLease,
                                  DelegatedLeaseJson("hz-2", "hz-3", w.clock.NowMicros()));
  BOOST_TEST(pc::IsForbidden(refused.status()), refused.status().ToString());
  auto written = w.server->Create(ps::NodeUser("hz-1"), poolcoord::store::Kind::kDelegatedLease,
                                  DelegatedLeaseJson("hz-2", "hz-1", w.clock.NowMicros()));
  BOOST_REQUIRE_MESSAGE(written.ok(), written.status().ToString());
  auto dl = pc::DecodeDelegatedLease(*written);
  BOOST_REQUIRE(dl.ok());
  BOOST_TEST(dl->status.leader_term.has_value());  // stamped by the rules
  // renewTime backwards within the term: 409.
  absl::Status back = w.server
                          ->Update(ps::NodeUser("hz-1"), poolcoord::store::Kind::kDelegatedLease, "hz-2",
                                   DelegatedLeaseJson("hz-2", "hz-1", w.clock.NowMicros() - kSecond,
                                                      dl->metadata.resource_version))
                          .status();
  BOOST_TEST(pc::CodeOf(back) == 409, back.ToString());
  // The node itself may delete it; a stale precondition is a conflict.
  BOOST_TEST(pc::IsConflict(w.server->Delete(ps::NodeUser("hz-2"), poolcoord::store::Kind::kDelegatedLease,
                                             "hz-2", "1")));
  BOOST_TEST(w.server
                 ->Delete(ps::NodeUser("hz-2"), poolcoord::store::Kind::kDelegatedLease, "hz-2",
                          dl->metadata.resource_version)
                 .ok());
  BOOST_TEST(pc::IsNotFound(w.server->Get(poolcoord::store::Kind::kDelegatedLease, "hz-2").status()));
}

// The driven forwarder: it learns of the DelegatedLease only when the cache
// is dispatched, and renews the node's cloud Lease only when its sync is due
// (the kubelet's last renewal older than one renew interval).
BOOST_AUTO_TEST_CASE(ForwarderMovesOnlyWhenDriven) {
  World w(/*with_cloud=*/true);
  w.cloud.KubeletRenew("hz-2", w.clock.NowMicros());
  w.Lead();
  BOOST_REQUIRE(w.server
                    ->Create(ps::NodeUser("hz-1"), poolcoord::store::Kind::kDelegatedLease,
                             DelegatedLeaseJson("hz-2", "hz-1", w.clock.NowMicros()))
                    .ok());
  BOOST_TEST(w.server->Forward() == 0);  // not dispatched: the forwarder knows nothing
  w.server->Dispatch();
  const int64_t due = w.server->NextForwardDue();
  BOOST_REQUIRE(due != INT64_MAX);
  w.server->Forward();
  const int64_t writes = w.cloud.server_lease_writes();
  // The kubelet renewed just now: the first forward waits a renew interval.
  BOOST_TEST(writes == 0);
  w.clock.Advance(seconds(6));
  // Keep the delegation live (7 s DelegatedLeases) as a leader would.
  auto dl = pc::DecodeDelegatedLease(*w.server->Get(poolcoord::store::Kind::kDelegatedLease, "hz-2"));
  BOOST_REQUIRE(w.server
                    ->Update(ps::NodeUser("hz-1"), poolcoord::store::Kind::kDelegatedLease, "hz-2",
                             DelegatedLeaseJson("hz-2", "hz-1", w.clock.NowMicros(),
                                                dl->metadata.resource_version))
                    .ok());
  w.server->Dispatch();
  w.clock.Advance(seconds(5));
  BOOST_TEST(w.server->NextForwardDue() <= w.clock.MonotonicMicros());
  BOOST_TEST(w.server->Forward() >= 1);
  BOOST_TEST(w.cloud.server_lease_writes() == 1);
  auto lease = w.cloud.GetLease("hz-2");
  BOOST_REQUIRE(lease.ok());
  BOOST_TEST(lease->metadata.annotations.count(poolcoord::election::kForwardedRenewTimeAnnotation) == 1u);
}
