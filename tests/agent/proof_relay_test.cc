// The agent's side of verifiable delegation (issue 15,
// docs/verifiable-delegation.md): the leader reads the pool's challenge from its
// PoolLease answers and relays it, members sign it into their heartbeats, the
// leader's DelegatedLease writes carry the member's heartbeat as received and
// its certificate as spec.proof, and a refused proof skips that member without
// stepping down. Over the agent core's test world, whose cloud models the
// server's challenges and proof check.
#define BOOST_TEST_MODULE proof_relay
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "agent/agent_core.h"
#include "agent/delegation_planner.h"
#include "agent/kube_agent_cloud.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "election/pool_lease_lock.h"
#include "rapidjson/document.h"
#include "tests/agent/agent_testing.h"
#include "tests/agent/agent_world.h"
#include "tests/cloud_fakes.h"

namespace pa = poolcoord::agent;
namespace pc = poolcoord::cloud;
namespace pe = poolcoord::election;
using pa::testing::TestPki;
using namespace pa::testing::world;  // NOLINT: the test world

namespace {

// A member's heartbeat as the leader's verifier hands it over.
std::shared_ptr<const pa::VerifiedHeartbeat> Evidence(const std::string& node,
                                                      const std::string& challenge,
                                                      std::string* datagram_out) {
  const pa::NodeIdentity& id = TestPki::Get().Identity(node);
  pa::Heartbeat hb = pa::testing::MakeHeartbeat(id, "hangzhou", 9);
  hb.challenge = challenge;
  const std::string datagram = pa::testing::Signed(hb, id);
  auto decoded = pa::DecodeDatagram(datagram);
  BOOST_REQUIRE(decoded.ok());
  auto cert = pa::NodeCertificate::Verify(id.certificate_der(), *TestPki::Get().ca(),
                                          RealNowUs());
  BOOST_REQUIRE(cert.certificate != nullptr);
  auto ev = std::make_shared<pa::VerifiedHeartbeat>();
  ev->signed_heartbeat = decoded->heartbeat;
  ev->certificate = cert.certificate;
  if (datagram_out != nullptr) *datagram_out = datagram;
  return ev;
}

std::string Other(const std::string& leader) { return leader == "hz-3" ? "hz-2" : "hz-3"; }

void RequireProofs(Cloud& c) {
  c.issue_challenges = true;
  c.proof_mode = "required";
}

}  // namespace

BOOST_AUTO_TEST_CASE(TheProofIsTheHeartbeatAsReceivedAndItsCertificate) {
  std::string datagram;
  pa::DelegatedLeaseWrite w;
  w.node = "hz-2";
  w.pool = "hangzhou";
  w.delegate = "hz-1";
  w.renew_time_us = 1'767'225'600'123'456;
  w.lease_duration_seconds = 7;
  w.evidence = Evidence("hz-2", "Y2hhbGxlbmdl", &datagram);
  rapidjson::Document d;
  d.Parse(pa::EncodeDelegatedLease(w).c_str());
  BOOST_REQUIRE(!d.HasParseError());
  BOOST_REQUIRE(d["spec"].HasMember("proof"));
  std::string heartbeat, certificate;
  BOOST_REQUIRE(absl::Base64Unescape(d["spec"]["proof"]["heartbeat"].GetString(), &heartbeat));
  BOOST_REQUIRE(absl::Base64Unescape(d["spec"]["proof"]["certificate"].GetString(), &certificate));
  BOOST_TEST(heartbeat == datagram);  // byte for byte: its signature still verifies
  BOOST_TEST(certificate == TestPki::Get().Identity("hz-2").certificate_der());
  // The other fields are as before.
  BOOST_TEST(std::string(d["spec"]["holderIdentity"].GetString()) == "hz-2");
  BOOST_TEST(d["spec"]["leaseDurationSeconds"].GetInt() == 7);

  // No challenge (a server that issues none): no proof, the write as before.
  w.evidence = Evidence("hz-2", "", nullptr);
  d.Parse(pa::EncodeDelegatedLease(w).c_str());
  BOOST_TEST(!d["spec"].HasMember("proof"));
  w.evidence = nullptr;
  d.Parse(pa::EncodeDelegatedLease(w).c_str());
  BOOST_TEST(!d["spec"].HasMember("proof"));
}

