#define BOOST_TEST_MODULE heartbeat_verifier
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "agent/heartbeat_verifier.h"
#include "base/clock.h"
#include "tests/agent/agent_testing.h"

namespace pa = poolcoord::agent;
namespace pe = poolcoord::base;
using pa::DropReason;
using pa::testing::Boot;
using pa::testing::CertificateDatagram;
using pa::testing::MakeHeartbeat;
using pa::testing::MustMint;
using pa::testing::Signed;
using pa::testing::TestPki;
using Kind = pa::HeartbeatVerifier::Result::Kind;

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<const pa::PoolView> Pool() {
  auto pool = std::make_shared<pa::PoolView>();
  pool->pool = "hangzhou";
  pool->self = "hz-1";
  pool->members = {{"hz-1", "10.0.0.1"}, {"hz-2", "10.0.0.2"}, {"hz-3", "10.0.0.3"}};
  return pool;
}

struct World {
  pe::FakeClock clock{NowUs()};
  pa::HeartbeatVerifier verifier;
  explicit World(pa::VerifierOptions options = {})
      : verifier(TestPki::Get().ca(), &clock, options) {
    verifier.SetPool(Pool());
  }
  pa::HeartbeatVerifier::Result Receive(const std::string& bytes) { return verifier.Receive(bytes); }
  int64_t Dropped(DropReason r) const {
    return verifier.stats().dropped[static_cast<size_t>(r)].load();
  }
  void Know(const std::string& node, pa::KeyType type = pa::KeyType::kEcdsaP256) {
    auto r = Receive(CertificateDatagram(TestPki::Get().Identity(node, type)));
    BOOST_REQUIRE_MESSAGE(r.kind == Kind::kCertificate, r.detail);
  }
};

const pa::NodeIdentity& Id(const std::string& node, pa::KeyType t = pa::KeyType::kEcdsaP256) {
  return TestPki::Get().Identity(node, t);
}

void ExpectDrop(const pa::HeartbeatVerifier::Result& r, DropReason reason) {
  BOOST_TEST((r.kind == Kind::kDropped), "accepted; expected " << pa::DropReasonName(reason));
  BOOST_TEST(pa::DropReasonName(r.reason) == pa::DropReasonName(reason), r.detail);
}

}  // namespace

BOOST_AUTO_TEST_CASE(AcceptsAMembersHeartbeatBothKeyTypes) {
  for (pa::KeyType type : {pa::KeyType::kEcdsaP256, pa::KeyType::kRsa}) {
    World w;
    w.Know("hz-2", type);
    BOOST_TEST(w.verifier.stats().certificates_accepted.load() == 1);
    w.clock.Advance(std::chrono::seconds(3));
    pa::Heartbeat hb = MakeHeartbeat(Id("hz-2", type), "hangzhou", 1);
    hb.challenge = "chal";
    const std::string datagram = Signed(hb, Id("hz-2", type));
    auto r = w.Receive(datagram);
    BOOST_REQUIRE_MESSAGE((r.kind == Kind::kHeartbeat), r.detail);
    BOOST_TEST(r.newest);
    BOOST_TEST(r.node == "hz-2");
    BOOST_TEST(r.heartbeat->heartbeat() == hb);
    BOOST_TEST(r.heartbeat->arrival_mono_us == w.clock.MonotonicMicros());
    BOOST_TEST(r.heartbeat->arrival_wall_us == w.clock.NowMicros());
    // What a proof needs: the signed bytes, signature, certificate.
    BOOST_TEST(r.heartbeat->certificate->fingerprint() == Id("hz-2", type).fingerprint());
    BOOST_TEST(r.heartbeat->certificate->VerifySignature(r.heartbeat->signed_heartbeat.signed_bytes,
                                                         r.heartbeat->signed_heartbeat.signature));
    BOOST_TEST(datagram.size() < (type == pa::KeyType::kRsa ? 450u : 260u));
    BOOST_TEST(w.verifier.stats().heartbeats_accepted.load() == 1);
  }
}

