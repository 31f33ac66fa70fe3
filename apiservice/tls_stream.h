// Internal to the HTTPS transport (tls_server.h), not an API: TLS on a
// connection's own socket. TlsStream is a Beast AsyncReadStream /
// AsyncWriteStream whose reads and writes OpenSSL does on the non-blocking
// socket through a BIO of ours (tls_stream.cc), with deadlines as
// beast::tcp_stream's; http_session.h runs HTTP/1.1 over it. Not thread-safe:
// a stream is used on its connection's strand.
#pragma once

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace poolcoord::apiservice::internal {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

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

  // Takes the socket (made non-blocking) and a new SSL of `ctx`, in the
  // server's role; the handshake is async_handshake's.
  TlsStream(tcp::socket&& socket, SSL_CTX* ctx);
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
  // posted completion and a deadline armed and cancelled.
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

}  // namespace poolcoord::apiservice::internal
