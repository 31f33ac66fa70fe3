// Authorization delegated to the cloud's kube-apiserver with
// SubjectAccessReview, as k8s.io/apiserver's delegating authorizer does
// (plugin/pkg/authorizer/webhook/webhook.go; defaults from
// pkg/server/options/authorization.go: allowed answers cached 10 s, denied ones
// 10 s, keyed by the review's spec).
//
// The review (cloud::SubjectAccessReview, through the typed client) carries
// resourceAttributes {namespace, verb, group, version, resource, subresource,
// name} for resource requests, nonResourceAttributes {path, verb} for everything
// else, and the user, groups, extra and uid. Answer: status.allowed,
// status.denied, status.reason, status.evaluationError.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "apiservice/delegating_authn.h"
#include "cloud/clientset.h"
#include "apiservice/request_info.h"
#include "apiservice/ttl_cache.h"
#include "base/clock.h"
#include "base/user_info.h"

namespace poolcoord::apiservice {

struct AccessReviewResult {
  bool allowed = false;
  bool denied = false;  // an explicit deny; neither flag set is "no opinion"
  std::string reason;
};

// Reviews a request's attributes. Thread-safe.
class AccessReviewer {
 public:
  virtual ~AccessReviewer() = default;
  // An answer; an error when none could be had (cloud unreachable, a non-2xx
  // status such as 403 for a service account without system:auth-delegator, a
  // body that is not a SubjectAccessReview, or allowed and denied both set).
  virtual absl::StatusOr<AccessReviewResult> Review(const base::UserInfo& user,
                                                    const RequestInfo& info) = 0;
};

// The review of `info` by `user`: resourceAttributes for resource requests,
// nonResourceAttributes for everything else.
cloud::SubjectAccessReview ReviewFor(const base::UserInfo& user, const RequestInfo& info);
// Its spec as JSON, fields in Go's declaration order; also the cache key.
std::string SubjectAccessReviewSpec(const base::UserInfo& user, const RequestInfo& info);

struct WebhookAccessReviewerOptions {
  std::chrono::microseconds allow_cache_ttl = std::chrono::seconds(10);
  std::chrono::microseconds deny_cache_ttl = std::chrono::seconds(10);
  size_t max_cache_entries = 8192;
  const base::Clock* clock = base::RealClock::Get();  // not owned
};

// SubjectAccessReview through `reviews` (not owned; must outlive this), with the
// cache in front. Errors are not cached; an answer both allowed and denied is
// Internal (as kube's webhook authorizer refuses it).
class WebhookAccessReviewer : public AccessReviewer {
 public:
  WebhookAccessReviewer(cloud::SubjectAccessReviewInterface* reviews,
                        WebhookAccessReviewerOptions options);
  absl::StatusOr<AccessReviewResult> Review(const base::UserInfo& user,
                                            const RequestInfo& info) override;

 private:
  cloud::SubjectAccessReviewInterface* reviews_;
  WebhookAccessReviewerOptions options_;
  TtlCache<AccessReviewResult> cache_;
};

}  // namespace poolcoord::apiservice
