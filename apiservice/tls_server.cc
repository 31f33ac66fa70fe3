#include "apiservice/tls_server.h"

#include <malloc.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "apiservice/openssl_ptr.h"
#include "apiservice/pki.h"
#include "base/string_view.h"
#include "handlers/url.h"
#include "store/api_error.h"

namespace poolcoord::apiservice {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Session;

// Wakes waiting streams in batches, on the I/O threads. A store's watch
// dispatcher wakes every watcher of an event one after the other (1,000 with
// 1,000 watches): a post per stream was 1,000 operations allocated on the
// dispatcher's thread and pushed through the scheduler's queue one by one, and a
// write's answer or the next request queued behind all of them (issue 13 part
// 4). Here a wake-up only appends the stream to a list; the list's first
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

handlers::Response PlainError(const absl::Status& status) {
  store::ApiErrorInfo info = store::ApiErrorFromStatus(status);
  handlers::Response r;
  r.status = info.code;
  r.SetHeader("Content-Type", "text/plain; charset=utf-8");
  r.body = info.message + "\n";
  return r;
}

// --- TLS on the connection's own socket

// A BIO over the connection's non-blocking socket with send/recv and
// MSG_NOSIGNAL (OpenSSL's socket BIO writes with write(2), which raises
// SIGPIPE on a connection the peer reset).
int SocketBioWrite(BIO* bio, const char* data, int len) {
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  BIO_clear_retry_flags(bio);
  ssize_t n = ::send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(bio);
    return -1;
  }
  return static_cast<int>(n);
}

int SocketBioRead(BIO* bio, char* out, int len) {
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  BIO_clear_retry_flags(bio);
  ssize_t n = ::recv(fd, out, static_cast<size_t>(len), 0);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_read(bio);
    return -1;
  }
  return static_cast<int>(n);
}

long SocketBioCtrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "poolcoord socket");
    BIO_meth_set_write(m, SocketBioWrite);
    BIO_meth_set_read(m, SocketBioRead);
    BIO_meth_set_ctrl(m, SocketBioCtrl);
    return m;
  }();
  return method;
}

// TLS over a connection's socket as a Beast AsyncReadStream/AsyncWriteStream:
// OpenSSL reads and writes the non-blocking socket itself and Asio only waits
// for readiness. Asio's ssl::stream keeps two 17 KiB buffers and a 2 x 17 KiB
// BIO pair for a connection's whole life (~70 KiB per idle connection, issue
// 12); here an idle connection holds the SSL object alone, because
// SSL_MODE_RELEASE_BUFFERS frees OpenSSL's record buffers between records.
//
// Deadlines as beast::tcp_stream's: when one passes, the pending operation (or
// the next one) fails with beast::error::timeout. Operations never complete
// inside their initiating call (Asio's rule); a result ready at once is posted.
// Not thread-safe: used on its connection's strand.
class TlsStream {
 public:
  using executor_type = tcp::socket::executor_type;

