#include "apiservice/server.h"

#include <unistd.h>

#include <atomic>
#include <climits>
#include <chrono>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "apiservice/delegation.h"
#include "apiservice/dynamic_certificates.h"
#include "apiservice/pki.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/microtime.h"
#include "cloud/clientset.h"
#include "cloud/rest_client.h"
#include "controllers/delegated_lease_gc.h"
#include "election/delegation_proof.h"
#include "controllers/forwarder.h"
#include "controllers/forwarder_shards.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "election/membership_file_source.h"
#include "election/node_membership_source.h"
#include "election/pool_lease_lock.h"
#include "handlers/registry/registry.h"
#include "handlers/status_mapping.h"
#include "store/api_error.h"
#include "store/cacher.h"
#include "store/etcd3_store.h"
#include "store/memory_store.h"

namespace poolcoord::apiservice {
namespace {

// Lower-case hex of `n` random bytes (replica identities, as hostname_<uuid>).
std::string RandomHex(int n) {
  std::random_device rd;
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (int i = 0; i < n; ++i) {
    unsigned v = rd() & 0xff;
    out.push_back(kHex[v >> 4]);
    out.push_back(kHex[v & 15]);
  }
  return out;
}


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

// The watcher gauge follows the stream's life, not the request's: counted while
// the source exists (the transport drops it when the stream ends).
class CountedStream final : public handlers::StreamSource {
 public:
  CountedStream(std::shared_ptr<handlers::StreamSource> inner, Metrics* metrics,
                std::string resource)
      : inner_(std::move(inner)), metrics_(metrics), resource_(std::move(resource)) {
    metrics_->WatcherStarted(resource_);
  }
  ~CountedStream() override { metrics_->WatcherEnded(resource_); }
  Step Poll(std::string* out, const std::function<void()>& wake, Clock::time_point* wake_at) override {
    return inner_->Poll(out, wake, wake_at);
  }
  void Cancel() override { inner_->Cancel(); }

 private:
  std::shared_ptr<handlers::StreamSource> inner_;
  Metrics* metrics_;
  std::string resource_;
};

}  // namespace

namespace {

// The Date header's value, formatted once per second per thread (every answer
// carries one).
std::string HttpDateNow(const base::Clock& clock) {
  thread_local int64_t cached_second = INT64_MIN;
  thread_local std::string cached;
  const int64_t us = clock.NowMicros();
  const int64_t second = us / 1'000'000 - (us % 1'000'000 < 0 ? 1 : 0);
  if (second != cached_second) {
    cached = base::FormatHttpDate(second);
    cached_second = second;
  }
  return cached;
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
    response.SetHeader("Date", HttpDateNow(*options_.clock));
    const bool watch_stream = info.verb == "watch" && static_cast<bool>(response.stream);
    auto elapsed = std::chrono::steady_clock::now() - start;
    if (metrics != nullptr) {
      metrics->ObserveRequest(verb, info.resource, response.status,
                              std::chrono::duration<double>(elapsed).count(), watch_stream);
    }
    if (base::VLogEnabled(2)) {
      base::LogInfo("\"HTTP\" verb=\"", verb, "\" URI=\"", request.path, "\" user=\"",
              request.user.username, "\" latency=\"", FormatLatency(elapsed), "\" srcIP=\"",
              connection.remote_address, "\" resp=", response.status,
              watch_stream ? " (watch started)" : "");
    }
    if (watch_stream && metrics != nullptr) {
      // The watcher gauge follows the stream's life, not the request's.
      response.stream =
          std::make_shared<CountedStream>(std::move(response.stream), metrics, info.resource);
    }
    return response;
  };

