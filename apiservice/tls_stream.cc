#include "apiservice/tls_stream.h"

#include <sys/socket.h>

namespace poolcoord::apiservice::internal {
namespace {

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

}  // namespace

TlsStream::TlsStream(tcp::socket&& socket, SSL_CTX* ctx)
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

}  // namespace poolcoord::apiservice::internal
