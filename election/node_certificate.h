// Node identities: the kubelet client certificate and key that sign heartbeats,
// and the checks a receiver makes on a peer's certificate and signature.
//
// This file depends on OpenSSL 3 (EVP) and absl only: the agent checks its
// peers with it and the server's proof check (election/delegation_proof.h) checks
// a forwarded heartbeat's certificate with it, so both judge a node identity
// the same way. agent/node_certificate.h re-exports it.
//
// Keys: ECDSA on P-256 (the kubelet's own default when it rotates its client
// certificate) signs ECDSA-SHA256 (DER signature); RSA of 2048 to 4096 bits
// signs RSASSA-PSS with SHA-256, MGF1-SHA-256 and a 32-byte salt. The algorithm
// follows from the certificate's key, never from the datagram, so a sender
// cannot pick a weaker one. Other keys are refused.
//
// A node certificate is accepted when (as kube-apiserver's x509 authenticator
// and Node authorizer would take it):
// - it chains to the cluster CA bundle (every certificate in the bundle is a
//   trust anchor, so a bundle holding an intermediate works) at the given time;
// - it may be used for TLS client authentication (no extendedKeyUsage, or one
//   that includes clientAuth: the kubelet's serving certificate names the node
//   too, but it is not the identity the agent uses);
// - its subject has CN "system:node:<node>" and an O "system:nodes".
//
// Modelled signatures, for a simulator that runs thousands of nodes on one
// simulated clock (agent/sim/README.md), where computing every ECDSA signature
// would cost more than the nodes' logic: an identity whose certificate's
// subject carries the organization kModelledSignatureOrganization signs by
// model, SHA-256 of a label, its certificate's fingerprint and the data —
// bytes anyone holding the certificate could compute, so they prove nothing —
// and only a CertificateAuthority made with modelled_signatures takes them: it
// checks such a leaf's signatures against the model (a different signer, or
// different data, fails as a real signature would). Every other authority
// checks the key's real signature, which a model's bytes never are. No flag
// or configuration of the shipped binaries makes such an authority.
//
// Thread-safety: CertificateAuthority, NodeCertificate and NodeIdentity are
// immutable after creation and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "election/heartbeat.h"

typedef struct evp_pkey_st EVP_PKEY;
typedef struct evp_md_ctx_st EVP_MD_CTX;
typedef struct x509_st X509;
typedef struct x509_store_st X509_STORE;

namespace poolcoord::election {

inline constexpr char kNodeUserPrefix[] = "system:node:";
inline constexpr char kNodesGroup[] = "system:nodes";
// The subject organization of a certificate whose key signs by model (see the
// file comment).
inline constexpr char kModelledSignatureOrganization[] = "poolcoord-sim:modelled-signatures";

enum class KeyType { kEcdsaP256, kRsa };

// Why a certificate was refused; each one has a drop counter.
enum class CertificateError {
  kNone,
  kMalformed,         // not DER, or trailing bytes
  kUnknownAuthority,  // does not chain to the cluster CA (or a bad chain)
  kExpired,           // outside its validity (or the CA's) at the given time
  kWrongIdentity,     // not CN system:node:<node> + O system:nodes, or not for clientAuth
  kUnsupportedKey,    // neither ECDSA P-256 nor RSA 2048..4096
};
const char* CertificateErrorName(CertificateError error);

struct CertificateAuthorityOptions {
  // Takes modelled signatures from leaves that carry
  // kModelledSignatureOrganization (simulators only; see the file comment).
  bool modelled_signatures = false;
};

// The cluster CA bundle (PEM, one or more certificates).
class CertificateAuthority {
 public:
  // InvalidArgument when the PEM holds no certificate or cannot be parsed;
  // NotFound when the file cannot be read.
  static absl::StatusOr<std::shared_ptr<const CertificateAuthority>> FromPem(
      absl::string_view pem, CertificateAuthorityOptions options = {});
  static absl::StatusOr<std::shared_ptr<const CertificateAuthority>> FromFile(const std::string& path);
  ~CertificateAuthority();
  CertificateAuthority(const CertificateAuthority&) = delete;
  CertificateAuthority& operator=(const CertificateAuthority&) = delete;

  X509_STORE* store() const { return store_; }
  bool modelled_signatures() const { return options_.modelled_signatures; }