  absl::StatusOr<base::UserInfo> user =
      options_.authenticator->Authenticate(request.headers, connection.peer.get());
  if (!user.ok()) return finish(handlers::ErrorResponse(user.status()));
  if (IsAnonymous(*user) && !options_.anonymous_auth &&
      !AnonymousAllowed(request.method, request.path)) {
    return finish(handlers::ErrorResponse(store::UnauthorizedError()));
  }
  request.user = *std::move(user);
  // Impersonation is kube-apiserver's to do: behind the aggregator the request
  // arrives already as the impersonated user. Served here directly, the headers
  // would be ignored and the request run as the caller (kubectl --as=... would
  // quietly act as the admin), so they are refused.
  for (const auto& [name, value] : request.headers) {
    if (absl::StartsWith(name, "impersonate-")) {
      return finish(handlers::ErrorResponse(store::ForbiddenError(absl::StrCat(
          "impersonation is not supported by this server (header ", name,
          "): send the request with the credentials of the user to act as, or through "
          "kube-apiserver, which impersonates before it proxies to this API"))));
    }
  }

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
  // Every module's metrics, rendered at GET /metrics. Declared before what
  // registers in it, so it outlives them.
  base::MetricsRegistry registry;
  PkiResult pki;
  std::string kubeconfig_path;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<Authorizer> authorizer;
  // After both: destroyed first, so the ConfigMap watcher stops before them.
  std::unique_ptr<Delegation> delegation;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<election::MembershipIndex> membership;
  std::unique_ptr<election::MembershipFileSource> membership_source;
  std::unique_ptr<election::DelegationProofs> proofs;
  std::unique_ptr<election::LeaseRules> rules;
  std::unique_ptr<controllers::DelegatedLeaseGc> gc;
  // The cloud cluster (--kubeconfig or in-cluster), and what runs against it.
  std::unique_ptr<cloud::RestClient> cloud;
  std::unique_ptr<cloud::Clientset> clientset;
  std::unique_ptr<election::NodeMembershipSource> node_source;
  // The forwarder's own client of the cloud (its rate limit and connections).
  std::unique_ptr<cloud::RestClient> forwarder_cloud;
  std::unique_ptr<cloud::Clientset> forwarder_clientset;
  std::unique_ptr<controllers::Forwarder> forwarder;
  std::unique_ptr<controllers::ForwarderShards> shards;
  std::atomic<bool> stopping{false};
  std::unique_ptr<handlers::Router> router;
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<InflightLimiter> limiter;
  std::unique_ptr<RequestPipeline> pipeline;
  std::unique_ptr<TlsServer> transport;
  // Last: stopped first, since its listeners feed the transport and the
  // authenticator.
  std::unique_ptr<DynamicCertificates> certificates;

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
  base::SetLogVerbosity(options.verbosity);

  PkiOptions pki_options;
  pki_options.cert_dir = options.cert_dir;
  pki_options.tls_cert_file = options.tls_cert_file;
  pki_options.tls_private_key_file = options.tls_private_key_file;
  pki_options.client_ca_file = options.client_ca_file;
  pki_options.bind_address = options.bind_address;
  absl::StatusOr<PkiResult> pki = EnsureCertificates(pki_options);
  if (!pki.ok()) return pki.status();
  p->pki = *std::move(pki);
  for (const std::string& file : p->pki.created) base::LogInfo("generated ", file);
  if (options.tls_cert_file.empty() && p->pki.created.empty()) {
    base::LogInfo("reusing the certificates in ", options.cert_dir);
  }
  {
    DynamicCertificatesOptions files;
    files.serving_cert_file = p->pki.serving_cert_file;
    files.serving_key_file = p->pki.serving_key_file;
    files.client_ca_file = p->pki.client_ca_file;
    files.requestheader_client_ca_file = options.requestheader_client_ca_file;
    files.registry = &p->registry;
    absl::StatusOr<std::unique_ptr<DynamicCertificates>> certificates =
        DynamicCertificates::Create(files);
    if (!certificates.ok()) return certificates.status();
    p->certificates = *std::move(certificates);
  }

