// libFuzzer target over the agent's LAN input: arbitrary bytes go through the
// datagram decoder and the HeartbeatVerifier of a small pool (hangzhou: hz-1 =
// us, hz-2 whose certificate is cached, hz-3).
//
// Invariants checked on every input:
// - no crash, no sanitizer report, bounded work;
// - a datagram that decodes is canonical: encoding what was decoded gives the
//   input back byte for byte (one wire form per message, so what a receiver
//   verified and what a proof carries are the same bytes);
// - the verifier drops exactly what the decoder refuses, with the matching
//   reason (oversized / unsupported_version / malformed);
// - nothing is accepted unless the certificate's key verifies its signature.
// Inputs starting with 0xFE mutate a freshly signed heartbeat of hz-2 with the
// rest of the input (XOR): it must be accepted exactly when no byte changed.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "agent/heartbeat.h"
#include "agent/heartbeat_verifier.h"
#include "agent/minted_pki.h"
#include "agent/node_certificate.h"
#include "base/clock.h"
#include "tests/fuzz/fuzz_invariants.h"

namespace pa = poolcoord::agent;
namespace pe = poolcoord::base;

namespace {

using poolcoord::fuzz::Check;
using poolcoord::fuzz::RealNow;

struct World {
  // The minted certificates are valid from an hour before the machine's now.
  pe::FakeClock clock{RealNow()};
  std::unique_ptr<pa::HeartbeatVerifier> verifier;
  std::unique_ptr<pa::NodeIdentity> hz2;
  uint64_t sequence = 0;

  World() {
    auto ca = pa::MintCertificateAuthority("fuzz-ca");
    auto node = pa::MintNodeCertificate(*ca, "hz-2");
    Check(ca.ok() && node.ok(), "minting");
    hz2 = std::move(*pa::NodeIdentity::FromPem(node->cert_pem, node->key_pem));
    auto authority = pa::CertificateAuthority::FromPem(ca->cert_pem);
    Check(authority.ok(), "CA");
    verifier = std::make_unique<pa::HeartbeatVerifier>(*authority, &clock);
    auto pool = std::make_shared<pa::PoolView>();
    pool->pool = "hangzhou";
    pool->self = "hz-1";
    pool->members = {{"hz-1", "a"}, {"hz-2", "b"}, {"hz-3", "c"}};
    verifier->SetPool(pool);
    auto cert = verifier->Receive(*pa::EncodeCertificateDatagram(hz2->certificate_der()));
    Check(cert.kind == pa::HeartbeatVerifier::Result::Kind::kCertificate, "cert cached");
  }

  std::string SignedHeartbeat() {
    pa::Heartbeat hb;
    hb.node = "hz-2";
    hb.pool = "hangzhou";
    hb.boot_id.fill(7);
    hb.sequence = ++sequence;
    hb.certificate_fingerprint = hz2->fingerprint();
    auto body = pa::EncodeHeartbeatBody(hb);
    auto sig = hz2->Sign(*body);
    return *pa::EncodeHeartbeatDatagram(*body, *sig);
  }
};

World& TheWorld() {
  static World* world = new World();
  return *world;
}

std::string Reencode(const pa::Datagram& d) {
  switch (d.type) {
    case pa::DatagramType::kHeartbeat: {
      auto body = pa::EncodeHeartbeatBody(d.heartbeat.heartbeat);
      Check(body.ok(), "decoded heartbeat re-encodes");
      Check(*body == d.heartbeat.signed_bytes, "signed bytes are the canonical body");
      auto back = pa::DecodeHeartbeatBody(*body);
      Check(back.ok() && *back == d.heartbeat.heartbeat, "body decodes alone");
      auto full = pa::EncodeHeartbeatDatagram(*body, d.heartbeat.signature);
      Check(full.ok(), "datagram re-encodes");
      return *full;
    }
    case pa::DatagramType::kCertificate:
      return *pa::EncodeCertificateDatagram(d.certificate_der);
    case pa::DatagramType::kCertificateRequest:
      return *pa::EncodeCertificateRequest(d.request);
  }
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = TheWorld();
  std::string input(reinterpret_cast<const char*>(data), size);
  using Kind = pa::HeartbeatVerifier::Result::Kind;

  if (size > 0 && data[0] == 0xFE) {
    const std::string original = w.SignedHeartbeat();
    std::string mutated = original;
    for (size_t i = 1; i < size && i - 1 < mutated.size(); ++i) mutated[i - 1] ^= input[i];
    auto r = w.verifier->Receive(mutated);
    Check((r.kind == Kind::kHeartbeat) == (mutated == original),
          "a signed heartbeat is accepted exactly when unchanged");
    return 0;
  }

  auto decoded = pa::DecodeDatagram(input);
  if (decoded.ok()) Check(Reencode(*decoded) == input, "canonical encoding");
  auto r = w.verifier->Receive(input);
  if (!decoded.ok()) {
    Check(r.kind == Kind::kDropped, "undecodable input is dropped");
    const pa::DropReason expected =
        decoded.status().code() == absl::StatusCode::kOutOfRange      ? pa::DropReason::kOversized
        : decoded.status().code() == absl::StatusCode::kUnimplemented ? pa::DropReason::kUnsupportedVersion
                                                                      : pa::DropReason::kMalformed;
    Check(r.reason == expected, "drop reason follows the decoder");
  }
  if (r.kind == Kind::kHeartbeat) {
    const auto& v = *r.heartbeat;
    Check(v.certificate != nullptr && v.certificate->node() == v.heartbeat().node, "signer");
    Check(v.certificate->VerifySignature(v.signed_heartbeat.signed_bytes, v.signed_heartbeat.signature),
          "accepted only with a valid signature");
  }
  return 0;
}
