// /healthz, /livez and /readyz, as k8s.io/apiserver pkg/server/healthz serves them
// (kubelet probes and kube-aggregator read these without credentials).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "handlers/http_types.h"

namespace poolcoord::handlers {

// A named check; true means healthy. Called on the request's thread, so it must
// be cheap and thread-safe.
using HealthCheck = std::pair<std::string, std::function<bool()>>;

// Serves GET /<endpoint> and GET /<endpoint>/<check> (`endpoint` is "healthz",
// "livez" or "readyz"; request.path tells which form). A "ping" check that always
// passes runs first unless `checks` names one itself.
// - /<endpoint>: every check not excluded by `?exclude=<name>` (repeatable) runs.
//   All pass: 200 text/plain; charset=utf-8, body "ok"; with `?verbose`, one line
//   "[+]<check> ok" per check ("[+]<check> excluded: ok" for excluded ones), then
//   "<endpoint> check passed". Any failure: 500 with the lines of every check,
//   failures as "[-]<check> failed: reason withheld", then "<endpoint> check
//   failed". Exclusions naming no check add a "warn: some health checks cannot be
//   excluded: no matches for ..." line.
// - /<endpoint>/<check>: runs that check alone: 200 "ok", 500 "internal server
//   error: <check> check failed", 404 when no check has that name.
// Thread-safe as far as the checks are.
Response ServeHealth(const Request& request, std::string_view endpoint,
                     const std::vector<HealthCheck>& checks);

}  // namespace poolcoord::handlers
