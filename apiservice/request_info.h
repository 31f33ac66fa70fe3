// The attributes of a request that authorization and metrics look at, resolved
// from method, path and query as k8s.io/apiserver's RequestInfoFactory does
// (pkg/endpoints/request/requestinfo.go), with API prefixes "api" and "apis".
//
// Resource requests: /apis/<group>/<version>/[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]
// (and /api/<version>/...). Verbs: GET/HEAD on a name is get, on a collection
// list, or watch with ?watch (any value but "0"/"false") or the legacy
// /watch/ path segment; POST create; PUT update; PATCH patch; DELETE on a name
// delete, on a collection deletecollection. A list or watch with
// fieldSelector=metadata.name=<n> carries that name. Everything else is a
// non-resource request whose verb is the lower-cased HTTP method.
#pragma once

#include <string>
#include <vector>

#include "handlers/http_types.h"

namespace poolcoord::apiservice {

struct RequestInfo {
  bool is_resource_request = false;
  std::string path;
  std::string verb;        // "get", "list", "watch", "create", ... or "post" (non-resource)
  std::string api_prefix;  // "apis" or "api"
  std::string api_group;   // "" for the core group
  std::string api_version;
  std::string namespace_;  // "" for cluster scope
  std::string resource;    // "widgets"
  std::string subresource; // "status"
  std::string name;
  std::vector<std::string> parts;  // resource/name/subresource/...
};

// Pure; never fails (a malformed resource path resolves like kube-apiserver does,
// as far as it can).
RequestInfo ResolveRequestInfo(const handlers::Request& request);

}  // namespace poolcoord::apiservice
