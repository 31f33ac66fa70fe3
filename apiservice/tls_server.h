// The HTTPS transport: the one adapter between the wire (Boost.Beast's HTTP/1.1
// over Boost.Asio sockets, TLS by OpenSSL; only the transport's own files in
// apiservice/ include them) and our own handlers::Request / handlers::Response.
// TlsServer (tls_server.cc) accepts connections, runs the I/O threads and holds
// the TLS context; each connection is an HTTP/1.1 session (http_session.h,
// internal) over TLS on its own socket (tls_stream.h, internal); the options and
// the handler's types are in tls_server_options.h.
//
// Behaviour, and why (docs/architecture.md "Transport"):
// - N I/O threads; accepts and TLS handshakes are asynchronous, each handshake
//   bounded by `handshake_timeout`, so a client that stalls never delays others.
// - Time limits as kube-apiserver's http.Server (k8s.io/apiserver
//   pkg/server/secure_serving.go): a request header must be complete within
//   `read_header_timeout` (32 s, ReadHeaderTimeout) of the connection's
//   handshake or of the first byte of a later request; a keep-alive connection
//   may wait `idle_timeout` (90 s, IdleTimeout) for that first byte. A client
//   that stalls mid-header is closed silently (no 408; Go answers nothing
//   either), and so is an idle one.
// - TLS 1.2 or newer; ALPN offers only http/1.1; no session resumption (the
//   authenticator sees the chain of every connection's own handshake).
// - OpenSSL reads and writes each connection's socket itself and releases its
//   record buffers between records (SSL_MODE_RELEASE_BUFFERS): an idle
//   connection costs a few KiB, not the ~70 KiB of Asio's ssl::stream buffers
//   Receive buffers shrink back after a request that grew them, and
//   after a burst of closed connections the freed heap is returned to the
//   system (malloc_trim), so memory falls again when clients leave.
// - The serving certificate and the client CA names can be replaced while
//   serving (SetServingCertificate, SetClientCaNames): handshakes that start
//   afterwards get the new ones, established connections keep theirs.
// - A client certificate is requested, never required: the handshake accepts any
//   certificate (a verify callback that always agrees) and the chain is handed to
//   the handler in ConnectionInfo; the authenticator verifies it.
// - HTTP/1.1 keep-alive, chunked request bodies, `Expect: 100-continue`; repeated
//   header lines are kept, names lower-cased. A body over `max_body_bytes` is
//   answered 413 (error_responder) and the connection closed; a malformed request
//   400 and closed. A body must arrive within `body_timeout` (60 s, from the end
//   of the header): past it the request is answered as kube-apiserver's timeout
//   filter answers one past --request-timeout (504, "Timeout: request did not
//   complete within the allotted timeout") and the connection closed.
// - Path percent-decoded ('+' stays), query decoded as form-urlencoded
//   (handlers::ParseQueryString).
// - Plain responses carry Content-Length. A Response with `stream` (a
//   handlers::StreamSource) is sent with Transfer-Encoding: chunked: the source
//   is polled on the connection's strand, one chunk in flight at a time, and
//   woken by its producer when it had nothing; no thread per stream. A wake-up
//   only queues the stream; the I/O threads serve queued streams in turns of a
//   few, so other work (a write's answer) waits for a turn, not for every
//   stream an event woke. While it
//   runs the connection is read in the background, so a client that goes away
//   cancels the source at once. At shutdown a waiting stream ends with its final
//   chunk.
// - The handler runs on an I/O thread and must not block for long, or, with
//   `handler_threads` > 0, on a fixed pool of that many threads, for handlers
//   that wait (a store's round trips to etcd): the I/O threads then only read,
//   write and stream, and their count need not grow for the waits.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "apiservice/tls_server_options.h"

namespace poolcoord::apiservice {

class TlsServer {
 public:
  // Loads the certificate, binds, listens and starts the I/O threads.
  // Errors: InvalidArgument (certificate, key, address), Unavailable (bind).
  static absl::StatusOr<std::unique_ptr<TlsServer>> Start(TlsServerOptions options,
                                                          RequestHandler handler);
  // Shuts down (without grace) if Shutdown was not called.
  ~TlsServer();
  TlsServer(const TlsServer&) = delete;
  TlsServer& operator=(const TlsServer&) = delete;

  // The bound port.
  int port() const;

  // Stops accepting connections and new requests; streams end with their final
  // chunk (after the chunk being written, if any). Returns at once; idempotent.
  void BeginShutdown();

  // BeginShutdown, then waits up to `grace` for in-flight requests (including the
  // final chunk of each stream) to finish, closes every
  // connection and joins the I/O threads. Returns true when everything finished
  // within the grace period. Idempotent; thread-safe against BeginShutdown.
  bool Shutdown(std::chrono::milliseconds grace);

  // Requests being served now (handler running or response being written).
  int ActiveRequests() const;
  // Connections open now (accepted and not yet closed).
  int OpenConnections() const;

  // Replaces the serving certificate (PEM: the leaf, then intermediates) and
  // its PEM key for handshakes that start from now on; connections already
  // established keep the one they got. InvalidArgument, and the current pair
  // stays, when they do not load or do not match. Thread-safe.
  absl::Status SetServingCertificate(const std::string& chain_pem, const std::string& key_pem);
  // Replaces the CA subjects the CertificateRequest names with those of every
  // certificate in `bundles_pem` ("" names none), as SetServingCertificate.
  absl::Status SetClientCaNames(const std::string& bundles_pem);

 private:
  struct Impl;
  explicit TlsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace poolcoord::apiservice
