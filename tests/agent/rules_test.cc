// The freshness rule (peer_table.h), the replay window (replay_window.h) and
// "does the cloud see me?" (cloud_reachability.h), on a fake clock.
#define BOOST_TEST_MODULE agent_rules
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>

#include "agent/cloud_reachability.h"
#include "agent/peer_table.h"
#include "agent/replay_window.h"
#include "base/clock.h"
#include "tests/agent/agent_testing.h"

namespace pa = poolcoord::agent;
namespace pe = poolcoord::base;
using pa::testing::Boot;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr int64_t kS = 1'000'000;

std::shared_ptr<const pa::VerifiedHeartbeat> Hb(const pe::Clock& clock, const std::string& node,
                                                 uint64_t seq, bool reachable = false,
                                                 bool leader = false, std::string challenge = "") {
  auto v = std::make_shared<pa::VerifiedHeartbeat>();
  v->signed_heartbeat.heartbeat.node = node;
  v->signed_heartbeat.heartbeat.pool = "hangzhou";
  v->signed_heartbeat.heartbeat.sequence = seq;
  v->signed_heartbeat.heartbeat.cloud_reachable = reachable;
  v->signed_heartbeat.heartbeat.leader = leader;
  v->signed_heartbeat.heartbeat.challenge = std::move(challenge);
  v->arrival_mono_us = clock.MonotonicMicros();
  v->arrival_wall_us = clock.NowMicros();
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Freshness)

BOOST_AUTO_TEST_CASE(YoungerThanIntervalPlusMargin) {
  pe::FakeClock clock;
  pa::PeerTable peers({.heartbeat_interval_us = 5 * kS, .margin_us = 2 * kS});
  clock.Advance(seconds(10));
  peers.Record(Hb(clock, "hz-2", 1), true);
  const int64_t arrival = clock.MonotonicMicros();
  BOOST_TEST(peers.IsFresh("hz-2", arrival));
  BOOST_TEST(peers.IsFresh("hz-2", arrival + 7 * kS - 1));
  BOOST_TEST(!peers.IsFresh("hz-2", arrival + 7 * kS));
  BOOST_TEST(!peers.IsFresh("hz-3", arrival));
  BOOST_TEST(peers.CountFresh(arrival + 7 * kS - 1) == 1u);
  BOOST_TEST(peers.CountFresh(arrival + 7 * kS) == 0u);
}

BOOST_AUTO_TEST_CASE(OnlyTheMonotonicClockCounts) {
  pe::FakeClock clock;
  pa::PeerTable peers({.heartbeat_interval_us = 5 * kS, .margin_us = 2 * kS});
  peers.Record(Hb(clock, "hz-2", 1), true);
  // The wall clock steps an hour back (or forward): freshness does not move.
  clock.StepWall(std::chrono::hours(-1));
  clock.Advance(seconds(6));
  BOOST_TEST(peers.IsFresh("hz-2", clock.MonotonicMicros()));
  clock.StepWall(std::chrono::hours(2));
  clock.Advance(seconds(1));
  BOOST_TEST(!peers.IsFresh("hz-2", clock.MonotonicMicros()));
}

BOOST_AUTO_TEST_CASE(EachHeartbeatRenewsTheEvidence) {
  pe::FakeClock clock;
  pa::PeerTable peers;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    peers.Record(Hb(clock, "hz-2", seq), true);
    clock.Advance(seconds(5));
    BOOST_TEST(peers.IsFresh("hz-2", clock.MonotonicMicros()));
  }
  // One lost heartbeat: stale from interval + margin after the last one.
  clock.Advance(seconds(2));
  BOOST_TEST(!peers.IsFresh("hz-2", clock.MonotonicMicros()));
  BOOST_TEST(peers.Latest("hz-2")->heartbeat().sequence == 10u);
}

BOOST_AUTO_TEST_CASE(AnOlderHeartbeatChangesNothing) {
  pe::FakeClock clock;
  pa::PeerTable peers;
  peers.Record(Hb(clock, "hz-2", 5, /*reachable=*/false), true);
  clock.Advance(seconds(6));
  peers.Record(Hb(clock, "hz-2", 4, /*reachable=*/true), /*newest=*/false);
  BOOST_TEST(peers.Latest("hz-2")->heartbeat().sequence == 5u);
  BOOST_TEST(!peers.Latest("hz-2")->heartbeat().cloud_reachable);
  clock.Advance(seconds(1));
  BOOST_TEST(!peers.IsFresh("hz-2", clock.MonotonicMicros()));
}

