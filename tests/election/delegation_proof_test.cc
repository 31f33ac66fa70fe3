// Verifiable delegation: the proof check of a leader's DelegatedLease
// write, every refusal, the challenges and their ages, through the lease rules
// over a memory store as the API runs them.
#define BOOST_TEST_MODULE delegation_proof
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "base/clock.h"
#include "election/delegation_proof.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "store/api_error.h"
#include "store/memory_store.h"
#include "tests/election/proof_testing.h"
#include "tests/rules_writes.h"

namespace pe = poolcoord::election;
namespace ps = poolcoord::store;
namespace pt = poolcoord::testing;
using pe::testing::MemberHeartbeat;
using pe::testing::ProofFor;
using pe::testing::ProofOf;
using pe::testing::ProofPki;
using pe::testing::SignedDatagram;
using std::chrono::seconds;

namespace {

constexpr int64_t kSec = 1'000'000;

ProofPki& Pki() {
  static ProofPki pki;
  return pki;
}

// One replica: its clock, its proof checker and rules, over a shared store.
struct Replica {
  explicit Replica(ps::Store* store, pe::MembershipIndex* membership,
                   pe::ProofMode mode = pe::ProofMode::kRequired)
      : clock(poolcoord::base::RealClock::Get()->NowMicros()),
        proofs(&clock, Options(mode), nullptr),
        rules(&clock, membership, Rules(&proofs)) {
    clock.Advance(seconds(100));  // keep clear of monotonic 0
    BOOST_REQUIRE(proofs.SetClientCaPem(Pki().ca().cert_pem).ok());
  }
  static pe::DelegationProofOptions Options(pe::ProofMode mode) {
    pe::DelegationProofOptions o;
    o.mode = mode;
    return o;
  }
  static pe::LeaseRulesOptions Rules(pe::DelegationProofs* proofs) {
    pe::LeaseRulesOptions o;
    o.forwarder_user = "system:serviceaccount:kube-system:poolcoord";
    o.delegation_proofs = proofs;
    return o;
  }
  poolcoord::base::FakeClock clock;
  pe::DelegationProofs proofs;
  pe::LeaseRules rules;
};

class World {
 public:
  explicit World(pe::ProofMode mode = pe::ProofMode::kRequired)
      : store_(ps::NewMemoryStore({})), a(store_.get(), &membership_, mode) {
    BOOST_REQUIRE(membership_
                      .Replace("file", {{"hangzhou", {"hz-1", "hz-2", "hz-3"}},
                                        {"beijing", {"bj-1", "bj-2"}}})
                      .ok());
    // The acquisition brings the first challenge (none with proofs off).
    BOOST_REQUIRE(Renew(a) == (mode != pe::ProofMode::kOff));
  }

  // The leader hz-1 renews hangzhou's PoolLease through `r`; true when the
  // renewal brought a new challenge.
  bool Renew(Replica& r, const std::string& pool = "hangzhou", const std::string& holder = "hz-1") {
    auto before = Get(ps::Kind::kPoolLease, pool);
    absl::Status s = pt::WriteThroughRules(store_.get(), r.rules, pt::NodeUser(holder),
                                           pt::PoolLeaseFor(pool, holder));
    BOOST_REQUIRE_MESSAGE(s.ok(), s.message());
    auto after = Get(ps::Kind::kPoolLease, pool);
    const auto& now = ps::DelegationOf(*after).challenges;
    return !now.empty() &&
           (!before || ps::DelegationOf(*before).challenges.empty() ||
            ps::DelegationOf(*before).challenges.front() != now.front());
  }

  ps::Store* store() { return store_.get(); }
  pe::MembershipIndex* membership() { return &membership_; }

  ps::ObjectPtr Get(ps::Kind kind, const std::string& name) {
    auto got = store_->Get(kind, name);
    return got.ok() ? *got : nullptr;
  }
  std::string Challenge(const std::string& pool = "hangzhou") {
    auto pl = Get(ps::Kind::kPoolLease, pool);
    BOOST_REQUIRE(pl);
    BOOST_REQUIRE(!ps::DelegationOf(*pl).challenges.empty());
    return ps::DelegationOf(*pl).challenges.front().value;
  }