  AuthenticatorOptions authn;
  authn.client_ca_file = p->pki.client_ca_file;
  authn.token_auth_file = options.token_auth_file;
  authn.requestheader_client_ca_file = options.requestheader_client_ca_file;
  authn.requestheader_allowed_names = options.requestheader_allowed_names;
  authn.requestheader_username_headers = options.requestheader_username_headers;
  authn.requestheader_group_headers = options.requestheader_group_headers;
  authn.requestheader_extra_headers_prefix = options.requestheader_extra_headers_prefix;
  DelegationOptions delegation;
  delegation.authentication_kubeconfig = options.authentication_kubeconfig;
  delegation.authorization_kubeconfig = options.authorization_kubeconfig;
  absl::StatusOr<std::unique_ptr<Delegation>> delegated = Delegation::Create(delegation);
  if (!delegated.ok()) return delegated.status();
  p->delegation = *std::move(delegated);
  authn.token_reviewer = p->delegation->token_reviewer();
  absl::StatusOr<std::unique_ptr<Authenticator>> authenticator = Authenticator::Create(authn);
  if (!authenticator.ok()) return authenticator.status();
  p->authenticator = *std::move(authenticator);
  if (absl::Status st = p->delegation->Start(p->authenticator.get()); !st.ok()) return st;
  if (p->delegation->token_reviewer() != nullptr) {
    base::LogInfo("delegated authentication (TokenReview) via ", p->delegation->authentication_server());
  }
  if (p->delegation->access_reviewer() != nullptr) {
    base::LogInfo("delegated authorization (SubjectAccessReview) via ",
            p->delegation->authorization_server());
  }
  // The followed ConfigMap's client-ca-file authenticates client certificates too
  // (delegation.cc logs whether it has one).
  if (p->pki.client_ca_file.empty() && p->delegation->token_reviewer() == nullptr) {
    base::LogWarning("no --client-ca-file and no --authentication-kubeconfig: client "
                     "certificates authenticate nobody");
  }

  AuthorizerOptions authz;
  authz.always_allow_paths = options.authorization_always_allow_paths;
  authz.forwarder_user = options.forwarder_user;
  authz.lease_proxy_users = options.lease_proxy_users;
  authz.access_reviewer = p->delegation->access_reviewer();
  p->authorizer = std::make_unique<Authorizer>(authz);

  if (options.storage_backend == "etcd3") {
    store::Etcd3StoreOptions etcd;
    etcd.endpoints = options.etcd_servers;
    etcd.prefix = options.etcd_prefix;
    etcd.ca_file = options.etcd_cafile;
    etcd.cert_file = options.etcd_certfile;
    etcd.key_file = options.etcd_keyfile;
    // Each replica times renewals on its own monotonic clock, from when it first
    // saw a version: a renewal made through another replica never expires early.
    etcd.monotonic_micros = [] { return base::RealClock::Get()->MonotonicMicros(); };
    absl::StatusOr<std::unique_ptr<store::Store>> etcd_store = store::NewEtcd3Store(etcd);
    if (!etcd_store.ok()) {
      return absl::Status(etcd_store.status().code(),
                          absl::StrCat("--etcd-servers: ", etcd_store.status().message()));
    }
    p->store = *std::move(etcd_store);
    base::LogInfo("storage: etcd3 at ", absl::StrJoin(options.etcd_servers, ","), ", key prefix ",
            options.etcd_prefix,
            options.etcd_certfile.empty() ? "" : ", TLS client certificate ",
            options.etcd_certfile);
  } else {
    store::MemoryStoreOptions store_options;
    store_options.watch_history_size = options.watch_history_size;
    store_options.watch_history_bytes = options.watch_history_bytes;
    p->store = store::NewMemoryStore(store_options);
  }
  if (options.watch_cache) {
    // Every kind of handlers/registry/ known to the store first: the cache keeps
    // one watch per kind it knows when it starts.
    handlers::registry::AllKinds();
    store::CacherOptions cache_options;
    cache_options.capacity = options.watch_history_size;
    cache_options.capacity_bytes = options.watch_history_bytes;
    absl::StatusOr<std::unique_ptr<store::Store>> cached =
        store::NewCacher(std::move(p->store), cache_options);
    if (!cached.ok()) {
      return absl::Status(cached.status().code(),
                          absl::StrCat("watch cache: ", cached.status().message()));
    }
    p->store = *std::move(cached);
  }