BOOST_AUTO_TEST_CASE(LeaderChallengeIsRelayed) {
  pe::FakeClock clock;
  pa::PeerTable peers;
  BOOST_TEST(peers.LeaderChallenge() == "");
  BOOST_TEST(peers.LeaderChallengeSource() == "");
  BOOST_TEST(peers.LeaderChallengeSince() == INT64_MIN);
  peers.Record(Hb(clock, "hz-2", 1, true, /*leader=*/true, "c1"), true);
  BOOST_TEST(peers.LeaderChallenge() == "c1");
  const int64_t first = clock.MonotonicMicros();
  BOOST_TEST(peers.LeaderChallengeSince() == first);
  const std::string hz2 = peers.LeaderChallengeSource();
  BOOST_TEST(hz2.rfind("hz-2/", 0) == 0);
  // The same challenge again: held since its first arrival.
  clock.Advance(seconds(1));
  peers.Record(Hb(clock, "hz-2", 2, true, true, "c1"), true);
  BOOST_TEST(peers.LeaderChallengeSince() == first);
  // A member's heartbeat (not leader) does not set it, even with a challenge.
  clock.Advance(seconds(1));
  peers.Record(Hb(clock, "hz-3", 1, false, false, "bogus"), true);
  BOOST_TEST(peers.LeaderChallenge() == "c1");
  // A new leader's challenge replaces it, and names its relayer (a member
  // heartbeats at once for a new leader's challenge: AgentCore).
  clock.Advance(seconds(1));
  peers.Record(Hb(clock, "hz-3", 2, true, true, "c2"), true);
  BOOST_TEST(peers.LeaderChallenge() == "c2");
  BOOST_TEST(peers.LeaderChallengeSince() == clock.MonotonicMicros());
  BOOST_TEST(peers.LeaderChallengeSource() != hz2);
  BOOST_TEST(peers.LeaderChallengeSource().rfind("hz-3/", 0) == 0);
}