  // hz-1 (the leader) writes hz-2's DelegatedLease with `proof` through `r`.
  absl::Status Write(Replica& r, std::optional<ps::DelegationProof> proof,
                     const std::string& node = "hz-2", int32_t duration = 7) {
    ps::Object dl = pt::DelegatedLeaseFor(node, "hangzhou", "hz-1", duration,
                                          r.clock.NowMicros() + (++renewals_));
    if (proof) ps::MutableDelegation(dl).proof = *proof;
    return pt::WriteThroughRules(store_.get(), r.rules, pt::NodeUser("hz-1"), dl);
  }
  absl::Status Write(std::optional<ps::DelegationProof> proof, const std::string& node = "hz-2",
                     int32_t duration = 7) {
    return Write(a, std::move(proof), node, duration);
  }

  // hz-2's own heartbeat over the current challenge, as its proof.
  ps::DelegationProof Fresh(uint64_t sequence, const std::string& node = "hz-2",
                            pe::KeyType type = pe::KeyType::kEcdsaP256) {
    const auto& id = Pki().Identity(node, type);
    return ProofFor(id, MemberHeartbeat(id, "hangzhou", Challenge(), sequence));
  }

 private:
  std::unique_ptr<ps::Store> store_;
  pe::MembershipIndex membership_;
  int64_t renewals_ = 0;

 public:
  Replica a;
};

// The refusal's HTTP code, and the rule it names (403: "(rule)" in the message
// and a cause on spec.proof; 422: the field causes).
void ExpectRefused(const absl::Status& s, int code, const std::string& rule) {
  BOOST_REQUIRE_MESSAGE(!s.ok(), "expected " << code << " " << rule << ", got OK");
  const ps::ApiErrorInfo info = ps::ApiErrorFromStatus(s);
  BOOST_TEST(info.code == code, s.message());
  if (code == 403) {
    BOOST_TEST(std::string(s.message()).find("(" + rule + ")") != std::string::npos, s.message());
    BOOST_REQUIRE(info.causes.size() == 1u);
    BOOST_TEST(info.causes[0].field == "spec.proof");
    BOOST_TEST(info.causes[0].message.rfind(rule + ": ", 0) == 0u, info.causes[0].message);
    BOOST_TEST(info.kind == "delegatedleases");
  } else {
    bool named = false;
    for (const auto& c : info.causes) named = named || c.field == rule;
    BOOST_TEST(named, s.message());
  }
}

BOOST_AUTO_TEST_SUITE(Accepted)

BOOST_AUTO_TEST_CASE(OwnFreshProofIsRecordedAndNotStored) {
  World w;
  const std::string challenge = w.Challenge();
  absl::Status written = w.Write(w.Fresh(5));
  BOOST_REQUIRE_MESSAGE(written.ok(), written.message());
  auto dl = w.Get(ps::Kind::kDelegatedLease, "hz-2");
  BOOST_REQUIRE(dl);
  const auto& d = ps::DelegationOf(*dl);
  BOOST_TEST(!d.proof.has_value());  // write-only
  BOOST_REQUIRE(d.accepted_proof.has_value());
  BOOST_TEST(d.accepted_proof->boot_id == "01010101010101010101010101010101");
  BOOST_TEST(d.accepted_proof->sequence == 5);
  BOOST_TEST(d.accepted_proof->challenge == challenge);
  BOOST_TEST(w.a.proofs.Count("accepted") == 1u);
}

BOOST_AUTO_TEST_CASE(RsaAndPemCertificates) {
  World w;
  BOOST_TEST(w.Write(w.Fresh(1, "hz-2", pe::KeyType::kRsa)).ok());
  const auto& id = Pki().Identity("hz-3");
  auto proof = ProofFor(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1));
  proof.certificate = Pki().CertificatePem("hz-3");
  absl::Status s = w.Write(proof, "hz-3");
  BOOST_TEST(s.ok(), s.message());
}

