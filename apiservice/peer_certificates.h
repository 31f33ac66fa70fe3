// The certificate chain a TLS client presented, kept per connection by the
// transport for the authenticator (which verifies it; the handshake accepts any).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <openssl/x509.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::apiservice {

// Immutable after construction apart from the verification cache; thread-safe.
class PeerCertificates {
 public:
  // Takes a new reference of `leaf` and of each intermediate (leaf excluded, as
  // SSL_get_peer_cert_chain gives it on the server side, order as sent).
  PeerCertificates(X509* leaf, const std::vector<X509*>& intermediates);
  ~PeerCertificates();
  PeerCertificates(const PeerCertificates&) = delete;
  PeerCertificates& operator=(const PeerCertificates&) = delete;

  // Parses PEM: `leaf_pem` holds one certificate, `intermediates_pem` zero or more.
  // For tests and tools. InvalidArgument when a PEM does not parse.
  static absl::StatusOr<std::shared_ptr<const PeerCertificates>> FromPem(
      const std::string& leaf_pem, const std::string& intermediates_pem = "");

  X509* leaf() const { return leaf_; }
  STACK_OF(X509) * intermediates() const { return intermediates_; }

  // A small memo of verification results keyed by the verifying trust store, so
  // a keep-alive connection verifies its chain once a minute, not per request.
  // Returns true and sets *verified when a fresh result for `key` exists.
  bool CachedVerification(const void* key, bool* verified) const;
  void CacheVerification(const void* key, bool verified) const;

 private:
  X509* leaf_;
  STACK_OF(X509) * intermediates_;
  struct Entry {
    const void* key;
    bool verified;
    std::chrono::steady_clock::time_point at;
  };
  mutable absl::Mutex mu_;
  mutable std::vector<Entry> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::apiservice
