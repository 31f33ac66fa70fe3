// Assembles the process: flags → PKI → store, membership, lease rules, router →
// the request pipeline → the TLS transport; and takes it down again on SIGTERM.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "apiservice/authenticator.h"
#include "apiservice/authorizer.h"
#include "apiservice/flags.h"
#include "apiservice/metrics.h"
#include "apiservice/request_info.h"
#include "apiservice/tls_server.h"
#include "base/clock.h"
#include "handlers/http_types.h"
#include "handlers/router.h"

namespace poolcoord::apiservice {

// The filters every request passes before a handler, in kube-apiserver's order
// (DefaultBuildHandlerChain): authentication (401; anonymous only where
// AnonymousAllowed, or everywhere with --anonymous-auth, then authorized),
// max-in-flight (429 with Retry-After: 1; watches and system:masters exempt,
// as WithMaxInFlightLimit), authorization (403), then the router. Every request
// is counted in Metrics; a watch's stream registers a watcher while it runs. At
// verbosity 2 and above each request is logged. Every answer carries a Date
// header from `clock`, as Go's net/http adds to each of kube-apiserver's: clients
// read the server's clock there (kubectl pool judges lease expiry by it).
struct PipelineOptions {
  const Authenticator* authenticator = nullptr;  // not owned
  const Authorizer* authorizer = nullptr;        // not owned
  handlers::Router* router = nullptr;            // not owned
  Metrics* metrics = nullptr;                    // not owned
  InflightLimiter* limiter = nullptr;            // not owned
  bool anonymous_auth = false;
  // The wall clock of the Date header: the rules' clock, so that Date and the
  // times the rules stamp on objects are readings of one clock.
  const base::Clock* clock = base::RealClock::Get();  // not owned
};

class RequestPipeline {
 public:
  explicit RequestPipeline(PipelineOptions options) : options_(options) {}
  // Thread-safe; never throws.
  handlers::Response Serve(handlers::Request& request, const ConnectionInfo& connection) const;

 private:
  PipelineOptions options_;
};

// The verb label kube-apiserver's request metrics use: GET, LIST, WATCH, POST,
// PUT, PATCH, APPLY (server-side apply patches), DELETE; the HTTP method for
// non-resource requests.
std::string MetricsVerb(const RequestInfo& info, const handlers::Request& request);

class ApiServer {
 public:
  // Builds everything and starts serving. Errors name the flag or file at fault
  // (PKI, CA bundles, token file, membership file, bind).
  static absl::StatusOr<std::unique_ptr<ApiServer>> Start(const ServerOptions& options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  int port() const;
  // https://127.0.0.1:<port> (or the specific bind address).
  std::string url() const;
  // The admin kubeconfig written (or found, when a file we did not write is
  // there: kept as it is, with a warning) at start, or "" when none was
  // (certificates given on the command line, or --write-kubeconfig="").
  const std::string& kubeconfig_path() const;

  // Stops accepting, lets in-flight requests finish, ends watches cleanly (store
  // Shutdown), stops background work; waits up to `grace`. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

  // Re-reads the serving certificate and the CA bundle files now (SIGHUP);
  // they are also followed on their own (dynamic_certificates.h).
  void ReloadCertificates();

 private:
  struct Parts;
  // --leader-elect: the forwarding shards shared among the replicas.
  static absl::Status StartForwarderShards(Parts* parts);
  explicit ApiServer(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace poolcoord::apiservice
