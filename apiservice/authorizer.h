// Authorization of authenticated requests, before any handler runs. A fixed
// policy standing in for RBAC until SubjectAccessReview delegation comes:
// - group system:masters: everything (as kube-apiserver's privileged group);
// - anyone, anonymous included: --authorization-always-allow-paths (a trailing
//   "*" matches a prefix; default /healthz, /readyz, /livez), the health paths
//   and their subpaths, /version, /metrics and POST /validate-delegated-heartbeat
//   (kube's system:public-info-viewer plus what DESIGN.md opens);
// - any authenticated user: GET/HEAD on discovery (/api, /apis and below, when
//   not a resource request) and /openapi, /openapi/* (kube's system:discovery);
// - group system:nodes: every verb on poolleases and delegatedleases and their
//   subresources (the lease rules then decide in detail);
// - the forwarder user: get/list/watch poolleases and delegatedleases, update and
//   patch delegatedleases/status;
// - the lease-proxy users: get/list/watch poolleases and delegatedleases.
// Everything else is 403 Forbidden with kube-apiserver's message
// (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters.forbiddenMessage):
//   poolleases.coordination.pool is forbidden: User "u" cannot list resource
//   "poolleases" in API group "coordination.pool" at the cluster scope
//   forbidden: User "u" cannot get path "/x"
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "apiservice/request_info.h"
#include "election/user_info.h"

namespace poolcoord::apiservice {

struct AuthorizerOptions {
  std::vector<std::string> always_allow_paths = {"/healthz", "/readyz", "/livez"};
  std::string forwarder_user;                  // "": nobody
  std::vector<std::string> lease_proxy_users;
};

class Authorizer {
 public:
  explicit Authorizer(AuthorizerOptions options);
  // OK or PermissionDenied (store::MakeApiError 403 Forbidden with details
  // {name, group, kind: resource}). Thread-safe, pure.
  absl::Status Authorize(const election::UserInfo& user, const RequestInfo& info) const;

 private:
  bool Allowed(const election::UserInfo& user, const RequestInfo& info) const;
  AuthorizerOptions options_;
};

// The kube-apiserver 403 message for a denied request.
std::string ForbiddenMessage(const election::UserInfo& user, const RequestInfo& info);

}  // namespace poolcoord::apiservice
