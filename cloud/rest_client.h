// The untyped client of a Kubernetes-style API server (client-go's
// rest.RESTClient), over the process's one HTTP transport (base/http_transport.h):
// paths in, JSON bodies and Kubernetes errors out. The typed clients
// (cloud/clientset.h) are built on it; the simulator uses it directly to speak
// to poolcoord as many agents at once.
//
// Where the config comes from: LoadKubeconfig (a kubeconfig file, as kubectl
// reads it) or InClusterConfig (the pod's service account, as client-go's
// rest.InClusterConfig).
//
//   ASSIGN_OR_RETURN(RestConfig config, LoadKubeconfig("/etc/kubeconfig"));
//   ASSIGN_OR_RETURN(auto client, RestClient::New(config));
//   ASSIGN_OR_RETURN(std::string body, client->Get("/api/v1/nodes/n1"));
//
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/http_transport.h"
#include "base/token_bucket.h"

namespace poolcoord::cloud {

// Where and how to connect (client-go's rest.Config, the parts we use).
struct RestConfig {
  std::string server;  // "https://127.0.0.1:6443", no trailing path
  base::TlsClientConfig tls;
  std::string bearer_token;
  // Whole-request timeout, retries included. client-go's leader election uses
  // max(1 s, RenewDeadline / 2) so one hung request cannot cost the lease.
  std::chrono::milliseconds timeout{10'000};
  std::string user_agent = "poolcoord";
  int max_idle_connections = 64;
  // Client-side rate limit of every request (watches included, once each), as
  // client-go's rest.Config QPS and Burst: a token bucket
  // (base/token_bucket.h). qps <= 0: no limit.
  double qps = 0;
  int burst = 0;
  // Idempotent requests (GET, PUT, DELETE) are retried after a failure before
  // any answer or a 429/502/503, within `timeout`.
  base::RetryPolicy retry{/*max_attempts=*/3, std::chrono::milliseconds(100),
                          std::chrono::milliseconds(1'000)};
  // When set, sees every HTTP answer to Do/Send (any status; not watch streams,
  // not transport failures) before it is decoded: what client-go callers wrap
  // the transport for (rest.Config.WrapTransport), e.g. reading the server's
  // clock from the Date header. Called on the requesting thread, so it must be
  // thread-safe when the client is shared.
  std::function<void(const base::HttpResponse&)> response_observer;
};

// Reads one kubeconfig (YAML) and returns its current context's cluster and user.
// Relative file paths resolve against the kubeconfig's directory, as client-go
// does; *-data fields are base64. `context` overrides current-context when
// non-empty. Errors: NotFound (file), InvalidArgument (malformed, missing
// context/cluster/user, an exec credential plugin). kubectl's whole set of
// rules (several files, flag overrides) is in cloud/kubeconfig.h, which
// implements this.
absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// The in-cluster config: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
// the service account token and CA from `sa_dir`. NotFound when not running in a
// pod (the variables or the token are missing).
absl::StatusOr<RestConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// Per-request overrides.
struct RequestOptions {
  // Replaces the configured bearer token (the simulator sends one identity per
  // agent over shared connections).
  std::string bearer_token;
  std::chrono::milliseconds timeout{0};  // replaces the configured one when > 0
  std::string content_type = "application/json";
};

// Patch types (k8s.io/apimachinery/pkg/types.PatchType).
inline constexpr char kMergePatch[] = "application/merge-patch+json";
inline constexpr char kJsonPatch[] = "application/json-patch+json";
inline constexpr char kStrategicMergePatch[] = "application/strategic-merge-patch+json";

class RestClient {
 public:
  // InvalidArgument when the server URL is empty or not http(s).
  static absl::StatusOr<std::unique_ptr<RestClient>> New(RestConfig config);

  // `path` starts with "/" and carries any query. The body of a 2xx answer;
  // an error answer as the Kubernetes error (cloud/errors.h); transport failures
  // as Unavailable / DeadlineExceeded.
  absl::StatusOr<std::string> Do(std::string_view method, std::string_view path,
                                 std::string_view body, const RequestOptions& options = {});
  // The answer whatever its status, for callers that count answers (the
  // simulator); transport failures as for Do.
  absl::StatusOr<base::HttpResponse> Send(std::string_view method, std::string_view path,
                                          std::string_view body,
                                          const RequestOptions& options = {});
  absl::StatusOr<std::string> Get(std::string_view path, const RequestOptions& o = {}) {
    return Do("GET", path, "", o);
  }
  absl::StatusOr<std::string> Post(std::string_view path, std::string_view body,
                                   const RequestOptions& o = {}) {
    return Do("POST", path, body, o);
  }
  absl::StatusOr<std::string> Put(std::string_view path, std::string_view body,
                                  const RequestOptions& o = {}) {
    return Do("PUT", path, body, o);
  }
  // `patch_type`: kMergePatch, kJsonPatch or kStrategicMergePatch.
  absl::StatusOr<std::string> Patch(std::string_view path, std::string_view patch_type,
                                    std::string_view body, RequestOptions o = {});
  absl::StatusOr<std::string> Delete(std::string_view path, const RequestOptions& o = {}) {
    return Do("DELETE", path, "", o);
  }

  // Streams a watch (one JSON event per line, as kube-apiserver sends them) to
  // on_line until the server ends the stream, on_line returns false or
  // control->Stop() is called: OK for all three. An error answer is its
  // Kubernetes error (410 is IsResourceExpired); transport failures as for Do.
  // The configured timeout does not apply (o.timeout does, when set).
  absl::Status Watch(std::string_view path, const std::function<bool(std::string_view)>& on_line,
                     base::StreamControl* control, const RequestOptions& o = {});

  const RestConfig& config() const { return config_; }

 private:
  RestClient(RestConfig config, std::unique_ptr<base::HttpTransport> transport);
  base::HttpRequest MakeRequest(std::string_view method, std::string_view path,
                                std::string_view body, const RequestOptions& o) const;

  const RestConfig config_;
  const std::unique_ptr<base::HttpTransport> transport_;
  base::TokenBucket limiter_;
};

}  // namespace poolcoord::cloud