  TlsStream(tcp::socket&& socket, SSL_CTX* ctx)
      : socket_(std::move(socket)), deadline_(socket_.get_executor()) {
    beast::error_code ec;
    socket_.non_blocking(true, ec);
    ssl_ = SSL_new(ctx);  // holds a reference of ctx for the connection's life
    if (ssl_ != nullptr) {
      BIO* bio = BIO_new(SocketBioMethod());
      BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(socket_.native_handle())));
      BIO_set_init(bio, 1);
      SSL_set_bio(ssl_, bio, bio);
      SSL_set_accept_state(ssl_);
    }
  }
  ~TlsStream() {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  executor_type get_executor() { return socket_.get_executor(); }
  tcp::socket& socket() { return socket_; }
  SSL* native_handle() { return ssl_; }

  // Deadline timers hold only this weak reference to the connection.
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  // The timer's wait is armed lazily: a wait armed for the new deadline or
  // earlier stays, and when it fires before the deadline it waits again for the
  // rest; only an earlier deadline re-arms it. A request sets four deadlines
  // (idle, header, body, write), and each used to cancel the armed wait and arm
  // another: four cancelled completions through the scheduler, ~7,400
  // instructions per renewal (callgrind). Now a busy connection re-arms about
  // once per read_header_timeout.
  void expires_after(std::chrono::steady_clock::duration d) {
    timed_out_ = false;
    due_ = std::chrono::steady_clock::now() + d;
    has_due_ = true;
    if (wait_armed_ && wait_at_ <= due_) return;
    ArmWait(due_);
  }

  // An armed wait stays; when it fires it finds no deadline.
  void expires_never() {
    timed_out_ = false;
    has_due_ = false;
  }

  // The BIO lets go of the descriptor first: a wait that had already completed
  // (an operation queued on the strand before the close) must not run OpenSSL
  // on the number, which the next accepted connection may reuse at once (a
  // watch's background read took a new client's handshake bytes, and that
  // connection hung until its handshake timeout).
  void close() {
    if (ssl_ != nullptr) BIO_set_data(SSL_get_rbio(ssl_), reinterpret_cast<void*>(intptr_t{-1}));
    ++deadline_generation_;
    wait_armed_ = false;
    has_due_ = false;
    deadline_.cancel();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  template <class MutableBufferSequence, class ReadHandler>
  auto async_read_some(const MutableBufferSequence& buffers, ReadHandler&& handler) {
    return net::async_compose<ReadHandler, void(beast::error_code, size_t)>(
        Op<ReadStep<MutableBufferSequence>>{this, {buffers}}, handler, socket_);
  }

  template <class ConstBufferSequence, class WriteHandler>
  auto async_write_some(const ConstBufferSequence& buffers, WriteHandler&& handler) {
    return net::async_compose<WriteHandler, void(beast::error_code, size_t)>(
        Op<WriteStep<ConstBufferSequence>>{this, {buffers}}, handler, socket_);
  }

  template <class Handler>
  auto async_handshake(Handler&& handler) {
    return net::async_compose<Handler, void(beast::error_code, size_t)>(
        Op<HandshakeStep>{this, {}}, handler, socket_);
  }

  // Hands `data` to OpenSSL now, without an asynchronous operation: true with
  // *n bytes taken (fewer than `len` when the socket's buffer filled up,
  // SSL_MODE_ENABLE_PARTIAL_WRITE); false when nothing was taken, because
  // OpenSSL would block or failed. The caller then writes the same bytes with
  // async_write_some, as OpenSSL's retry rule asks, and that reports a failure.
  // A watch event costs one SSL_write this way, not a composed operation, a
  // posted completion and a deadline armed and cancelled (issue 13 part 4).
  bool TryWrite(const void* data, size_t len, size_t* n) {
    if (ssl_ == nullptr || timed_out_ || len == 0 || !socket_.is_open()) return false;
    // No ERR_clear_error first: nothing here reads the error queue, and the
    // asynchronous steps clear it before their own calls.
    if (SSL_write_ex(ssl_, data, len, n) == 1) return true;
    ERR_clear_error();
    *n = 0;
    return false;
  }

  // Sends close_notify; does not wait for the peer's (as Go's tls.Conn.Close).
  template <class Handler>
  auto async_shutdown(Handler&& handler) {
    return net::async_compose<Handler, void(beast::error_code, size_t)>(
        Op<ShutdownStep>{this, {}}, handler, socket_);
  }

 private:
  enum class Want { kNothing, kRead, kWrite };

  void ArmWait(std::chrono::steady_clock::time_point at) {
    wait_armed_ = true;
    wait_at_ = at;
    const uint64_t generation = ++deadline_generation_;
    deadline_.expires_at(at);  // cancels the wait armed before, if any
    deadline_.async_wait([this, owner = owner_, generation](beast::error_code ec) {
      if (ec) return;
      std::shared_ptr<void> alive = owner.lock();
      if (!alive || generation != deadline_generation_) return;
      wait_armed_ = false;
      if (!has_due_) return;
      if (std::chrono::steady_clock::now() < due_) return ArmWait(due_);
      timed_out_ = true;
      beast::error_code ignored;
      socket_.cancel(ignored);
    });
  }

  // One attempt of an OpenSSL call; on WANT_* the caller waits and retries.
  Want Failed(int ret, beast::error_code* ec) {
    const int err = SSL_get_error(ssl_, ret);
    if (err == SSL_ERROR_WANT_READ) return Want::kRead;
    if (err == SSL_ERROR_WANT_WRITE) return Want::kWrite;
    if (err == SSL_ERROR_ZERO_RETURN) {
      *ec = net::error::eof;  // close_notify, or EOF (SSL_OP_IGNORE_UNEXPECTED_EOF)
    } else if (err == SSL_ERROR_SYSCALL && errno != 0) {
      *ec = beast::error_code(errno, boost::system::system_category());
    } else if (unsigned long code = ERR_get_error(); code != 0) {
      *ec = beast::error_code(static_cast<int>(code), net::error::get_ssl_category());
    } else {
      *ec = net::error::eof;
    }
    ERR_clear_error();
    return Want::kNothing;
  }

  template <class Buffers>
  struct ReadStep {
    Buffers buffers;
    Want operator()(TlsStream& s, size_t* n, beast::error_code* ec) {
      net::mutable_buffer b;
      for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers);
           ++it) {
        b = *it;
        if (b.size() > 0) break;
      }
      if (b.size() == 0) return Want::kNothing;
      if (s.ssl_ == nullptr) {
        *ec = net::error::no_memory;
        return Want::kNothing;
      }
      ERR_clear_error();
      errno = 0;
      if (SSL_read_ex(s.ssl_, b.data(), b.size(), n) == 1) return Want::kNothing;
      return s.Failed(0, ec);
    }
  };

  template <class Buffers>
  struct WriteStep {
    Buffers buffers;
    Want operator()(TlsStream& s, size_t* n, beast::error_code* ec) {
      // A response's header and body arrive as separate buffers: small ones
      // leave as one record, as Beast's flat_stream coalesced them (two records
      // would be two sends). A retry after WANT_WRITE gathers the same bytes
      // (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER allows the new address).
      thread_local std::array<char, 16 * 1024> scratch;
      const size_t total = net::buffer_size(buffers);
      net::const_buffer first;
      for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers);
           ++it) {
        first = *it;
        if (first.size() > 0) break;
      }
      const void* data = first.data();
      size_t len = first.size();
      if (len < total && total <= scratch.size()) {
        len = net::buffer_copy(net::buffer(scratch.data(), scratch.size()), buffers);
        data = scratch.data();
      }
      if (len == 0) return Want::kNothing;
      if (s.ssl_ == nullptr) {
        *ec = net::error::no_memory;
        return Want::kNothing;
      }
      ERR_clear_error();
      errno = 0;
      if (SSL_write_ex(s.ssl_, data, len, n) == 1) return Want::kNothing;
      return s.Failed(0, ec);
    }
  };

  struct HandshakeStep {
    Want operator()(TlsStream& s, size_t*, beast::error_code* ec) {
      if (s.ssl_ == nullptr) {
        *ec = net::error::no_memory;
        return Want::kNothing;
      }
      ERR_clear_error();
      errno = 0;
      int ret = SSL_do_handshake(s.ssl_);
      if (ret == 1) return Want::kNothing;
      Want want = s.Failed(ret, ec);
      // A peer that closes mid-handshake is an error here, not a clean end.
      if (want == Want::kNothing && *ec == net::error::eof) *ec = net::error::connection_reset;
      return want;
    }
  };

  struct ShutdownStep {
    Want operator()(TlsStream& s, size_t*, beast::error_code* ec) {
      if (s.ssl_ == nullptr) return Want::kNothing;
      ERR_clear_error();
      errno = 0;
      int ret = SSL_shutdown(s.ssl_);
      if (ret >= 0) return Want::kNothing;  // 0: ours sent, theirs not awaited
      Want want = s.Failed(ret, ec);
      // Waiting for the peer's close_notify is not wanted.
      return want == Want::kRead ? Want::kNothing : want;
    }
  };

  template <class Step>
  struct Op {
    Op(TlsStream* stream, Step first) : s(stream), step(std::move(first)) {}
    TlsStream* s;
    Step step;
    bool waited = false;
    bool posted = false;
    beast::error_code result;
    size_t bytes = 0;

    template <class Self>
    void operator()(Self& self, beast::error_code ec = {}) {
      if (posted) return self.complete(result, bytes);
      if (s->timed_out_) {
        ec = beast::error::timeout;
      } else if (!ec && !s->socket_.is_open()) {
        ec = net::error::bad_descriptor;  // closed after its wait completed: see close()
      } else if (!ec) {
        size_t n = 0;
        Want want = step(*s, &n, &ec);
        if (want != Want::kNothing) {
          waited = true;
          s->socket_.async_wait(want == Want::kRead ? tcp::socket::wait_read
                                                    : tcp::socket::wait_write,
                                std::move(self));
          return;
        }
        bytes = n;
      }
      if (waited) return self.complete(ec, bytes);
      posted = true;
      result = ec;
      net::post(s->socket_.get_executor(), std::move(self));
    }
  };

  tcp::socket socket_;
  net::steady_timer deadline_;
  SSL* ssl_ = nullptr;
  std::weak_ptr<void> owner_;
  uint64_t deadline_generation_ = 0;
  bool timed_out_ = false;
  // The deadline (when has_due_), and the time the timer's wait is armed for.
  std::chrono::steady_clock::time_point due_;
  bool has_due_ = false;
  std::chrono::steady_clock::time_point wait_at_;
  bool wait_armed_ = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, SSL_CTX* ctx, std::shared_ptr<Shared> shared)
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

  ~Session() {
    absl::MutexLock lock(&shared_->mu);
    shared_->sessions.erase(this);
    // A stream whose client left ends with no completion handler to finish its
    // request (nothing holds the session any more): count it finished here, or
    // Shutdown would wait for it until the grace period runs out.
    if (!request_counted_) --shared_->active_requests;
  }

  net::any_io_executor executor() { return stream_.get_executor(); }

  void Start() {
    stream_.set_owner(weak_from_this());
    {
      absl::MutexLock lock(&shared_->mu);
      shared_->sessions[this] = weak_from_this();
    }
    net::dispatch(executor(), [self = shared_from_this()] { self->DoHandshake(); });
  }

  // On the strand, when the server begins shutting down. A stream waiting for
  // its source ends now with its final chunk (one writing ends after the write).
  void OnServerShutdown() {
    if (state_ == State::kHandshake || state_ == State::kReading) Close();
    if (state_ == State::kIdleAfterStream) Close();
    if (state_ == State::kStreaming && stream_waiting_) PumpStream();
  }

 private:
  enum class State { kHandshake, kReading, kActive, kStreaming, kIdleAfterStream, kClosing };

  void DoHandshake() {
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

  void OnReadable(beast::error_code ec) {
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

  void DoHandshakeWait() {
    stream_.socket().async_wait(tcp::socket::wait_read,
                                [self = shared_from_this()](beast::error_code ec) {
                                  self->OnReadable(ec);
                                });
  }

  // As Go's net/http: a first record that starts like an HTTP request gets
  // "400 Bad Request" in plain text; anything else that is not TLS is just closed.
  void RefusePlainHttp() {
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
  void LingeringClose() {
    state_ = State::kClosing;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    DrainPlain();
  }

  void DrainPlain() {
    if (drained_ > drain_limit_) return CloseSocket();
    buffer_.consume(buffer_.size());
    stream_.socket().async_read_some(
        buffer_.prepare(16 * 1024), [self = shared_from_this()](beast::error_code ec, size_t n) {
          if (ec) return self->CloseSocket();
          self->drained_ += n;
          self->DrainPlain();
        });
  }

  void OnHandshake(beast::error_code ec) {
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

  void DoRead(bool first_request = false) {
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
  void ReadHeader() {
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
  void Refuse(const absl::Status& status) {
    const ErrorResponder& responder = shared_->options.error_responder;
    RefuseWith(responder ? responder(status) : PlainError(status));
  }

  void RefuseWith(handlers::Response response) {
    state_ = State::kActive;
    BeginRequest();
    keep_alive_ = false;
    drain_after_write_ = true;
    WriteResponse(std::move(response), /*head=*/false);
  }

  // Go's net/http answer when the header exceeds MaxHeaderBytes, in plain text.
  void RefuseHeaderTooLarge() {
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
  void RefuseBodyTimeout() {
    handlers::Response r;
    r.status = 504;
    r.SetHeader("Content-Type", "text/plain; charset=utf-8");
    r.body =
        R"({"metadata":{},"status":"Failure","message":"Timeout: request did not complete within the )"
        R"(allotted timeout","reason":"Timeout","details":{},"code":504})";
    RefuseWith(std::move(r));
  }

  bool ReadFailed(beast::error_code ec) {
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

  void OnHeader(beast::error_code ec) {
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

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (self->ReadFailed(ec)) return;
                       self->Dispatch();
                     });
  }

  void Dispatch() {
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
  handlers::Response Handle(handlers::Request& request) {
    try {
      return shared_->handler(request, conn_);
    } catch (const std::exception& e) {
      return PlainError(store::InternalError(absl::StrCat("unhandled error: ", e.what())));
    } catch (...) {
      return PlainError(store::InternalError("unhandled error"));
    }
  }

  void Respond(handlers::Response response, bool head) {
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

  static bool TransportHeader(const std::string& name) {
    std::string lower = absl::AsciiStrToLower(name);
    return lower == "content-length" || lower == "transfer-encoding" || lower == "connection";
  }

  void WriteResponse(handlers::Response response, bool head) {
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

  void OnWrite(beast::error_code ec) {
    res_.reset();
    FinishRequest();
    if (ec || state_ == State::kClosing) return Close();
    if (drain_after_write_) return Drain();
    if (!keep_alive_ || shared_->shutting_down.load()) return GracefulClose();
    DoRead();
  }

  void BeginRequest() {
    shared_->RequestStarted();
    request_counted_ = false;
  }

  void FinishRequest() {
    if (request_counted_) return;
    request_counted_ = true;
    shared_->RequestFinished();
  }

  // --- streamed responses: the source is polled on this strand; one chunk is
  // in flight at a time, so a slow client holds back only its own source.

  void StartStream(handlers::Response response) {
    state_ = State::kStreaming;
    stream_failed_ = false;
    source_ = std::move(response.stream);
    stream_res_.emplace(static_cast<http::status>(response.status), 11);
    for (const auto& [name, value] : response.headers) {
      if (!TransportHeader(name)) stream_res_->insert(name, value);
    }
    if (shared_->shutting_down.load()) keep_alive_ = false;
    stream_res_->keep_alive(keep_alive_);
    stream_res_->chunked(true);
    stream_sr_.emplace(*stream_res_);
    stream_.expires_after(shared_->options.write_timeout);
    http::async_write_header(stream_, *stream_sr_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->OnStreamHeader(ec);
                             });
  }

  void OnStreamHeader(beast::error_code ec) {
    stream_sr_.reset();
    stream_res_.reset();
    if (ec || state_ == State::kClosing) return EndStream(/*clean=*/false);
    StartBackgroundRead();
    // OpenSSL's write buffer is still released after each chunk: keeping it
    // while streaming cost ~6.5 KiB resident per watch (+6-7 MiB at 1,000) for
    // ~1% of the server's CPU in perf (issue 13 part 4), so it is not kept.
    PumpStream();
  }

  // Asks the source for what is ready and writes it, waits for its wake-up, or
  // ends the response.
  void PumpStream() {
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
      char size_line[24];
      const int size_len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk_.size());
      chunk_.insert(0, size_line, static_cast<size_t>(size_len));
      chunk_ += "\r\n";
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

  void OnStreamWake() {
    if (state_ == State::kStreaming && stream_waiting_) PumpStream();
  }

 public:
  // StreamWaker's turn for this stream: on an I/O thread, runs on the strand.
  void WakeStream() {
    net::dispatch(executor(), [self = shared_from_this()] { self->OnStreamWake(); });
  }

 private:
  // The stream's timer, if armed, stays armed: OnStreamWake ignores it while
  // the stream is not waiting, and the next wait keeps it when it asks for the
  // same time.
  void StopWaiting() { stream_waiting_ = false; }

  void CancelStreamTimer() {
    stream_timer_armed_ = false;
    ++stream_timer_generation_;
    stream_timer_.cancel();  // its handler holds the session
  }

  // Releases the source; `clean` sends the final chunk and keeps the connection
  // for the next request, otherwise it closes.
  void EndStream(bool clean) {
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
    stream_.expires_after(shared_->options.write_timeout);
    net::async_write(stream_, http::make_chunk_last(),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnFinalChunk(ec);
                     });
  }

  // While a stream runs, a read detects the peer going away; bytes that arrive
  // (a pipelined request) are kept for the parser.
  void StartBackgroundRead() {
    if (bg_read_pending_) return;
    if (buffer_.size() >= 64 * 1024) return;  // enough pipelined input kept
    bg_read_pending_ = true;
    stream_.expires_never();
    stream_.async_read_some(buffer_.prepare(16 * 1024),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->OnBackgroundRead(ec, n);
                            });
  }

  void OnBackgroundRead(beast::error_code ec, size_t n) {
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

  void OnFinalChunk(beast::error_code ec) {
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
  void Drain() {
    state_ = State::kClosing;
    drain_limit_ = 64 * 1024 * 1024;
    stream_.expires_after(std::chrono::seconds(2));
    stream_.async_shutdown([self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->CloseSocket();
      self->LingeringClose();
    });
  }

  void GracefulClose() {
    state_ = State::kClosing;
    stream_.expires_after(std::chrono::seconds(2));
    stream_.async_shutdown([self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->CloseSocket();
      self->LingeringClose();
    });
  }

  void Close() {
    state_ = State::kClosing;
    CloseSocket();
  }

  void CloseSocket() {
    idle_timer_.cancel();
    stream_.close();
    stream_failed_ = true;
  }

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
  bool bg_read_pending_ = false;

};

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

int AlpnSelect(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof(kHttp11), in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  // No http/1.1 offered: carry on without ALPN rather than fail the handshake.
  return SSL_TLSEXT_ERR_NOACK;
}

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

// What the TLS context is built from; replaced as a whole.
struct TlsMaterial {
  std::string chain_pem;
  std::string key_pem;
  std::string client_ca_pem;  // whose subjects the CertificateRequest names
};

std::vector<X509Ptr> ReadPemCertificates(const std::string& pem) {
  std::vector<X509Ptr> out;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    out.emplace_back(cert);
  }
  ERR_clear_error();
  return out;
}

// A server context for `m`. Contexts are immutable once built: a change builds
// a new one, which new connections take (each SSL holds its context).
absl::StatusOr<std::shared_ptr<SSL_CTX>> BuildContext(const TlsMaterial& m) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SslCtxFree());
  if (!ctx) return absl::InternalError(absl::StrCat("TLS context: ", OpenSslError()));
  SSL_CTX* native = ctx.get();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION |
                                  SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                               SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Whole records in one recv where the socket has them (fewer system calls).
  SSL_CTX_set_read_ahead(native, 1);
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);

  std::vector<X509Ptr> chain = ReadPemCertificates(m.chain_pem);
  if (chain.empty()) return absl::InvalidArgumentError("no PEM certificate");
  BioPtr key_bio(BIO_new_mem_buf(m.key_pem.data(), static_cast<int>(m.key_pem.size())));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) return absl::InvalidArgumentError(absl::StrCat("key: ", OpenSslError()));
  STACK_OF(X509)* extra = sk_X509_new_null();
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(extra, chain[i].get());
  const int used = SSL_CTX_use_cert_and_key(native, chain[0].get(), key, extra, 1);
  sk_X509_free(extra);  // the context took its own references
  EVP_PKEY_free(key);
  if (used != 1) return absl::InvalidArgumentError(OpenSslError());
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the certificate does not match the key");
  }
  // Request, never require: the authenticator verifies against the right CA.
  SSL_CTX_set_verify(native, SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
  if (!m.client_ca_pem.empty()) {
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new(
        [](const X509_NAME* const* a, const X509_NAME* const* b) { return X509_NAME_cmp(*a, *b); });
    for (const X509Ptr& ca : ReadPemCertificates(m.client_ca_pem)) {
      X509_NAME* name = X509_get_subject_name(ca.get());
      if (sk_X509_NAME_find(names, name) >= 0) continue;  // named once
      sk_X509_NAME_push(names, X509_NAME_dup(name));
    }
    SSL_CTX_set_client_CA_list(native, names);  // takes ownership
  }
  static const unsigned char kSessionContext[] = "poolcoord";
  SSL_CTX_set_session_id_context(native, kSessionContext, sizeof(kSessionContext) - 1);
  SSL_CTX_set_alpn_select_cb(native, AlpnSelect, nullptr);
  ERR_clear_error();
  return ctx;
}

