// Shared by the agent's unit tests: a minted cluster CA, node identities, and
// signed heartbeat datagrams.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <boost/test/unit_test.hpp>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "agent/heartbeat.h"
#include "agent/minted_pki.h"
#include "agent/node_certificate.h"

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

inline MintedKeyPair MustMint(absl::StatusOr<MintedKeyPair> minted) {
  BOOST_REQUIRE_MESSAGE(minted.ok(), minted.status().ToString());
  return *minted;
}

// One CA and, lazily, one identity per (node, key type); minted once per test
// binary, since RSA key generation takes a while.
class TestPki {
 public:
  static TestPki& Get() {
    static TestPki pki;
    return pki;
  }
  const MintedKeyPair& ca_pair() const { return ca_; }
  std::shared_ptr<const CertificateAuthority> ca() const { return authority_; }

  const MintedKeyPair& NodePair(const std::string& node, KeyType type = KeyType::kEcdsaP256) {
    auto key = std::make_pair(node, type);
    auto it = pairs_.find(key);
    if (it == pairs_.end()) it = pairs_.emplace(key, MustMint(MintNodeCertificate(ca_, node, type))).first;
    return it->second;
  }
  const NodeIdentity& Identity(const std::string& node, KeyType type = KeyType::kEcdsaP256) {
    auto key = std::make_pair(node, type);
    auto it = identities_.find(key);
    if (it == identities_.end()) {
      const MintedKeyPair& pair = NodePair(node, type);
      auto id = NodeIdentity::FromPem(pair.cert_pem, pair.key_pem);
      BOOST_REQUIRE_MESSAGE(id.ok(), id.status().ToString());
      it = identities_.emplace(key, std::move(*id)).first;
    }
    return *it->second;
  }

 private:
  TestPki() {
    ca_ = MustMint(MintCertificateAuthority("test-cluster-ca"));
    auto ca = CertificateAuthority::FromPem(ca_.cert_pem);
    BOOST_REQUIRE(ca.ok());
    authority_ = *ca;
  }
  MintedKeyPair ca_;
  std::shared_ptr<const CertificateAuthority> authority_;
  std::map<std::pair<std::string, KeyType>, MintedKeyPair> pairs_;
  std::map<std::pair<std::string, KeyType>, std::unique_ptr<NodeIdentity>> identities_;
};

// DER of a PEM certificate (also one NodeIdentity would refuse).
inline std::string PemToDer(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  BOOST_REQUIRE(cert != nullptr);
  unsigned char* buf = nullptr;
  int len = i2d_X509(cert, &buf);
  std::string der(reinterpret_cast<char*>(buf), static_cast<size_t>(len));
  OPENSSL_free(buf);
  X509_free(cert);
  return der;
}

inline BootId Boot(uint8_t b) {
  BootId id{};
  id.fill(b);
  return id;
}

inline Heartbeat MakeHeartbeat(const NodeIdentity& id, const std::string& pool, uint64_t sequence,
                               BootId boot = Boot(1), bool reachable = false) {
  Heartbeat hb;
  hb.node = id.node();
  hb.pool = pool;
  hb.boot_id = boot;
  hb.sequence = sequence;
  hb.cloud_reachable = reachable;
  hb.sent_wall_us = 1'767'225'600'000'000;
  hb.certificate_fingerprint = id.fingerprint();
  return hb;
}

// The datagram of `hb` signed by `signer`.
inline std::string Signed(const Heartbeat& hb, const NodeIdentity& signer) {
  auto body = EncodeHeartbeatBody(hb);
  BOOST_REQUIRE_MESSAGE(body.ok(), body.status().ToString());
  auto sig = signer.Sign(*body);
  BOOST_REQUIRE_MESSAGE(sig.ok(), sig.status().ToString());
  auto datagram = EncodeHeartbeatDatagram(*body, *sig);
  BOOST_REQUIRE_MESSAGE(datagram.ok(), datagram.status().ToString());
  return *datagram;
}

inline std::string CertificateDatagram(const NodeIdentity& id) {
  auto d = EncodeCertificateDatagram(id.certificate_der());
  BOOST_REQUIRE(d.ok());
  return *d;
}

}  // namespace poolcoord::agent::testing
