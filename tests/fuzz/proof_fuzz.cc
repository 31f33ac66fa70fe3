// libFuzzer target over the server's delegation proof check: what a
// pool leader puts in a DelegatedLease's spec.proof goes through the codec, the
// base64/PEM and datagram decoders and DelegationProofs::Verify, for node hz-2
// of pool hangzhou whose PoolLease carries one known challenge.
//
// The first byte picks how the rest is used:
//   0xFE  mutation: a freshly signed proof of hz-2 (a new challenge, issued
//         input[1] seconds ago on the server's wall clock) XOR the rest of the
//         input: accepted exactly when no byte changed and the challenge is at
//         most --delegation-proof-max-age (15 s) old;
//   0xFD  a DelegatedLease JSON body: decoded as the API decodes a write, its
//         spec.proof (if any) checked; spec.proof never comes back out;
//   0xFC  spec.proof's two strings as a client sends them: heartbeat, NUL,
//         certificate;
//   else  the whole input is the heartbeat datagram (base64-encoded here),
//         with hz-2's own certificate.
//
// Invariants checked on every input:
// - no crash, no sanitizer report, bounded work;
// - the answer is OK, a 403 Forbidden with one cause on spec.proof naming a
//   rule, or a 422 Invalid with causes: never any other error;
// - an accepted proof is a heartbeat datagram of hz-2, pool hangzhou, "cut
//   off", over the pool's challenge, whose signature hz-2's key verifies, and
//   status.proof records exactly its boot id, sequence and challenge.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "base/clock.h"
#include "tests/fuzz/fuzz_invariants.h"
#include "election/delegation_proof.h"
#include "election/heartbeat.h"
#include "election/minted_pki.h"
#include "election/node_certificate.h"
#include "rapidjson/document.h"
#include "store/api_error.h"
#include "store/object.h"
#include "store/object_codec.h"

namespace pe = poolcoord::election;
namespace ps = poolcoord::store;

namespace {

constexpr char kNode[] = "hz-2";
constexpr char kPool[] = "hangzhou";
// The pool's challenge for the non-mutation modes: fixed, so the dictionary
// and the seeds can carry it.
constexpr char kChallenge[] = "ZnV6ei1jaGFsbGVuZ2UtMDAwMDAwMDAwMDAwMDAwMDA=";

using poolcoord::fuzz::Check;
using poolcoord::fuzz::RealNow;

struct World {
  // The minted certificates are valid from an hour before the machine's now.
  poolcoord::base::FakeClock clock{RealNow()};
  std::unique_ptr<pe::DelegationProofs> proofs;
  std::unique_ptr<pe::NodeIdentity> hz2;
  std::shared_ptr<const pe::NodeCertificate> hz2_certificate;  // verified, for the oracle
  ps::Object pool_lease;
  uint64_t sequence = 0;

  World() {
    clock.Advance(std::chrono::seconds(100));
    auto ca = pe::MintCertificateAuthority("fuzz-ca");
    auto node = pe::MintNodeCertificate(*ca, kNode);
    Check(ca.ok() && node.ok(), "minting");
    hz2 = std::move(*pe::NodeIdentity::FromPem(node->cert_pem, node->key_pem));
    proofs = std::make_unique<pe::DelegationProofs>(&clock, pe::DelegationProofOptions{}, nullptr);
    Check(proofs->SetClientCaPem(ca->cert_pem).ok(), "CA");
    auto authority = pe::CertificateAuthority::FromPem(ca->cert_pem);
    Check(authority.ok(), "CA parses");
    hz2_certificate = hz2->VerifyAgainst(**authority, clock.NowMicros()).certificate;
    Check(hz2_certificate != nullptr, "hz-2's certificate verifies");
    pool_lease = PoolLease(kChallenge, clock.NowMicros());
  }

  ps::Object PoolLease(const std::string& challenge, int64_t issue_time_us) {
    ps::Object pl;
    pl.kind = ps::Kind::kPoolLease;
    pl.metadata.name = kPool;
    ps::MutableDelegation(pl).challenges = {{challenge, issue_time_us}};
    return pl;
  }

  std::string SignedHeartbeat(const std::string& challenge) {
    pe::Heartbeat hb;
    hb.node = kNode;
    hb.pool = kPool;
    hb.boot_id.fill(7);
    hb.sequence = ++sequence;
    hb.challenge = challenge;
    hb.certificate_fingerprint = hz2->fingerprint();
    auto body = pe::EncodeHeartbeatBody(hb);
    auto sig = hz2->Sign(*body);
    return *pe::EncodeHeartbeatDatagram(*body, *sig);
  }