// After this many connections closed (counted from the most open since the
// last trim), freed memory is handed back to the system. glibc keeps freed
// small blocks in its heaps, and a few live blocks spread over them pin whole
// pages: after 2,000 idle TLS connections closed, the resident set stayed at
// its peak (issue 12).
constexpr int kTrimAfterClosedConnections = 64;
constexpr std::chrono::seconds kTrimCheckPeriod{2};

}  // namespace

struct TlsServer::Impl {
  std::shared_ptr<Shared> shared;
  net::io_context ioc;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  net::steady_timer trim_timer{acceptor.get_executor()};
  int peak_open = 0;  // on the acceptor's strand
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  int port = 0;
  absl::Mutex shutdown_mu;
  bool shut_down ABSL_GUARDED_BY(shutdown_mu) = false;
  absl::Mutex threads_mu;
  int running_threads ABSL_GUARDED_BY(threads_mu) = 0;
  absl::Mutex ctx_mu;
  TlsMaterial material ABSL_GUARDED_BY(ctx_mu);
  std::shared_ptr<SSL_CTX> ctx ABSL_GUARDED_BY(ctx_mu);
  // After ioc: destroyed (stopped and joined) first, since its handlers post
  // their answers to ioc.
  std::optional<net::thread_pool> handler_pool;