// A master writes without a proof, as the rules let masters through otherwise.
BOOST_AUTO_TEST_CASE(MastersPass) {
  World w;
  ps::Object dl = pt::DelegatedLeaseFor("hz-2", "hangzhou", "hz-1", 7, 1);
  poolcoord::base::UserInfo admin{"admin", "", {"system:masters"}, {}};
  BOOST_TEST(pt::WriteThroughRules(w.store(), w.a.rules, admin, dl).ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Modes)

BOOST_AUTO_TEST_CASE(RequiredRefusesAWriteWithoutProof) {
  World w;
  ExpectRefused(w.Write(std::nullopt), 403, "missing");
  BOOST_TEST(!w.Get(ps::Kind::kDelegatedLease, "hz-2"));  // nothing written
}

BOOST_AUTO_TEST_CASE(OptionalCountsUnprovenWritesAndStillChecksProofs) {
  World w(pe::ProofMode::kOptional);
  BOOST_TEST(w.Write(std::nullopt).ok());
  BOOST_TEST(w.Write(w.Fresh(3)).ok());
  ExpectRefused(w.Write(w.Fresh(3)), 403, "replay");
  // The proof's floor survives an unproven write in between.
  BOOST_TEST(w.Write(std::nullopt).ok());
  ExpectRefused(w.Write(w.Fresh(2)), 403, "replay");
  BOOST_TEST(w.a.proofs.Count("accepted") == 1u);
}

BOOST_AUTO_TEST_CASE(OffIgnoresAndDropsProofs) {
  World w(pe::ProofMode::kOff);
  BOOST_TEST(w.Write(ps::DelegationProof{"garbage", "garbage"}).ok());
  auto dl = w.Get(ps::Kind::kDelegatedLease, "hz-2");
  BOOST_REQUIRE(dl);
  BOOST_TEST(!dl->delegation);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Refusals)

BOOST_AUTO_TEST_CASE(ForeignCa) {
  World w;
  ProofPki foreign("some-other-ca");
  const auto& id = foreign.Identity("hz-2");
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1))), 403,
                "unknown_authority");
  BOOST_TEST(!w.Get(ps::Kind::kDelegatedLease, "hz-2"));
}

BOOST_AUTO_TEST_CASE(WrongNodeInCertificate) {
  World w;
  // hz-3's certificate and key, a heartbeat that claims to be hz-2's.
  const auto& id = Pki().Identity("hz-3");
  auto hb = MemberHeartbeat(id, "hangzhou", w.Challenge(), 1);
  hb.node = "hz-2";
  ExpectRefused(w.Write(ProofFor(id, hb)), 403, "wrong_identity");
}

BOOST_AUTO_TEST_CASE(HeartbeatOfAnotherNode) {
  World w;
  // hz-2's key signed a heartbeat naming hz-3.
  const auto& id = Pki().Identity("hz-2");
  auto hb = MemberHeartbeat(id, "hangzhou", w.Challenge(), 1);
  hb.node = "hz-3";
  ExpectRefused(w.Write(ProofFor(id, hb)), 403, "wrong_node");
}

BOOST_AUTO_TEST_CASE(NotANodeCertificate) {
  World w;
  pe::MintOptions o;
  o.common_name = "system:serviceaccount:default:x";
  o.organizations = {"system:serviceaccounts"};
  auto pair = pe::testing::MustMint(pe::MintCertificate(Pki().ca(), o));
  auto minted = pe::NodeIdentity::FromPem(pair.cert_pem, pair.key_pem);
  BOOST_REQUIRE(!minted.ok());  // not a node: NodeIdentity refuses it, so sign by hand
  const auto& honest = Pki().Identity("hz-2");
  auto hb = MemberHeartbeat(honest, "hangzhou", w.Challenge(), 1);
  hb.certificate_fingerprint = pe::CertificateFingerprint(pe::testing::PemDer(pair.cert_pem));
  auto body = pe::EncodeHeartbeatBody(hb);
  auto sig = pe::testing::SignWithPem(pair.key_pem, *body);
  auto datagram = pe::EncodeHeartbeatDatagram(*body, sig);
  BOOST_REQUIRE(datagram.ok());
  ps::DelegationProof proof{absl::Base64Escape(*datagram), pair.cert_pem};
  ExpectRefused(w.Write(proof), 403, "wrong_identity");
}

BOOST_AUTO_TEST_CASE(ExpiredCertificate) {
  World w;
  pe::MintOptions o;
  o.common_name = "system:node:hz-2";
  o.organizations = {"system:nodes"};
  const int64_t now = w.a.clock.NowMicros();
  o.not_before_us = now - 48 * 3600 * kSec;
  o.not_after_us = now - 3600 * kSec;
  auto pair = pe::testing::MustMint(pe::MintCertificate(Pki().ca(), o));
  auto id = pe::NodeIdentity::FromPem(pair.cert_pem, pair.key_pem);
  BOOST_REQUIRE(id.ok());
  ExpectRefused(w.Write(ProofFor(**id, MemberHeartbeat(**id, "hangzhou", w.Challenge(), 1))), 403,
                "expired_certificate");
}

