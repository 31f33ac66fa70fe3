// Shared results of certificate and signature checks, for a process that runs
// many agents at once (the simulator): each distinct certificate DER and each
// distinct (certificate, signed bytes, signature) is checked once, and every
// agent's verifier still makes every other check itself (decoding, pool,
// replay, identity, validity now). Sound because both checks are pure
// functions of their inputs: a certificate's chain is judged when first seen
// (as each verifier's own cache does) and its validity window again at each
// use by the verifier; a signature verifies or not.
//
// Only successes are remembered (a refusal is judged again), and the signature
// memo forgets everything when it reaches max_signatures (bounded memory).
//
// A real agent has no use for it: it verifies its own peers' datagrams, each
// once. Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "agent/node_certificate.h"

namespace poolcoord::agent {

class VerificationMemo {
 public:
  explicit VerificationMemo(size_t max_signatures = 1 << 20) : max_signatures_(max_signatures) {}

  // NodeCertificate::Verify, remembered when it succeeds.
  NodeCertificate::Result Certificate(absl::string_view der, const CertificateAuthority& ca,
                                      int64_t wall_us);
  // cert.VerifySignature(data, signature), remembered when it holds.
  bool Signature(const NodeCertificate& cert, absl::string_view data, absl::string_view signature);

  int64_t hits() const;
  int64_t misses() const;

 private:
  using Key = std::array<uint8_t, 32>;
  struct KeyHash {
    size_t operator()(const Key& k) const {
      size_t h;
      static_assert(sizeof(h) <= sizeof(Key));
      __builtin_memcpy(&h, k.data(), sizeof(h));
      return h;
    }
  };
  const size_t max_signatures_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, std::shared_ptr<const NodeCertificate>, KeyHash> certificates_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<Key, KeyHash> signatures_ ABSL_GUARDED_BY(mu_);
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace poolcoord::agent