BOOST_AUTO_TEST_CASE(UnknownCertificateAsksTheSender) {
  World w;
  const std::string datagram = Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 1), Id("hz-2"));
  const int64_t arrival = w.clock.MonotonicMicros();
  auto r = w.Receive(datagram);
  ExpectDrop(r, DropReason::kUnknownCertificate);
  BOOST_TEST(r.node == "hz-2");
  BOOST_TEST(r.fingerprint == Id("hz-2").fingerprint());
  // The heartbeat waits for the certificate and is judged when it comes, as of
  // its own arrival.
  w.clock.Advance(std::chrono::milliseconds(300));
  auto cert = w.Receive(CertificateDatagram(Id("hz-2")));
  BOOST_REQUIRE((cert.kind == Kind::kCertificate));
  BOOST_REQUIRE(cert.heartbeat != nullptr);
  BOOST_TEST(cert.newest);
  BOOST_TEST(cert.heartbeat->heartbeat().sequence == 1u);
  BOOST_TEST(cert.heartbeat->arrival_mono_us == arrival);
  // Judged once: the same datagram again is a replay.
  ExpectDrop(w.Receive(datagram), DropReason::kReplay);
  // A known certificate again is harmless and carries nothing.
  auto again = w.Receive(CertificateDatagram(Id("hz-2")));
  BOOST_TEST((again.kind == Kind::kCertificate));
  BOOST_TEST(again.heartbeat == nullptr);
  BOOST_TEST(w.verifier.stats().certificates_accepted.load() == 1);
}

BOOST_AUTO_TEST_CASE(AWaitingHeartbeatPassesEveryCheck) {
  World w;
  // A forged heartbeat in hz-2's name waits, then fails its signature check
  // when hz-2's certificate comes; nothing is accepted.
  pa::Heartbeat forged = MakeHeartbeat(Id("hz-2"), "hangzhou", 1);
  ExpectDrop(w.Receive(Signed(forged, Id("hz-3"))), DropReason::kUnknownCertificate);
  auto cert = w.Receive(CertificateDatagram(Id("hz-2")));
  BOOST_TEST((cert.kind == Kind::kCertificate));
  BOOST_TEST(cert.heartbeat == nullptr);
  BOOST_TEST(w.Dropped(DropReason::kBadSignature) == 1);
  // Only the latest waits: of two, the second is judged.
  World v;
  ExpectDrop(v.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 1), Id("hz-2"))),
             DropReason::kUnknownCertificate);
  ExpectDrop(v.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 2), Id("hz-2"))),
             DropReason::kUnknownCertificate);
  auto c2 = v.Receive(CertificateDatagram(Id("hz-2")));
  BOOST_REQUIRE(c2.heartbeat != nullptr);
  BOOST_TEST(c2.heartbeat->heartbeat().sequence == 2u);
}

BOOST_AUTO_TEST_CASE(Replay) {
  World w;
  w.Know("hz-2");
  const std::string one = Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 1), Id("hz-2"));
  BOOST_TEST((w.Receive(one).kind == Kind::kHeartbeat));
  ExpectDrop(w.Receive(one), DropReason::kReplay);
  ExpectDrop(w.Receive(one), DropReason::kReplay);
  BOOST_TEST(w.Dropped(DropReason::kReplay) == 2);
  // Later numbers are new; an older unseen one within the window is accepted
  // but is not the newest; below the window it is refused.
  auto r5 = w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 5), Id("hz-2")));
  BOOST_TEST(r5.newest);
  auto r3 = w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 3), Id("hz-2")));
  BOOST_TEST((r3.kind == Kind::kHeartbeat));
  BOOST_TEST(!r3.newest);
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 3), Id("hz-2"))),
             DropReason::kReplay);
  BOOST_TEST(w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 100), Id("hz-2"))).newest);
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 36), Id("hz-2"))),
             DropReason::kReplay);
  // A restarted agent (new boot id) starts again at 1.
  auto restarted = w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 1, Boot(2)), Id("hz-2")));
  BOOST_TEST((restarted.kind == Kind::kHeartbeat));
  BOOST_TEST(restarted.newest);
  // The old boot's heartbeats stay refused.
  ExpectDrop(w.Receive(one), DropReason::kReplay);
  // Replay state is per sender.
  w.Know("hz-3");
  BOOST_TEST((w.Receive(Signed(MakeHeartbeat(Id("hz-3"), "hangzhou", 1), Id("hz-3"))).kind ==
              Kind::kHeartbeat));
}