BOOST_AUTO_TEST_CASE(BadSignature) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  std::string datagram = SignedDatagram(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1));
  std::string flipped_sig = datagram;
  flipped_sig.back() ^= 0x01;
  ExpectRefused(w.Write(ProofOf(flipped_sig, id)), 403, "bad_signature");
  // A signed byte changed after signing: the sequence's last byte.
  std::string flipped_body = datagram;
  flipped_body[6 + 4 + 7] ^= 0x04;
  ExpectRefused(w.Write(ProofOf(flipped_body, id)), 403, "bad_signature");
  // Another node's valid signature over the same bytes.
  const auto& other = Pki().Identity("hz-3");
  auto hb = MemberHeartbeat(id, "hangzhou", w.Challenge(), 1);
  auto body = pe::EncodeHeartbeatBody(hb);
  auto sig = other.Sign(*body);
  ExpectRefused(w.Write(ProofOf(*pe::EncodeHeartbeatDatagram(*body, *sig), id)), 403,
                "bad_signature");
}

// A modelled signature (a simulator's node) is a proof only for a server
// whose client CA was made to take them; the shipped path refuses it.
BOOST_AUTO_TEST_CASE(ModelledSignatureOnlyWithAModellingAuthority) {
  World w;
  pe::MintOptions o;
  o.common_name = "system:node:hz-2";
  o.organizations = {pe::kNodesGroup, pe::kModelledSignatureOrganization};
  const pe::MintedKeyPair pair = pe::testing::MustMint(pe::MintCertificate(Pki().ca(), o));
  auto id = pe::NodeIdentity::FromPem(pair.cert_pem, pair.key_pem);
  BOOST_REQUIRE(id.ok());
  ExpectRefused(w.Write(ProofFor(**id, MemberHeartbeat(**id, "hangzhou", w.Challenge(), 1))),
                403, "bad_signature");
  auto modelling = pe::CertificateAuthority::FromPem(Pki().ca().cert_pem,
                                                      {.modelled_signatures = true});
  BOOST_REQUIRE(modelling.ok());
  w.a.proofs.SetClientCa(*modelling);
  BOOST_TEST(w.Write(ProofFor(**id, MemberHeartbeat(**id, "hangzhou", w.Challenge(), 2))).ok());
  // The model binds the data: a changed byte fails as a real signature would.
  std::string datagram = SignedDatagram(**id, MemberHeartbeat(**id, "hangzhou", w.Challenge(), 3));
  datagram[6 + 4 + 7] ^= 0x04;
  ExpectRefused(w.Write(ProofOf(datagram, **id)), 403, "bad_signature");
}

// Precheck (before the store's step, off its lock) verifies the signature once;
// the rules' Verify then finds it remembered and makes every other check.
BOOST_AUTO_TEST_CASE(PrecheckedSignatureIsVerifiedOnce) {
  World w;
  const ps::DelegationProof proof = w.Fresh(1);
  w.a.proofs.Precheck(proof, "hz-2");
  BOOST_TEST(w.a.proofs.signature_checks() == 1u);
  BOOST_TEST(w.a.proofs.Count("accepted") == 0u);  // judges nothing
  BOOST_TEST(w.Write(proof).ok());
  BOOST_TEST(w.a.proofs.signature_checks() == 1u);
  BOOST_TEST(w.a.proofs.remembered_signature_hits() == 1u);
  // Remembered is not accepted: the same proof again is a replay.
  ExpectRefused(w.Write(proof), 403, "replay");
  // Without a precheck, Verify checks the signature itself.
  BOOST_TEST(w.Write(w.Fresh(2)).ok());
  BOOST_TEST(w.a.proofs.signature_checks() == 2u);
}