  // The cloud cluster: an explicit --kubeconfig, else the in-cluster config.
  {
    absl::StatusOr<cloud::RestConfig> cloud_config =
        options.kubeconfig.empty() ? cloud::InClusterConfig()
                                   : cloud::LoadKubeconfig(options.kubeconfig);
    if (cloud_config.ok()) {
      if (options.leader_elect) {
        // client-go: max(1 s, RenewDeadline / 2), so one hung request cannot
        // outlast a shard's lease (the shards' electors use this client).
        cloud_config->timeout = std::chrono::milliseconds(std::max<int64_t>(
            1000, absl::ToInt64Milliseconds(options.leader_elect_renew_deadline) / 2));
      }
      absl::StatusOr<std::unique_ptr<cloud::RestClient>> rest =
          cloud::RestClient::New(*cloud_config);
      if (!rest.ok()) return rest.status();
      p->cloud = *std::move(rest);
      p->clientset = std::make_unique<cloud::Clientset>(p->cloud.get());
      // The forwarder's own: --kube-api-qps/-burst, a connection per worker,
      // and a request timeout under one renew interval (with --leader-elect,
      // under leaseDuration - renewDeadline too, so that a write in flight when
      // a shard is lost ends before another replica may take it).
      cloud::RestConfig fc = *cloud_config;
      fc.qps = options.kube_api_qps;
      fc.burst = options.kube_api_burst;
      fc.max_idle_connections = options.concurrent_node_lease_syncs + 2;
      fc.timeout = absl::ToChronoMilliseconds(ForwarderRequestTimeout(options));
      fc.user_agent = "poolcoord-forwarder";
      absl::StatusOr<std::unique_ptr<cloud::RestClient>> frest = cloud::RestClient::New(fc);
      if (!frest.ok()) return frest.status();
      p->forwarder_cloud = *std::move(frest);
      p->forwarder_clientset = std::make_unique<cloud::Clientset>(p->forwarder_cloud.get());
      base::LogInfo("cloud cluster: ", p->cloud->config().server);
    } else if (!options.kubeconfig.empty()) {
      return absl::Status(cloud_config.status().code(),
                          absl::StrCat("--kubeconfig: ", cloud_config.status().message()));
    }
  }
  if (options.leader_elect && !p->cloud) {
    return absl::InvalidArgumentError(
        "--leader-elect needs the cloud cluster: give --kubeconfig or run in a pod");
  }

  p->membership = std::make_unique<election::MembershipIndex>();
  if (!options.pool_membership_file.empty()) {
    p->membership_source = std::make_unique<election::MembershipFileSource>(
        options.pool_membership_file, p->membership.get());
    if (absl::Status st = p->membership_source->Start(); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("--pool-membership-file: ", st.message()));
    }
    base::LogInfo("pool membership from ", options.pool_membership_file, ": ",
            p->membership->Snapshot().size(), " pools");
  } else if (!p->cloud) {
    // No source at all: membership is known to be empty, not "still loading".
    (void)p->membership->Replace("file", {});
  }
  if (p->cloud) {
    p->node_source = std::make_unique<election::NodeMembershipSource>(
        p->clientset->Nodes(), p->membership.get(), options.pool_label);
    p->node_source->Start();
    base::LogInfo("pool membership from the Nodes' label ", options.pool_label);
  }

  election::DelegationProofOptions proof_options;
  // Unset: required where a DelegatedLease becomes a node's liveness in the cloud
  // (this server forwards it), optional where it is only stored.
  const bool proof_mode_default = options.delegation_proof.empty();
  proof_options.mode = proof_mode_default
                           ? (p->cloud ? election::ProofMode::kRequired : election::ProofMode::kOptional)
                           : *election::ParseProofMode(options.delegation_proof);  // flags validated it
  proof_options.challenge_period = options.delegation_challenge_period;
  proof_options.max_age = options.delegation_proof_max_age;
  p->proofs = std::make_unique<election::DelegationProofs>(base::RealClock::Get(), proof_options,
                                                           &p->registry);
  // Node certificates chain to the users' client CA; rotations follow below.
  if (absl::Status st = p->proofs->SetClientCaPem(p->authenticator->ClientCaPem()); !st.ok()) {
    base::LogWarning("delegation proofs: client CA not usable: ", st.message());
  }