 private:
  CertificateAuthority(X509_STORE* store, CertificateAuthorityOptions options)
      : store_(store), options_(options) {}
  X509_STORE* store_;
  const CertificateAuthorityOptions options_;
};

// A node certificate that passed every check at some time; holds its public key
// ready for signature checks.
class NodeCertificate {
 public:
  struct Result {
    std::shared_ptr<const NodeCertificate> certificate;  // set when error == kNone
    CertificateError error = CertificateError::kNone;
    std::string detail;  // a sentence for logs when refused
  };
  // Parses `der` and runs every check at `wall_us` (µs since the epoch).
  static Result Verify(absl::string_view der, const CertificateAuthority& ca, int64_t wall_us);
  ~NodeCertificate();
  NodeCertificate(const NodeCertificate&) = delete;
  NodeCertificate& operator=(const NodeCertificate&) = delete;

  const std::string& node() const { return node_; }  // "hz-1"
  const std::string& der() const { return der_; }
  const Fingerprint& fingerprint() const { return fingerprint_; }
  KeyType key_type() const { return key_type_; }
  // Validity, µs since the epoch (the certificate's own notBefore/notAfter).
  int64_t not_before_us() const { return not_before_us_; }
  int64_t not_after_us() const { return not_after_us_; }
  bool ValidAt(int64_t wall_us) const {
    return wall_us >= not_before_us_ && wall_us <= not_after_us_;
  }
  // True when `signature` is this certificate's key's signature of `data`
  // (or its model's, when modelled()).
  bool VerifySignature(absl::string_view data, absl::string_view signature) const;
  // Signatures are checked against the model: the leaf carries
  // kModelledSignatureOrganization and the authority that verified it takes
  // modelled signatures.
  bool modelled() const { return modelled_; }

 private:
  NodeCertificate() = default;
  bool modelled_ = false;
  std::string node_;
  std::string der_;
  Fingerprint fingerprint_{};
  KeyType key_type_ = KeyType::kEcdsaP256;
  int64_t not_before_us_ = 0, not_after_us_ = 0;
  EVP_PKEY* key_ = nullptr;
  // A verification context initialized once (digest, key, padding); each check
  // starts from a copy, which skips OpenSSL 3's per-init algorithm fetches.
  EVP_MD_CTX* verify_template_ = nullptr;
};

// The agent's own identity: its certificate and private key.
class NodeIdentity {
 public:
  // From PEM: the certificate (the first one in cert_pem) and its private key
  // (key_pem; the kubelet's kubelet-client-current.pem holds both, so the same
  // text may be passed twice). Checks: the key matches the certificate, the key
  // type is supported, the subject names a node (CN system:node:<node>, O
  // system:nodes). InvalidArgument otherwise. The chain is not checked here
  // (the receivers do); the caller may VerifyAgainst() to fail early.
  static absl::StatusOr<std::unique_ptr<NodeIdentity>> FromPem(absl::string_view cert_pem,
                                                                absl::string_view key_pem);
  // NotFound when a file cannot be read; else as FromPem.
  static absl::StatusOr<std::unique_ptr<NodeIdentity>> FromFiles(const std::string& cert_path,
                                                                  const std::string& key_path);
  ~NodeIdentity();
  NodeIdentity(const NodeIdentity&) = delete;
  NodeIdentity& operator=(const NodeIdentity&) = delete;

  const std::string& node() const { return node_; }
  const std::string& certificate_der() const { return der_; }
  const Fingerprint& fingerprint() const { return fingerprint_; }
  KeyType key_type() const { return key_type_; }
  // The signature of `data` (see the file comment for the algorithm; the
  // model's when the certificate carries kModelledSignatureOrganization).
  // Internal when OpenSSL fails.
  absl::StatusOr<std::string> Sign(absl::string_view data) const;
  bool modelled() const { return modelled_; }
  // The receivers' check of this certificate, at `wall_us`.
  NodeCertificate::Result VerifyAgainst(const CertificateAuthority& ca, int64_t wall_us) const;

 private:
  NodeIdentity() = default;
  std::string node_;
  std::string der_;
  Fingerprint fingerprint_{};
  KeyType key_type_ = KeyType::kEcdsaP256;
  EVP_PKEY* key_ = nullptr;
  bool modelled_ = false;
};

// SHA-256 of `der`.
Fingerprint CertificateFingerprint(absl::string_view der);

}  // namespace poolcoord::election
