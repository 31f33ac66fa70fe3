// Authorization delegated to the cloud's kube-apiserver with
// SubjectAccessReview, as k8s.io/apiserver's delegating authorizer does
// (plugin/pkg/authorizer/webhook/webhook.go; defaults from
// pkg/server/options/authorization.go: allowed answers cached 10 s, denied ones
// 10 s, keyed by the review's spec).
//
// Request: POST /apis/authorization.k8s.io/v1/subjectaccessreviews with
//   {"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview",
//    "spec":{"resourceAttributes":{"namespace","verb","group","version",
//            "resource","subresource","name"}   (resource requests)
//          | "nonResourceAttributes":{"path","verb"}  (everything else),
//            "user","groups","extra","uid"}}
// Empty fields are left out (Go's omitempty). Answer: status.allowed,
// status.denied, status.reason, status.evaluationError.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "apiservice/delegating_authn.h"
#include "apiservice/request_info.h"
#include "apiservice/ttl_cache.h"
#include "base/clock.h"
#include "base/user_info.h"

namespace poolcoord::apiservice {

inline constexpr char kSubjectAccessReviewPath[] =
    "/apis/authorization.k8s.io/v1/subjectaccessreviews";

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

// The review's spec as JSON, fields in Go's declaration order; also the cache key.
std::string SubjectAccessReviewSpec(const base::UserInfo& user, const RequestInfo& info);

struct WebhookAccessReviewerOptions {
  std::chrono::microseconds allow_cache_ttl = std::chrono::seconds(10);
  std::chrono::microseconds deny_cache_ttl = std::chrono::seconds(10);
  size_t max_cache_entries = 8192;
  const base::Clock* clock = base::RealClock::Get();  // not owned
};

// SubjectAccessReview over `post`, with the cache in front. Errors are not
// cached.
class WebhookAccessReviewer : public AccessReviewer {
 public:
  WebhookAccessReviewer(ReviewPoster post, WebhookAccessReviewerOptions options);
  absl::StatusOr<AccessReviewResult> Review(const base::UserInfo& user,
                                            const RequestInfo& info) override;

  static std::string RequestBody(const std::string& spec_json);
  // Reads an answer body. InvalidArgument when it is not a review, Internal when
  // it is both allowed and denied (as kube's webhook authorizer refuses it).
  static absl::StatusOr<AccessReviewResult> ParseResponse(std::string_view body);

 private:
  ReviewPoster post_;
  WebhookAccessReviewerOptions options_;
  TtlCache<AccessReviewResult> cache_;
};

}  // namespace poolcoord::apiservice