BOOST_AUTO_TEST_CASE(AProofRefusalIsToldFromNotLeading) {
  // The server's 403 of the proof check: one cause on spec.proof.
  const std::string refused = R"({"kind":"Status","apiVersion":"v1","status":"Failure",
    "message":"delegatedleases.coordination.pool \"hz-2\" is forbidden: delegation proof refused (stale_challenge): ...",
    "reason":"Forbidden","details":{"name":"hz-2","group":"coordination.pool","kind":"delegatedleases",
    "causes":[{"reason":"FieldValueForbidden","message":"stale_challenge: issued 16s ago","field":"spec.proof"}]},
    "code":403})";
  absl::Status s = pc::StatusFromResponse(403, refused);
  BOOST_TEST(pc::IsForbidden(s));
  BOOST_TEST(pc::HasCauseField(s, "spec.proof"));
  BOOST_REQUIRE_EQUAL(pc::CausesOf(s).size(), 1u);
  BOOST_TEST(pc::CausesOf(s)[0].message == "stale_challenge: issued 16s ago");
  BOOST_TEST(pc::CausesOf(s)[0].type == "FieldValueForbidden");
  BOOST_TEST((pa::OutcomeFromStatus(s) == pa::DelegationOutcome::kProofRefused));
  // "You do not lead this pool": no cause, a step-down.
  absl::Status not_leader = pc::StatusFromResponse(
      403, R"({"kind":"Status","reason":"Forbidden","message":"hz-1 does not hold poolleases/hangzhou","code":403})");
  BOOST_TEST(pc::CausesOf(not_leader).empty());
  BOOST_TEST((pa::OutcomeFromStatus(not_leader) == pa::DelegationOutcome::kForbidden));
  // A cause on another field (a 422's) is not a proof refusal.
  absl::Status invalid = pc::ApiError(403, "Forbidden", "x", {{"FieldValueForbidden", "m", "spec.delegate"}});
  BOOST_TEST((pa::OutcomeFromStatus(invalid) == pa::DelegationOutcome::kForbidden));
  // Garbage causes are ignored, not a crash.
  BOOST_TEST(pc::CausesOf(pc::StatusFromResponse(403, R"({"details":{"causes":[1,"x",{"field":7}]}})"))
                 .size() == 1u);
}

BOOST_AUTO_TEST_CASE(TheLeaseLockKeepsThePoolsCurrentChallenge) {
  poolcoord::testing::FakeLeases leases;
  pc::Lease lease;
  lease.metadata.name = "hangzhou";
  lease.status.challenges = {{"bmV3", 1'767'225'600'000'000}, {"b2xk", 1'767'225'595'000'000}};
  leases.Put(lease);
  pe::PoolLeaseLock lock(&leases, "hangzhou", "hz-1");
  BOOST_TEST(lock.CurrentChallenge() == "");
  BOOST_REQUIRE(lock.Get().ok());
  BOOST_TEST(lock.CurrentChallenge() == "bmV3");  // newest first

  // The wire form, as the server writes it.
  auto decoded = pc::DecodeLease(R"({"metadata":{"name":"hangzhou"},"spec":{},
    "status":{"observedTime":"2026-01-01T00:00:00.000000Z","challenges":[
      {"value":"bmV3","issueTime":"2026-01-01T00:00:00.000000Z"},{"value":"b2xk"},{"value":""},7]}})");
  BOOST_REQUIRE(decoded.ok());
  BOOST_REQUIRE_EQUAL(decoded->status.challenges.size(), 2u);
  BOOST_TEST(decoded->status.challenges[0].value == "bmV3");
  BOOST_TEST(*decoded->status.challenges[0].issue_time_us == 1'767'225'600'000'000);
  BOOST_TEST(!decoded->status.challenges[1].issue_time_us.has_value());
}

BOOST_AUTO_TEST_CASE(TheLeaderRelaysTheChallengeAndMembersSignIt) {
  World w(RequireProofs);
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string current = w.cloud.CurrentChallenge();
  BOOST_REQUIRE(!current.empty());
  BOOST_TEST(w.nodes[leader].core->challenge() == current);
  w.Run(10);  // two more rounds: every member has heard the leader's
  for (const auto& name : w.names) {
    if (name == leader) continue;
    // What the leader relayed ...
    auto from_leader = w.nodes[name].core->LatestOf(leader);
    BOOST_REQUIRE(from_leader != nullptr);
    BOOST_TEST(from_leader->heartbeat().leader);
    BOOST_TEST(!from_leader->heartbeat().challenge.empty());
    // ... is what the member signs, and the leader receives it.
    BOOST_TEST(w.nodes[name].core->challenge() == from_leader->heartbeat().challenge);
  }
  // Challenges come with the renewals, one every 5 s (the period) or so.
  BOOST_TEST(w.cloud.next_challenge >= 6);
  BOOST_TEST(w.cloud.next_challenge <= 9);
}

BOOST_AUTO_TEST_CASE(ProvenDelegationKeepsACutOffMemberAlive) {
  World w(RequireProofs);
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string member = Other(leader);
  w.cloud.cut.insert(member);
  w.Run(30);
  // Every heartbeat written once, each with a proof the (modelled) server took.
  const size_t writes = w.WritesFor(member);
  BOOST_TEST(writes >= 5u);
  BOOST_TEST(w.cloud.Refusals() == 0, "refused: " << w.cloud.Refusals());
  for (const auto& write : w.cloud.writes) {
    BOOST_REQUIRE(write.evidence != nullptr);
    BOOST_TEST(pa::SendsProof(*write.evidence));
    BOOST_TEST(!write.evidence->heartbeat().cloud_reachable);
    BOOST_TEST(write.lease_duration_seconds == 7);  // the freshness bound, within max-age
  }
  BOOST_TEST(w.nodes[leader].core->delegation_stats().refused_proof.load() == 0);

  // The member dies: its last proof is the last write; nothing is written
  // for it afterwards, so the server's count of it ends.
  w.Kill(member);
  const size_t at_death = w.WritesFor(member);
  w.Run(30);
  BOOST_TEST(w.WritesFor(member) <= at_death + 1);
}

