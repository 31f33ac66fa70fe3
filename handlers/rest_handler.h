// The HTTP edge of the REST verbs of every kind and its /status subresource
// (get, list, watch, create, update, patch, delete, deletecollection), as
// k8s.io/apiserver's endpoints handlers sit above its registry: query options
// (dryRun, fieldValidation, fieldManager, DeleteOptions, ListOptions), request
// bodies and patches, content negotiation (JSON, Table, PartialObjectMetadata),
// Warning headers, response bodies. The verbs themselves are the generic
// registry store's (handlers/registry/generic_store.h), the kind's behaviour its
// strategy's (handlers/registry/strategy.h); watch streams are watch_handler.h's.
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
