#include "apiservice/http_session.h"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <string_view>

#include <openssl/x509.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/string_view.h"
#include "handlers/url.h"
#include "store/api_error.h"

namespace poolcoord::apiservice::internal {
namespace {

handlers::Response PlainError(const absl::Status& status) {
  store::ApiErrorInfo info = store::ApiErrorFromStatus(status);
  handlers::Response r;
  r.status = info.code;
  r.SetHeader("Content-Type", "text/plain; charset=utf-8");
  r.body = info.message + "\n";
  return r;
}

}  // namespace

Session::Session(tcp::socket&& socket, SSL_CTX* ctx, std::shared_ptr<Shared> shared)
    : stream_(std::move(socket), ctx),
      shared_(std::move(shared)),
      idle_timer_(stream_.get_executor()),
      buffer_(shared_->options.max_header_bytes + kReadChunk),
      stream_timer_(stream_.get_executor()) {
  beast::error_code ec;
  tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
  if (!ec) {
    conn_.remote_address = remote.address().is_v6()
                               ? absl::StrCat("[", remote.address().to_string(), "]:", remote.port())
                               : absl::StrCat(remote.address().to_string(), ":", remote.port());
  }
}

Session::~Session() {
  absl::MutexLock lock(&shared_->mu);
  shared_->sessions.erase(this);
  // A stream whose client left ends with no completion handler to finish its
  // request (nothing holds the session any more): count it finished here, or
  // Shutdown would wait for it until the grace period runs out.
  if (!request_counted_) --shared_->active_requests;
}

void Session::Start() {
  stream_.set_owner(weak_from_this());
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->sessions[this] = weak_from_this();
  }
  net::dispatch(executor(), [self = shared_from_this()] { self->DoHandshake(); });
}

void Session::OnServerShutdown() {
  if (state_ == State::kHandshake || state_ == State::kReading) Close();
  if (state_ == State::kIdleAfterStream) Close();
  if (state_ == State::kStreaming && stream_waiting_) PumpStream();
}

void Session::DoHandshake() {
  state_ = State::kHandshake;
  stream_.expires_after(shared_->options.handshake_timeout);
  // The first byte is looked at (not consumed) before OpenSSL reads, so that
  // plain HTTP sent to this port can get Go's answer: a TLS connection starts
  // with a handshake record (0x16), an HTTP request with a letter.
  stream_.socket().async_wait(tcp::socket::wait_read,
                              [self = shared_from_this()](beast::error_code ec) {
                                self->OnReadable(ec);
                              });
}

void Session::OnReadable(beast::error_code ec) {
  if (ec || state_ == State::kClosing) return Close();
  unsigned char first = 0;
  ssize_t n = ::recv(stream_.socket().native_handle(), &first, 1, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return DoHandshakeWait();
  }
  if (n <= 0) return Close();
  if (first != 0x16) return RefusePlainHttp();
  stream_.async_handshake([self = shared_from_this()](beast::error_code ec, size_t) {
    self->OnHandshake(ec);
  });
}

void Session::DoHandshakeWait() {
  stream_.socket().async_wait(tcp::socket::wait_read,
                              [self = shared_from_this()](beast::error_code ec) {
                                self->OnReadable(ec);
                              });
}

// As Go's net/http: a first record that starts like an HTTP request gets
// "400 Bad Request" in plain text; anything else that is not TLS is just closed.
void Session::RefusePlainHttp() {
  if (buffer_.size() < 5) {  // Go looks at the 5 bytes of a record header
    stream_.socket().async_read_some(
        buffer_.prepare(512), [self = shared_from_this()](beast::error_code ec, size_t n) {
          if (ec || self->state_ == State::kClosing) return self->Close();
          self->buffer_.commit(n);
          self->RefusePlainHttp();
        });
    return;
  }
  std::string_view head(static_cast<const char*>(buffer_.data().data()), 5);
  if (head != "GET /" && head != "HEAD " && head != "POST " && head != "PUT /" &&
      head != "OPTIO") {
    return Close();
  }
  state_ = State::kClosing;
  static constexpr std::string_view kReply =
      "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";
  stream_.expires_after(shared_->options.write_timeout);
  net::async_write(stream_.socket(), net::buffer(kReply.data(), kReply.size()),
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     if (ec) return self->CloseSocket();
                     self->LingeringClose();
                   });
}

