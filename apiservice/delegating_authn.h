// Bearer-token authentication delegated to the cloud's kube-apiserver with
// TokenReview, as k8s.io/apiserver's delegating authenticator does
// (plugin/pkg/authenticator/token/webhook, wrapped in
// pkg/authentication/token/cache with 10 s TTLs for success and failure).
//
// The review (cloud::TokenReview, through the typed client) carries
// spec.token; the answer status.authenticated, status.user{username, uid,
// groups, extra}, status.error.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "apiservice/ttl_cache.h"
#include "base/clock.h"
#include "base/user_info.h"
#include "cloud/clientset.h"

namespace poolcoord::apiservice {

struct TokenReviewResult {
  bool authenticated = false;
  base::UserInfo user;  // as the review returned it; no groups added
  std::string error;        // status.error, when the reviewer gave one
};

// Reviews bearer tokens. Thread-safe.
class TokenReviewer {
 public:
  virtual ~TokenReviewer() = default;
  // An answer, authenticated or not; an error when no answer could be had (cloud
  // unreachable, a non-2xx HTTP status such as 403 for a service account without
  // system:auth-delegator, a body that is not a TokenReview).
  virtual absl::StatusOr<TokenReviewResult> Review(const std::string& token) = 0;
};

struct WebhookTokenReviewerOptions {
  // k8s.io/apiserver's DelegatingAuthenticationOptions.CacheTTL (10 s), used for
  // authenticated and unauthenticated answers alike. An answer carrying
  // status.error and transport errors are not cached (cacheErrs=false).
  std::chrono::microseconds cache_ttl = std::chrono::seconds(10);
  size_t max_cache_entries = 4096;
  const base::Clock* clock = base::RealClock::Get();  // not owned
};

// TokenReview through `reviews` (not owned; must outlive this), with the cache
// in front. The cache key is an
// HMAC-SHA256 of the token under a per-process random key, so the cache never
// holds a token or a plain hash of it (as kube's token cache keys it).
class WebhookTokenReviewer : public TokenReviewer {
 public:
  WebhookTokenReviewer(cloud::TokenReviewInterface* reviews, WebhookTokenReviewerOptions options);
  absl::StatusOr<TokenReviewResult> Review(const std::string& token) override;

 private:
  std::string CacheKey(const std::string& token) const;

  cloud::TokenReviewInterface* reviews_;
  WebhookTokenReviewerOptions options_;
  std::string hmac_key_;
  TtlCache<TokenReviewResult> cache_;
};

}  // namespace poolcoord::apiservice