// What fails the signature is never remembered; Precheck of a proof for
// another node (or of a malformed one) checks nothing.
BOOST_AUTO_TEST_CASE(PrecheckRemembersOnlyValidSignatures) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  std::string datagram = SignedDatagram(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1));
  datagram.back() ^= 0x01;
  const ps::DelegationProof bad = ProofOf(datagram, id);
  w.a.proofs.Precheck(bad, "hz-2");
  BOOST_TEST(w.a.proofs.signature_checks() == 1u);
  ExpectRefused(w.Write(bad), 403, "bad_signature");
  BOOST_TEST(w.a.proofs.signature_checks() == 2u);
  BOOST_TEST(w.a.proofs.remembered_signature_hits() == 0u);
  w.a.proofs.Precheck(w.Fresh(2), "hz-3");  // hz-2's heartbeat, for hz-3
  w.a.proofs.Precheck(ps::DelegationProof{"not base64!", "x"}, "hz-2");
  BOOST_TEST(w.a.proofs.signature_checks() == 2u);
}

BOOST_AUTO_TEST_CASE(CertificateTheHeartbeatDoesNotName) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  const auto& rsa = Pki().Identity("hz-2", pe::KeyType::kRsa);  // also hz-2's
  auto proof = ProofFor(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1));
  proof.certificate = absl::Base64Escape(rsa.certificate_der());
  ExpectRefused(w.Write(proof), 403, "certificate_mismatch");
}

BOOST_AUTO_TEST_CASE(ReachableHeartbeat) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  auto hb = MemberHeartbeat(id, "hangzhou", w.Challenge(), 1);
  hb.cloud_reachable = true;
  ExpectRefused(w.Write(ProofFor(id, hb)), 403, "reachable");
}

BOOST_AUTO_TEST_CASE(HeartbeatOfAnotherPool) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "beijing", w.Challenge(), 1))), 403,
                "wrong_pool");
}

BOOST_AUTO_TEST_CASE(NoUnknownAndForeignChallenges) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", "", 1))), 403,
                "no_challenge");
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", "bm90LWlzc3VlZA==", 2))),
                403, "unknown_challenge");
  // Beijing gets a leader and a challenge of its own.
  BOOST_REQUIRE(w.Renew(w.a, "beijing", "bj-1"));
  const std::string beijing = w.Challenge("beijing");
  BOOST_TEST(beijing != w.Challenge());
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", beijing, 3))), 403,
                "foreign_challenge");
  BOOST_TEST(w.Write(w.Fresh(4)).ok());
}

BOOST_AUTO_TEST_CASE(StaleChallenge) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  const std::string first = w.Challenge();
  auto proof = ProofFor(id, MemberHeartbeat(id, "hangzhou", first, 1));
  w.a.clock.Advance(seconds(15));
  BOOST_TEST(w.Write(proof).ok());  // 15 s: the bound itself still passes
  w.a.clock.Advance(std::chrono::microseconds(1));
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", first, 2))), 403,
                "stale_challenge");
}

// A challenge rotated out of the PoolLease's list (the leader kept renewing) is
// refused as stale, with its age.
BOOST_AUTO_TEST_CASE(RetiredChallengeIsStale) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  const std::string first = w.Challenge();
  const size_t kept = w.a.proofs.options().ChallengesKept();
  BOOST_TEST(kept == 4u);  // 15 s / 5 s + 1
  for (size_t i = 0; i < kept; ++i) {
    w.a.clock.Advance(seconds(5));
    BOOST_REQUIRE(w.Renew(w.a));
  }
  auto pl = w.Get(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(ps::DelegationOf(*pl).challenges.size() == kept);
  for (const auto& c : ps::DelegationOf(*pl).challenges) BOOST_TEST(c.value != first);
  absl::Status s = w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", first, 1)));
  ExpectRefused(s, 403, "stale_challenge");
  BOOST_TEST(std::string(s.message()).find("20.0s ago") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_CASE(ReplayedSequence) {
  World w;
  BOOST_TEST(w.Write(w.Fresh(5)).ok());
  ExpectRefused(w.Write(w.Fresh(5)), 403, "replay");
  ExpectRefused(w.Write(w.Fresh(4)), 403, "replay");
  BOOST_TEST(w.Write(w.Fresh(6)).ok());
  // The agent restarted: a new boot id starts again at 1.
  const auto& id = Pki().Identity("hz-2");
  BOOST_TEST(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1, 2))).ok());
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1, 2))), 403,
                "replay");
}

