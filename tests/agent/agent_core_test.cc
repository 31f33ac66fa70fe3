// The agent core end to end over fakes: a modelled LAN (a queue of datagrams),
// a modelled cloud (a PoolLease with optimistic concurrency, DelegatedLeases
// that only the current holder may write, each node's own Lease), one fake
// clock for everyone.
#define BOOST_TEST_MODULE agent_core
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/agent_core.h"
#include "base/clock.h"
#include "tests/agent/agent_testing.h"
#include "tests/agent/agent_world.h"

namespace pa = poolcoord::agent;
namespace pb = poolcoord::base;
namespace pe = poolcoord::election;
using pa::testing::TestPki;
using namespace pa::testing::world;  // NOLINT: the test world

BOOST_AUTO_TEST_CASE(APoolHearsItselfAndElectsOneLeader) {
  World w;
  w.Run(25);
  for (auto& [name, n] : w.nodes) {
    auto s = n.core->status();
    BOOST_TEST(s.seen, name);
    BOOST_TEST(s.peers_heard == 2u, name);
    BOOST_TEST(n.core->verifier_stats().heartbeats_accepted.load() > 0);
    for (size_t r = 0; r < pa::kDropReasonCount; ++r) {
      BOOST_TEST(n.core->verifier_stats().dropped[r].load() == 0,
                 name << " dropped " << pa::DropReasonName(static_cast<pa::DropReason>(r)));
    }
    // One heartbeat round per interval (5 s) after the first.
    BOOST_TEST(n.core->stats().rounds.load() >= 5);
    BOOST_TEST(n.core->stats().rounds.load() <= 7);
  }
  BOOST_TEST(w.Leaders().size() == 1u);
  BOOST_TEST(w.cloud.writes.empty());  // nobody is cut off
  // Every member's latest heartbeat says "reachable", and the leader's says "leader".
  const std::string leader = w.Leaders()[0];
  for (const auto& other : w.names) {
    if (other == leader) continue;
    auto hb = w.nodes[other].core->LatestOf(leader);
    BOOST_REQUIRE(hb != nullptr);
    BOOST_TEST(hb->heartbeat().leader);
    BOOST_TEST(hb->heartbeat().cloud_reachable);
  }
}

// The world's PoolLease answers are the server's lease rules': a member that
// writes over the leader's live lease, even with the resourceVersion it read,
// is refused as poolcoord-apiserver refuses it, and the lease stays the
// leader's.
BOOST_AUTO_TEST_CASE(TheWorldsPoolLeaseIsJudgedByTheServersRules) {
  World w;
  w.Run(25);
  BOOST_REQUIRE(w.Leaders().size() == 1u);
  const std::string leader = w.Leaders()[0];
  const std::string other = OtherThan(leader);
  FakeCloud lock(&w.cloud, other);
  auto held = lock.Get();
  BOOST_REQUIRE(held.ok());
  pe::LeaderElectionRecord takeover = held->record;
  takeover.holder_identity = other;
  takeover.lease_transitions += 1;
  auto taken = lock.Update(takeover, held->version);
  BOOST_TEST(taken.status().code() == absl::StatusCode::kAborted);  // 409, the rules' Conflict
  BOOST_TEST(std::string(taken.status().message()).find(leader) != std::string::npos,
             taken.status().message());
  BOOST_TEST(w.cloud.pool_lease.holder_identity == leader);
  // For another node, never.
  pe::LeaderElectionRecord for_leader = held->record;
  for_leader.holder_identity = leader;
  BOOST_TEST(lock.Update(for_leader, held->version).status().code() ==
             absl::StatusCode::kPermissionDenied);
}

BOOST_AUTO_TEST_CASE(ACutOffMemberIsDelegatedAndReleased) {
  World w;
  std::string leader;
  const std::string member = CutOffTheMember(w, &leader);
  w.Run(2);
  BOOST_TEST(!w.nodes[member].core->status().seen);
  w.Run(20);
  // Written about once per heartbeat, renewTime = the leader's arrival time.
  const size_t writes = w.WritesFor(member);
  BOOST_TEST(writes >= 3u);
  BOOST_TEST(writes <= 6u);
  BOOST_REQUIRE(w.cloud.delegated.count(member) == 1);
  auto latest = w.nodes[leader].core->LatestOf(member);
  BOOST_TEST(w.cloud.delegated[member].renew_time_us == latest->arrival_wall_us);
  BOOST_TEST(w.cloud.delegated[member].delegate == leader);
  BOOST_TEST(w.cloud.delegated[member].duration == 7);
  BOOST_TEST(!latest->heartbeat().cloud_reachable);
  BOOST_TEST(w.nodes[leader].core->delegation_stats().delegated.load() == 1);

  // The link comes back but the cloud Lease is the forwarder's: still cut off,
  // delegation goes on until the kubelet renews on its own.
  w.cloud.node_leases[member] = {.exists = true, .forwarded = true};
  w.cloud.cut.erase(member);
  const size_t before = w.WritesFor(member);
  w.Run(15);
  BOOST_TEST(!w.nodes[member].core->status().seen);
  BOOST_TEST(w.nodes[member].core->status().reachable);
  BOOST_TEST(w.WritesFor(member) > before);
  w.cloud.node_leases[member] = {.exists = true, .forwarded = false};
  w.Run(12);
  BOOST_TEST(w.nodes[member].core->status().seen);
  BOOST_TEST(w.cloud.delegated.count(member) == 0);
  BOOST_TEST(w.cloud.deletes == 1);
}

