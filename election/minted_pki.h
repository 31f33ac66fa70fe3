// Certificates minted in memory, for the simulator's modelled nodes, the tests
// and the benchmarks: a cluster CA and kubelet-style client certificates signed
// by it, with every property a test needs to get wrong on purpose.
//
// Not for production use: keys live in memory only, serial numbers are random.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "election/node_certificate.h"

namespace poolcoord::election {

struct MintedKeyPair {
  std::string cert_pem;
  std::string key_pem;
};

struct MintOptions {
  KeyType key_type = KeyType::kEcdsaP256;
  int rsa_bits = 2048;
  std::string ec_curve = "P-256";  // "P-384" makes a key the agent refuses
  // A PEM private key to certify instead of a new one (RSA key generation takes
  // ~50 ms: benchmarks share a few keys among many nodes).
  std::string key_pem;
  // A CA certificate (an intermediate, when signed by another CA).
  bool is_ca = false;
  // Validity, µs since the epoch; 0 = [now - 1 h, now + 1 year].
  int64_t not_before_us = 0;
  int64_t not_after_us = 0;
  // The subject: CN and Os as given (a node certificate: "system:node:<node>",
  // {"system:nodes"}).
  std::string common_name;
  std::vector<std::string> organizations;
  // extendedKeyUsage: "clientAuth" (a kubelet client certificate), "serverAuth",
  // or "" for none.
  std::string extended_key_usage = "clientAuth";
};

// A self-signed CA (basicConstraints CA:TRUE, keyCertSign).
absl::StatusOr<MintedKeyPair> MintCertificateAuthority(const std::string& common_name,
                                                       const MintOptions& options = {});

// A leaf signed by `ca`; options.common_name/organizations are the subject.
absl::StatusOr<MintedKeyPair> MintCertificate(const MintedKeyPair& ca, const MintOptions& options);

// The usual node certificate: CN system:node:<node>, O system:nodes, clientAuth.
absl::StatusOr<MintedKeyPair> MintNodeCertificate(const MintedKeyPair& ca, const std::string& node,
                                                  KeyType key_type = KeyType::kEcdsaP256);

}  // namespace poolcoord::election
