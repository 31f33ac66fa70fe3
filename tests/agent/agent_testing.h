// Shared by the agent's unit tests: a minted cluster CA, node identities, and
// signed heartbeat datagrams.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <boost/test/unit_test.hpp>

#include "agent/agent_cloud.h"
#include "agent/heartbeat.h"
#include "agent/minted_pki.h"
#include "agent/node_certificate.h"
#include "tests/election/proof_testing.h"

// Boost.Test prints the operands of a failed comparison.
BOOST_TEST_DONT_PRINT_LOG_VALUE(poolcoord::agent::Fingerprint)
BOOST_TEST_DONT_PRINT_LOG_VALUE(poolcoord::agent::BootId)
// (In election's namespace, where Heartbeat lives, for argument-dependent lookup.)
namespace poolcoord::election {
inline std::ostream& boost_test_print_type(std::ostream& os, const Heartbeat& hb) {
  return os << "{node " << hb.node << ", pool " << hb.pool << ", seq " << hb.sequence
            << ", reachable " << hb.cloud_reachable << ", leader " << hb.leader << "}";
}
}  // namespace poolcoord::election

namespace poolcoord::agent::testing {

using election::testing::MustMint;

// One CA and, lazily, one identity per (node, key type); minted once per test
// binary, since RSA key generation takes a while.
class TestPki : public election::testing::ProofPki {
 public:
  static TestPki& Get() {
    static TestPki pki;
    return pki;
  }
  const MintedKeyPair& ca_pair() const { return ProofPki::ca(); }
  std::shared_ptr<const CertificateAuthority> ca() const { return authority_; }
  // `node`'s identity as AgentCore::New takes it: shared but not owned, since
  // the PKI outlives every core of the test binary.
  std::shared_ptr<const NodeIdentity> SharedIdentity(const std::string& node) {
    return std::shared_ptr<const NodeIdentity>(&Identity(node), [](const NodeIdentity*) {});
  }

 private:
  TestPki() {
    auto ca = CertificateAuthority::FromPem(ca_pair().cert_pem);
    BOOST_REQUIRE(ca.ok());
    authority_ = *ca;
  }
  std::shared_ptr<const CertificateAuthority> authority_;
};

// The leader hz-1's DelegatedLease write for hz-2 in hangzhou (renewTime
// 2026-01-01T00:00:00.123456Z, 7 s), as the tests of its encoding start from.
inline DelegatedLeaseWrite HangzhouWrite() {
  DelegatedLeaseWrite w;
  w.node = "hz-2";
  w.pool = "hangzhou";
  w.delegate = "hz-1";
  w.renew_time_us = 1'767'225'600'123'456;
  w.lease_duration_seconds = 7;
  return w;
}

// DER of a PEM certificate (also one NodeIdentity would refuse).
inline std::string PemToDer(const std::string& pem) { return election::testing::PemDer(pem); }

inline BootId Boot(uint8_t b) {
  BootId id{};
  id.fill(b);
  return id;
}

inline Heartbeat MakeHeartbeat(const NodeIdentity& id, const std::string& pool, uint64_t sequence,
                               BootId boot = Boot(1), bool reachable = false) {
  Heartbeat hb = election::testing::MemberHeartbeat(id, pool, /*challenge=*/"", sequence);
  hb.boot_id = boot;
  hb.cloud_reachable = reachable;
  return hb;
}

// The datagram of `hb` signed by `signer`.
inline std::string Signed(const Heartbeat& hb, const NodeIdentity& signer) {
  return election::testing::SignedDatagram(signer, hb);
}

inline std::string CertificateDatagram(const NodeIdentity& id) {
  auto d = EncodeCertificateDatagram(id.certificate_der());
  BOOST_REQUIRE(d.ok());
  return *d;
}

}  // namespace poolcoord::agent::testing
