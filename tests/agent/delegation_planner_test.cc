#define BOOST_TEST_MODULE delegation_planner
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/delegation_planner.h"
#include "base/clock.h"
#include "tests/agent/agent_testing.h"
#include "tests/agent/server_refusal.h"

namespace pa = poolcoord::agent;
namespace pe = poolcoord::base;
using pa::testing::Boot;
using Kind = pa::DelegationAction::Kind;
using Outcome = pa::DelegationOutcome;
using std::chrono::seconds;

namespace {

constexpr int64_t kS = 1'000'000;

struct World {
  pe::FakeClock clock;
  pa::PeerTable peers{{.heartbeat_interval_us = 5 * kS, .margin_us = 2 * kS}};
  pa::PoolView pool{"hangzhou", "hz-1", {{"hz-1", "a"}, {"hz-2", "b"}, {"hz-3", "c"}}};
  pa::DelegationPlanner planner{{.lease_duration_seconds = 7, .refusal_backoff_us = 30 * kS,
                                 .max_writes_per_evidence = 2}};
  std::map<std::string, uint64_t> seq;

  World() {
    clock.Advance(seconds(1000));
    planner.StartLeading();
  }
  // A verified heartbeat of `node` arrives now.
  std::shared_ptr<const pa::VerifiedHeartbeat> Hear(const std::string& node, bool reachable,
                                                    pa::BootId boot = Boot(1)) {
    auto v = std::make_shared<pa::VerifiedHeartbeat>();
    v->signed_heartbeat.heartbeat.node = node;
    v->signed_heartbeat.heartbeat.pool = "hangzhou";
    v->signed_heartbeat.heartbeat.boot_id = boot;
    v->signed_heartbeat.heartbeat.sequence = ++seq[node];
    v->signed_heartbeat.heartbeat.cloud_reachable = reachable;
    v->arrival_mono_us = clock.MonotonicMicros();
    v->arrival_wall_us = clock.NowMicros();
    peers.Record(v, true);
    return v;
  }
  std::vector<pa::DelegationAction> Plan() { return planner.Plan(peers, pool, clock.MonotonicMicros()); }
  // Plans exactly one action and returns it.
  pa::DelegationAction One() {
    auto actions = Plan();
    BOOST_REQUIRE_EQUAL(actions.size(), 1u);
    return actions[0];
  }
  bool Answer(const pa::DelegationAction& a, Outcome o, const std::string& rv = "") {
    return planner.OnResult(a, o, rv, clock.MonotonicMicros());
  }
  // Read (404) then create, both answered OK: the member is delegated.
  void Delegate(const std::string& node) {
    auto read = One();
    BOOST_REQUIRE(read.kind == Kind::kRead);
    Answer(read, Outcome::kNotFound);
    auto create = One();
    BOOST_REQUIRE(create.kind == Kind::kCreate);
    Answer(create, Outcome::kOk, "rv1");
  }
  // `node` is heard cut off and delegated; 5 s later it is heard again.
  void DelegatedThenHeard(const std::string& node, bool reachable) {
    Hear(node, false);
    Delegate(node);
    clock.Advance(seconds(5));
    Hear(node, reachable);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(NothingWhenNotLeading) {
  World w;
  w.planner.StopLeading();
  w.Hear("hz-2", false);
  BOOST_TEST(w.Plan().empty());
  BOOST_TEST(!w.planner.leading());
}

BOOST_AUTO_TEST_CASE(CutOffMemberIsWrittenOncePerHeartbeat) {
  World w;
  auto hb = w.Hear("hz-2", false);
  w.Hear("hz-3", true);  // reaches the cloud: nothing to do
  auto read = w.One();
  BOOST_TEST(read.node == "hz-2");
  BOOST_TEST((read.kind == Kind::kRead));
  BOOST_TEST(w.Plan().empty());  // one request in flight per member
  w.Answer(read, Outcome::kNotFound);
  auto create = w.One();
  BOOST_TEST((create.kind == Kind::kCreate));
  BOOST_TEST(create.renew_time_us == hb->arrival_wall_us);  // the leader's time of that heartbeat
  BOOST_TEST(create.lease_duration_seconds == 7);
  BOOST_TEST(create.evidence == hb);
  BOOST_TEST(create.evidence_deadline_mono_us == hb->arrival_mono_us + 7 * kS);
  BOOST_TEST(!w.Answer(create, Outcome::kOk, "rv1"));
  BOOST_TEST(w.Plan().empty());  // written; the same evidence is not written again
  w.clock.Advance(seconds(2));
  BOOST_TEST(w.Plan().empty());
  // The next heartbeat: an update with the version written.
  w.clock.Advance(seconds(3));
  auto hb2 = w.Hear("hz-2", false);
  auto update = w.One();
  BOOST_TEST((update.kind == Kind::kUpdate));
  BOOST_TEST(update.resource_version == "rv1");
  BOOST_TEST(update.renew_time_us == hb2->arrival_wall_us);
  w.Answer(update, Outcome::kOk, "rv2");
  BOOST_TEST(w.planner.stats().written.load() == 2);
  BOOST_TEST(w.planner.stats().delegated.load() == 1);
}

BOOST_AUTO_TEST_CASE(StopsWhenTheEvidenceStops) {
  World w;
  w.Hear("hz-2", false);
  w.Delegate("hz-2");
  // hz-2 dies: no heartbeat. Nothing is written while the last one is fresh
  // (it is written already), and nothing after it went stale.
  for (int i = 0; i < 20; ++i) {
    w.clock.Advance(seconds(1));
    BOOST_TEST(w.Plan().empty());
  }
  BOOST_TEST(w.planner.stats().written.load() == 1);
  BOOST_TEST(w.planner.stats().deleted.load() == 0);  // it runs out on its own
}

BOOST_AUTO_TEST_CASE(StaleEvidenceIsNeverWritten) {
  World w;
  w.Hear("hz-2", false);
  w.clock.Advance(seconds(7));  // interval + margin
  BOOST_TEST(w.Plan().empty());
  // Planned while fresh, but the executor took too long: reported skipped.
  World v;
  v.Hear("hz-2", false);
  auto read = v.One();
  v.Answer(read, Outcome::kNotFound);
  auto create = v.One();
  v.clock.Advance(seconds(7));
  BOOST_TEST(v.clock.MonotonicMicros() >= create.evidence_deadline_mono_us);
  v.Answer(create, Outcome::kSkipped);
  BOOST_TEST(v.planner.stats().skipped_stale.load() == 1);
  BOOST_TEST(v.Plan().empty());
}

BOOST_AUTO_TEST_CASE(RenewTimeNeverGoesBackWithinATerm) {
  World w;
  auto hb = w.Hear("hz-2", false);
  w.Delegate("hz-2");
  // The leader's wall clock steps back a minute between two heartbeats.
  w.clock.StepWall(seconds(-60));
  w.clock.Advance(seconds(5));
  auto hb2 = w.Hear("hz-2", false);
  BOOST_TEST(hb2->arrival_wall_us < hb->arrival_wall_us);
  auto update = w.One();
  BOOST_TEST(update.renew_time_us == hb->arrival_wall_us + 1);
  // A new term starts fresh: the clock's own time again.
  w.planner.StartLeading();
  w.clock.Advance(seconds(1));
  auto hb3 = w.Hear("hz-2", false);
  auto read = w.One();
  w.Answer(read, Outcome::kOk, "rv9");
  auto again = w.One();
  BOOST_TEST((again.kind == Kind::kUpdate));
  BOOST_TEST(again.resource_version == "rv9");
  BOOST_TEST(again.renew_time_us == hb3->arrival_wall_us);
}

BOOST_AUTO_TEST_CASE(DeletedWhenTheMemberReachesTheCloud) {
  World w;
  w.DelegatedThenHeard("hz-2", true);
  auto del = w.One();
  BOOST_TEST((del.kind == Kind::kDelete));
  BOOST_TEST(del.resource_version == "rv1");
  w.Answer(del, Outcome::kOk);
  BOOST_TEST(w.planner.stats().deleted.load() == 1);
  BOOST_TEST(w.planner.stats().delegated.load() == 0);
  w.clock.Advance(seconds(5));
  w.Hear("hz-2", true);
  BOOST_TEST(w.Plan().empty());
  // A member this term never delegated: nothing to delete.
  w.Hear("hz-3", true);
  BOOST_TEST(w.Plan().empty());
}

BOOST_AUTO_TEST_CASE(DeleteOfAnObjectAlreadyGone) {
  World w;
  w.DelegatedThenHeard("hz-2", true);
  auto del = w.One();
  w.Answer(del, Outcome::kNotFound);
  w.clock.Advance(seconds(5));
  w.Hear("hz-2", true);
  BOOST_TEST(w.Plan().empty());
}

BOOST_AUTO_TEST_CASE(ConflictRereadsThenOneInformedRetry) {
  World w;
  w.DelegatedThenHeard("hz-2", false);
  auto update = w.One();
  w.Answer(update, Outcome::kConflict);
  BOOST_TEST(w.planner.stats().refused_conflict.load() == 1);
  auto reread = w.One();
  BOOST_TEST((reread.kind == Kind::kRead));
  w.Answer(reread, Outcome::kOk, "rv7");
  auto retry = w.One();
  BOOST_TEST((retry.kind == Kind::kUpdate));
  BOOST_TEST(retry.resource_version == "rv7");
  w.Answer(retry, Outcome::kConflict);
  // Two writes for this heartbeat: nothing more until the next one.
  BOOST_TEST(w.Plan().empty());
  w.clock.Advance(seconds(1));
  BOOST_TEST(w.Plan().empty());
  w.clock.Advance(seconds(4));
  w.Hear("hz-2", false);
  BOOST_TEST((w.One().kind == Kind::kRead));
}

BOOST_AUTO_TEST_CASE(ForbiddenStepsDown) {
  World w;
  w.Hear("hz-2", false);
  w.Hear("hz-3", false);
  auto actions = w.Plan();
  BOOST_REQUIRE_EQUAL(actions.size(), 2u);
  BOOST_TEST(w.Answer(actions[0], Outcome::kForbidden));  // step down
  BOOST_TEST(!w.planner.leading());
  BOOST_TEST(w.planner.stats().step_downs.load() == 1);
  // The other answer, arriving late, changes nothing; nothing more is planned.
  BOOST_TEST(!w.Answer(actions[1], Outcome::kNotFound));
  w.clock.Advance(seconds(5));
  w.Hear("hz-2", false);
  BOOST_TEST(w.Plan().empty());
  // 401 is taken the same way.
  BOOST_TEST((pa::OutcomeFromStatus(absl::UnauthenticatedError("x")) == Outcome::kForbidden));
}

// The server's refusals of a leader's write when the PoolLease is free for it
// to take end the term without a step-down; those naming a live holder, or a
// writer of another pool, step down. Each refusal is the real lease rules'.
BOOST_AUTO_TEST_CASE(ARefusalWithThePoolLeaseFreeEndsTheTermWithoutAStepDown) {
  pe::FakeClock clock;
  clock.Advance(seconds(1000));
  const int64_t now = clock.MonotonicMicros();
  const std::map<std::string, std::vector<std::string>> pools{{"hangzhou", {"hz-1", "hz-2", "hz-3"}},
                                                              {"suzhou", {"sz-1"}}};
  auto answer = [&](const std::string& writer, poolcoord::store::ObjectPtr pool_lease) {
    return pa::testing::ServerAnswerToDelegatedLeaseWrite(&clock, pools, writer, "hz-2", "hangzhou",
                                                          std::move(pool_lease));
  };
  using pa::testing::ServerPoolLease;
  struct Case {
    const char* what;
    absl::Status answer;
    Outcome want;
  };
  const Case cases[] = {
      // A server restarted on its memory store: the PoolLease is gone.
      {"no PoolLease", answer("hz-1", nullptr), Outcome::kTermLapsed},
      {"released", answer("hz-1", ServerPoolLease("hangzhou", "", 15, now - 1 * kS)),
       Outcome::kTermLapsed},
      {"another's, expired", answer("hz-1", ServerPoolLease("hangzhou", "hz-3", 15, now - 20 * kS)),
       Outcome::kTermLapsed},
      {"its own, expired", answer("hz-1", ServerPoolLease("hangzhou", "hz-1", 15, now - 20 * kS)),
       Outcome::kTermLapsed},
      // A live holder leads: a deposed leader steps down.
      {"another's, live", answer("hz-1", ServerPoolLease("hangzhou", "hz-3", 15, now - 1 * kS)),
       Outcome::kForbidden},
      // Membership moved: not this pool's to lead, whatever its PoolLease.
      {"writer of another pool, no PoolLease", answer("sz-1", nullptr), Outcome::kForbidden},
      {"writer of another pool, released",
       answer("sz-1", ServerPoolLease("hangzhou", "", 15, now - 1 * kS)), Outcome::kForbidden},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what << ": " << c.answer) {
      BOOST_TEST(poolcoord::cloud::IsForbidden(c.answer));
      BOOST_TEST((pa::OutcomeFromStatus(c.answer) == c.want));
      BOOST_TEST(pa::TermLapsed(c.answer) == (c.want == Outcome::kTermLapsed));
    }
  }
  // The holder's own live lease is admitted (the rules above are the writer's).
  BOOST_TEST(answer("hz-1", ServerPoolLease("hangzhou", "hz-1", 15, now - 1 * kS)).ok());
  // A 403 of another kind (the authorizer's, a fake's) is no lapse.
  BOOST_TEST(!pa::TermLapsed(absl::PermissionDeniedError("not the pool's leader")));
  BOOST_TEST(!pa::TermLapsed(absl::NotFoundError("\"hz-1\" may create poollease \"hangzhou\"")));

  // The planner stops either way; only the lapse is counted apart.
  World w;
  w.Hear("hz-2", false);
  auto actions = w.Plan();
  BOOST_REQUIRE_EQUAL(actions.size(), 1u);
  BOOST_TEST(w.Answer(actions[0], Outcome::kTermLapsed));
  BOOST_TEST(!w.planner.leading());
  BOOST_TEST(w.planner.stats().lapsed_terms.load() == 1);
  BOOST_TEST(w.planner.stats().step_downs.load() == 0);
  BOOST_TEST(w.planner.stats().refused_forbidden.load() == 1);
}

BOOST_AUTO_TEST_CASE(AnswersOfAnEarlierTermAreIgnored) {
  World w;
  w.Hear("hz-2", false);
  auto read = w.One();
  w.planner.StartLeading();  // lost and won again meanwhile
  BOOST_TEST(!w.Answer(read, Outcome::kForbidden));
  BOOST_TEST(w.planner.leading());
  auto fresh_read = w.One();  // the new term reads again
  BOOST_TEST((fresh_read.kind == Kind::kRead));
}

BOOST_AUTO_TEST_CASE(InvalidBacksOff) {
  World w;
  w.Hear("hz-2", false);
  auto read = w.One();
  w.Answer(read, Outcome::kNotFound);
  auto create = w.One();
  w.Answer(create, Outcome::kInvalid);
  BOOST_TEST(w.planner.stats().refused_invalid.load() == 1);
  for (int i = 0; i < 5; ++i) {
    w.clock.Advance(seconds(5));
    w.Hear("hz-2", false);
    BOOST_TEST(w.Plan().empty());
  }
  w.clock.Advance(seconds(5));  // 30 s after the refusal
  w.Hear("hz-2", false);
  BOOST_TEST(w.Plan().size() == 1u);
}

BOOST_AUTO_TEST_CASE(UnavailableIsNotRetriedBlindly) {
  World w;
  w.DelegatedThenHeard("hz-2", false);
  auto update = w.One();
  w.Answer(update, Outcome::kUnavailable);
  BOOST_TEST(w.planner.stats().errors.load() == 1);
  BOOST_TEST(w.Plan().empty());
  w.clock.Advance(seconds(2));
  BOOST_TEST(w.Plan().empty());
  // Next heartbeat: the outcome was unknown, so the version is read first.
  w.clock.Advance(seconds(3));
  w.Hear("hz-2", false);
  BOOST_TEST((w.One().kind == Kind::kRead));
}

BOOST_AUTO_TEST_CASE(AlreadyExistsRereads) {
  World w;
  w.Hear("hz-2", false);
  auto read = w.One();
  w.Answer(read, Outcome::kNotFound);
  auto create = w.One();
  w.Answer(create, Outcome::kAlreadyExists);
  auto reread = w.One();
  BOOST_TEST((reread.kind == Kind::kRead));
  w.Answer(reread, Outcome::kOk, "rv3");
  auto update = w.One();
  BOOST_TEST((update.kind == Kind::kUpdate));
  BOOST_TEST(update.resource_version == "rv3");
}

BOOST_AUTO_TEST_CASE(UpdateOfAVanishedObjectCreates) {
  World w;
  w.DelegatedThenHeard("hz-2", false);
  auto update = w.One();
  w.Answer(update, Outcome::kNotFound);  // collected, or deleted by the node
  auto create = w.One();
  BOOST_TEST((create.kind == Kind::kCreate));
  BOOST_TEST(create.resource_version.empty());
}

BOOST_AUTO_TEST_CASE(NeverTheLeaderItselfNorStrangers) {
  World w;
  w.Hear("hz-1", false);  // cannot come from the verifier; planned for nobody anyway
  w.Hear("bj-1", false);
  BOOST_TEST(w.Plan().empty());
}

BOOST_AUTO_TEST_CASE(MembersThatLeaveAreForgotten) {
  World w;
  w.Hear("hz-2", false);
  w.Delegate("hz-2");
  BOOST_TEST(w.planner.stats().delegated.load() == 1);
  w.pool.members.erase("hz-2");
  BOOST_TEST(w.Plan().empty());
  BOOST_TEST(w.planner.stats().delegated.load() == 0);
}

BOOST_AUTO_TEST_CASE(OutcomeMapping) {
  BOOST_TEST((pa::OutcomeFromStatus(absl::OkStatus()) == Outcome::kOk));
  BOOST_TEST((pa::OutcomeFromStatus(absl::NotFoundError("")) == Outcome::kNotFound));
  BOOST_TEST((pa::OutcomeFromStatus(absl::AbortedError("")) == Outcome::kConflict));
  BOOST_TEST((pa::OutcomeFromStatus(absl::AlreadyExistsError("")) == Outcome::kAlreadyExists));
  BOOST_TEST((pa::OutcomeFromStatus(absl::PermissionDeniedError("")) == Outcome::kForbidden));
  BOOST_TEST((pa::OutcomeFromStatus(absl::InvalidArgumentError("")) == Outcome::kInvalid));
  BOOST_TEST((pa::OutcomeFromStatus(absl::UnavailableError("")) == Outcome::kUnavailable));
  BOOST_TEST((pa::OutcomeFromStatus(absl::DeadlineExceededError("")) == Outcome::kUnavailable));
  BOOST_TEST((pa::OutcomeFromStatus(absl::ResourceExhaustedError("")) == Outcome::kUnavailable));
}

// Verifiable delegation, the failover input: when a successor takes
// the PoolLease, the heartbeats it holds arrived before its term (the previous
// leader may have sent them already: a replay) and carry the previous leader's
// challenge (stale by the takeover). They are withheld, never sent to be
// refused, and so is any heartbeat whose challenge is not usable now; the
// member's next heartbeat is planned as usual.
BOOST_AUTO_TEST_CASE(AProofTheServerWouldRefuseIsWithheld) {
  World w;
  const int64_t real_now = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  auto cert = pa::NodeCertificate::Verify(pa::testing::TestPki::Get().Identity("hz-2").certificate_der(),
                                          *pa::testing::TestPki::Get().ca(), real_now);
  BOOST_REQUIRE(cert.certificate != nullptr);
  auto hear = [&](const std::string& challenge) {
    auto v = std::const_pointer_cast<pa::VerifiedHeartbeat>(w.Hear("hz-2", false));
    v->signed_heartbeat.heartbeat.challenge = challenge;
    v->certificate = cert.certificate;
    return v;
  };
  const std::set<std::string> usable = {"new"};
  auto plan = [&] { return w.planner.Plan(w.peers, w.pool, w.clock.MonotonicMicros(), &usable); };

  hear("new");  // heard before the term began
  w.clock.Advance(seconds(1));
  w.planner.StartLeading(w.clock.MonotonicMicros());
  BOOST_TEST(plan().empty());
  BOOST_TEST(w.planner.stats().withheld.load() == 1);
  BOOST_TEST(plan().empty());  // counted once per heartbeat
  BOOST_TEST(w.planner.stats().withheld.load() == 1);

  w.clock.Advance(seconds(1));
  hear("old");  // in the term, but the previous leader's challenge
  BOOST_TEST(plan().empty());
  BOOST_TEST(w.planner.stats().withheld.load() == 2);

  w.clock.Advance(seconds(1));
  hear("new");
  auto actions = plan();
  BOOST_REQUIRE_EQUAL(actions.size(), 1u);
  BOOST_TEST((actions[0].kind == Kind::kRead));
  w.Answer(actions[0], Outcome::kNotFound);
  actions = plan();
  BOOST_REQUIRE_EQUAL(actions.size(), 1u);
  BOOST_TEST((actions[0].kind == Kind::kCreate));
  BOOST_TEST(actions[0].evidence->heartbeat().challenge == "new");
  BOOST_TEST(w.planner.stats().withheld.load() == 2);

  w.Answer(actions[0], Outcome::kOk, "rv1");
  // No challenge at all (a member that has not heard one yet): "missing".
  w.clock.Advance(seconds(1));
  hear("");
  BOOST_TEST(plan().empty());
  BOOST_TEST(w.planner.stats().withheld.load() == 3);

  // Without challenges from the server (no filter), a heartbeat goes as before.
  w.clock.Advance(seconds(1));
  hear("old");
  actions = w.planner.Plan(w.peers, w.pool, w.clock.MonotonicMicros(), nullptr);
  BOOST_REQUIRE_EQUAL(actions.size(), 1u);
  BOOST_TEST((actions[0].kind == Kind::kUpdate));
}
