// The one outbound HTTP(S) transport of the process, on libcurl: the cloud
// cluster's kube-apiserver (cloud/), poolcoord itself (the simulator) and etcd's
// JSON gateway (store/etcd3_client) all go through it.
//
// What it does for every caller:
// - connection reuse: each request borrows a libcurl easy handle from a pool and
//   gives it back, so sequential requests reuse an idle kept-alive connection
//   and concurrent ones run on separate connections;
// - TLS: the CA, the client certificate and key, each as a file or PEM data
//   (data wins, as client-go's rest.TLSClientConfig does), or no verification;
// - a bearer token (per transport, or per request);
// - timeouts: whole-request and connect;
// - retries with exponential backoff for idempotent requests that failed before
//   an answer, or were answered 429/5xx-unavailable (client-go's
//   rest.Request retries idempotent verbs the same way), within the request's
//   timeout;
// - streaming: a 200 answer handed over line by line (watches), which another
//   thread ends at once with a StreamControl.
//
// It knows nothing of Kubernetes or etcd: any HTTP answer, 4xx and 5xx
// included, is an HttpResponse; callers read bodies.
//
// Thread-safety: one HttpTransport serves any number of threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::base {

struct TlsClientConfig {
  std::string ca_file;
  std::string ca_data;  // PEM; wins over ca_file
  std::string cert_file;
  std::string cert_data;  // PEM
  std::string key_file;
  std::string key_data;  // PEM
  bool insecure_skip_verify = false;
};

struct RetryPolicy {
  // Attempts in all (1: no retry).
  int max_attempts = 1;
  // The wait before the second attempt, doubled each time up to max_backoff,
  // each wait drawn uniformly from [backoff/2, backoff] (jitter).
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{2'000};
};

struct HttpTransportConfig {
  TlsClientConfig tls;
  std::string bearer_token;
  // Whole-request timeout (connect + TLS + transfer, all attempts); 0: none.
  // Streams have none unless the request sets one.
  std::chrono::milliseconds timeout{10'000};
  std::chrono::milliseconds connect_timeout{10'000};
  std::string user_agent = "poolcoord";
  // Idle connections kept for reuse; more may be open while busy.
  int max_idle_connections = 64;
  RetryPolicy retry;
  // TCP keepalive of every connection: the first probe after this long
  // without a packet from the peer, then one every interval; after `probes`
  // unanswered ones (0: the system's, net.ipv4.tcp_keepalive_probes, 9) the
  // kernel ends the connection and its transfer fails. libcurl's defaults
  // (60 s, 60 s) notice a silent peer after 10 minutes.
  std::chrono::seconds keepalive_idle{60};
  std::chrono::seconds keepalive_interval{60};
  int keepalive_probes = 0;
};

// Lets another thread end a running Stream at once.
class StreamControl {
 public:
  StreamControl() = default;
  StreamControl(const StreamControl&) = delete;
  StreamControl& operator=(const StreamControl&) = delete;
  // Idempotent; a later Stream with this control returns at once.
  void Stop();
  bool stopped() const { return stopped_.load(); }

 private:
  friend class HttpTransport;
  std::atomic<bool> stopped_{false};
  absl::Mutex mu_;
  void* multi_ ABSL_GUARDED_BY(mu_) = nullptr;  // CURLM* of the running stream
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;  // absolute: "https://10.0.0.1:6443/api/v1/nodes?limit=5"
  std::string body;
  std::string content_type = "application/json";  // sent when there is a body or a write verb
  std::string accept = "application/json";        // "" sends none
  std::string bearer_token;                       // overrides the transport's when set
  std::vector<std::string> headers;  // more header lines, "Name: value", sent as given
  std::chrono::milliseconds timeout{0};           // overrides the transport's when > 0
  // Retried under the transport's RetryPolicy. Defaults to the verb's HTTP
  // idempotence (GET, HEAD, PUT, DELETE); a POST that only reads (etcd's range)
  // may say so.
  std::optional<bool> idempotent;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string retry_after;  // the Retry-After header, when sent
  std::string date;         // the Date header, when sent (the server's clock; base::ParseHttpDate)
};

// Why a transfer failed, in the terms a caller needs to explain it (the etcd3
// client turns these into hints naming its TLS flags).
enum class TransferFailure {
  kNone,
  kConnect,             // no connection (refused, unreachable, DNS): nothing was sent
  kPeerVerification,    // the server's certificate was not accepted
  kCaFile,              // the CA bundle could not be loaded
  kClientCertProblem,   // the client certificate or key could not be loaded
  kClientCertRejected,  // the server refused the client certificate
  kTlsHandshake,        // any other TLS set-up failure
  kSendReceive,         // the connection broke while sending or receiving
  kNothing,             // the server closed the connection without an answer
  kTimeout,
  kCancelled,
  kOther,
};

// The details of a failed transfer, for callers that explain failures.
struct TransferError {
  TransferFailure kind = TransferFailure::kNone;
  bool fresh_connection = false;  // the transfer opened its connection itself
  long http_status = 0;           // an answer's status seen before the failure, else 0
  std::string detail;             // libcurl's text, e.g. "Couldn't connect to server (...)"
};

class HttpTransport {
 public:
  static std::unique_ptr<HttpTransport> New(HttpTransportConfig config);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // One request, retried when the policy allows. Errors: Unavailable for
  // connect/TLS/transport failures, DeadlineExceeded on timeout; the message
  // names the method and URL. `error`, when given, receives the details of the
  // last failed transfer.
  absl::StatusOr<HttpResponse> Do(const HttpRequest& request, TransferError* error = nullptr);

  // Streams the answer: for a 200, each complete non-empty line (without "\r\n")
  // goes to on_line until the server ends the stream, on_line returns false or
  // control->Stop() is called: all three OK. Any other status: the body is
  // collected and returned in `response` (OK). Transport errors as for Do, never
  // retried. `control` may be nullptr.
  absl::Status Stream(const HttpRequest& request,
                      const std::function<bool(std::string_view)>& on_line, StreamControl* control,
                      HttpResponse* response, TransferError* error = nullptr);

  const HttpTransportConfig& config() const { return config_; }

 private:
  explicit HttpTransport(HttpTransportConfig config);
  void* AcquireHandle();
  void ReleaseHandle(void* handle);
  absl::StatusOr<HttpResponse> DoOnce(const HttpRequest& request, std::chrono::milliseconds timeout,
                                      TransferError* error);

  const HttpTransportConfig config_;
  absl::Mutex mu_;
  std::vector<void*> idle_ ABSL_GUARDED_BY(mu_);  // CURL* easy handles
};

}  // namespace poolcoord::base
