// An outbound HTTPS/JSON client for Kubernetes-style API servers (the cloud
// cluster's kube-apiserver, or poolcoord itself), on libcurl.
//
// It lives in store/ because both election/ (the PoolLease lock, the forwarder)
// and apiservice/ (delegated authn/authz, the cloud Lease) talk to remote API
// servers through it (DESIGN.md "Inside").
//
// Usage:
//   ASSIGN_OR_RETURN(auto config, LoadKubeconfig("/etc/kubeconfig"));
//   ASSIGN_OR_RETURN(auto client, KubeClient::New(config));
//   ASSIGN_OR_RETURN(KubeResponse r, client->Get("/apis/coordination.pool/v1alpha1/poolleases/p"));
//   if (r.status != 200) return StatusFromKubeResponse(r);
//
// A transport failure (connect, TLS, timeout) is an absl::Status error; any HTTP
// answer, 4xx and 5xx included, is a KubeResponse. StatusFromKubeResponse turns
// an error answer into the absl code of reference/cpp-style.md's table.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::store {

// Where and how to connect. Each credential comes as a file path or as PEM data;
// data wins when both are set (as client-go's rest.TLSClientConfig does).
struct KubeClientConfig {
  std::string server;  // "https://127.0.0.1:6443", no trailing path
  std::string ca_file;
  std::string ca_data;  // PEM
  std::string client_cert_file;
  std::string client_cert_data;  // PEM
  std::string client_key_file;
  std::string client_key_data;  // PEM
  std::string bearer_token;
  bool insecure_skip_tls_verify = false;
  // Whole-request timeout (connect + TLS + transfer). 0: none. client-go's
  // leader election uses max(1 s, RenewDeadline / 2) so one hung request cannot
  // cost the leader its lease.
  std::chrono::milliseconds timeout{10'000};
  std::string user_agent = "poolcoord";
  // Idle connections kept for reuse (keep-alive); more may be open while busy.
  int max_idle_connections = 64;
};

// One HTTP answer, whatever its status.
struct KubeResponse {
  int status = 0;
  std::string body;
};

// Per-request overrides.
struct KubeRequestOptions {
  // Replaces the configured bearer token for this request (a fleet simulator
  // sends one identity per agent over shared connections).
  std::string bearer_token;
  // Replaces the configured timeout when > 0.
  std::chrono::milliseconds timeout{0};
  std::string content_type = "application/json";
  // Checked while the transfer runs; when it turns true the request fails with
  // Cancelled (watch streams that must end from another thread).
  const std::atomic<bool>* cancel = nullptr;
};

// Thread-safe: every request borrows one libcurl easy handle from a pool and
// returns it afterwards, so concurrent requests run on separate connections and
// sequential ones reuse an idle connection (HTTP/1.1 keep-alive).
class KubeClient {
 public:
  // InvalidArgument when the server URL is empty or not http(s).
  static absl::StatusOr<std::unique_ptr<KubeClient>> New(KubeClientConfig config);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  // `path` starts with "/" and carries any query. Errors: Unavailable for
  // connect/TLS/transport failures, DeadlineExceeded on timeout, Cancelled.
  absl::StatusOr<KubeResponse> Do(std::string_view method, std::string_view path,
                                  std::string_view body, const KubeRequestOptions& options = {});
  absl::StatusOr<KubeResponse> Get(std::string_view path, const KubeRequestOptions& o = {}) {
    return Do("GET", path, "", o);
  }
  absl::StatusOr<KubeResponse> Post(std::string_view path, std::string_view body,
                                    const KubeRequestOptions& o = {}) {
    return Do("POST", path, body, o);
  }
  absl::StatusOr<KubeResponse> Put(std::string_view path, std::string_view body,
                                   const KubeRequestOptions& o = {}) {
    return Do("PUT", path, body, o);
  }
  // content_type defaults to a merge patch ("application/merge-patch+json").
  absl::StatusOr<KubeResponse> Patch(std::string_view path, std::string_view body,
                                     KubeRequestOptions o = {});
  absl::StatusOr<KubeResponse> Delete(std::string_view path, const KubeRequestOptions& o = {}) {
    return Do("DELETE", path, "", o);
  }

  // Streams a watch (newline-delimited JSON events, as kube-apiserver sends
  // them): calls on_line for each complete line until the server ends the
  // stream, on_line returns false, or options.cancel turns true. The configured
  // timeout does not apply (options.timeout does, when set). Returns OK when the
  // stream ended normally or on_line stopped it; FailedPrecondition with the body
  // when the server answered other than 200; transport errors as for Do.
  absl::Status Watch(std::string_view path, const std::function<bool(std::string_view)>& on_line,
                     const KubeRequestOptions& options = {});

  const KubeClientConfig& config() const { return config_; }

 private:
  explicit KubeClient(KubeClientConfig config);
  void* AcquireHandle();
  void ReleaseHandle(void* handle);
  absl::Status Perform(void* handle, std::string_view method, std::string_view path,
                       std::string_view body, const KubeRequestOptions& options,
                       const std::function<bool(std::string_view)>* on_line,
                       std::string* body_out, long* status);

  const KubeClientConfig config_;
  absl::Mutex mu_;
  std::vector<void*> idle_ ABSL_GUARDED_BY(mu_);  // CURL* easy handles
};

// Reads a kubeconfig (YAML) and returns its current context's cluster and user
// as a client config. Relative file paths resolve against the kubeconfig's
// directory, as client-go does; *-data fields are base64. `context` overrides
// current-context when non-empty. Errors: NotFound (file), InvalidArgument
// (malformed, missing context/cluster/user).
absl::StatusOr<KubeClientConfig> LoadKubeconfig(const std::string& path,
                                                const std::string& context = "");

// The in-cluster config, as client-go's rest.InClusterConfig: server
// https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the service
// account token and CA from `sa_dir` (default
// /var/run/secrets/kubernetes.io/serviceaccount). NotFound when not running in a
// pod (the variables or the token are missing).
absl::StatusOr<KubeClientConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// The absl code for an error answer (status >= 300), following
// reference/cpp-style.md: 404 NotFound, 409 AlreadyExists (reason
// AlreadyExists) or Aborted (Conflict), 401 Unauthenticated, 403
// PermissionDenied, 400/422 InvalidArgument, 410 OutOfRange, 429
// ResourceExhausted, 503 Unavailable, 504 DeadlineExceeded, else Unknown. The
// message is the metav1.Status message when the body is one. OK for 2xx.
absl::Status StatusFromKubeResponse(const KubeResponse& response);

}  // namespace poolcoord::store