BOOST_AUTO_TEST_CASE(ARefusedProofSkipsTheMemberAndTheLeaderStays) {
  World w(RequireProofs);
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string refused = Other(leader);
  const std::string proven = leader == "hz-1" ? "hz-2" : "hz-1";
  BOOST_REQUIRE(refused != proven);
  w.cloud.refuse_proofs_of.insert(refused);
  w.cloud.cut.insert(refused);
  w.cloud.cut.insert(proven);
  w.Run(30);
  const auto& stats = w.nodes[leader].core->delegation_stats();
  // Each of the refused member's heartbeats tried once, then skipped.
  BOOST_TEST(stats.refused_proof.load() >= 4);
  BOOST_TEST(stats.refused_proof.load() <= 7);
  BOOST_TEST(w.cloud.proof_refusals["test"] == stats.refused_proof.load());
  BOOST_TEST(stats.step_downs.load() == 0);
  BOOST_TEST(stats.refused_forbidden.load() == 0);
  BOOST_TEST(w.nodes[leader].core->status().leading);
  BOOST_TEST(w.cloud.pool_lease.holder_identity == leader);
  // The other cut-off member is delegated all along.
  BOOST_TEST(w.WritesFor(proven) >= 5u);
  BOOST_TEST(w.cloud.delegated.count(refused) == 0);
}

BOOST_AUTO_TEST_CASE(NoChallengeNoProof) {
  // A server that issues no challenges (or runs --delegation-proof=off): the
  // writes go as before, without spec.proof.
  World w;
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string member = Other(leader);
  w.cloud.cut.insert(member);
  w.Run(15);
  BOOST_REQUIRE(w.WritesFor(member) >= 2u);
  for (const auto& write : w.cloud.writes) BOOST_TEST(!pa::SendsProof(*write.evidence));
  // ... and a server that requires proofs refuses them as "missing", which
  // skips the member rather than deposing the leader.
  w.cloud.proof_mode = "required";
  w.Run(15);
  BOOST_TEST(w.cloud.proof_refusals["missing"] >= 2);
  BOOST_TEST(w.nodes[leader].core->delegation_stats().step_downs.load() == 0);
  BOOST_TEST(w.nodes[leader].core->status().leading);
}

BOOST_AUTO_TEST_CASE(ALeaderFailoverKeepsProofsGoing) {
  World w(RequireProofs);
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string member = Other(leader);
  w.cloud.cut.insert(member);
  w.Run(15);
  BOOST_REQUIRE(w.WritesFor(member) >= 2u);
  w.Kill(leader);
  w.Run(40);  // the PoolLease expires (15 s), a successor takes it
  auto leaders = w.Leaders();
  BOOST_REQUIRE_EQUAL(leaders.size(), 1u);
  BOOST_TEST(leaders[0] != leader);
  BOOST_TEST(w.cloud.delegated.count(member) == 1);
  BOOST_TEST(w.cloud.delegated[member].delegate == leaders[0]);
  // The member's heartbeats carried the dead leader's last challenge (stale by
  // the takeover) until the successor's first heartbeat reached it: at most
  // the heartbeat in hand and one more are refused; then proofs pass again.
  BOOST_TEST(w.cloud.proof_refusals["stale_challenge"] <= 2);
  BOOST_TEST(w.cloud.proof_refusals["unknown_challenge"] == 0);
  BOOST_TEST(w.cloud.proof_refusals["replay"] == 0);
  const size_t after = w.WritesFor(member);
  w.Run(15);
  BOOST_TEST(w.WritesFor(member) >= after + 2);
  BOOST_TEST(w.nodes[leaders[0]].core->delegation_stats().step_downs.load() == 0);
}

BOOST_AUTO_TEST_CASE(LeaseDurationStaysWithinTheProofMaxAge) {
  pb::FakeClock clock;
  Lan lan;
  FakeLan fake(&lan, "hz-1");
  std::shared_ptr<const pa::NodeIdentity> id(&TestPki::Get().Identity("hz-1"),
                                              [](const pa::NodeIdentity*) {});
  pa::AgentOptions o;
  auto core = pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, o);
  BOOST_REQUIRE(core.ok());
  BOOST_TEST((*core)->options().delegation.lease_duration_seconds == 7);  // 5 s + 2 s
  o.freshness.heartbeat_interval_us = 20 * kS;  // bound 22 s
  core = pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, o);
  BOOST_REQUIRE(core.ok());
  BOOST_TEST((*core)->options().delegation.lease_duration_seconds == 15);
  o.proof_max_age_seconds = 10;
  core = pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, o);
  BOOST_TEST((*core)->options().delegation.lease_duration_seconds == 10);
}
