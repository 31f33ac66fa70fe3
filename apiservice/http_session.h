// Internal to the HTTPS transport (tls_server.h), not an API: one accepted
// connection's HTTP/1.1 session over its TlsStream (tls_stream.h). Session
// peeks at the first byte (plain HTTP gets Go's 400), completes the handshake,
// then reads requests under the header, idle, body and size limits, refuses
// what breaks them (400, 413, 431, 504, then closes as Go's
// closeWriteAndWait), runs the handler and writes its response, and sends a
// streamed response chunk by chunk. StreamWaker wakes waiting streams in turns
// on the I/O threads; Shared is what the server and its sessions share.
// Thread safety: a Session runs on its connection's strand; StreamWaker and
// Shared are thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/ssl.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "apiservice/tls_server_options.h"
#include "apiservice/tls_stream.h"
#include "handlers/http_types.h"

namespace poolcoord::apiservice::internal {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Session;

// Wakes waiting streams in batches, on the I/O threads. A store's watch
// dispatcher wakes every watcher of an event one after the other (1,000 with
// 1,000 watches): a post per stream was 1,000 operations allocated on the
// dispatcher's thread and pushed through the scheduler's queue one by one, and a
// write's answer or the next request queued behind all of them. Here a
// wake-up only appends the stream to a list; the list's first
// wake-up posts a drain. A drain takes a turn of up to kStreamsPerTurn streams,
// posts the next drain first when more are waiting (so every I/O thread takes
// turns, and one that is descheduled holds back only its own turn), then runs
// its streams on their strands (inline: the drain is on an I/O thread and the
// strand is idle). Whatever else is ready (a write's answer, a request read)
// queues between two turns, not behind the whole fan-out. Thread-safe.
class StreamWaker {
 public:
  explicit StreamWaker(net::io_context::executor_type executor) : executor_(std::move(executor)) {}
  // Any thread, any number of times; a session gone by its turn is skipped.
  void Wake(std::weak_ptr<Session> session);

 private:
  // A turn writes an event to this many streams (~0.2 ms on this machine).
  static constexpr size_t kStreamsPerTurn = 16;
  void Drain();

  const net::io_context::executor_type executor_;
  absl::Mutex mu_;
  std::vector<std::weak_ptr<Session>> pending_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // the first not yet taken
  bool drain_posted_ ABSL_GUARDED_BY(mu_) = false;
};

// What the server and every session share; outlives the I/O threads' handlers.
struct Shared {
  TlsServerOptions options;
  RequestHandler handler;
  // Where handlers run when options.handler_threads > 0 (owned by the Impl,
  // which outlives every handler it runs); nullptr: on the I/O threads.
  net::thread_pool* handler_pool = nullptr;
  std::atomic<bool> shutting_down{false};
  // Set before the I/O threads start; lives as long as every session.
  std::unique_ptr<StreamWaker> waker;

  absl::Mutex mu;
  int active_requests ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<Session*, std::weak_ptr<Session>> sessions ABSL_GUARDED_BY(mu);

  void RequestStarted() {
    absl::MutexLock lock(&mu);
    ++active_requests;
  }
  void RequestFinished() {
    absl::MutexLock lock(&mu);
    --active_requests;
  }
};

// One accepted connection, from its first byte to its close: owned by the
// handlers pending on it (a shared_ptr each), and listed in Shared::sessions
// while it lives.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, SSL_CTX* ctx, std::shared_ptr<Shared> shared);
  ~Session();

  net::any_io_executor executor() { return stream_.get_executor(); }

  // Registers the session in Shared and starts the handshake on its strand.
  void Start();

  // On the strand, when the server begins shutting down. A stream waiting for
  // its source ends now with its final chunk (one writing ends after the write).
  void OnServerShutdown();

  // StreamWaker's turn for this stream: on an I/O thread, runs on the strand.
  void WakeStream();

 private:
  enum class State { kHandshake, kReading, kActive, kStreaming, kIdleAfterStream, kClosing };