  ps::DelegationProof ProofOf(const std::string& datagram) const {
    return {absl::Base64Escape(datagram), absl::Base64Escape(hz2->certificate_der())};
  }
};

World& TheWorld() {
  static World* world = new World();
  return *world;
}

// Checks the answer's shape, and what an accepted proof must be. Returns
// whether it was accepted.
bool Judge(const ps::DelegationProof& proof, const ps::Object& pool_lease,
           const absl::StatusOr<ps::AcceptedProof>& verdict) {
  World& w = TheWorld();
  if (!verdict.ok()) {
    const ps::ApiErrorInfo info = ps::ApiErrorFromStatus(verdict.status());
    Check(info.code == 403 || info.code == 422, "a refusal is 403 or 422");
    Check(!info.causes.empty(), "a refusal names its field");
    if (info.code == 403) {
      Check(info.causes.size() == 1 && info.causes[0].field == "spec.proof",
            "a 403 carries one cause on spec.proof");
      Check(info.causes[0].message.find(": ") != std::string::npos, "the cause names its rule");
    }
    return false;
  }
  std::string datagram;
  Check(absl::Base64Unescape(proof.heartbeat, &datagram), "accepted heartbeat is base64");
  auto decoded = pe::DecodeDatagram(datagram);
  Check(decoded.ok() && decoded->type == pe::DatagramType::kHeartbeat, "accepted is a heartbeat");
  const pe::Heartbeat& hb = decoded->heartbeat.heartbeat;
  Check(hb.node == kNode && hb.pool == kPool, "accepted names the node and its pool");
  Check(!hb.cloud_reachable, "accepted says cut off");
  bool listed = false;
  for (const auto& c : ps::DelegationOf(pool_lease).challenges) listed |= c.value == hb.challenge;
  Check(listed, "accepted carries the pool's challenge");
  Check(w.hz2_certificate->VerifySignature(decoded->heartbeat.signed_bytes,
                                              decoded->heartbeat.signature),
        "accepted only with hz-2's valid signature");
  Check(verdict->boot_id == pe::BootIdHex(hb.boot_id) &&
            verdict->sequence == static_cast<int64_t>(hb.sequence) &&
            verdict->challenge == hb.challenge,
        "status.proof records the heartbeat");
  return true;
}

void VerifyOne(const ps::DelegationProof& proof) {
  World& w = TheWorld();
  auto verdict = w.proofs->Verify(proof, kNode, kPool, w.pool_lease, std::nullopt, 7);
  Judge(proof, w.pool_lease, verdict);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = TheWorld();
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (size == 0) return 0;

  switch (data[0]) {
    case 0xFE: {
      const int age_s = size > 1 ? data[1] % 32 : 0;
      const std::string challenge = pe::DelegationProofs::NewChallengeValue();
      const ps::Object pl = w.PoolLease(challenge, w.clock.NowMicros() - age_s * 1'000'000LL);
      const std::string original = w.SignedHeartbeat(challenge);
      std::string mutated = original;
      for (size_t i = 2; i < size && i - 2 < mutated.size(); ++i) mutated[i - 2] ^= input[i];
      const ps::DelegationProof proof = w.ProofOf(mutated);
      auto verdict = w.proofs->Verify(proof, kNode, kPool, pl, std::nullopt, 7);
      const bool accepted = Judge(proof, pl, verdict);
      Check(accepted == (mutated == original && age_s <= 15),
            "a signed proof is accepted exactly when unchanged and fresh");
      return 0;
    }
    case 0xFD: {
      std::vector<std::string> unknown;
      auto decoded = ps::DecodeObjectJson(input.substr(1), ps::Kind::kDelegatedLease, &unknown);
      if (!decoded.ok()) return 0;
      const ps::DelegationFields& d = ps::DelegationOf(**decoded);
      if (d.proof) VerifyOne(*d.proof);
      // Write-only: spec.proof is never encoded, to clients or to storage.
      for (const std::string& out :
           {ps::EncodeObject(**decoded), ps::EncodeForStorage(**decoded)}) {
        rapidjson::Document doc;
        doc.Parse(out.data(), out.size());
        Check(!doc.HasParseError() && doc.IsObject(), "encodes to a JSON object");
        Check(!doc.HasMember("spec") || !doc["spec"].IsObject() ||
                  !doc["spec"].HasMember("proof"),
              "spec.proof is never encoded");
      }
      return 0;
    }
    case 0xFC: {
      const std::string rest = input.substr(1);
      const size_t nul = rest.find('\0');
      ps::DelegationProof proof;
      proof.heartbeat = rest.substr(0, nul);
      if (nul != std::string::npos) proof.certificate = rest.substr(nul + 1);
      VerifyOne(proof);
      return 0;
    }
    default:
      VerifyOne(w.ProofOf(input));
      return 0;
  }
}