  explicit Impl(int threads_hint) : ioc(threads_hint) {}
  ~Impl() {
    beast::error_code ignored;
    acceptor.close(ignored);
  }

  std::shared_ptr<SSL_CTX> Context() {
    absl::MutexLock lock(&ctx_mu);
    return ctx;
  }

  // Builds a context from the current material changed by `change`; keeps the
  // old one when that fails.
  absl::Status Replace(const std::function<void(TlsMaterial*)>& change) {
    absl::MutexLock lock(&ctx_mu);
    TlsMaterial next = material;
    change(&next);
    absl::StatusOr<std::shared_ptr<SSL_CTX>> built = BuildContext(next);
    if (!built.ok()) return built.status();
    material = std::move(next);
    ctx = *std::move(built);
    return absl::OkStatus();
  }

  absl::Status Init() {
    const TlsServerOptions& o = shared->options;
    TlsMaterial initial;
    absl::StatusOr<std::string> chain = ReadFileToString(o.cert_file);
    if (!chain.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("serving certificate ", o.cert_file, ": ", chain.status().message()));
    }
    absl::StatusOr<std::string> key = ReadFileToString(o.key_file);
    if (!key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("serving key ", o.key_file, ": ", key.status().message()));
    }
    initial.chain_pem = *std::move(chain);
    initial.key_pem = *std::move(key);
    for (const std::string& file : o.client_ca_files) {
      absl::StatusOr<std::string> pem = ReadFileToString(file);
      if (!pem.ok() || ReadPemCertificates(*pem).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "client CA bundle ", file, ": ",
            pem.ok() ? "no PEM certificate" : std::string(pem.status().message())));
      }
      absl::StrAppend(&initial.client_ca_pem, *pem, "\n");
    }
    if (absl::Status st = Replace([&](TlsMaterial* m) { *m = std::move(initial); }); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("serving certificate ", o.cert_file,
                                                     " / key ", o.key_file, ": ", st.message()));
    }

    beast::error_code ec;
    net::ip::address address = net::ip::make_address(o.bind_address, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("bind address \"", o.bind_address, "\" is not an IP address"));
    }
    tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", o.bind_address, ":",
                                                 o.port, ": ", ec.message()));
    }
    port = acceptor.local_endpoint().port();
    return absl::OkStatus();
  }

  void DoAccept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (shared->shutting_down.load() || !acceptor.is_open()) return;
      if (ec) {
        // Out of descriptors and the like: back off instead of spinning.
        auto timer = std::make_shared<net::steady_timer>(acceptor.get_executor());
        timer->expires_after(std::chrono::milliseconds(100));
        timer->async_wait([this, timer](beast::error_code) { DoAccept(); });
        return;
      }
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::shared_ptr<SSL_CTX> current = Context();
      std::make_shared<Session>(std::move(socket), current.get(), shared)->Start();
      {
        absl::MutexLock lock(&shared->mu);
        peak_open = std::max(peak_open, static_cast<int>(shared->sessions.size()));
      }
      DoAccept();
    });
  }

  // On the acceptor's strand, every kTrimCheckPeriod.
  void ScheduleTrim() {
    trim_timer.expires_after(kTrimCheckPeriod);
    trim_timer.async_wait([this](beast::error_code ec) {
      if (ec || shared->shutting_down.load()) return;
      int open;
      {
        absl::MutexLock lock(&shared->mu);
        open = static_cast<int>(shared->sessions.size());
      }
      peak_open = std::max(peak_open, open);
      if (peak_open - open >= kTrimAfterClosedConnections) {
        malloc_trim(0);
        peak_open = open;
      }
      ScheduleTrim();
    });
  }

  void RunThreads(int n) {
    work.emplace(ioc.get_executor());
    {
      absl::MutexLock lock(&threads_mu);
      running_threads = n;
    }
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([this] {
        for (;;) {
          try {
            ioc.run();
            break;
          } catch (...) {
            // A handler threw through Asio; keep serving the others.
          }
        }
        absl::MutexLock lock(&threads_mu);
        --running_threads;
      });
    }
  }
};