BOOST_AUTO_TEST_CASE(ADeadMemberIsNotKeptAlive) {
  World w;
  std::string leader;
  const std::string member = CutOffTheMember(w, &leader);
  w.Run(15);
  BOOST_REQUIRE(w.WritesFor(member) >= 2u);
  w.Kill(member);
  const int64_t died = w.clock.MonotonicMicros();
  const size_t at_death = w.WritesFor(member);
  w.Run(30);
  // At most the heartbeat already on its way is written after the death.
  BOOST_TEST(w.WritesFor(member) <= at_death + 1);
  const auto& last = w.cloud.writes.back();
  BOOST_TEST(last.node == member);
  BOOST_TEST(last.evidence->arrival_mono_us <= died);
}

BOOST_AUTO_TEST_CASE(ALeaderThatLosesTheCloudStepsDownAtOnce) {
  World w;
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  w.cloud.cut.insert(leader);
  w.Run(0.3);
  BOOST_TEST(!w.nodes[leader].core->status().leading);
  // Its peers hear it say so within one interval.
  w.Run(5);
  for (const auto& other : w.names) {
    if (other == leader) continue;
    BOOST_TEST(!w.nodes[other].core->LatestOf(leader)->heartbeat().leader);
  }
  // Another member takes the PoolLease once it expires (15 s, and a poll).
  w.Run(20);
  auto leaders = w.Leaders();
  BOOST_REQUIRE_EQUAL(leaders.size(), 1u);
  BOOST_TEST(leaders[0] != leader);
  // ... and delegates the old leader, which is alive but cut off.
  w.Run(10);
  BOOST_TEST(w.cloud.delegated.count(leader) == 1);
  BOOST_TEST(w.cloud.delegated[leader].delegate == leaders[0]);
}

BOOST_AUTO_TEST_CASE(ForbiddenWritesStepDown) {
  World w;
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string member = OtherThan(leader);
  w.cloud.forbid_writes = true;
  w.cloud.cut.insert(member);
  // The PoolLease's holders in turn.
  std::vector<std::string> holders{leader};
  auto run = [&](double seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
      w.Run(0.1);
      const std::string& h = w.cloud.pool_lease.holder_identity;
      if (!h.empty() && h != holders.back()) holders.push_back(h);
    }
  };
  run(8);
  auto& stats = w.nodes[leader].core->delegation_stats();
  BOOST_TEST(stats.step_downs.load() == 1);
  BOOST_TEST(stats.refused_forbidden.load() == 1);
  BOOST_TEST(!w.nodes[leader].core->status().leading);
  // It released the PoolLease; another member takes it (and is refused too),
  // before the one that stepped down campaigns again (15 s later).
  run(10);
  BOOST_REQUIRE(holders.size() >= 2u);
  const std::string next = holders[1];
  BOOST_TEST(next != leader);
  BOOST_TEST(next != member);  // cut off: it does not campaign
  BOOST_TEST(w.nodes[next].core->delegation_stats().step_downs.load() == 1);
  BOOST_TEST(w.cloud.writes.empty());
}

