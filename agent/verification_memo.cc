#include "agent/verification_memo.h"

#include <openssl/evp.h>

namespace poolcoord::agent {
namespace {

// SHA-256 over the parts, each preceded by its length (no two inputs collide
// by shifting bytes between parts).
std::array<uint8_t, 32> Digest(std::initializer_list<absl::string_view> parts) {
  std::array<uint8_t, 32> out{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  for (absl::string_view p : parts) {
    const uint64_t n = p.size();
    EVP_DigestUpdate(ctx, &n, sizeof(n));
    EVP_DigestUpdate(ctx, p.data(), p.size());
  }
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, out.data(), &len);
  EVP_MD_CTX_free(ctx);
  return out;
}

}  // namespace

NodeCertificate::Result VerificationMemo::Certificate(absl::string_view der,
                                                      const CertificateAuthority& ca, int64_t wall_us) {
  const Fingerprint fp = CertificateFingerprint(der);
  {
    absl::MutexLock l(&mu_);
    auto it = certificates_.find(fp);
    if (it != certificates_.end()) {
      ++hits_;
      NodeCertificate::Result r;
      r.certificate = it->second;
      return r;
    }
    ++misses_;
  }
  NodeCertificate::Result r = NodeCertificate::Verify(der, ca, wall_us);
  if (r.error == CertificateError::kNone) {
    absl::MutexLock l(&mu_);
    certificates_.emplace(fp, r.certificate);
  }
  return r;
}

bool VerificationMemo::Signature(const NodeCertificate& cert, absl::string_view data,
                                 absl::string_view signature) {
  const auto& fp = cert.fingerprint();
  const Key key = Digest({absl::string_view(reinterpret_cast<const char*>(fp.data()), fp.size()), data,
                          signature});
  {
    absl::MutexLock l(&mu_);
    if (signatures_.contains(key)) {
      ++hits_;
      return true;
    }
    ++misses_;
  }
  const bool ok = cert.VerifySignature(data, signature);
  if (ok) {
    absl::MutexLock l(&mu_);
    if (signatures_.size() >= max_signatures_) signatures_.clear();
    signatures_.insert(key);
  }
  return ok;
}

int64_t VerificationMemo::hits() const {
  absl::MutexLock l(&mu_);
  return hits_;
}

int64_t VerificationMemo::misses() const {
  absl::MutexLock l(&mu_);
  return misses_;
}

}  // namespace poolcoord::agent