BOOST_AUTO_TEST_CASE(ForgedDatagramsDoNotMoveTheWindow) {
  World w;
  w.Know("hz-2");
  // Sequence 100 "from hz-2" signed by hz-3: refused, and hz-2's real 100 still counts.
  pa::Heartbeat forged = MakeHeartbeat(Id("hz-2"), "hangzhou", 100);
  ExpectDrop(w.Receive(Signed(forged, Id("hz-3"))), DropReason::kBadSignature);
  BOOST_TEST((w.Receive(Signed(forged, Id("hz-2"))).kind == Kind::kHeartbeat));
}

BOOST_AUTO_TEST_CASE(BadSignatures) {
  World w;
  w.Know("hz-2");
  const std::string good = Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 7), Id("hz-2"));
  // Flip the "reachable" flag after signing: a member cannot be made to ask for delegation.
  std::string flag = good;
  flag[6] ^= 0x01;
  ExpectDrop(w.Receive(flag), DropReason::kBadSignature);
  // A byte of the signature.
  std::string sig = good;
  sig[sig.size() - 3] ^= 0x40;
  ExpectDrop(w.Receive(sig), DropReason::kBadSignature);
  // A signature made for other bytes, spliced in.
  const std::string other = Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 8), Id("hz-2"));
  auto body = pa::EncodeHeartbeatBody(MakeHeartbeat(Id("hz-2"), "hangzhou", 7));
  auto other_decoded = pa::DecodeDatagram(other);
  auto spliced = pa::EncodeHeartbeatDatagram(*body, other_decoded->heartbeat.signature);
  ExpectDrop(w.Receive(*spliced), DropReason::kBadSignature);
  BOOST_TEST(w.Dropped(DropReason::kBadSignature) == 3);
  BOOST_TEST((w.Receive(good).kind == Kind::kHeartbeat));
}

BOOST_AUTO_TEST_CASE(SomeoneElsesCertificate) {
  World w;
  w.Know("hz-2");
  w.Know("hz-3");
  // hz-3 claims hz-2's certificate but signs with its own key.
  pa::Heartbeat claim = MakeHeartbeat(Id("hz-3"), "hangzhou", 1);
  claim.certificate_fingerprint = Id("hz-2").fingerprint();
  ExpectDrop(w.Receive(Signed(claim, Id("hz-3"))), DropReason::kWrongIdentity);
  // hz-3 sends "hz-2" with hz-2's fingerprint: the signature gives it away.
  pa::Heartbeat impersonation = MakeHeartbeat(Id("hz-2"), "hangzhou", 1);
  ExpectDrop(w.Receive(Signed(impersonation, Id("hz-3"))), DropReason::kBadSignature);
}

BOOST_AUTO_TEST_CASE(ForeignPoolAndOwnNode) {
  World w;
  w.Know("hz-2");
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "beijing", 1), Id("hz-2"))),
             DropReason::kForeignPool);
  // A node of another pool, claiming ours.
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(Id("bj-1"), "hangzhou", 1), Id("bj-1"))),
             DropReason::kForeignPool);
  ExpectDrop(w.Receive(CertificateDatagram(Id("bj-1"))), DropReason::kForeignPool);
  // Our own name, and our own certificate reflected back.
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(Id("hz-1"), "hangzhou", 1), Id("hz-1"))),
             DropReason::kOwnNode);
  ExpectDrop(w.Receive(CertificateDatagram(Id("hz-1"))), DropReason::kOwnNode);
  BOOST_TEST(w.Dropped(DropReason::kForeignPool) == 3);
  BOOST_TEST(w.verifier.cached_certificates() == 1u);
}