// A server restarted on its memory store has lost the PoolLease: the leader's
// next DelegatedLease write is refused with 403, and the server's refusal says
// the PoolLease is there for it to create. The leader takes it again at once
// and goes on delegating, instead of stepping down for step_down_backoff with
// its pool's cut-off members undelegated (no other member reaches the cloud
// to lead meanwhile).
BOOST_AUTO_TEST_CASE(AServerRestartThatLosesThePoolLeaseIsNoStepDown) {
  World w;
  std::string leader;
  const std::string member = CutOffTheMember(w, &leader);
  std::string third;
  for (const std::string& n : w.names) {
    if (n != leader && n != member) third = n;
  }
  w.cloud.cut.insert(third);
  w.Run(12);
  BOOST_REQUIRE(w.WritesFor(member) > 0);
  BOOST_REQUIRE(w.WritesFor(third) > 0);
  // The restart comes just after a renewal of the PoolLease and shortly
  // before the member's next heartbeat, so the leader writes before its
  // elector's next renewal (2 s) would create the PoolLease anew.
  int64_t renewal = w.cloud.pool_lease_written_mono_us;
  bool placed = false;
  for (int i = 0; i < 200 && !placed; ++i) {
    w.Run(0.1);
    const int64_t now = w.clock.MonotonicMicros();
    const int64_t heartbeat_in = w.nodes[member].next_lan - now;
    placed = w.cloud.pool_lease_written_mono_us != renewal && heartbeat_in > 0 &&
             heartbeat_in < 1 * kS;
    renewal = w.cloud.pool_lease_written_mono_us;
  }
  BOOST_REQUIRE(placed);
  const int64_t restart = w.clock.MonotonicMicros();
  w.cloud.RestartServer(/*keep_objects=*/false);
  w.Run(12);
  const auto& stats = w.nodes[leader].core->delegation_stats();
  // The 403 came (the write before the renewal), and was taken as a lapse.
  BOOST_TEST(stats.lapsed_terms.load() == 1);
  BOOST_TEST(stats.step_downs.load() == 0);
  BOOST_TEST(stats.refused_forbidden.load() == 1);
  // The same leader holds the PoolLease it created again, and leads.
  BOOST_TEST(w.cloud.pool_lease.holder_identity == leader);
  BOOST_TEST(w.Leaders() == std::vector<std::string>{leader});
  BOOST_TEST(w.nodes[leader].core->stats().elections_won.load() == 2);
  // Both cut-off members are written again within a heartbeat of the new term
  // (the heartbeats before it are withheld): no gap beyond the freshness
  // bound, the life of one DelegatedLease (7 s), where stepping down left
  // them unwritten for 15 s.
  for (const std::string& cut : {member, third}) {
    BOOST_TEST_CONTEXT(cut) {
      BOOST_TEST(w.cloud.delegated.count(cut) == 1);
      BOOST_REQUIRE(w.cloud.write_times[cut].back() > restart);
      BOOST_TEST(w.cloud.LongestGap(cut, restart) <= 7 * kS);
      BOOST_TEST(w.clock.MonotonicMicros() - w.cloud.write_times[cut].back() <= 7 * kS);
    }
  }
}

BOOST_AUTO_TEST_CASE(ARestartedAgentRejoinsWithinOneInterval) {
  World w;
  w.Run(25);
  const auto old_boot = w.nodes["hz-2"].core->boot_id();
  w.Kill("hz-2");
  w.Run(10);
  BOOST_TEST(w.nodes["hz-1"].core->status().peers_heard == 1u);
  w.Start("hz-2", 7);
  BOOST_TEST((w.nodes["hz-2"].core->boot_id() != old_boot));
  w.Run(5);  // one interval
  // Its peers hear the new boot (their certificate of hz-2 is still cached)...
  for (const auto& other : {"hz-1", "hz-3"}) {
    BOOST_TEST(w.nodes[other].core->status().peers_heard == 2u, other);
  }
  // ... and it hears them: their certificates came with its requests, and the
  // heartbeats that waited for them counted at once.
  BOOST_TEST(w.nodes["hz-2"].core->status().peers_heard == 2u);
  BOOST_TEST(w.nodes["hz-2"].core->stats().certificate_requests_sent.load() >= 1);
  // Its first heartbeats were verified (no verified one of theirs to sample from).
  BOOST_TEST(w.nodes["hz-2"].core->status().peers_fresh == 2u);
}

BOOST_AUTO_TEST_CASE(OnlyWhatDecisionsRestOnIsVerified) {
  World w;
  w.Run(65);
  // Everyone reachable: after the first heartbeats, signatures are checked for
  // the leader's heartbeats and once per 30 s per member.
  const std::string leader = w.Leaders().at(0);
  for (auto& [name, n] : w.nodes) {
    const auto& v = n.core->verifier_stats();
    const int64_t accepted = v.heartbeats_accepted.load(), heard = v.heartbeats_heard.load();
    BOOST_TEST(accepted + heard >= 24);  // 2 peers x 12-13 rounds
    // Of a non-leader peer's 13 heartbeats, 3 are checked (at 0, 30, 60 s).
    if (name == leader) {
      BOOST_TEST(accepted <= 6, name << ": " << accepted << " verified");
      BOOST_TEST(heard >= 18, name << ": " << heard << " heard");
    } else {
      BOOST_TEST(heard >= 9, name << ": " << heard << " heard");
    }
    BOOST_TEST(n.core->status().peers_heard == 2u);
  }
  // A member that says "cut off" is verified at every heartbeat.
  const std::string member = OtherThan(leader);
  w.cloud.cut.insert(member);
  w.Run(2);
  const int64_t before = w.nodes[leader].core->verifier_stats().heartbeats_accepted.load();
  w.Run(20);
  BOOST_TEST(w.nodes[leader].core->verifier_stats().heartbeats_accepted.load() - before >= 4);
  BOOST_TEST(w.nodes[leader].core->status().peers_fresh >= 1u);
}

BOOST_FIXTURE_TEST_CASE(AgentCoreValidatesOptions, LoneNode) {
  pa::AgentOptions o;
  o.reachability.request_timeout_us = 10 * kS;  // = renew deadline
  BOOST_TEST(pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, o).status().code() ==
             absl::StatusCode::kInvalidArgument);
  o = pa::AgentOptions{};
  o.freshness.heartbeat_interval_us = 0;
  BOOST_TEST(!pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, o).ok());
  BOOST_TEST(!pa::AgentCore::New(nullptr, TestPki::Get().ca(), &clock, &fake, nullptr, {}).ok());
  BOOST_TEST(pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, {}).ok());
}
