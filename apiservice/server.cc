#include "apiservice/server.h"

#include <chrono>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "apiservice/log.h"
#include "apiservice/pki.h"
#include "election/clock.h"
#include "election/delegated_lease_gc.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "election/membership_file_source.h"
#include "handlers/status_mapping.h"
#include "store/api_error.h"
#include "store/memory_store.h"

namespace poolcoord::apiservice {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = absl::ascii_toupper(static_cast<unsigned char>(c));
  return out;
}

bool IsReadOnly(const RequestInfo& info) {
  if (info.is_resource_request) {
    return info.verb == "get" || info.verb == "list" || info.verb == "watch";
  }
  return info.verb == "get" || info.verb == "head" || info.verb == "options";
}

std::string FormatLatency(std::chrono::steady_clock::duration d) {
  double ms = std::chrono::duration<double, std::milli>(d).count();
  return absl::StrCat(static_cast<int64_t>(ms * 1000) / 1000.0, "ms");
}

}  // namespace

std::string MetricsVerb(const RequestInfo& info, const handlers::Request& request) {
  if (!info.is_resource_request) return Upper(request.method);
  if (info.verb == "get") return "GET";
  if (info.verb == "list") return "LIST";
  if (info.verb == "watch") return "WATCH";
  if (info.verb == "create") return "POST";
  if (info.verb == "update") return "PUT";
  if (info.verb == "patch") {
    return request.Header("content-type").starts_with("application/apply-patch+yaml") ? "APPLY"
                                                                                      : "PATCH";
  }
  if (info.verb == "delete" || info.verb == "deletecollection") return "DELETE";
  return Upper(request.method);
}

handlers::Response RequestPipeline::Serve(handlers::Request& request,
                                          const ConnectionInfo& connection) const {
  const auto start = std::chrono::steady_clock::now();
  const RequestInfo info = ResolveRequestInfo(request);
  const std::string verb = MetricsVerb(info, request);
  Metrics* metrics = options_.metrics;

  auto finish = [&](handlers::Response response) {
    const bool watch_stream = info.verb == "watch" && static_cast<bool>(response.stream);
    auto elapsed = std::chrono::steady_clock::now() - start;
    if (metrics != nullptr) {
      metrics->ObserveRequest(verb, info.resource, response.status,
                              std::chrono::duration<double>(elapsed).count(), watch_stream);
    }
    if (VLogEnabled(2)) {
      LogInfo("\"HTTP\" verb=\"", verb, "\" URI=\"", request.path, "\" user=\"",
              request.user.username, "\" latency=\"", FormatLatency(elapsed), "\" srcIP=\"",
              connection.remote_address, "\" resp=", response.status,
              watch_stream ? " (watch started)" : "");
    }
    if (watch_stream && metrics != nullptr) {
      // The watcher gauge follows the stream's life, not the request's.
      auto inner = std::move(response.stream);
      std::string resource = info.resource;
      response.stream = [inner = std::move(inner), metrics, resource](handlers::ChunkWriter& w) {
        metrics->WatcherStarted(resource);
        inner(w);
        metrics->WatcherEnded(resource);
      };
    }
    return response;
  };

  absl::StatusOr<election::UserInfo> user =
      options_.authenticator->Authenticate(request.headers, connection.peer.get());
  if (!user.ok()) return finish(handlers::ErrorResponse(user.status()));
  if (IsAnonymous(*user) && !options_.anonymous_auth &&
      !AnonymousAllowed(request.method, request.path)) {
    return finish(handlers::ErrorResponse(store::UnauthorizedError()));
  }
  request.user = *std::move(user);

  const bool limited = info.verb != "watch" && !request.user.IsMaster();
  if (limited && options_.limiter != nullptr && !options_.limiter->TryAcquire()) {
    return finish(handlers::ErrorResponse(
        store::TooManyRequestsError("Too many requests, please try again later.", 1)));
  }
  const bool read_only = IsReadOnly(info);
  if (metrics != nullptr && info.verb != "watch") metrics->InflightChanged(!read_only, 1);

  handlers::Response response;
  if (absl::Status allowed = options_.authorizer->Authorize(request.user, info); !allowed.ok()) {
    response = handlers::ErrorResponse(allowed);
  } else {
    response = options_.router->Handle(request);
  }

  if (metrics != nullptr && info.verb != "watch") metrics->InflightChanged(!read_only, -1);
  if (limited && options_.limiter != nullptr) options_.limiter->Release();
  return finish(std::move(response));
}