// Our side is done writing: half-close, then read (raw, discarded) what the
// client still sends for up to 2 s, so that closing sends no reset that
// could destroy the answer before the client read it (Go's
// closeWriteAndWait does the same).
void Session::LingeringClose() {
  state_ = State::kClosing;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(std::chrono::seconds(2));
  DrainPlain();
}

void Session::DrainPlain() {
  if (drained_ > drain_limit_) return CloseSocket();
  buffer_.consume(buffer_.size());
  stream_.socket().async_read_some(
      buffer_.prepare(16 * 1024), [self = shared_from_this()](beast::error_code ec, size_t n) {
        if (ec) return self->CloseSocket();
        self->drained_ += n;
        self->DrainPlain();
      });
}

void Session::OnHandshake(beast::error_code ec) {
  if (ec || state_ == State::kClosing) return Close();
  SSL* ssl = stream_.native_handle();
  if (X509* leaf = SSL_get1_peer_certificate(ssl)) {
    std::vector<X509*> chain;
    if (STACK_OF(X509)* sent = SSL_get_peer_cert_chain(ssl)) {
      for (int i = 0; i < sk_X509_num(sent); ++i) {
        X509* c = sk_X509_value(sent, i);
        // Some stacks repeat the leaf; it is held separately.
        if (X509_cmp(c, leaf) != 0) chain.push_back(c);
      }
    }
    conn_.peer = std::make_shared<const PeerCertificates>(leaf, chain);
    X509_free(leaf);
  }
  DoRead(/*first_request=*/true);
}

void Session::DoRead(bool first_request) {
  if (shared_->shutting_down.load()) return Close();
  state_ = State::kReading;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(shared_->options.max_header_bytes));
  parser_->body_limit(shared_->options.max_body_bytes);
  // As Go's http.Server: the header deadline runs from the start of the
  // first request, and from the first byte of each later one; until that
  // byte a keep-alive connection may idle.
  header_started_ = first_request || buffer_.size() > 0;
  if (buffer_.size() == 0 && buffer_.capacity() > kKeptBufferBytes) {
    buffer_.shrink_to_fit();  // a large request grew it; an idle connection keeps little
  }
  const TlsServerOptions& o = shared_->options;
  stream_.expires_after(header_started_ ? o.read_header_timeout : o.idle_timeout);
  ReadHeader();
}

// http::async_read_header, with the parser fed here: Beast 1.74 throws
// std::length_error out of the parser for a header line over 64 KiB (it keeps
// field offsets in 16 bits), which would drop the connection unanswered.
void Session::ReadHeader() {
  if (buffer_.size() > 0) {
    if (!header_started_) {
      header_started_ = true;
      stream_.expires_after(shared_->options.read_header_timeout);
    }
    beast::error_code ec;
    size_t used = 0;
    try {
      used = parser_->put(buffer_.data(), ec);
    } catch (const std::length_error&) {
      return RefuseHeaderTooLarge();
    }
    buffer_.consume(used);
    if (ec && ec != http::error::need_more) return OnHeader(ec);
    if (!ec && parser_->is_header_done()) return OnHeader(ec);
  }
  const size_t room = beast::read_size(buffer_, kReadChunk);
  if (room == 0) return RefuseHeaderTooLarge();
  stream_.async_read_some(buffer_.prepare(room),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            if (ec) return self->OnHeader(ec);
                            self->buffer_.commit(n);
                            self->ReadHeader();
                          });
}

// Answers a transport-level refusal and closes.
void Session::Refuse(const absl::Status& status) {
  const ErrorResponder& responder = shared_->options.error_responder;
  RefuseWith(responder ? responder(status) : PlainError(status));
}

void Session::RefuseWith(handlers::Response response) {
  state_ = State::kActive;
  BeginRequest();
  keep_alive_ = false;
  drain_after_write_ = true;
  WriteResponse(std::move(response), /*head=*/false);
}

// Go's net/http answer when the header exceeds MaxHeaderBytes, in plain text.
void Session::RefuseHeaderTooLarge() {
  handlers::Response r;
  r.status = 431;
  r.SetHeader("Content-Type", "text/plain; charset=utf-8");
  r.body = "431 Request Header Fields Too Large";
  RefuseWith(std::move(r));
}

