#include "apiservice/delegating_authz.h"

#include "absl/strings/str_cat.h"
#include "cloud/codec.h"

namespace poolcoord::apiservice {

cloud::SubjectAccessReview ReviewFor(const base::UserInfo& user, const RequestInfo& info) {
  cloud::SubjectAccessReview r;
  if (info.is_resource_request) {
    r.resource_attributes = cloud::ResourceAttributes{info.namespace_, info.verb,     info.api_group,
                                                      info.api_version, info.resource,
                                                      info.subresource, info.name};
  } else {
    r.non_resource_attributes = cloud::NonResourceAttributes{info.path, info.verb};
  }
  r.user = user;
  return r;
}

std::string SubjectAccessReviewSpec(const base::UserInfo& user, const RequestInfo& info) {
  return cloud::EncodeSubjectAccessReviewSpec(ReviewFor(user, info));
}

WebhookAccessReviewer::WebhookAccessReviewer(cloud::SubjectAccessReviewInterface* reviews,
                                             WebhookAccessReviewerOptions options)
    : reviews_(reviews), options_(options), cache_(options.clock, options.max_cache_entries) {}

absl::StatusOr<AccessReviewResult> WebhookAccessReviewer::Review(const base::UserInfo& user,
                                                                 const RequestInfo& info) {
  const cloud::SubjectAccessReview review = ReviewFor(user, info);
  const std::string key = cloud::EncodeSubjectAccessReviewSpec(review);
  if (std::optional<AccessReviewResult> cached = cache_.Get(key)) return *cached;
  absl::StatusOr<cloud::SubjectAccessReview> answer = reviews_->Create(review);
  if (!answer.ok()) {
    return absl::Status(answer.status().code(),
                        absl::StrCat("SubjectAccessReview: ", answer.status().message()));
  }
  if (answer->allowed && answer->denied) {
    return absl::InternalError(
        "webhook subject access review returned both allow and deny response");
  }
  AccessReviewResult result{answer->allowed, answer->denied, answer->reason};
  cache_.Put(key, result, result.allowed ? options_.allow_cache_ttl : options_.deny_cache_ttl);
  return result;
}

}  // namespace poolcoord::apiservice