BOOST_AUTO_TEST_CASE(BadCertificates) {
  World w;
  const auto& ca = TestPki::Get().ca_pair();
  auto other_ca = MustMint(pa::MintCertificateAuthority("another-cluster"));
  auto foreign_pair = MustMint(pa::MintNodeCertificate(other_ca, "hz-2"));
  auto foreign_id = pa::NodeIdentity::FromPem(foreign_pair.cert_pem, foreign_pair.key_pem);
  BOOST_REQUIRE(foreign_id.ok());
  ExpectDrop(w.Receive(CertificateDatagram(**foreign_id)), DropReason::kUnknownAuthority);
  // Its heartbeats name a certificate nobody accepted.
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(**foreign_id, "hangzhou", 1), **foreign_id)),
             DropReason::kUnknownCertificate);
  // Refused again from memory, counted again.
  ExpectDrop(w.Receive(CertificateDatagram(**foreign_id)), DropReason::kUnknownAuthority);
  BOOST_TEST(w.Dropped(DropReason::kUnknownAuthority) == 2);

  pa::MintOptions expired;
  expired.common_name = "system:node:hz-2";
  expired.organizations = {"system:nodes"};
  expired.not_before_us = NowUs() - 7200'000'000LL;
  expired.not_after_us = NowUs() - 3600'000'000LL;
  auto expired_pair = MustMint(pa::MintCertificate(ca, expired));
  auto expired_id = pa::NodeIdentity::FromPem(expired_pair.cert_pem, expired_pair.key_pem);
  BOOST_REQUIRE(expired_id.ok());
  ExpectDrop(w.Receive(CertificateDatagram(**expired_id)), DropReason::kExpiredCertificate);

  pa::MintOptions admin = expired;
  admin.not_before_us = admin.not_after_us = 0;
  admin.common_name = "kubernetes-admin";
  admin.organizations = {"system:masters"};
  auto admin_pair = MustMint(pa::MintCertificate(ca, admin));
  ExpectDrop(w.Receive(*pa::EncodeCertificateDatagram(pa::testing::PemToDer(admin_pair.cert_pem))),
             DropReason::kWrongIdentity);
  pa::MintOptions p384 = expired;
  p384.not_before_us = p384.not_after_us = 0;
  p384.ec_curve = "P-384";
  auto p384_pair = MustMint(pa::MintCertificate(ca, p384));
  ExpectDrop(w.Receive(*pa::EncodeCertificateDatagram(pa::testing::PemToDer(p384_pair.cert_pem))),
             DropReason::kUnsupportedKey);

  ExpectDrop(w.Receive(*pa::EncodeCertificateDatagram("not DER at all")),
             DropReason::kMalformedCertificate);
  BOOST_TEST(w.verifier.cached_certificates() == 0u);
}

BOOST_AUTO_TEST_CASE(CertificateExpiresWhileCached) {
  World w;
  pa::MintOptions o;
  o.common_name = "system:node:hz-2";
  o.organizations = {"system:nodes"};
  o.not_before_us = NowUs() - 3600'000'000LL;
  o.not_after_us = NowUs() + 60'000'000LL;
  auto pair = MustMint(pa::MintCertificate(TestPki::Get().ca_pair(), o));
  auto id = pa::NodeIdentity::FromPem(pair.cert_pem, pair.key_pem);
  BOOST_REQUIRE(id.ok());
  BOOST_TEST((w.Receive(CertificateDatagram(**id)).kind == Kind::kCertificate));
  BOOST_TEST((w.Receive(Signed(MakeHeartbeat(**id, "hangzhou", 1), **id)).kind == Kind::kHeartbeat));
  w.clock.Advance(std::chrono::seconds(120));
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(**id, "hangzhou", 2), **id)),
             DropReason::kExpiredCertificate);
}