// kube-apiserver's answer to a request that outlives --request-timeout (60 s),
// byte for byte: its timeout filter writes this Status (no kind or apiVersion)
// as text/plain. For a body that never completes it can send it only once the
// body is in (measured with 1.32.6: a body 20 bytes short was held unanswered
// for the 620 s we waited, and answered so when sent after 65 s); we answer at
// the deadline and close rather than hold the connection.
void Session::RefuseBodyTimeout() {
  handlers::Response r;
  r.status = 504;
  r.SetHeader("Content-Type", "text/plain; charset=utf-8");
  r.body =
      R"({"metadata":{},"status":"Failure","message":"Timeout: request did not complete within the )"
      R"(allotted timeout","reason":"Timeout","details":{},"code":504})";
  RefuseWith(std::move(r));
}

bool Session::ReadFailed(beast::error_code ec) {
  if (!ec) return false;
  if (state_ == State::kClosing) return true;
  if (ec == beast::error::timeout && parser_ && parser_->is_header_done()) {
    RefuseBodyTimeout();
  } else if (ec == http::error::body_limit) {
    Refuse(store::RequestEntityTooLargeError(
        absl::StrCat("limit is ", shared_->options.max_body_bytes)));
  } else if (ec == http::error::header_limit) {
    RefuseHeaderTooLarge();
  } else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
             ec != http::error::end_of_stream && ec != http::error::partial_message &&
             ec != http::error::short_read) {
    // Malformed HTTP: answer once, then close (Go's server sends 400 too).
    Refuse(store::BadRequestError(absl::StrCat("malformed HTTP request: ", ec.message())));
  } else {
    Close();  // EOF, reset, timeout: nothing to answer
  }
  return true;
}

void Session::OnHeader(beast::error_code ec) {
  if (ReadFailed(ec)) return;
  stream_.expires_after(shared_->options.body_timeout);
  auto& req = parser_->get();
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    continue_res_.emplace(http::status::continue_, req.version());
    http::async_write(stream_, *continue_res_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->continue_res_.reset();
                        if (ec) return self->Close();
                        self->ReadBody();
                      });
    return;
  }
  ReadBody();
}

void Session::ReadBody() {
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     if (self->ReadFailed(ec)) return;
                     self->Dispatch();
                   });
}

void Session::Dispatch() {
  {
    // Go's url.ParseRequestURI rejects a path with a bad escape ("%zz").
    std::string_view target = parser_->get().target();
    std::string_view bad = handlers::InvalidPercentEscape(target.substr(0, target.find('?')));
    if (!bad.empty()) {
      absl::Status status =
          store::BadRequestError(absl::StrCat("invalid URL escape \"", std::string(bad), "\""));
      parser_.reset();
      return Refuse(status);
    }
  }
  state_ = State::kActive;
  BeginRequest();
  http::request<http::string_body> req = parser_->release();
  parser_.reset();
  keep_alive_ = req.keep_alive();
  request_version_ = req.version();

  handlers::Request request;
  request.method = std::string(req.method_string());
  std::string_view target = req.target();
  size_t q = target.find('?');
  request.path = handlers::PercentDecode(target.substr(0, q), /*plus_is_space=*/false);
  if (q != std::string_view::npos) request.query = handlers::ParseQueryString(target.substr(q + 1));
  request.headers.reserve(static_cast<size_t>(std::distance(req.begin(), req.end())));
  for (const auto& field : req) {
    request.headers.emplace_back(absl::AsciiStrToLower(base::Av(field.name_string())), std::string(field.value()));
  }
  request.body = std::move(req.body());

  const bool head = request.method == "HEAD";
  if (shared_->handler_pool != nullptr) {
    // The connection waits (state kActive, nothing else pending on it) while
    // the handler runs on the pool; its answer comes back to this strand.
    net::post(*shared_->handler_pool,
              [self = shared_from_this(), request = std::move(request), head]() mutable {
                handlers::Response response = self->Handle(request);
                net::post(self->executor(),
                          [self, response = std::move(response), head]() mutable {
                            self->Respond(std::move(response), head);
                          });
              });
    return;
  }
  Respond(Handle(request), head);
}

// Runs the handler (on this strand, or on the handler pool: it reads only
// conn_, which does not change while a request is active).
handlers::Response Session::Handle(handlers::Request& request) {
  try {
    return shared_->handler(request, conn_);
  } catch (const std::exception& e) {
    return PlainError(store::InternalError(absl::StrCat("unhandled error: ", e.what())));
  } catch (...) {
    return PlainError(store::InternalError("unhandled error"));
  }
}

