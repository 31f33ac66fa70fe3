// A small client for etcd's v3 JSON gateway (grpc-gateway in front of the gRPC
// API, served on the client port of etcd 3.4 under /v3/...), over the process's
// one HTTP transport (base/http_transport.h).
//
// Wire facts (etcd 3.4, checked against etcd-server 3.4.23):
// - every call is a POST of the gRPC request message as JSON, with proto field
//   names (`mod_revision`, `range_end`), int64 fields as decimal strings, and
//   bytes fields (keys, values) in standard base64;
// - a gRPC error answers HTTP 4xx/5xx with {"error", "message", "code"}, where
//   `code` is the gRPC code (numerically the same as absl::StatusCode);
// - zero values are left out of answers (a failed txn has no "succeeded");
// - /v3/watch streams one JSON object per line: {"result": WatchResponse} or,
// for
//   a stream error, {"error": {...}}.
//
// Thread-safety: Call and Stream may run concurrently from any threads (the
// transport gives each its own connection).
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
#include "base/http_transport.h"
#include "rapidjson/document.h"

namespace poolcoord::store {

struct Etcd3ClientOptions {
  // "http://127.0.0.1:2379", "https://etcd-0:2379"; a URL without a scheme gets
  // https:// when TLS files are set, else http://.
  std::vector<std::string> endpoints;
  std::string ca_file;    // PEM; empty: the system trust store
  std::string cert_file;  // PEM client certificate
  std::string key_file;   // PEM client key
  // Whole-call timeout for unary calls, all endpoints tried included; streams
  // have none.
  std::chrono::milliseconds timeout{10'000};
};

// Lets another thread end a running Stream at once (the transport's control).
using Etcd3StreamControl = base::StreamControl;

class Etcd3Client {
 public:
  // InvalidArgument when no endpoint is given.
  static absl::StatusOr<std::unique_ptr<Etcd3Client>> New(Etcd3ClientOptions options);
  ~Etcd3Client();
  Etcd3Client(const Etcd3Client&) = delete;
  Etcd3Client& operator=(const Etcd3Client&) = delete;

  // POSTs `body` to `path` ("/v3/kv/range") and returns the parsed answer.
  // Errors: the gRPC error of the answer as the same absl code with etcd's
  // message ("etcdserver: mvcc: required revision has been compacted");
  // Unavailable naming the endpoints when none served it. A call moves on to
  // the next endpoint when it could not connect or its member has no leader
  // (every call requires one, as clientv3.WithRequireLeader does: etcd refuses
  // it before running it); one that failed after it was sent, or that its
  // member could not serve in time ("etcdserver: request timed out"), moves on
  // only when `idempotent` (a txn may have been applied). Calls start at the
  // endpoint that last served one.
  absl::StatusOr<rapidjson::Document> Call(std::string_view path, std::string_view body,
                                           bool idempotent);

  // POSTs `body` to `path` on the current endpoint and hands each line of a 200
  // answer to on_line until the server closes the stream, on_line returns false
  // or control->Stop() is called (all three: OK). Errors as for Call. A watch
  // requires a leader too: etcd ends it with an error line ("etcdserver: no
  // leader") once its member has been without one for three election timeouts.
  absl::Status Stream(std::string_view path, std::string_view body,
                      const std::function<bool(std::string_view)>& on_line,
                      Etcd3StreamControl* control);

  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  Etcd3Client(Etcd3ClientOptions options, std::vector<std::string> endpoints,
              std::unique_ptr<base::HttpTransport> transport);
  base::HttpRequest Request(const std::string& url, std::string_view body) const;

  const Etcd3ClientOptions options_;
  const std::vector<std::string> endpoints_;
  // The endpoint that answered last: calls start there.
  std::atomic<size_t> preferred_{0};
  const std::unique_ptr<base::HttpTransport> transport_;
};

}  // namespace poolcoord::store