BOOST_AUTO_TEST_CASE(RetainDropsFormerMembers) {
  pe::FakeClock clock;
  pa::PeerTable peers;
  peers.Record(Hb(clock, "hz-2", 1), true);
  peers.Record(Hb(clock, "hz-3", 1), true);
  pa::PoolView pool{"hangzhou", "hz-1", {{"hz-1", "a"}, {"hz-2", "b"}}};
  peers.Retain(pool);
  BOOST_TEST(peers.Latest("hz-2") != nullptr);
  BOOST_TEST(peers.Latest("hz-3") == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Replay)

BOOST_AUTO_TEST_CASE(Window) {
  pa::ReplayWindow w;
  BOOST_TEST(w.IsNew(Boot(1), 1));
  BOOST_TEST(w.Accept(Boot(1), 1, 1));
  BOOST_TEST(!w.IsNew(Boot(1), 1));
  BOOST_TEST(w.IsNew(Boot(1), 2));
  BOOST_TEST(w.Accept(Boot(1), 70, 2));
  // 7..69 within the window (70 - 63 = 7) and unseen; 6 is below it.
  BOOST_TEST(w.IsNew(Boot(1), 7));
  BOOST_TEST(!w.IsNew(Boot(1), 6));
  BOOST_TEST(!w.IsNew(Boot(1), 1));
  BOOST_TEST(!w.Accept(Boot(1), 7, 3));  // accepted, not the newest
  BOOST_TEST(!w.IsNew(Boot(1), 7));
  BOOST_TEST(w.Accept(Boot(1), 71, 4));
  BOOST_TEST(!w.IsNew(Boot(1), 7));  // bit moved with the window
  BOOST_TEST(!w.IsNew(Boot(1), 70));
  BOOST_TEST(w.IsNew(Boot(1), 69));
  // A jump of more than the window clears it.
  BOOST_TEST(w.Accept(Boot(1), 1000, 5));
  BOOST_TEST(!w.IsNew(Boot(1), 1000));
  BOOST_TEST(w.IsNew(Boot(1), 999));
  BOOST_TEST(!w.IsNew(Boot(1), 936));
}

BOOST_AUTO_TEST_CASE(BootsAreRememberedAndBounded) {
  pa::ReplayWindow w;
  uint64_t tick = 0;
  w.Accept(Boot(1), 5, ++tick);
  for (uint8_t b = 2; b <= pa::ReplayWindow::kMaxBoots; ++b) {
    BOOST_TEST(w.Accept(Boot(b), 1, ++tick));
  }
  BOOST_TEST(!w.IsNew(Boot(1), 5));  // still remembered
  // Boot 1 in use again, then one more new boot: boot 2 (least recently used) goes.
  w.Accept(Boot(1), 6, ++tick);
  w.Accept(Boot(99), 1, ++tick);
  BOOST_TEST(!w.IsNew(Boot(1), 6));
  BOOST_TEST(w.IsNew(Boot(2), 1));  // forgotten: replayable once (replay_window.h)
  BOOST_TEST(!w.IsNew(Boot(3), 1));
}

BOOST_AUTO_TEST_CASE(ReplaysNeverSilenceTheCurrentBoot) {
  pa::ReplayWindow w;
  uint64_t tick = 0;
  w.Accept(Boot(1), 100, ++tick);
  // An attacker replays recordings of many boots the receiver never saw.
  for (uint8_t b = 10; b < 40; ++b) w.Accept(Boot(b), 1, ++tick);
  // The live sender's next heartbeat is still accepted as its newest.
  BOOST_TEST(w.IsNew(Boot(1), 101));
  BOOST_TEST(w.Accept(Boot(1), 101, ++tick));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(CloudSeesMe)

pa::ReachabilityOptions Options() {
  return {.probe_period_us = 5 * kS, .request_timeout_us = 3 * kS,
          .kubelet_return_timeout_us = 40 * kS};
}

BOOST_AUTO_TEST_CASE(NothingAnsweredYet) {
  pa::CloudReachability r(Options());
  BOOST_TEST(!r.Reachable(0));
  BOOST_TEST(!r.Seen(0));
}

BOOST_AUTO_TEST_CASE(AnswersKeepItReachableForProbePlusTimeout) {
  pa::CloudReachability r(Options());
  r.OnRequest(10 * kS, true);
  r.OnNodeLease(10 * kS, {.exists = true, .forwarded = false});
  BOOST_TEST(r.Reachable(10 * kS));
  BOOST_TEST(r.Seen(10 * kS));
  BOOST_TEST(r.Seen(18 * kS - 1));
  BOOST_TEST(!r.Seen(18 * kS));  // no answer for probe period + timeout
  BOOST_TEST(!r.Reachable(18 * kS));
}

BOOST_AUTO_TEST_CASE(AFailedRequestCutsOffAtOnce) {
  pa::CloudReachability r(Options());
  r.OnRequest(10 * kS, true);
  r.OnRequest(12 * kS, false);  // timeout or transport error
  BOOST_TEST(!r.Reachable(12 * kS));
  BOOST_TEST(!r.Seen(12 * kS));
  r.OnRequest(13 * kS, true);
  BOOST_TEST(r.Reachable(13 * kS));
  BOOST_TEST(r.reachable_since_us() == 13 * kS);
}

BOOST_AUTO_TEST_CASE(ForwardedLeaseWaitsForTheKubelet) {
  pa::CloudReachability r(Options());
  // The partition heals at 100 s; the Lease still carries the forwarder's renewal.
  for (int64_t t = 100; t < 140; t += 5) {
    r.OnRequest(t * kS, true);
    r.OnNodeLease(t * kS, {.exists = true, .forwarded = true});
    BOOST_TEST(r.Reachable(t * kS));
    BOOST_TEST(!r.Seen(t * kS), "at " << t << " s");
  }
  // The kubelet renews on its own (renewTime ≠ the forwarder's): seen at once.
  r.OnRequest(141 * kS, true);
  r.OnNodeLease(141 * kS, {.exists = true, .forwarded = false});
  BOOST_TEST(r.Seen(141 * kS));
}

BOOST_AUTO_TEST_CASE(AKubeletThatDoesNotComeBackIsLeftToTheCloud) {
  pa::CloudReachability r(Options());
  for (int64_t t = 100; t <= 140; t += 5) {
    r.OnRequest(t * kS, true);
    r.OnNodeLease(t * kS, {.exists = true, .forwarded = true});
  }
  BOOST_TEST(!r.Seen(139 * kS));
  BOOST_TEST(r.Seen(140 * kS));  // 40 s of working link
}

BOOST_AUTO_TEST_CASE(ABreakRestartsTheKubeletWait) {
  pa::CloudReachability r(Options());
  r.OnRequest(100 * kS, true);
  r.OnNodeLease(100 * kS, {.exists = true, .forwarded = true});
  r.OnRequest(120 * kS, true);
  r.OnRequest(125 * kS, false);  // the link flaps
  r.OnRequest(130 * kS, true);
  r.OnNodeLease(130 * kS, {.exists = true, .forwarded = true});
  BOOST_TEST(!r.Seen(141 * kS - 1));
  for (int64_t t = 135; t <= 170; t += 5) r.OnRequest(t * kS, true);
  BOOST_TEST(!r.Seen(170 * kS - 1));
  BOOST_TEST(r.Seen(170 * kS));
  // A gap of answers longer than probe + timeout is a break too.
  r.OnRequest(180 * kS, true);
  BOOST_TEST(r.reachable_since_us() == 180 * kS);
}

BOOST_AUTO_TEST_CASE(NoLeaseOrUnreadableLease) {
  pa::CloudReachability r(Options());
  r.OnRequest(1 * kS, true);
  r.OnNodeLease(1 * kS, {.exists = false, .forwarded = false});
  BOOST_TEST(r.Seen(1 * kS));
  // A 403 on the Lease read still proves the link; nothing is known of the Lease.
  pa::CloudReachability r2(Options());
  r2.OnRequest(1 * kS, true);
  BOOST_TEST(r2.Seen(1 * kS));
}

BOOST_AUTO_TEST_SUITE_END()