  // --- the handshake, and plain HTTP refused
  void DoHandshake();
  void OnReadable(beast::error_code ec);
  void DoHandshakeWait();
  void RefusePlainHttp();
  void LingeringClose();
  void DrainPlain();
  void OnHandshake(beast::error_code ec);

  // --- reading a request, and refusing one
  void DoRead(bool first_request = false);
  void ReadHeader();
  void Refuse(const absl::Status& status);
  void RefuseWith(handlers::Response response);
  void RefuseHeaderTooLarge();
  void RefuseBodyTimeout();
  bool ReadFailed(beast::error_code ec);
  void OnHeader(beast::error_code ec);
  void ReadBody();

  // --- running the handler and writing its response
  void Dispatch();
  handlers::Response Handle(handlers::Request& request);
  void Respond(handlers::Response response, bool head);
  static bool TransportHeader(const std::string& name);
  void WriteResponse(handlers::Response response, bool head);
  void OnWrite(beast::error_code ec);
  void BeginRequest();
  void FinishRequest();

  // --- streamed responses: the source is polled on this strand; one chunk is
  // in flight at a time, so a slow client holds back only its own source.
  void StartStream(handlers::Response response);
  void OnStreamHeader(beast::error_code ec);
  void PumpStream();
  void OnStreamWake();
  // The stream's timer, if armed, stays armed: OnStreamWake ignores it while
  // the stream is not waiting, and the next wait keeps it when it asks for the
  // same time.
  void StopWaiting() { stream_waiting_ = false; }
  void CancelStreamTimer();
  void EndStream(bool clean);
  void StartBackgroundRead();
  void OnBackgroundRead(beast::error_code ec, size_t n);
  void OnFinalChunk(beast::error_code ec);

  // --- closing
  void Drain();
  void GracefulClose();
  void Close();
  void CloseSocket();

  // Reads ask for up to this much; the receive buffer may hold a whole header
  // (max_header_bytes) plus one such read, and is shrunk back to nothing when
  // an idle connection's buffer grew beyond kKeptBufferBytes.
  static constexpr size_t kReadChunk = 64 * 1024;
  static constexpr size_t kKeptBufferBytes = 16 * 1024;

  TlsStream stream_;
  std::shared_ptr<Shared> shared_;
  net::steady_timer idle_timer_;
  beast::flat_buffer buffer_;
  ConnectionInfo conn_;
  State state_ = State::kHandshake;
  bool header_started_ = false;  // the current request's first byte arrived
  bool keep_alive_ = true;
  // The request's HTTP version, 10 or 11 (Beast's encoding): an HTTP/1.0
  // client gets streams unchunked, ended by the close.
  unsigned request_version_ = 11;
  bool drain_after_write_ = false;
  bool request_counted_ = true;  // false while a request is counted in Shared
  size_t drained_ = 0;
  size_t drain_limit_ = 1024 * 1024;  // bytes LingeringClose reads before it closes
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> continue_res_;
  std::optional<http::response<http::string_body>> res_;
  std::optional<http::response<http::empty_body>> stream_res_;
  std::optional<http::response_serializer<http::empty_body>> stream_sr_;
  std::shared_ptr<handlers::StreamSource> source_;
  net::steady_timer stream_timer_;
  std::string chunk_;  // the chunk being written
  std::function<void()> stream_wake_;  // handed to every Poll of the stream
  bool stream_waiting_ = false;
  bool stream_timer_armed_ = false;
  handlers::StreamSource::Clock::time_point stream_timer_at_{};  // when armed
  uint64_t stream_timer_generation_ = 0;  // a fired wait of an older arming is ignored
  std::shared_ptr<Session> self_while_streaming_;  // see OnBackgroundRead
  bool stream_failed_ = false;  // peer gone or a write failed
  bool stream_chunked_ = true;  // false for an HTTP/1.0 client
  bool bg_read_pending_ = false;
};

}  // namespace poolcoord::apiservice::internal
