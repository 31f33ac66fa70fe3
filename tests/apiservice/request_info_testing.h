// Shared by the authorizer tests (tests/apiservice/authorizer_test.cc,
// delegating_authz_test.cc): the RequestInfo of a request, resolved as the
// server resolves it before it authorizes, so the tests judge real attributes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "apiservice/request_info.h"
#include "handlers/http_types.h"

namespace poolcoord::apiservice::testing {

// The API group/version's path prefix.
inline const std::string kBase = "/apis/coordination.pool/v1alpha1";

// `method path?query` resolved by ResolveRequestInfo.
inline RequestInfo Info(const std::string& method, const std::string& path,
                        std::vector<std::pair<std::string, std::string>> query = {}) {
  handlers::Request r;
  r.method = method;
  r.path = path;
  r.query = std::move(query);
  return ResolveRequestInfo(r);
}

}  // namespace poolcoord::apiservice::testing