  election::LeaseRulesOptions rules_options;
  rules_options.max_lease_duration_seconds = options.max_lease_duration;
  rules_options.forwarder_user = options.forwarder_user;
  rules_options.lease_proxy_users = options.lease_proxy_users;
  rules_options.delegation_proofs = p->proofs.get();
  p->rules = std::make_unique<election::LeaseRules>(base::RealClock::Get(),
                                                    p->membership.get(), rules_options);
  p->gc = std::make_unique<controllers::DelegatedLeaseGc>(p->store.get(), p->rules.get(),
                                                       options.delegated_lease_gc_period);
  p->gc->Start();
  base::LogInfo("delegation proofs ", election::ProofModeName(proof_options.mode),
                proof_mode_default ? (p->cloud ? " (the default with a cloud cluster)"
                                               : " (the default standalone, with no cloud cluster)")
                                   : "",
                " (challenge every ", absl::FormatDuration(proof_options.challenge_period),
                ", max age ", absl::FormatDuration(proof_options.max_age), ")");

  if (p->cloud) {
    controllers::ForwarderOptions fo;
    fo.taint_after = absl::ToChronoMicroseconds(options.delegation_taint_after);
    fo.resync_period = absl::ToChronoMilliseconds(options.forwarder_resync_period);
    fo.kubelet_renew_interval = absl::ToChronoMicroseconds(options.kubelet_renew_interval);
    fo.node_monitor_grace_period = absl::ToChronoMicroseconds(options.node_monitor_grace_period);
    fo.workers = options.concurrent_node_lease_syncs;
    // One replica (the memory store) forwards every node: one shard, its own.
    fo.shards = options.leader_elect ? options.forwarder_shards : 1;
    cloud::Clientset* fcs = p->forwarder_clientset.get();
    p->forwarder = std::make_unique<controllers::Forwarder>(
        p->store.get(), p->rules.get(),
        controllers::ForwarderCloud{fcs->Leases(fo.node_lease_namespace), fcs->Nodes(),
                                    fcs->Events(fo.events_namespace)},
        base::RealClock::Get(), &p->registry, fo);
    if (options.leader_elect) {
      absl::Status st = StartForwarderShards(p.get());
      if (!st.ok()) return st;
    }
    p->forwarder->Start();
    if (p->shards) p->shards->Start();
  }

  p->metrics = std::make_unique<Metrics>(&p->registry);
  p->limiter = std::make_unique<InflightLimiter>(options.max_requests_inflight);

  handlers::RouterOptions router;
  router.store = p->store.get();
  router.clock = base::RealClock::Get();
  router.rules = p->rules.get();
  router.membership = p->membership.get();
  router.lease_proxy_users = options.lease_proxy_users;
  router.forwarder_user = options.forwarder_user;
  router.livez_checks = {{"ping", [] { return true; }}};
  router.readyz_checks = {{"ping", [] { return true; }}};
  if (p->shards) {
    // client-go's HealthzAdaptor with kube-controller-manager's 20 s tolerance:
    // fails only while a held shard's renewals are wedged.
    controllers::ForwarderShards* shards = p->shards.get();
    router.livez_checks.emplace_back("leaderElection",
                                     [shards] { return shards->Healthy(absl::Seconds(20)); });
  }
  if (!options.pool_membership_file.empty() || p->node_source) {
    election::MembershipIndex* index = p->membership.get();
    router.readyz_checks.emplace_back("membership", [index] { return index->Loaded(); });
  }
  base::MetricsRegistry* registry = &p->registry;
  router.metrics_text = [registry] { return registry->Render(); };
  p->router = handlers::NewRouter(router);