TlsServer::TlsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<TlsServer>> TlsServer::Start(TlsServerOptions options,
                                                            RequestHandler handler) {
  int threads = options.io_threads > 0
                    ? options.io_threads
                    : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  auto impl = std::make_unique<Impl>(threads);
  impl->shared = std::make_shared<Shared>();
  impl->shared->options = std::move(options);
  impl->shared->handler = std::move(handler);
  impl->shared->waker = std::make_unique<StreamWaker>(impl->ioc.get_executor());
  if (absl::Status st = impl->Init(); !st.ok()) return st;
  if (impl->shared->options.handler_threads > 0) {
    impl->handler_pool.emplace(static_cast<size_t>(impl->shared->options.handler_threads));
    impl->shared->handler_pool = &*impl->handler_pool;
  }
  impl->DoAccept();
  impl->ScheduleTrim();
  impl->RunThreads(threads);
  return std::unique_ptr<TlsServer>(new TlsServer(std::move(impl)));
}

TlsServer::~TlsServer() { Shutdown(std::chrono::milliseconds(0)); }

int TlsServer::port() const { return impl_->port; }

int TlsServer::ActiveRequests() const {
  absl::MutexLock lock(&impl_->shared->mu);
  return impl_->shared->active_requests;
}

int TlsServer::OpenConnections() const {
  absl::MutexLock lock(&impl_->shared->mu);
  return static_cast<int>(impl_->shared->sessions.size());
}

