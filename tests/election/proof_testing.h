// Shared by the tests of verifiable delegation: a cluster CA, node
// identities, and proofs as a pool leader forwards them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include <boost/test/unit_test.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/escaping.h"
#include "election/heartbeat.h"
#include "election/minted_pki.h"
#include "election/node_certificate.h"
#include "store/object.h"

namespace poolcoord::election::testing {

inline MintedKeyPair MustMint(absl::StatusOr<MintedKeyPair> minted) {
  BOOST_REQUIRE_MESSAGE(minted.ok(), minted.status().ToString());
  return *minted;
}

// One CA per instance and, lazily, one key pair and identity per (node, key
// type).
class ProofPki {
 public:
  explicit ProofPki(const std::string& ca_name = "test-cluster-ca")
      : ca_(MustMint(MintCertificateAuthority(ca_name))) {}
  const MintedKeyPair& ca() const { return ca_; }

  const MintedKeyPair& NodePair(const std::string& node, KeyType type = KeyType::kEcdsaP256) {
    auto key = std::make_pair(node, type);
    auto it = pairs_.find(key);
    if (it == pairs_.end()) {
      it = pairs_.emplace(key, MustMint(MintNodeCertificate(ca_, node, type))).first;
    }
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
  const std::string& CertificatePem(const std::string& node, KeyType type = KeyType::kEcdsaP256) {
    return NodePair(node, type).cert_pem;
  }

 private:
  MintedKeyPair ca_;
  std::map<std::pair<std::string, KeyType>, MintedKeyPair> pairs_;
  std::map<std::pair<std::string, KeyType>, std::unique_ptr<NodeIdentity>> identities_;
};

// A member's heartbeat: cut off, signed over `challenge`.
inline Heartbeat MemberHeartbeat(const NodeIdentity& id, const std::string& pool,
                                 const std::string& challenge, uint64_t sequence,
                                 uint8_t boot = 1) {
  Heartbeat hb;
  hb.node = id.node();
  hb.pool = pool;
  hb.boot_id.fill(boot);
  hb.sequence = sequence;
  hb.cloud_reachable = false;
  hb.challenge = challenge;
  hb.sent_wall_us = 1'767'225'600'000'000;
  hb.certificate_fingerprint = id.fingerprint();
  return hb;
}

// The datagram `signer` sends for `hb` (body signed by signer's key).
inline std::string SignedDatagram(const NodeIdentity& signer, const Heartbeat& hb) {
  auto body = EncodeHeartbeatBody(hb);
  BOOST_REQUIRE_MESSAGE(body.ok(), body.status().ToString());
  auto sig = signer.Sign(*body);
  BOOST_REQUIRE(sig.ok());
  auto datagram = EncodeHeartbeatDatagram(*body, *sig);
  BOOST_REQUIRE_MESSAGE(datagram.ok(), datagram.status().ToString());
  return *datagram;
}

// spec.proof as the leader writes it: the datagram and the certificate, base64.
inline store::DelegationProof ProofOf(const std::string& datagram, const NodeIdentity& cert_of) {
  return store::DelegationProof{absl::Base64Escape(datagram),
                                absl::Base64Escape(cert_of.certificate_der())};
}

inline store::DelegationProof ProofFor(const NodeIdentity& id, const Heartbeat& hb) {
  return ProofOf(SignedDatagram(id, hb), id);
}

// DER of a PEM certificate.
inline std::string PemDer(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  BOOST_REQUIRE(cert != nullptr);
  unsigned char* der = nullptr;
  int len = i2d_X509(cert, &der);
  X509_free(cert);
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

// An ECDSA-SHA256 signature with a PEM key, for identities NodeIdentity refuses.
inline std::string SignWithPem(const std::string& key_pem, const std::string& data) {
  BIO* bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  BOOST_REQUIRE(key != nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  size_t len = 0;
  BOOST_REQUIRE(EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1);
  BOOST_REQUIRE(EVP_DigestSign(ctx, nullptr, &len,
                               reinterpret_cast<const unsigned char*>(data.data()),
                               data.size()) == 1);
  std::string sig(len, '\0');
  BOOST_REQUIRE(EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                               reinterpret_cast<const unsigned char*>(data.data()),
                               data.size()) == 1);
  sig.resize(len);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return sig;
}

}  // namespace poolcoord::election::testing
