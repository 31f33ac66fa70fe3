// What the HTTPS transport (tls_server.h) is configured with and what it hands
// the handler: TlsServerOptions (address, certificate files, threads, the time
// and size limits), ConnectionInfo (the peer's address and certificate chain),
// RequestHandler and ErrorResponder. Plain values, no behaviour; the limits'
// meanings are in tls_server.h. Apart from the server so that the server and
// its per-connection sessions (http_session.h) both read them.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "apiservice/peer_certificates.h"
#include "handlers/http_types.h"

namespace poolcoord::apiservice {

// kube-apiserver's limit on request bodies (3 MiB, as its generic server sets
// MaxRequestBodyBytes).
inline constexpr size_t kMaxRequestBodyBytes = 3 * 1024 * 1024;

struct ConnectionInfo {
  std::string remote_address;  // "127.0.0.1:54321"
  // The client's certificate chain as sent, unverified; nullptr without one.
  std::shared_ptr<const PeerCertificates> peer;
};

// Serves one request. Runs on an I/O thread (or a handler thread, see
// TlsServerOptions::handler_threads); must not throw (an exception is
// answered 500).
using RequestHandler =
    std::function<handlers::Response(handlers::Request& request, const ConnectionInfo& connection)>;

// Builds the response for a transport-level refusal (413, 400). The default
// writes a plain-text body.
using ErrorResponder = std::function<handlers::Response(const absl::Status& status)>;

struct TlsServerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port; see TlsServer::port()
  std::string cert_file;  // PEM chain
  std::string key_file;   // PEM key
  // CA bundles whose subjects the CertificateRequest names (Go clients send a
  // certificate only when it chains to one of them). Empty: no names.
  std::vector<std::string> client_ca_files;
  int io_threads = 0;  // 0: max(2, hardware concurrency)
  // Threads that run the handler; 0: the handler runs on the I/O threads.
  int handler_threads = 0;
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds read_header_timeout{32'000};  // kube-apiserver's
  std::chrono::milliseconds idle_timeout{90'000};         // kube-apiserver's
  std::chrono::milliseconds body_timeout{60'000};   // from the end of the header
  std::chrono::milliseconds write_timeout{60'000};  // per response or per chunk
  size_t max_body_bytes = kMaxRequestBodyBytes;
  size_t max_header_bytes = 1024 * 1024;  // Go's http.DefaultMaxHeaderBytes
  ErrorResponder error_responder;
};

}  // namespace poolcoord::apiservice
