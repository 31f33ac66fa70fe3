// Authorization of authenticated requests, before any handler runs. A fixed
// policy for what the lease rules judge themselves, then SubjectAccessReview:
// - group system:masters: everything (as kube-apiserver's privileged group);
// - anyone, anonymous included: --authorization-always-allow-paths (a trailing
//   "*" matches a prefix; default /healthz, /readyz, /livez), the health paths
//   and their subpaths, /version, /metrics and POST /validate-delegated-heartbeat
//   (kube's system:public-info-viewer plus the metrics and webhook paths);
// - any authenticated user: GET/HEAD on discovery (/api, /apis and below, when
//   not a resource request) and /openapi, /openapi/* (kube's system:discovery);
// - group system:nodes: every verb on every kind of ours (handlers/registry/)
//   and its subresources (the lease rules then decide in detail);
// - the forwarder user and the lease-proxy users: get/list/watch every kind
//   of ours.
// What these rules do not allow goes to the AccessReviewer when one is
// configured (--authorization-kubeconfig or in-cluster: SubjectAccessReview,
// delegating_authz.h), as the union authorizer of an aggregated API server does
// after its always-allow paths and groups:
// - allowed: OK;
// - denied or no opinion: 403 Forbidden, the review's reason appended to the
//   message after ": " (responsewriters.Forbidden);
// - the review failed (cloud unreachable, 403 for want of system:auth-delegator):
//   500 InternalError "Internal Server Error: "<path>": <error>", because
//   k8s.io/apiserver's WithAuthorization answers an authorizer error that comes
//   without an Allow with responsewriters.InternalError (the webhook's error
//   is "no opinion" plus the error). The request is refused either way.
// Everything else is 403 Forbidden with kube-apiserver's message
// (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters.forbiddenMessage):
//   widgets.coordination.pool is forbidden: User "u" cannot list resource
//   "widgets" in API group "coordination.pool" at the cluster scope
//   forbidden: User "u" cannot get path "/x"
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "apiservice/delegating_authz.h"
#include "apiservice/request_info.h"
#include "base/user_info.h"

namespace poolcoord::apiservice {

struct AuthorizerOptions {
  std::vector<std::string> always_allow_paths = {"/healthz", "/readyz", "/livez"};
  std::string forwarder_user;                  // "": nobody
  std::vector<std::string> lease_proxy_users;
  // Delegated authorization of what the rules above leave open; nullptr: none
  // (then it is 403). Not owned; must outlive the Authorizer.
  AccessReviewer* access_reviewer = nullptr;
};

class Authorizer {
 public:
  explicit Authorizer(AuthorizerOptions options);
  // OK, PermissionDenied (store::MakeApiError 403 Forbidden with details
  // {name, group, kind: resource}), or Internal (500) when the delegated review
  // failed. Thread-safe; pure without an AccessReviewer, else it may block on
  // SubjectAccessReview for an uncached question.
  absl::Status Authorize(const base::UserInfo& user, const RequestInfo& info) const;

 private:
  bool Allowed(const base::UserInfo& user, const RequestInfo& info) const;
  AuthorizerOptions options_;
};

// The kube-apiserver 403 message for a denied request; a non-empty `reason`
// (the authorizer's) is appended after ": ".
std::string ForbiddenMessage(const base::UserInfo& user, const RequestInfo& info,
                             const std::string& reason = "");

}  // namespace poolcoord::apiservice