BOOST_AUTO_TEST_CASE(NoClientCaThenOne) {
  World w;
  BOOST_REQUIRE(w.a.proofs.SetClientCaPem("").ok());
  ExpectRefused(w.Write(w.Fresh(1)), 403, "no_client_ca");
  BOOST_REQUIRE(w.a.proofs.SetClientCaPem(Pki().ca().cert_pem).ok());
  BOOST_TEST(w.Write(w.Fresh(2)).ok());
  BOOST_TEST(!w.a.proofs.SetClientCaPem("not a certificate").ok());
  BOOST_TEST(w.Write(w.Fresh(3)).ok());  // the old CA stays
}

// A rotated client CA takes effect on cached certificates at once.
BOOST_AUTO_TEST_CASE(RotatedCaEmptiesTheCache) {
  World w;
  BOOST_TEST(w.Write(w.Fresh(1)).ok());
  ProofPki other("rotated-ca");
  BOOST_REQUIRE(w.a.proofs.SetClientCaPem(other.ca().cert_pem).ok());
  ExpectRefused(w.Write(w.Fresh(2)), 403, "unknown_authority");
  BOOST_REQUIRE(w.a.proofs.SetClientCaPem(other.ca().cert_pem + Pki().ca().cert_pem).ok());
  BOOST_TEST(w.Write(w.Fresh(3)).ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Malformed)

BOOST_AUTO_TEST_CASE(EveryTruncationIs422) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  const std::string datagram =
      SignedDatagram(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1));
  for (size_t n = 1; n < datagram.size(); ++n) {
    absl::Status s = w.Write(ProofOf(datagram.substr(0, n), id));
    BOOST_REQUIRE_MESSAGE(!s.ok(), "prefix " << n);
    BOOST_TEST(ps::ApiErrorFromStatus(s).code == 422, "prefix " << n << ": " << s.message());
  }
  ExpectRefused(w.Write(ProofOf("", id)), 422, "spec.proof.heartbeat");
  const std::string der = id.certificate_der();
  ps::DelegationProof cut{absl::Base64Escape(datagram), absl::Base64Escape(der.substr(0, 100))};
  // A cut certificate no longer matches the heartbeat's fingerprint.
  ExpectRefused(w.Write(cut), 403, "certificate_mismatch");
  BOOST_TEST(!w.Get(ps::Kind::kDelegatedLease, "hz-2"));
}

BOOST_AUTO_TEST_CASE(OversizedProofs) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  // 1,401 bytes: within the field's characters, past the datagram limit.
  std::string big = SignedDatagram(id, MemberHeartbeat(id, "hangzhou", w.Challenge(), 1));
  big.resize(1401, 'x');
  absl::Status s = w.Write(ProofOf(big, id));
  ExpectRefused(s, 422, "spec.proof.heartbeat");
  BOOST_TEST(std::string(s.message()).find("exceeds the limit of 1400") != std::string::npos,
             s.message());
  ExpectRefused(w.Write(ps::DelegationProof{std::string(5000, 'A'), "x"}), 422,
                "spec.proof.heartbeat");
  ExpectRefused(w.Write(ps::DelegationProof{"UENIQg==", std::string(9000, 'A')}), 422,
                "spec.proof.certificate");
}

BOOST_AUTO_TEST_CASE(NotBase64NotPemNotAHeartbeat) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  auto good = w.Fresh(1);
  ExpectRefused(w.Write(ps::DelegationProof{"!!!", good.certificate}), 422, "spec.proof.heartbeat");
  ExpectRefused(w.Write(ps::DelegationProof{good.heartbeat, "%%%"}), 422, "spec.proof.certificate");
  ExpectRefused(w.Write(ps::DelegationProof{good.heartbeat, "-----BEGIN CERTIFICATE-----\nAAAA\n"}),
                422, "spec.proof.certificate");
  auto cert_datagram = pe::EncodeCertificateDatagram(id.certificate_der());
  ExpectRefused(w.Write(ProofOf(*cert_datagram, id)), 422, "spec.proof.heartbeat");
  // A sequence a JSON int64 cannot hold.
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", w.Challenge(),
                                                     uint64_t{1} << 63))),
                422, "spec.proof.heartbeat");
}