  PipelineOptions pipeline;
  pipeline.authenticator = p->authenticator.get();
  pipeline.authorizer = p->authorizer.get();
  pipeline.router = p->router.get();
  pipeline.metrics = p->metrics.get();
  pipeline.limiter = p->limiter.get();
  pipeline.anonymous_auth = options.anonymous_auth;
  pipeline.clock = router.clock;
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
  if (options.storage_backend == "etcd3") {
    // On etcd3 a handler waits for its round trips to etcd (a write: a range,
    // then a txn). On an I/O thread that wait held back the watch streams of
    // the thread and queued the next write behind their fan-out (at 1,000
    // watchers and 20 writes/s, writes p50 52 ms on etcd3 against 3.6 ms on
    // the memory store). Eight I/O threads hid the wait but cost the fan-out
    // 5x the context switches (439 against 85 per write with two) and a third
    // more CPU per write. So handlers wait on a pool of their own and the I/O
    // threads stay at the default; neither count grows with
    // watchers or connections.
    transport.handler_threads = 8;
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
  {
    // New certificate files reach the transport (serving pair) and the
    // authenticator (CA bundles); whatever the authenticator trusts, from the
    // files or the ConfigMap, is what the CertificateRequest names.
    TlsServer* transport_ptr = p->transport.get();
    Authenticator* authn_ptr = p->authenticator.get();
    DynamicCertificates* certs = p->certificates.get();
    election::DelegationProofs* proofs_ptr = p->proofs.get();
    authn_ptr->SetTrustChangedListener([transport_ptr, authn_ptr, proofs_ptr] {
      if (absl::Status st = transport_ptr->SetClientCaNames(authn_ptr->AcceptedCaPem()); !st.ok()) {
        base::LogWarning("client CA names for the TLS handshake not updated: ", st.message());
      }
      if (absl::Status st = proofs_ptr->SetClientCaPem(authn_ptr->ClientCaPem()); !st.ok()) {
        base::LogWarning("delegation proofs: client CA not updated: ", st.message());
      }
    });
    certs->AddListener([transport_ptr, authn_ptr, certs](CertificateMaterial m) -> absl::Status {
      if (m == CertificateMaterial::kServing) {
        std::shared_ptr<const ServingCertificate> serving = certs->serving();
        return transport_ptr->SetServingCertificate(serving->cert_pem, serving->key_pem);
      }
      return authn_ptr->SetFileCaBundles(certs->ca_pem(CertificateMaterial::kClientCa),
                                         certs->ca_pem(CertificateMaterial::kRequestHeaderCa));
    });
    // What changed between the first reads and now (a ConfigMap applied before
    // the listener was set; files replaced meanwhile are seen by Start's check).
    (void)transport_ptr->SetClientCaNames(authn_ptr->AcceptedCaPem());
    if (absl::Status st = authn_ptr->SetFileCaBundles(
            certs->ca_pem(CertificateMaterial::kClientCa),
            certs->ca_pem(CertificateMaterial::kRequestHeaderCa));
        !st.ok()) {
      base::LogWarning("client CA bundles: ", st.message());
    }
    (void)proofs_ptr->SetClientCaPem(authn_ptr->ClientCaPem());
    if (std::shared_ptr<const ServingCertificate> serving = certs->serving()) {
      if (serving->not_after_unix <= absl::ToUnixSeconds(absl::Now())) {
        base::LogWarning("the serving certificate ", p->pki.serving_cert_file, " has expired (",
                   serving->Describe(), "); clients will refuse it until the file is replaced");
      }
      (void)transport_ptr->SetServingCertificate(serving->cert_pem, serving->key_pem);
    }
    certs->Start();
  }

  const std::string url = ServerUrl(options.bind_address, p->transport->port());
  if (!p->pki.admin_cert_file.empty() && !options.write_kubeconfig.empty()) {
    bool changed = false;
    absl::Status st = WriteAdminKubeconfig(options.write_kubeconfig, p->pki, url, &changed);
    if (absl::IsFailedPrecondition(st)) {
      // Someone else's file, or ours after `kubectl config` rewrote it (which
      // drops our header line, e.g. when a node's user is added as the README
      // once showed): never overwritten, and no reason to refuse to serve. The
      // admin certificate in --cert-dir outlives restarts, so such a file
      // usually still works.
      base::LogWarning("--write-kubeconfig: ", st.message(),
                       "; kept as it is, not replaced (remove it for a fresh one at the next "
                       "start; the admin certificate is ", p->pki.admin_cert_file, ")");
    } else if (!st.ok()) {
      p->transport->Shutdown(std::chrono::milliseconds(0));
      p->gc->Stop();
      if (p->membership_source) p->membership_source->Stop();
      return absl::Status(st.code(), absl::StrCat("--write-kubeconfig: ", st.message()));
    } else {
      base::LogInfo(changed ? "wrote" : "kept", " admin kubeconfig ", options.write_kubeconfig);
    }
    p->kubeconfig_path = options.write_kubeconfig;
  }
  // Only once nothing can fail start-up any more.
  base::LogInfo("serving on ", options.bind_address, ":", p->transport->port(), " (", url, ")");
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(p)));
}