BOOST_AUTO_TEST_CASE(DecodeFailures) {
  World w;
  w.Know("hz-2");
  const std::string good = Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 1), Id("hz-2"));
  ExpectDrop(w.Receive(good + std::string(2000, 'x')), DropReason::kOversized);
  ExpectDrop(w.Receive(std::string(65'507, '\0')), DropReason::kOversized);
  ExpectDrop(w.Receive(good.substr(0, 40)), DropReason::kMalformed);
  ExpectDrop(w.Receive(""), DropReason::kMalformed);
  ExpectDrop(w.Receive("GET / HTTP/1.1\r\n\r\n"), DropReason::kMalformed);
  std::string v9 = good;
  v9[4] = 9;
  ExpectDrop(w.Receive(v9), DropReason::kUnsupportedVersion);
  BOOST_TEST(w.Dropped(DropReason::kMalformed) == 3);
  BOOST_TEST(w.verifier.stats().heartbeats_accepted.load() == 0);
}

BOOST_AUTO_TEST_CASE(CertificateRequests) {
  World w;
  pa::CertificateRequest req;
  req.fingerprint = Id("hz-1").fingerprint();
  req.node = "hz-3";
  auto r = w.Receive(*pa::EncodeCertificateRequest(req));
  BOOST_TEST((r.kind == Kind::kCertificateRequest));
  BOOST_TEST(r.node == "hz-3");
  BOOST_TEST(r.fingerprint == req.fingerprint);
  req.node = "bj-1";
  ExpectDrop(w.Receive(*pa::EncodeCertificateRequest(req)), DropReason::kForeignPool);
  req.node = "hz-1";
  ExpectDrop(w.Receive(*pa::EncodeCertificateRequest(req)), DropReason::kOwnNode);
  BOOST_TEST(w.verifier.stats().certificate_requests.load() == 1);
}

BOOST_AUTO_TEST_CASE(MembershipChanges) {
  World w;
  w.Know("hz-2");
  w.Know("hz-3");
  BOOST_TEST((w.Receive(Signed(MakeHeartbeat(Id("hz-3"), "hangzhou", 1), Id("hz-3"))).kind ==
              Kind::kHeartbeat));
  auto smaller = std::make_shared<pa::PoolView>(*Pool());
  smaller->members.erase("hz-3");
  w.verifier.SetPool(smaller);
  BOOST_TEST(w.verifier.Certificate(Id("hz-3").fingerprint()) == nullptr);
  BOOST_TEST(w.verifier.Certificate(Id("hz-2").fingerprint()) != nullptr);
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(Id("hz-3"), "hangzhou", 2), Id("hz-3"))),
             DropReason::kForeignPool);
  ExpectDrop(w.Receive(CertificateDatagram(Id("hz-3"))), DropReason::kForeignPool);
  // Back in the pool: the certificate refused a moment ago is judged again.
  w.verifier.SetPool(Pool());
  w.Know("hz-3");
}

BOOST_AUTO_TEST_CASE(CertificatesPerNodeBounded) {
  World w;
  w.Know("hz-2");
  BOOST_TEST((w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 1), Id("hz-2"))).kind ==
              Kind::kHeartbeat));
  // Three more valid certificates of hz-2 (old rotations, replayed at us): the
  // one in use stays, the cache holds at most three for the node.
  for (int i = 0; i < 3; ++i) {
    auto pair = MustMint(pa::MintNodeCertificate(TestPki::Get().ca_pair(), "hz-2"));
    auto id = pa::NodeIdentity::FromPem(pair.cert_pem, pair.key_pem);
    BOOST_REQUIRE(id.ok());
    BOOST_TEST((w.Receive(CertificateDatagram(**id)).kind == Kind::kCertificate));
  }
  BOOST_TEST(w.verifier.cached_certificates() == 3u);
  BOOST_TEST(w.verifier.Certificate(Id("hz-2").fingerprint()) != nullptr);
  BOOST_TEST((w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 2), Id("hz-2"))).kind ==
              Kind::kHeartbeat));
}

BOOST_AUTO_TEST_CASE(WithoutTheCertificateCache) {
  pa::VerifierOptions no_cache;
  no_cache.cache_verified_certificates = false;
  World w(no_cache);
  w.Know("hz-2");
  BOOST_TEST(w.verifier.Certificate(Id("hz-2").fingerprint()) == nullptr);
  auto r = w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 1), Id("hz-2")));
  BOOST_REQUIRE_MESSAGE((r.kind == Kind::kHeartbeat), r.detail);
  BOOST_TEST(r.heartbeat->certificate->node() == "hz-2");
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 2), Id("hz-3"))),
             DropReason::kBadSignature);
  // The chain is judged again at each heartbeat: a year on, it has expired.
  w.clock.Advance(std::chrono::hours(24 * 400));
  ExpectDrop(w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 3), Id("hz-2"))),
             DropReason::kExpiredCertificate);
}