// A newcomer's write with leaseDurationSeconds 40 and a garbage proof got a 422
// naming only the duration; with the duration fixed, only spec.proof.heartbeat,
// not the certificate, just as bad. Every malformed field comes in one 422.
BOOST_AUTO_TEST_CASE(EveryMalformedFieldInOne422) {
  World w;
  auto fields = [](const absl::Status& s) {
    std::vector<std::string> out;
    for (const auto& c : ps::ApiErrorFromStatus(s).causes) out.push_back(c.field);
    return out;
  };
  const absl::Status both = w.Write(w.a, ps::DelegationProof{"not-base64!", "not-a-cert!"}, "hz-2", 40);
  BOOST_TEST(ps::ApiErrorFromStatus(both).code == 422, both.message());
  BOOST_TEST(fields(both) == (std::vector<std::string>{"spec.leaseDurationSeconds",
                                                       "spec.proof.heartbeat",
                                                       "spec.proof.certificate"}),
             both.message());
  const absl::Status proof_only = w.Write(ps::DelegationProof{"not-base64!", "not-a-cert!"});
  BOOST_TEST(fields(proof_only) ==
                 (std::vector<std::string>{"spec.proof.heartbeat", "spec.proof.certificate"}),
             proof_only.message());
}

BOOST_AUTO_TEST_CASE(LeaseLongerThanTheProofVouches) {
  World w;
  ExpectRefused(w.Write(w.a, w.Fresh(1), "hz-2", 16), 422, "spec.leaseDurationSeconds");
  BOOST_TEST(w.Write(w.a, w.Fresh(2), "hz-2", 15).ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Challenges)

// A renewal by the holder brings a new challenge once the current one is a
// period old; the list keeps ChallengesKept(); a release brings none.
BOOST_AUTO_TEST_CASE(IssuedWithRenewalsOncePerPeriod) {
  World w;
  BOOST_TEST(!w.Renew(w.a));
  w.a.clock.Advance(seconds(4));
  BOOST_TEST(!w.Renew(w.a));
  w.a.clock.Advance(seconds(1));
  BOOST_TEST(w.Renew(w.a));
  auto after = w.Get(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(ps::DelegationOf(*after).challenges.size() == 2u);
  BOOST_TEST(ps::DelegationOf(*after).challenges[0].issue_time_us == w.a.clock.NowMicros());
  for (int i = 0; i < 10; ++i) {
    w.a.clock.Advance(seconds(5));
    BOOST_TEST(w.Renew(w.a));
  }
  after = w.Get(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST(ps::DelegationOf(*after).challenges.size() == 4u);
  // A release (empty holder) keeps the list and adds nothing.
  w.a.clock.Advance(seconds(5));
  ps::Object release = pt::PoolLeaseFor("hangzhou", "");
  BOOST_REQUIRE(pt::WriteThroughRules(w.store(), w.a.rules, pt::NodeUser("hz-1"), release).ok());
  auto released = w.Get(ps::Kind::kPoolLease, "hangzhou");
  BOOST_TEST((ps::DelegationOf(*released).challenges == ps::DelegationOf(*after).challenges));
}

// Two replicas over one store (etcd3's case): whichever serves the renewal
// issues; both judge a proof the same, and the persisted status.proof stops a
// replay on either.
BOOST_AUTO_TEST_CASE(TwoReplicasAgree) {
  World w;
  Replica b(w.store(), w.membership());
  b.clock.StepWall(std::chrono::microseconds(w.a.clock.NowMicros() - b.clock.NowMicros()));
  BOOST_TEST(!w.Renew(b));  // a's challenge, fresh on b's clocks too
  BOOST_TEST(w.Write(w.a, w.Fresh(1)).ok());
  ExpectRefused(w.Write(b, w.Fresh(1)), 403, "replay");
  BOOST_TEST(w.Write(b, w.Fresh(2)).ok());
  ExpectRefused(w.Write(w.a, w.Fresh(2)), 403, "replay");
  w.a.clock.Advance(seconds(5));
  b.clock.Advance(seconds(5));
  BOOST_TEST(w.Renew(b));   // b issues the next one
  BOOST_TEST(!w.Renew(w.a));  // and a finds it fresh
  BOOST_TEST(w.Write(w.a, w.Fresh(3)).ok());
}

// A replica that first sees a challenge late (it started later, or its watch
// lagged) still judges its age by the issue time: both refuse at the same time.
BOOST_AUTO_TEST_CASE(LateSightIsCoveredByTheIssueTime) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  const std::string c = w.Challenge();
  w.a.clock.Advance(seconds(10));
  Replica b(w.store(), w.membership());
  b.clock.StepWall(std::chrono::microseconds(w.a.clock.NowMicros() - b.clock.NowMicros()));
  BOOST_TEST(w.Write(b, ProofFor(id, MemberHeartbeat(id, "hangzhou", c, 1))).ok());
  w.a.clock.Advance(seconds(6));
  b.clock.Advance(seconds(6));
  ExpectRefused(w.Write(b, ProofFor(id, MemberHeartbeat(id, "hangzhou", c, 2))), 403,
                "stale_challenge");
  ExpectRefused(w.Write(w.a, ProofFor(id, MemberHeartbeat(id, "hangzhou", c, 3))), 403,
                "stale_challenge");
}

// A wall clock stepped back does not make a challenge younger: its first
// sight on the monotonic clock still counts.
BOOST_AUTO_TEST_CASE(WallClockStepBackDoesNotRejuvenate) {
  World w;
  const auto& id = Pki().Identity("hz-2");
  const std::string c = w.Challenge();
  w.a.clock.Advance(seconds(16));
  w.a.clock.StepWall(-std::chrono::microseconds(3600 * kSec));
  ExpectRefused(w.Write(ProofFor(id, MemberHeartbeat(id, "hangzhou", c, 1))), 403,
                "stale_challenge");
}

BOOST_AUTO_TEST_CASE(ModeNamesAndOptions) {
  BOOST_TEST((pe::ParseProofMode("required").value() == pe::ProofMode::kRequired));
  BOOST_TEST((pe::ParseProofMode("optional").value() == pe::ProofMode::kOptional));
  BOOST_TEST((pe::ParseProofMode("off").value() == pe::ProofMode::kOff));
  BOOST_TEST(!pe::ParseProofMode("yes").ok());
  pe::DelegationProofOptions o;
  o.challenge_period = absl::Seconds(4);
  o.max_age = absl::Seconds(13);
  BOOST_TEST(o.ChallengesKept() == 5u);
  o.challenge_period = absl::ZeroDuration();
  BOOST_TEST(!o.Validate().ok());
  BOOST_TEST(pe::DelegationProofs::NewChallengeValue().size() == 44u);
  BOOST_TEST(pe::DelegationProofs::NewChallengeValue() != pe::DelegationProofs::NewChallengeValue());
}

// A seeded source of challenge bytes (a simulator's) gives the same
// challenges in the same order.
BOOST_AUTO_TEST_CASE(SeededChallengesRepeat) {
  auto issue = [](uint64_t seed) {
    poolcoord::base::FakeClock clock;
    pe::DelegationProofOptions o;
    o.random_bytes = [state = seed](unsigned char* bytes, size_t n) mutable {
      for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>((state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 56);
    };
    pe::DelegationProofs proofs(&clock, o, nullptr);
    ps::Object pool_lease = pt::PoolLeaseFor("hangzhou", "hz-1");
    std::vector<std::string> values;
    for (int i = 0; i < 3; ++i) {
      BOOST_REQUIRE(proofs.MaybeIssueChallenge(pool_lease));
      values.push_back(ps::DelegationOf(pool_lease).challenges.front().value);
      clock.Advance(seconds(5));
    }
    return values;
  };
  const std::vector<std::string> first = issue(7);
  BOOST_TEST(first == issue(7));
  BOOST_TEST(first != issue(8));
  BOOST_TEST(first[0] != first[1]);
  BOOST_TEST(first[0].size() == 44u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(StatusWrites)

// Nobody but an administrator writes status, so nobody can move the floor of
// sequence numbers the proof check persisted.
BOOST_AUTO_TEST_CASE(OnlyAnAdministratorMovesTheProofFloor) {
  World w;
  BOOST_REQUIRE(w.Write(w.Fresh(9)).ok());
  auto dl = w.Get(ps::Kind::kDelegatedLease, "hz-2");
  ps::Object proposed = *dl;
  ps::MutableDelegation(proposed).accepted_proof->sequence = 1;
  poolcoord::base::UserInfo fwd{"system:serviceaccount:kube-system:poolcoord", "", {}, {}};
  BOOST_TEST(ps::ApiErrorFromStatus(w.a.rules.AdmitStatusWrite(fwd, *dl, proposed)).code == 403);
  BOOST_TEST(ps::ApiErrorFromStatus(w.a.rules.AdmitStatusWrite(
                 poolcoord::base::UserInfo{"system:node:hz-1", "", {"system:nodes"}, {}}, *dl, proposed))
                 .code == 403);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
