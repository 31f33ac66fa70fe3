// The REST verbs of poolleases and delegatedleases, and their /status
// subresource, over the Store: get, list, watch, create, update, patch, delete,
// deletecollection, as kube-apiserver's generic registry serves a cluster-scoped
// resource. Thin: decode, hand the rule check and the mutation to
// Store::Update as one function, encode.
#pragma once

#include <string>

#include "handlers/http_types.h"
#include "store/object.h"
#include "store/store.h"

namespace poolcoord::base {
class Clock;
}  // namespace poolcoord::base

namespace poolcoord::election {
class LeaseRules;
}  // namespace poolcoord::election

namespace poolcoord::handlers {

struct RestContext {
  store::Store* store = nullptr;
  const base::Clock* clock = nullptr;
  const election::LeaseRules* rules = nullptr;  // nullptr: no lease rules (tests)
};

// One resource request after routing: /apis/<g>/<v>/<plural>[/<name>[/<subresource>]].
struct ResourcePath {
  store::Kind kind;
  std::string name;         // "" for the collection
  std::string subresource;  // "" or "status"
};

// Serves one request; never throws. Unknown subresources are 404, verbs the path
// does not support are 405 MethodNotAllowed.
Response ServeResource(const RestContext& context, const ResourcePath& path, Request& request);

}  // namespace poolcoord::handlers