void Session::Respond(handlers::Response response, bool head) {
  if (state_ == State::kClosing) {
    // Closed while the handler ran on the pool (server shutdown): a stream's
    // source is released here, as EndStream would.
    if (response.stream) response.stream->Cancel();
    FinishRequest();
    return;
  }
  if (response.stream && !head) {
    StartStream(std::move(response));
  } else {
    WriteResponse(std::move(response), head);
  }
}

bool Session::TransportHeader(const std::string& name) {
  std::string lower = absl::AsciiStrToLower(name);
  return lower == "content-length" || lower == "transfer-encoding" || lower == "connection";
}

void Session::WriteResponse(handlers::Response response, bool head) {
  res_.emplace(static_cast<http::status>(response.status), 11);
  for (const auto& [name, value] : response.headers) {
    if (!TransportHeader(name)) res_->insert(name, value);
  }
  if (shared_->shutting_down.load()) keep_alive_ = false;
  res_->keep_alive(keep_alive_);
  if (head) {
    res_->content_length(response.body.size());
  } else {
    res_->body() = std::move(response.body);
    res_->prepare_payload();
  }
  stream_.expires_after(shared_->options.write_timeout);
  http::async_write(stream_, *res_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->OnWrite(ec);
  });
}

void Session::OnWrite(beast::error_code ec) {
  res_.reset();
  FinishRequest();
  if (ec || state_ == State::kClosing) return Close();
  if (drain_after_write_) return Drain();
  if (!keep_alive_ || shared_->shutting_down.load()) return GracefulClose();
  DoRead();
}

void Session::BeginRequest() {
  shared_->RequestStarted();
  request_counted_ = false;
}

void Session::FinishRequest() {
  if (request_counted_) return;
  request_counted_ = true;
  shared_->RequestFinished();
}

// --- streamed responses: the source is polled on this strand; one chunk is
// in flight at a time, so a slow client holds back only its own source.

void Session::StartStream(handlers::Response response) {
  state_ = State::kStreaming;
  stream_failed_ = false;
  source_ = std::move(response.stream);
  stream_res_.emplace(static_cast<http::status>(response.status), 11);
  for (const auto& [name, value] : response.headers) {
    if (!TransportHeader(name)) stream_res_->insert(name, value);
  }
  // HTTP/1.0 knows no chunked coding: the body is the raw stream and the
  // close ends it (RFC 9112 section 6.3, as Go's net/http answers such a client).
  stream_chunked_ = request_version_ >= 11;
  if (shared_->shutting_down.load() || !stream_chunked_) keep_alive_ = false;
  stream_res_->keep_alive(keep_alive_);
  stream_res_->chunked(stream_chunked_);
  stream_sr_.emplace(*stream_res_);
  stream_.expires_after(shared_->options.write_timeout);
  http::async_write_header(stream_, *stream_sr_,
                           [self = shared_from_this()](beast::error_code ec, size_t) {
                             self->OnStreamHeader(ec);
                           });
}

void Session::OnStreamHeader(beast::error_code ec) {
  stream_sr_.reset();
  stream_res_.reset();
  if (ec || state_ == State::kClosing) return EndStream(/*clean=*/false);
  StartBackgroundRead();
  // OpenSSL's write buffer is still released after each chunk: keeping it
  // while streaming cost ~6.5 KiB resident per watch (+6-7 MiB at 1,000) for
  // ~1% of the server's CPU in perf, so it is not kept.
  PumpStream();
}

