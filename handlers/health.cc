#include "handlers/health.h"

#include <algorithm>
#include <set>


namespace poolcoord::handlers {
namespace {

constexpr char kTextPlain[] = "text/plain; charset=utf-8";

Response Text(int status, std::string body) {
  Response r;
  r.status = status;
  r.SetHeader("Content-Type", kTextPlain);
  r.SetHeader("X-Content-Type-Options", "nosniff");
  r.body = std::move(body);
  return r;
}

// The checks to run: ping first (k8s.io/apiserver installs PingHealthz by
// default), then the caller's.
std::vector<HealthCheck> WithPing(const std::vector<HealthCheck>& checks) {
  std::vector<HealthCheck> all;
  bool has_ping = std::any_of(checks.begin(), checks.end(),
                              [](const HealthCheck& c) { return c.first == "ping"; });
  if (!has_ping) all.emplace_back("ping", [] { return true; });
  all.insert(all.end(), checks.begin(), checks.end());
  return all;
}

bool RunCheck(const HealthCheck& check) {
  // A check that throws counts as failed; nothing may escape a handler.
  try {
    return check.second && check.second();
  } catch (...) {
    return false;
  }
}

}  // namespace

Response ServeHealth(const Request& request, std::string_view endpoint,
                     const std::vector<HealthCheck>& checks) {
  const std::vector<HealthCheck> all = WithPing(checks);

  // "/readyz/<check>": one check alone.
  std::string_view rest = request.path;
  auto strip = [&rest](std::string_view prefix) {
    if (rest.substr(0, prefix.size()) == prefix) rest.remove_prefix(prefix.size());
  };
  strip("/");
  strip(endpoint);
  strip("/");
  if (!rest.empty()) {
    auto it = std::find_if(all.begin(), all.end(),
                           [rest](const HealthCheck& c) { return c.first == rest; });
    if (it == all.end()) return Text(404, "404 page not found\n");
    if (!RunCheck(*it)) {
      return Text(500, "internal server error: " + it->first + " check failed\n");
    }
    return Text(200, "ok");
  }

  std::set<std::string> excluded;
  for (const auto& [key, value] : request.query) {
    if (key == "exclude") excluded.insert(value);
  }
  std::string lines;
  bool failed = false;
  for (const HealthCheck& check : all) {
    if (excluded.erase(check.first) > 0) {
      lines += "[+]" + check.first + " excluded: ok\n";
      continue;
    }
    if (RunCheck(check)) {
      lines += "[+]" + check.first + " ok\n";
    } else {
      failed = true;
      lines += "[-]" + check.first + " failed: reason withheld\n";
    }
  }
  if (!excluded.empty()) {
    lines += "warn: some health checks cannot be excluded: no matches for ";
    bool first = true;
    for (const std::string& name : excluded) {
      lines += (first ? "\"" : ",\"") + name + "\"";
      first = false;
    }
    lines += "\n";
  }
  if (failed) {
    // http.Error's shape: the text, then a newline.
    return Text(500, lines + std::string(endpoint) + " check failed\n");
  }
  if (!request.HasQuery("verbose")) return Text(200, "ok");
  return Text(200, lines + std::string(endpoint) + " check passed\n");
}

}  // namespace poolcoord::handlers