struct ApiServer::Parts {
  ServerOptions options;
  PkiResult pki;
  std::string kubeconfig_path;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<Authorizer> authorizer;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<election::MembershipIndex> membership;
  std::unique_ptr<election::MembershipFileSource> membership_source;
  std::unique_ptr<election::LeaseRules> rules;
  std::unique_ptr<election::DelegatedLeaseGc> gc;
  std::unique_ptr<handlers::Router> router;
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<InflightLimiter> limiter;
  std::unique_ptr<RequestPipeline> pipeline;
  std::unique_ptr<TlsServer> transport;

  absl::Mutex shutdown_mu;
  bool shut_down ABSL_GUARDED_BY(shutdown_mu) = false;
};

ApiServer::ApiServer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

ApiServer::~ApiServer() { Shutdown(std::chrono::seconds(5)); }

int ApiServer::port() const { return parts_->transport->port(); }

std::string ApiServer::url() const { return ServerUrl(parts_->options.bind_address, port()); }

const std::string& ApiServer::kubeconfig_path() const { return parts_->kubeconfig_path; }

absl::StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(const ServerOptions& options) {
  auto p = std::make_unique<Parts>();
  p->options = options;
  SetLogVerbosity(options.verbosity);

  PkiOptions pki_options;
  pki_options.cert_dir = options.cert_dir;
  pki_options.tls_cert_file = options.tls_cert_file;
  pki_options.tls_private_key_file = options.tls_private_key_file;
  pki_options.client_ca_file = options.client_ca_file;
  pki_options.bind_address = options.bind_address;
  absl::StatusOr<PkiResult> pki = EnsureCertificates(pki_options);
  if (!pki.ok()) return pki.status();
  p->pki = *std::move(pki);
  for (const std::string& file : p->pki.created) LogInfo("generated ", file);
  if (options.tls_cert_file.empty() && p->pki.created.empty()) {
    LogInfo("reusing the certificates in ", options.cert_dir);
  }

  AuthenticatorOptions authn;
  authn.client_ca_file = p->pki.client_ca_file;
  authn.token_auth_file = options.token_auth_file;
  authn.requestheader_client_ca_file = options.requestheader_client_ca_file;
  authn.requestheader_allowed_names = options.requestheader_allowed_names;
  authn.requestheader_username_headers = options.requestheader_username_headers;
  authn.requestheader_group_headers = options.requestheader_group_headers;
  authn.requestheader_extra_headers_prefix = options.requestheader_extra_headers_prefix;
  absl::StatusOr<std::unique_ptr<Authenticator>> authenticator = Authenticator::Create(authn);
  if (!authenticator.ok()) return authenticator.status();
  p->authenticator = *std::move(authenticator);
  if (p->pki.client_ca_file.empty()) {
    LogWarning("no --client-ca-file: client certificates authenticate nobody");
  }

  AuthorizerOptions authz;
  authz.always_allow_paths = options.authorization_always_allow_paths;
  authz.forwarder_user = options.forwarder_user;
  authz.lease_proxy_users = options.lease_proxy_users;
  p->authorizer = std::make_unique<Authorizer>(authz);

  if (!options.authentication_kubeconfig.empty() || !options.authorization_kubeconfig.empty()) {
    LogWarning("--authentication-kubeconfig/--authorization-kubeconfig are accepted but "
               "TokenReview/SubjectAccessReview delegation is not available yet");
  }
  if (!options.kubeconfig.empty()) {
    LogWarning("--kubeconfig is accepted but the Node membership source and the forwarder are "
               "not available yet");
  }
  if (options.leader_elect) {
    LogWarning("--leader-elect is accepted but replica leader election is not available yet");
  }

  store::MemoryStoreOptions store_options;
  store_options.watch_history_size = options.watch_history_size;
  p->store = store::NewMemoryStore(store_options);

  p->membership = std::make_unique<election::MembershipIndex>();
  if (!options.pool_membership_file.empty()) {
    p->membership_source = std::make_unique<election::MembershipFileSource>(
        options.pool_membership_file, p->membership.get());
    if (absl::Status st = p->membership_source->Start(); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("--pool-membership-file: ", st.message()));
    }
    LogInfo("pool membership from ", options.pool_membership_file, ": ",
            p->membership->Snapshot().size(), " pools");
  } else {
    // No source at all: membership is known to be empty, not "still loading".
    (void)p->membership->Replace("file", {});
  }

  election::LeaseRulesOptions rules_options;
  rules_options.max_lease_duration_seconds = options.max_lease_duration;
  rules_options.forwarder_user = options.forwarder_user;
  rules_options.lease_proxy_users = options.lease_proxy_users;
  p->rules = std::make_unique<election::LeaseRules>(election::RealClock::Get(),
                                                    p->membership.get(), rules_options);
  p->gc = std::make_unique<election::DelegatedLeaseGc>(p->store.get(), p->rules.get(),
                                                       options.delegated_lease_gc_period);
  p->gc->Start();

  p->metrics = std::make_unique<Metrics>();
  p->limiter = std::make_unique<InflightLimiter>(options.max_requests_inflight);

  handlers::RouterOptions router;
  router.store = p->store.get();
  router.clock = election::RealClock::Get();
  router.rules = p->rules.get();
  router.membership = p->membership.get();
  router.lease_proxy_users = options.lease_proxy_users;
  router.forwarder_user = options.forwarder_user;
  router.livez_checks = {{"ping", [] { return true; }}};
  router.readyz_checks = {{"ping", [] { return true; }}};
  if (!options.pool_membership_file.empty()) {
    election::MembershipIndex* index = p->membership.get();
    router.readyz_checks.emplace_back("membership", [index] { return index->Loaded(); });
  }
  Metrics* metrics = p->metrics.get();
  router.metrics_text = [metrics] { return metrics->Render(); };
  p->router = handlers::NewRouter(router);

  PipelineOptions pipeline;
  pipeline.authenticator = p->authenticator.get();
  pipeline.authorizer = p->authorizer.get();
  pipeline.router = p->router.get();
  pipeline.metrics = p->metrics.get();
  pipeline.limiter = p->limiter.get();
  pipeline.anonymous_auth = options.anonymous_auth;
  p->pipeline = std::make_unique<RequestPipeline>(pipeline);

  TlsServerOptions transport;
  transport.bind_address = options.bind_address;
  transport.port = options.secure_port;
  transport.cert_file = p->pki.serving_cert_file;
  transport.key_file = p->pki.serving_key_file;
  if (!p->pki.client_ca_file.empty()) transport.client_ca_files.push_back(p->pki.client_ca_file);
  if (!options.requestheader_client_ca_file.empty()) {
    transport.client_ca_files.push_back(options.requestheader_client_ca_file);
  }
  transport.error_responder = [](const absl::Status& status) {
    return handlers::ErrorResponse(status);
  };
  RequestPipeline* serve = p->pipeline.get();
  absl::StatusOr<std::unique_ptr<TlsServer>> server = TlsServer::Start(
      transport, [serve](handlers::Request& request, const ConnectionInfo& connection) {
        return serve->Serve(request, connection);
      });
  if (!server.ok()) {
    p->gc->Stop();
    if (p->membership_source) p->membership_source->Stop();
    return server.status();
  }
  p->transport = *std::move(server);

  const std::string url = ServerUrl(options.bind_address, p->transport->port());
  LogInfo("serving on ", options.bind_address, ":", p->transport->port(), " (", url, ")");
  if (!p->pki.admin_cert_file.empty() && !options.write_kubeconfig.empty()) {
    bool changed = false;
    absl::Status st = WriteAdminKubeconfig(options.write_kubeconfig, p->pki, url, &changed);
    if (!st.ok()) {
      p->transport->Shutdown(std::chrono::milliseconds(0));
      p->gc->Stop();
      if (p->membership_source) p->membership_source->Stop();
      return absl::Status(st.code(), absl::StrCat("--write-kubeconfig: ", st.message()));
    }
    p->kubeconfig_path = options.write_kubeconfig;
    LogInfo(changed ? "wrote" : "kept", " admin kubeconfig ", options.write_kubeconfig);
  }
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(p)));
}

void ApiServer::Shutdown(std::chrono::milliseconds grace) {
  {
    absl::MutexLock lock(&parts_->shutdown_mu);
    if (parts_->shut_down) return;
    parts_->shut_down = true;
  }
  // Stop taking work first, then end watches (store Shutdown closes every
  // watcher, so each stream writes its final chunk), then wait for the rest.
  parts_->transport->BeginShutdown();
  parts_->store->Shutdown();
  if (!parts_->transport->Shutdown(grace)) {
    LogWarning("shutdown: some requests did not finish within ",
               std::chrono::duration_cast<std::chrono::seconds>(grace).count(), "s");
  }
  parts_->gc->Stop();
  if (parts_->membership_source) parts_->membership_source->Stop();
}

}  // namespace poolcoord::apiservice
