#include "handlers/router.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "handlers/admission_handler.h"
#include "handlers/discovery.h"
#include "handlers/health.h"
#include "handlers/openapi.h"
#include "handlers/registry/registry.h"
#include "handlers/rest_handler.h"
#include "handlers/status_mapping.h"
#include "store/api_error.h"

namespace poolcoord::handlers {
namespace {

constexpr absl::string_view kGroupPath = "/apis/coordination.pool";
constexpr absl::string_view kGroupVersionPath = "/apis/coordination.pool/v1alpha1";
constexpr absl::string_view kWebhookPath = "/validate-delegated-heartbeat";

Response NotFound() { return ErrorResponse(store::UnknownPathError()); }

Response OnlyGet(const Request& request) {
  return ErrorResponse(store::MethodNotAllowedError(
      absl::StrCat("the server does not allow this method on the requested resource (",
                   request.method, " ", request.path, ")")));
}

bool IsRead(const Request& r) { return r.method == "GET" || r.method == "HEAD"; }

class RouterImpl : public Router {
 public:
  explicit RouterImpl(const RouterOptions& options) : options_(options) {
    rest_.store = options.store;
    rest_.clock = options.clock;
    rest_.rules = options.rules;
    admission_.store = options.store;
    admission_.rules = options.rules;
  }

  Response Handle(Request& request) override {
    absl::string_view path = request.path;
    if (path.size() > 1 && path.back() == '/') path.remove_suffix(1);

    if (path == kWebhookPath) {
      if (request.method != "POST") return OnlyGet(request);
      return ServeAdmissionReview(request, admission_);
    }
    if (absl::StartsWith(path, kGroupVersionPath)) return ServeGroupVersion(path, request);
    for (absl::string_view endpoint : {"healthz", "livez", "readyz"}) {
      std::string prefix = absl::StrCat("/", endpoint);
      if (path == prefix || absl::StartsWith(path, prefix + "/")) {
        if (!IsRead(request)) return OnlyGet(request);
        return ServeHealth(request, std::string_view(endpoint.data(), endpoint.size()),
                           endpoint == "livez" ? options_.livez_checks : options_.readyz_checks);
      }
    }
    if (!IsRead(request)) {
      if (path == "/apis" || path == kGroupPath || path == "/version" || path == "/metrics" ||
          absl::StartsWith(path, "/openapi/")) {
        return OnlyGet(request);
      }
      return NotFound();
    }
    if (path == "/apis") return ServeApiGroupList(request);
    if (path == kGroupPath) return ServeApiGroup(request);
    if (path == "/api") return ServeApiVersions(request);
    if (path == "/version") return ServeVersion(request);
    if (path == "/openapi/v2") return ServeOpenApiV2(request);
    if (path == "/openapi/v3") return ServeOpenApiV3Root(request);
    if (path == absl::StrCat("/openapi/v3", kGroupVersionPath)) {
      return ServeOpenApiV3GroupVersion(request);
    }
    if (path == "/metrics") {
      Response r;
      r.SetHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
      r.body = options_.metrics_text ? options_.metrics_text() : "";
      return r;
    }
    return NotFound();
  }

 private:
  Response ServeGroupVersion(absl::string_view path, Request& request) {
    absl::string_view rest = path.substr(kGroupVersionPath.size());
    if (rest.empty()) {
      if (!IsRead(request)) return OnlyGet(request);
      return ServeApiResourceList(request);
    }
    if (rest.front() != '/') return NotFound();
    std::vector<absl::string_view> parts = absl::StrSplit(rest.substr(1), '/');
    // Legacy /watch/<plural>[/<name>] paths, as kube-apiserver still serves them.
    bool legacy_watch = false;
    if (!parts.empty() && parts[0] == "watch") {
      legacy_watch = true;
      parts.erase(parts.begin());
    }
    if (parts.empty() || parts.size() > 3) return NotFound();
    const registry::Strategy* kind =
        registry::ForPlural(std::string_view(parts[0].data(), parts[0].size()));
    if (kind == nullptr) {
      // Namespaced paths included: every kind is cluster-scoped.
      return NotFound();
    }
    ResourcePath rp{kind->kind(), parts.size() > 1 ? std::string(parts[1]) : "",
                    parts.size() > 2 ? std::string(parts[2]) : ""};
    if (parts.size() > 1 && parts[1].empty()) return NotFound();
    if (legacy_watch) {
      if (!IsRead(request) || !rp.subresource.empty()) return OnlyGet(request);
      request.query.emplace_back("watch", "true");
    }
    return ServeResource(rest_, rp, request);
  }

  RouterOptions options_;
  RestContext rest_;
  AdmissionOptions admission_;
};

}  // namespace

std::unique_ptr<Router> NewRouter(const RouterOptions& options) {
  return std::make_unique<RouterImpl>(options);
}

}  // namespace poolcoord::handlers