// Asks the source for what is ready and writes it, waits for its wake-up, or
// ends the response.
void Session::PumpStream() {
  // Chunks the socket took at once, written in this call; past the budget
  // the stream yields its thread to the other connections (a stream with
  // much to send, e.g. a watch's initial state, would otherwise hold it).
  constexpr int kDirectWritesPerTurn = 8;
  for (int direct = 0;; ++direct) {
    StopWaiting();
    if (state_ != State::kStreaming || stream_failed_) return EndStream(/*clean=*/false);
    if (shared_->shutting_down.load()) return EndStream(/*clean=*/true);
    if (direct == kDirectWritesPerTurn) {
      return net::post(executor(), [self = shared_from_this()] { self->PumpStream(); });
    }
    if (!stream_wake_) {
      // Called by the store's writer: only queues the stream (StreamWaker). A
      // wake-up that finds the stream not waiting (a timer pumped first) is
      // ignored by OnStreamWake; a spurious Poll would only return kWait again.
      // The session is locked first: while it lives, so does its Shared and
      // the waker (a wake-up may race the server's destruction).
      stream_wake_ = [weak = weak_from_this()] {
        if (std::shared_ptr<Session> self = weak.lock()) self->shared_->waker->Wake(weak);
      };
    }
    chunk_.clear();
    auto wake_at = handlers::StreamSource::Clock::time_point::max();
    handlers::StreamSource::Step step;
    try {
      step = source_->Poll(&chunk_, stream_wake_, &wake_at);
    } catch (...) {
      // A source that throws ends like one that ends; the status line is out.
      step = handlers::StreamSource::Step::kEnd;
    }
    if (step == handlers::StreamSource::Step::kWait && chunk_.empty()) {
      stream_waiting_ = true;
      if (wake_at == handlers::StreamSource::Clock::time_point::max()) {
        CancelStreamTimer();
      } else if (!stream_timer_armed_ || stream_timer_at_ != wake_at) {
        // A watch asks for the same time (its deadline, its next bookmark)
        // after every event: the timer stays armed across events instead of
        // being cancelled and armed again for each.
        stream_timer_armed_ = true;
        stream_timer_at_ = wake_at;
        const uint64_t generation = ++stream_timer_generation_;
        stream_timer_.expires_at(wake_at);  // cancels a wait for another time
        stream_timer_.async_wait(
            [self = shared_from_this(), generation](beast::error_code ec) {
              if (ec || generation != self->stream_timer_generation_) return;
              self->stream_timer_armed_ = false;
              self->OnStreamWake();
            });
      }
      return;
    }
    const bool last = step == handlers::StreamSource::Step::kEnd;
    // An empty chunk would read as the end of the body.
    if (chunk_.empty()) {
      if (last) return EndStream(/*clean=*/true);
      continue;
    }
    // The chunk as HTTP/1.1 frames it (size in hex, CRLF, data, CRLF), handed
    // to OpenSSL at once: when the socket takes it all, as it does for a
    // watch event, no asynchronous write is needed.
    if (stream_chunked_) {
      char size_line[24];
      const int size_len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk_.size());
      chunk_.insert(0, size_line, static_cast<size_t>(size_len));
      chunk_ += "\r\n";
    }
    size_t taken = 0;
    stream_.TryWrite(chunk_.data(), chunk_.size(), &taken);
    if (taken == chunk_.size()) {
      if (last) return EndStream(/*clean=*/true);
      continue;
    }
    stream_.expires_after(shared_->options.write_timeout);
    net::async_write(stream_, net::buffer(chunk_.data() + taken, chunk_.size() - taken),
                     [self = shared_from_this(), last](beast::error_code ec, size_t) {
                       if (ec) self->stream_failed_ = true;
                       // No deadline while the stream waits for events; the
                       // background read still notices a client that left.
                       self->stream_.expires_never();
                       if (last && !ec) return self->EndStream(/*clean=*/true);
                       self->PumpStream();
                     });
    return;
  }
}

void Session::OnStreamWake() {
  if (state_ == State::kStreaming && stream_waiting_) PumpStream();
}

void Session::WakeStream() {
  net::dispatch(executor(), [self = shared_from_this()] { self->OnStreamWake(); });
}

void Session::CancelStreamTimer() {
  stream_timer_armed_ = false;
  ++stream_timer_generation_;
  stream_timer_.cancel();  // its handler holds the session
}

// Releases the source; `clean` sends the final chunk and keeps the connection
// for the next request, otherwise it closes.
void Session::EndStream(bool clean) {
  StopWaiting();
  CancelStreamTimer();
  stream_wake_ = nullptr;
  // Released when this handler returns: the write below holds the session.
  std::shared_ptr<Session> self = std::move(self_while_streaming_);
  if (source_) {
    source_->Cancel();
    source_.reset();
  }
  std::string().swap(chunk_);  // the largest chunk's capacity is not kept
  if (!clean || stream_failed_ || state_ != State::kStreaming) {
    FinishRequest();
    return Close();
  }
  if (!stream_chunked_) {
    // The close is the body's end: close_notify tells the client it is whole.
    FinishRequest();
    return GracefulClose();
  }
  stream_.expires_after(shared_->options.write_timeout);
  net::async_write(stream_, http::make_chunk_last(),
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->OnFinalChunk(ec);
                   });
}