BOOST_AUTO_TEST_CASE(LazyChecksOnlyWhatIsNeeded) {
  pa::VerifierOptions lazy;
  lazy.needed = [](const pa::Heartbeat& hb) { return !hb.cloud_reachable || hb.leader; };
  lazy.sample_period_us = 30'000'000;
  World w(lazy);
  w.Know("hz-2");
  auto hb = [&](uint64_t seq, bool reachable, const std::string& signer) {
    return w.Receive(Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", seq, Boot(1), reachable), Id(signer)));
  };
  // Nothing verified yet: the first one is.
  BOOST_TEST((hb(1, true, "hz-2").kind == Kind::kHeartbeat));
  w.clock.Advance(std::chrono::seconds(5));
  auto heard = hb(2, true, "hz-2");
  BOOST_TEST((heard.kind == Kind::kHeard));
  BOOST_TEST(heard.node == "hz-2");
  BOOST_TEST(heard.heartbeat == nullptr);
  BOOST_TEST(w.verifier.stats().heartbeats_heard.load() == 1);
  // A forged "reachable" one is heard, never trusted nor recorded: the real
  // sequence 3 is still new.
  BOOST_TEST((hb(3, true, "hz-3").kind == Kind::kHeard));
  // A forged "cut off" one is checked and refused; the real one accepted.
  ExpectDrop(hb(4, false, "hz-3"), DropReason::kBadSignature);
  BOOST_TEST((hb(4, false, "hz-2").kind == Kind::kHeartbeat));
  BOOST_TEST((hb(3, true, "hz-2").kind == Kind::kHeard));
  // Once the sample period passed, a "reachable" one is checked again.
  w.clock.Advance(std::chrono::seconds(30));
  ExpectDrop(hb(10, true, "hz-3"), DropReason::kBadSignature);
  BOOST_TEST((hb(10, true, "hz-2").kind == Kind::kHeartbeat));
  // Leader heartbeats are always checked.
  pa::Heartbeat lead = MakeHeartbeat(Id("hz-2"), "hangzhou", 11, Boot(1), true);
  lead.leader = true;
  BOOST_TEST((w.Receive(Signed(lead, Id("hz-2"))).kind == Kind::kHeartbeat));
}

BOOST_AUTO_TEST_CASE(SharedMemoGivesTheSameVerdicts) {
  // Two receivers (two agents of one simulator) share check results: each
  // distinct certificate and signature is checked once, and forgeries are
  // still refused by both.
  pa::VerificationMemo memo;
  pa::VerifierOptions shared;
  shared.memo = &memo;
  World w1(shared), w2(shared);
  w1.Know("hz-2");
  w2.Know("hz-2");
  const std::string good = Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 1, Boot(1), false), Id("hz-2"));
  BOOST_TEST((w1.Receive(good).kind == Kind::kHeartbeat));
  BOOST_TEST((w2.Receive(good).kind == Kind::kHeartbeat));
  BOOST_TEST(memo.misses() == 2);  // one certificate, one signature
  BOOST_TEST(memo.hits() == 2);
  const std::string forged = Signed(MakeHeartbeat(Id("hz-2"), "hangzhou", 2, Boot(1), false), Id("hz-3"));
  ExpectDrop(w1.Receive(forged), DropReason::kBadSignature);
  ExpectDrop(w2.Receive(forged), DropReason::kBadSignature);
  // Replays stay per receiver.
  ExpectDrop(w1.Receive(good), DropReason::kReplay);
}

BOOST_AUTO_TEST_CASE(ReasonNames) {
  for (size_t i = 0; i < pa::kDropReasonCount; ++i) {
    BOOST_TEST(std::string(pa::DropReasonName(static_cast<DropReason>(i))) != "unknown");
  }
}
