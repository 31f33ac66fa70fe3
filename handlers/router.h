// The entry point from the transport into the handlers: one Router serves every
// path of the API (REST verbs, watch, discovery, OpenAPI, health, admission).
// Authentication and authorization have run before Handle is called.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "handlers/http_types.h"
#include "store/store.h"

namespace poolcoord::base {
class Clock;
}  // namespace poolcoord::base

namespace poolcoord::election {
class LeaseRules;
class MembershipIndex;
}  // namespace poolcoord::election

namespace poolcoord::handlers {

struct RouterOptions {
  store::Store* store = nullptr;           // not owned
  const base::Clock* clock = nullptr;         // not owned
  election::LeaseRules* rules = nullptr;          // not owned; nullptr: no lease rules
  const election::MembershipIndex* membership = nullptr;  // not owned
  std::vector<std::string> lease_proxy_users;
  std::string forwarder_user;
  std::string version_git = "v0.1.0";
  // Named health checks for /healthz, /livez and /readyz (true = healthy).
  std::vector<std::pair<std::string, std::function<bool()>>> readyz_checks;
  std::vector<std::pair<std::string, std::function<bool()>>> livez_checks;
  // Prometheus text for /metrics, supplied by apiservice/.
  std::function<std::string()> metrics_text;
};

class Router {
 public:
  virtual ~Router() = default;
  // Never throws; every failure is a Status response.
  virtual Response Handle(Request& request) = 0;
};

std::unique_ptr<Router> NewRouter(const RouterOptions& options);

}  // namespace poolcoord::handlers
