#include "apiservice/delegating_authn.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace poolcoord::apiservice {

WebhookTokenReviewer::WebhookTokenReviewer(cloud::TokenReviewInterface* reviews,
                                           WebhookTokenReviewerOptions options)
    : reviews_(reviews),
      options_(options),
      cache_(options.clock, options.max_cache_entries) {
  hmac_key_.resize(32);
  if (RAND_bytes(reinterpret_cast<unsigned char*>(hmac_key_.data()),
                 static_cast<int>(hmac_key_.size())) != 1) {
    // Without randomness the key is still private to the process.
    hmac_key_ = absl::StrCat(reinterpret_cast<uintptr_t>(this), "-poolcoord-token-cache");
  }
}

std::string WebhookTokenReviewer::CacheKey(const std::string& token) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), hmac_key_.data(), static_cast<int>(hmac_key_.size()),
       reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest, &length);
  return std::string(reinterpret_cast<char*>(digest), length);
}

absl::StatusOr<TokenReviewResult> WebhookTokenReviewer::Review(const std::string& token) {
  const std::string key = CacheKey(token);
  if (std::optional<TokenReviewResult> cached = cache_.Get(key)) return *cached;
  cloud::TokenReview review;
  review.token = token;
  absl::StatusOr<cloud::TokenReview> answer = reviews_->Create(review);
  if (!answer.ok()) {
    return absl::Status(answer.status().code(),
                        absl::StrCat("TokenReview: ", answer.status().message()));
  }
  absl::StatusOr<TokenReviewResult> result =
      TokenReviewResult{answer->authenticated, answer->user, answer->error};
  // An authenticated answer that names nobody cannot become a user.
  if (result->authenticated && result->user.username.empty()) {
    return absl::InternalError("TokenReview: authenticated without a username");
  }
  if (result->error.empty()) cache_.Put(key, *result, options_.cache_ttl);
  return result;
}

}  // namespace poolcoord::apiservice