absl::Status TlsServer::SetServingCertificate(const std::string& chain_pem,
                                              const std::string& key_pem) {
  absl::Status st = impl_->Replace([&](TlsMaterial* m) {
    m->chain_pem = chain_pem;
    m->key_pem = key_pem;
  });
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("serving certificate: ", st.message()));
  return st;
}

absl::Status TlsServer::SetClientCaNames(const std::string& bundles_pem) {
  absl::Status st = impl_->Replace([&](TlsMaterial* m) { m->client_ca_pem = bundles_pem; });
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("client CA names: ", st.message()));
  return st;
}

// Every open connection's OnServerShutdown, on its strand (a snapshot: sessions
// opened later see shutting_down themselves).
static void NotifyShutdown(Shared& shared) {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&shared.mu);
    for (auto& [ptr, weak] : shared.sessions) {
      if (std::shared_ptr<Session> s = weak.lock()) sessions.push_back(std::move(s));
    }
  }
  for (auto& s : sessions) {
    net::post(s->executor(), [s] { s->OnServerShutdown(); });
  }
}

void TlsServer::BeginShutdown() {
  Shared& shared = *impl_->shared;
  if (shared.shutting_down.exchange(true)) return;
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->trim_timer.cancel();
  });
  NotifyShutdown(shared);
}

