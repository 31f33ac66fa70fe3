// The lying leader of verifiable delegation's tests (agent/testing/forging_leader.h): it
// keeps a dead member "alive" with replayed or fabricated heartbeats. With the
// server's proofs off the attack succeeds (the modelled server takes every
// forged write); with proofs required every forged write is refused, the honest
// delegation of a cut-off member goes on, and the liar keeps its leadership.
#define BOOST_TEST_MODULE forging_leader
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>

#include "agent/testing/forging_leader.h"
#include "tests/agent/agent_testing.h"
#include "tests/agent/agent_world.h"

namespace pa = poolcoord::agent;
using pa::testing::TestPki;
using namespace pa::testing::world;  // NOLINT: the test world

namespace {

struct Liars {
  std::map<std::string, std::shared_ptr<pa::ForgingLeader>> by_node;
  void operator()(const std::string& name, pa::AgentOptions& o) {
    auto forger = std::make_shared<pa::ForgingLeader>(TestPki::Get().ca());
    by_node[name] = forger;
    o.forger = forger;
  }
};

// Runs a pool of liars; kills a member; returns the last renewTime written for it after
// its death (0 if none) and the leader's forging stats.
struct Outcome {
  int64_t forged_accepted = 0, forged_refused_proof = 0;
  int64_t renew_after_death_s = 0;  // how long after its death its DelegatedLease was renewed
  std::map<std::string, int> refusals;
  bool leader_kept = false;
  size_t honest_writes = 0;
};

Outcome Attack(const std::string& mode, const std::string& victim_kind) {
  auto liars = std::make_shared<Liars>();
  World w([&](Cloud& c) {
            c.issue_challenges = true;
            c.proof_mode = mode;
          },
          [liars](const std::string& name, pa::AgentOptions& o) { (*liars)(name, o); });
  if (victim_kind == "never") {
    // A member that never came up: in everyone's pool, never heard.
    w.pool_template->members["hz-4"] = "hz-4";
    for (auto& [name, n] : w.nodes) {
      auto pool = std::make_shared<pa::PoolView>(*w.pool_template);
      pool->self = name;
      n.core->SetPool(pool);
    }
  }
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string victim = victim_kind == "never" ? "hz-4" : OtherThan(leader);
  const std::string honest = leader == "hz-1" ? "hz-2" : "hz-1";
  BOOST_REQUIRE(honest != victim);
  if (victim_kind == "heard") {
    // Cut off and delegated honestly first: the liar holds its real heartbeats.
    w.cloud.cut.insert(victim);
    w.Run(15);
    BOOST_REQUIRE(w.WritesFor(victim) >= 2u);
    w.Kill(victim);
  }
  w.cloud.cut.insert(honest);  // a cut-off member the liar delegates honestly
  const int64_t died_wall = w.clock.NowMicros();
  w.Run(60);
  Outcome out;
  const auto& forger = *liars->by_node.at(leader);
  out.forged_accepted = forger.stats().accepted.load();
  out.forged_refused_proof = forger.stats().refused_proof.load();
  if (w.cloud.delegated.count(victim) != 0) {
    out.renew_after_death_s = (w.cloud.delegated[victim].renew_time_us - died_wall) / kS;
  }
  out.refusals = w.cloud.proof_refusals;
  out.leader_kept = w.nodes[leader].core->status().leading &&
                    w.nodes[leader].core->delegation_stats().step_downs.load() == 0;
  out.honest_writes = w.WritesFor(honest);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(WithProofsOffTheLieKeepsADeadMemberAlive) {
  Outcome o = Attack("off", "heard");
  BOOST_TEST(o.forged_accepted >= 10);  // every 5 s for 60 s
  BOOST_TEST(o.renew_after_death_s >= 55);  // renewed to the end: false liveness
  BOOST_TEST(o.leader_kept);
}

BOOST_AUTO_TEST_CASE(WithProofsRequiredReplayedHeartbeatsAreRefused) {
  Outcome o = Attack("required", "heard");
  BOOST_TEST(o.forged_accepted == 0);
  BOOST_TEST(o.forged_refused_proof >= 10);
  // Replays of a heartbeat the server took already, then with its challenge
  // stale, then gone from the pool's recent ones; before the liar first heard
  // its members (its first term), fabrications in their names.
  const int replayed =
      o.refusals["replay"] + o.refusals["stale_challenge"] + o.refusals["unknown_challenge"];
  BOOST_TEST(replayed >= 10);
  BOOST_TEST(o.refusals["stale_challenge"] >= 1);
  BOOST_TEST(replayed + o.refusals["wrong_identity"] == o.forged_refused_proof);
  // Its DelegatedLease was last renewed with its last real heartbeat.
  BOOST_TEST(o.renew_after_death_s <= 0);
  // The liar stays leader and the honest delegation of a cut-off member goes on.
  BOOST_TEST(o.leader_kept);
  BOOST_TEST(o.honest_writes >= 8u);
}

BOOST_AUTO_TEST_CASE(WithProofsOffAFabricatedMemberIsKeptAlive) {
  Outcome o = Attack("off", "never");
  BOOST_TEST(o.forged_accepted >= 10);
  BOOST_TEST(o.renew_after_death_s >= 55);
}

BOOST_AUTO_TEST_CASE(WithProofsRequiredFabricatedHeartbeatsAreRefused) {
  // Signed with the liar's own key and certificate, which names the liar.
  Outcome o = Attack("required", "never");
  BOOST_TEST(o.forged_accepted == 0);
  BOOST_TEST(o.forged_refused_proof >= 10);
  BOOST_TEST(o.refusals["wrong_identity"] == o.forged_refused_proof);
  BOOST_TEST(o.renew_after_death_s == 0);  // never written
  BOOST_TEST(o.leader_kept);
  BOOST_TEST(o.honest_writes >= 8u);
}