// While a stream runs, a read detects the peer going away; bytes that arrive
// (a pipelined request) are kept for the parser.
void Session::StartBackgroundRead() {
  if (bg_read_pending_) return;
  if (buffer_.size() >= 64 * 1024) return;  // enough pipelined input kept
  bg_read_pending_ = true;
  stream_.expires_never();
  stream_.async_read_some(buffer_.prepare(16 * 1024),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->OnBackgroundRead(ec, n);
                          });
}

void Session::OnBackgroundRead(beast::error_code ec, size_t n) {
  bg_read_pending_ = false;
  if (ec) {
    if (state_ == State::kStreaming) {
      stream_failed_ = true;
      // A write in flight ends the stream when it completes.
      if (stream_waiting_) EndStream(/*clean=*/false);
    }
    if (state_ == State::kIdleAfterStream) Close();
    return;
  }
  buffer_.commit(n);
  // A client that sent its next request while the stream ran is still
  // there; reading on would leave that request unparsed in buffer_ while
  // OnFinalChunk waits for more bytes (the request hung until its timeout).
  if (state_ == State::kStreaming) {
    if (buffer_.size() == 0) return StartBackgroundRead();
    // No read is pending now, and a waiting stream has nothing else in
    // flight: the session holds itself until the stream ends.
    self_while_streaming_ = shared_from_this();
    return;
  }
  if (state_ == State::kIdleAfterStream) {
    idle_timer_.cancel();
    DoRead();
  }
}

void Session::OnFinalChunk(beast::error_code ec) {
  FinishRequest();
  if (ec || state_ == State::kClosing) return Close();
  if (!keep_alive_ || shared_->shutting_down.load()) return Close();
  if (!bg_read_pending_) return DoRead();
  // The background read becomes the wait for the next request.
  state_ = State::kIdleAfterStream;
  idle_timer_.expires_after(shared_->options.idle_timeout);
  idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && self->state_ == State::kIdleAfterStream) self->Close();
  });
}

// --- closing

// After a refusal (a framing error, a body or header too large), as Go's
// closeWriteAndWait: close_notify and a TCP half-close right after the
// answer, so the client sees the end at once (the answer said
// "Connection: close"; the connection used to stay open for the 2 s drain),
// then what it still sends (the rest of a refused body) is read and
// discarded for a short while, so that the answer arrives instead of a reset.
void Session::Drain() {
  state_ = State::kClosing;
  drain_limit_ = 64 * 1024 * 1024;
  stream_.expires_after(std::chrono::seconds(2));
  stream_.async_shutdown([self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) return self->CloseSocket();
    self->LingeringClose();
  });
}

void Session::GracefulClose() {
  state_ = State::kClosing;
  stream_.expires_after(std::chrono::seconds(2));
  stream_.async_shutdown([self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) return self->CloseSocket();
    self->LingeringClose();
  });
}

void Session::Close() {
  state_ = State::kClosing;
  CloseSocket();
}

void Session::CloseSocket() {
  idle_timer_.cancel();
  stream_.close();
  stream_failed_ = true;
}

// --- StreamWaker

void StreamWaker::Wake(std::weak_ptr<Session> session) {
  {
    absl::MutexLock lock(&mu_);
    pending_.push_back(std::move(session));
    if (drain_posted_) return;
    drain_posted_ = true;
  }
  net::post(executor_, [this] { Drain(); });
}

void StreamWaker::Drain() {
  std::array<std::weak_ptr<Session>, kStreamsPerTurn> turn;
  size_t n = 0;
  bool more = false;
  {
    absl::MutexLock lock(&mu_);
    while (n < kStreamsPerTurn && next_ < pending_.size()) {
      turn[n++] = std::move(pending_[next_++]);
    }
    if (next_ == pending_.size()) {
      pending_.clear();
      next_ = 0;
      drain_posted_ = false;
    } else {
      more = true;
    }
  }
  if (more) net::post(executor_, [this] { Drain(); });
  for (size_t i = 0; i < n; ++i) {
    if (std::shared_ptr<Session> s = turn[i].lock()) s->WakeStream();
  }
}

}  // namespace poolcoord::apiservice::internal
