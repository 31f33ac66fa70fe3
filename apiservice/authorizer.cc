#include "apiservice/authorizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "apiservice/authenticator.h"
#include "base/log.h"
#include "handlers/registry/registry.h"
#include "store/api_error.h"
#include "store/object.h"

namespace poolcoord::apiservice {
namespace {

bool HasPrefix(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool IsHealthPath(std::string_view path) {
  for (std::string_view health : {"/healthz", "/livez", "/readyz"}) {
    if (path == health || (HasPrefix(path, health) && path.size() > health.size() &&
                           path[health.size()] == '/')) {
      return true;
    }
  }
  return false;
}

bool IsReadVerb(const std::string& verb) {
  return verb == "get" || verb == "list" || verb == "watch";
}

// The strategy of a kind of ours that `info` names (cluster-scoped, as all are);
// nullptr for anything else.
const handlers::registry::Strategy* OurKind(const RequestInfo& info) {
  if (info.api_group != store::kGroup || !info.namespace_.empty()) return nullptr;
  return handlers::registry::ForPlural(info.resource);
}

}  // namespace

Authorizer::Authorizer(AuthorizerOptions options) : options_(std::move(options)) {}

std::string ForbiddenMessage(const base::UserInfo& user, const RequestInfo& info,
                             const std::string& reason) {
  const std::string suffix = reason.empty() ? "" : absl::StrCat(": ", reason);
  if (!info.is_resource_request) {
    return absl::StrFormat("forbidden: User \"%s\" cannot %s path \"%s\"%s", user.username,
                           info.verb, info.path, suffix);
  }
  std::string resource = info.resource;
  if (!info.subresource.empty()) absl::StrAppend(&resource, "/", info.subresource);
  std::string message =
      info.namespace_.empty()
          ? absl::StrFormat("User \"%s\" cannot %s resource \"%s\" in API group \"%s\" at the "
                            "cluster scope",
                            user.username, info.verb, resource, info.api_group)
          : absl::StrFormat("User \"%s\" cannot %s resource \"%s\" in API group \"%s\" in the "
                            "namespace \"%s\"",
                            user.username, info.verb, resource, info.api_group, info.namespace_);
  // schema.GroupResource.String(): "resource.group", or "resource" for core.
  std::string qualified =
      info.api_group.empty() ? info.resource : absl::StrCat(info.resource, ".", info.api_group);
  absl::StrAppend(&message, suffix);
  if (info.name.empty()) return absl::StrCat(qualified, " is forbidden: ", message);
  return absl::StrFormat("%s \"%s\" is forbidden: %s", qualified, info.name, message);
}

bool Authorizer::Allowed(const base::UserInfo& user, const RequestInfo& info) const {
  if (user.IsMaster()) return true;
  if (!info.is_resource_request) {
    for (const std::string& allowed : options_.always_allow_paths) {
      if (!allowed.empty() && allowed.back() == '*') {
        if (HasPrefix(info.path, std::string_view(allowed).substr(0, allowed.size() - 1))) return true;
      } else if (info.path == allowed) {
        return true;
      }
    }
    if (IsHealthPath(info.path) || info.path == "/version" || info.path == "/version/" ||
        info.path == "/metrics") {
      return info.verb == "get" || info.verb == "head";
    }
    if (info.path == kWebhookPath && info.verb == "post") return true;
    if (IsAnonymous(user) || !user.InGroup(kAuthenticatedGroup)) return false;
    if (info.verb != "get" && info.verb != "head") return false;
    return info.path == "/api" || HasPrefix(info.path, "/api/") || info.path == "/apis" ||
           HasPrefix(info.path, "/apis/") || info.path == "/openapi" ||
           HasPrefix(info.path, "/openapi/");
  }
  const handlers::registry::Strategy* strategy = OurKind(info);
  if (strategy == nullptr) return false;
  if (user.InGroup("system:nodes")) return true;
  if (!options_.forwarder_user.empty() && user.username == options_.forwarder_user) {
    if (info.subresource.empty() && IsReadVerb(info.verb)) return true;
  }
  if (std::find(options_.lease_proxy_users.begin(), options_.lease_proxy_users.end(),
                user.username) != options_.lease_proxy_users.end()) {
    return info.subresource.empty() && IsReadVerb(info.verb);
  }
  return false;
}

absl::Status Authorizer::Authorize(const base::UserInfo& user, const RequestInfo& info) const {
  if (Allowed(user, info)) return absl::OkStatus();
  std::string reason;
  if (options_.access_reviewer != nullptr) {
    absl::StatusOr<AccessReviewResult> review = options_.access_reviewer->Review(user, info);
    if (!review.ok()) {
      base::LogWarning("subject access review failed: ", review.status().message());
      // responsewriters.InternalError's text (kube writes it as text/plain; we
      // keep every error a Status object).
      store::ApiErrorInfo error;
      error.code = 500;
      error.reason = "InternalError";
      error.message = absl::StrFormat("Internal Server Error: \"%s\": %s", info.path,
                                      std::string(review.status().message()));
      return store::MakeApiError(absl::StatusCode::kInternal, error);
    }
    if (review->allowed) return absl::OkStatus();
    reason = review->reason;
  }
  store::ApiErrorInfo error;
  error.code = 403;
  error.reason = "Forbidden";
  error.message = ForbiddenMessage(user, info, reason);
  if (info.is_resource_request) {
    error.name = info.name;
    error.group = info.api_group;
    error.kind = info.resource;
  }
  return store::MakeApiError(absl::StatusCode::kPermissionDenied, error);
}

}  // namespace poolcoord::apiservice