bool TlsServer::Shutdown(std::chrono::milliseconds grace) {
  {
    absl::MutexLock lock(&impl_->shutdown_mu);
    if (impl_->shut_down) return true;
    impl_->shut_down = true;
  }
  BeginShutdown();
  Shared& shared = *impl_->shared;
  absl::Time deadline = absl::Now() + absl::FromChrono(grace);
  bool clean;
  {
    absl::MutexLock lock(&shared.mu);
    auto drained = [&shared]() {
      shared.mu.AssertHeld();  // absl::Condition runs it under the lock
      return shared.active_requests == 0;
    };
    clean = shared.mu.AwaitWithDeadline(absl::Condition(&drained), deadline);
  }
  // Connections that are still open (idle, mid-read) are closed now.
  NotifyShutdown(shared);
  impl_->work.reset();
  {
    // Let graceful TLS closes finish, briefly; then stop whatever remains.
    absl::MutexLock lock(&impl_->threads_mu);
    auto done = [impl = impl_.get()]() {
      impl->threads_mu.AssertHeld();  // absl::Condition runs it under the lock
      return impl->running_threads == 0;
    };
    if (!impl_->threads_mu.AwaitWithTimeout(absl::Condition(&done),
                                            clean ? absl::Seconds(3) : absl::Milliseconds(100))) {
      clean = false;
    }
  }
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  if (impl_->handler_pool) {
    // Handlers still queued are dropped, running ones finish; their answers
    // go to the stopped ioc and are never run.
    impl_->handler_pool->stop();
    impl_->handler_pool->join();
  }
  return clean;
}

}  // namespace poolcoord::apiservice