void ApiServer::ReloadCertificates() { parts_->certificates->CheckNow(); }

void ApiServer::Shutdown(std::chrono::milliseconds grace) {
  {
    absl::MutexLock lock(&parts_->shutdown_mu);
    if (parts_->shut_down) return;
    parts_->shut_down = true;
  }
  parts_->certificates->Stop();
  // Hand the forwarding shards over first (each stops, then its Lease is
  // released), so another replica takes them at once, not a lease later.
  if (parts_->shards) parts_->shards->Stop();
  // Then no forwarding, before the requests drain (up to `grace`): a server
  // told to stop writes nothing into the cloud after its forwarder's request
  // timeout, which the post-delete cleanup (--cleanup) counts on.
  if (parts_->forwarder) parts_->forwarder->Stop();
  // Stop taking work, then end watches (store Shutdown closes every
  // watcher, so each stream writes its final chunk), then wait for the rest.
  parts_->transport->BeginShutdown();
  parts_->store->Shutdown();
  if (!parts_->transport->Shutdown(grace)) {
    base::LogWarning("shutdown: some requests did not finish within ",
               std::chrono::duration_cast<std::chrono::seconds>(grace).count(), "s");
  }
  parts_->stopping = true;
  if (parts_->node_source) parts_->node_source->Stop();
  parts_->gc->Stop();
  if (parts_->membership_source) parts_->membership_source->Stop();
  if (parts_->delegation) parts_->delegation->Stop();
}

// --leader-elect: forwarding shared among the replicas through shard Leases in
// the cloud (controllers/forwarder_shards.h); every replica serves.
absl::Status ApiServer::StartForwarderShards(Parts* p) {
  const ServerOptions& o = p->options;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  controllers::ForwarderShardsOptions so;
  so.shards = o.forwarder_shards;
  so.name = o.leader_elect_resource_name;
  so.identity = absl::StrCat(host, "_", RandomHex(8));
  so.lease_duration = o.leader_elect_lease_duration;
  so.renew_deadline = o.leader_elect_renew_deadline;
  so.retry_period = o.leader_elect_retry_period;
  controllers::Forwarder* forwarder = p->forwarder.get();
  controllers::ShardTarget target{[forwarder](int s) { forwarder->AcquireShard(s); },
                                  [forwarder](int s) { forwarder->ReleaseShard(s); }};
  absl::StatusOr<std::unique_ptr<controllers::ForwarderShards>> shards =
      controllers::ForwarderShards::New(p->clientset->Leases(o.leader_elect_resource_namespace),
                                        base::RealClock::Get(), &p->registry, so,
                                        std::move(target));
  if (!shards.ok()) {
    return absl::Status(shards.status().code(),
                        absl::StrCat("--leader-elect-*: ", shards.status().message()));
  }
  p->shards = *std::move(shards);
  base::LogInfo("forwarding in ", so.shards, " shards (Leases ", so.name, "-shard-<i> in ",
                o.leader_elect_resource_namespace, ") as replica ", so.identity);
  return absl::OkStatus();
}

}  // namespace poolcoord::apiservice
