#include "apiservice/peer_certificates.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

namespace poolcoord::apiservice {
namespace {
// How long a verification result of a connection's chain is reused.
constexpr std::chrono::seconds kVerificationTtl(60);
}  // namespace

PeerCertificates::PeerCertificates(X509* leaf, const std::vector<X509*>& intermediates)
    : leaf_(leaf), intermediates_(sk_X509_new_null()) {
  X509_up_ref(leaf_);
  for (X509* cert : intermediates) {
    X509_up_ref(cert);
    sk_X509_push(intermediates_, cert);
  }
}

PeerCertificates::~PeerCertificates() {
  X509_free(leaf_);
  sk_X509_pop_free(intermediates_, X509_free);
}

absl::StatusOr<std::shared_ptr<const PeerCertificates>> PeerCertificates::FromPem(
    const std::string& leaf_pem, const std::string& intermediates_pem) {
  BIO* bio = BIO_new_mem_buf(leaf_pem.data(), static_cast<int>(leaf_pem.size()));
  X509* leaf = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (leaf == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("leaf certificate PEM does not parse");
  }
  std::vector<X509*> chain;
  bio = BIO_new_mem_buf(intermediates_pem.data(), static_cast<int>(intermediates_pem.size()));
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) chain.push_back(cert);
  BIO_free(bio);
  ERR_clear_error();  // the end of the PEM stream queues an error
  auto peer = std::make_shared<const PeerCertificates>(leaf, chain);
  X509_free(leaf);
  for (X509* cert : chain) X509_free(cert);
  return peer;
}

bool PeerCertificates::CachedVerification(const void* key, bool* verified) const {
  absl::MutexLock lock(&mu_);
  auto now = std::chrono::steady_clock::now();
  for (const Entry& e : cache_) {
    if (e.key == key && now - e.at < kVerificationTtl) {
      *verified = e.verified;
      return true;
    }
  }
  return false;
}

void PeerCertificates::CacheVerification(const void* key, bool verified) const {
  absl::MutexLock lock(&mu_);
  for (Entry& e : cache_) {
    if (e.key == key) {
      e = {key, verified, std::chrono::steady_clock::now()};
      return;
    }
  }
  cache_.push_back({key, verified, std::chrono::steady_clock::now()});
}

}  // namespace poolcoord::apiservice
