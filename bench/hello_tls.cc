// poolcoord-hello-tls: the ceiling of our transport. A Boost.Beast HTTPS server
// shaped like apiservice/tls_server.cc (one io_context, N threads, a strand per
// connection, request_parser<string_body>, keep-alive, the same TLS context
// options) that answers every request with a fixed 200 "ok". The renewal
// benchmark compares the real server with this to separate what the transport
// costs from what the handlers cost.
//
// Usage: poolcoord-hello-tls --port=N --cert=FILE --key=FILE [--threads=N]
// Runs until SIGINT/SIGTERM.

#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/flag_set.h"
#include "bench/bench_flags.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, ssl::context& ctx) : stream_(std::move(socket), ctx) {}

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      beast::get_lowest_layer(self->stream_).expires_after(std::chrono::seconds(10));
      self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
        if (!ec) self->Read();
      });
    });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(3 * 1024 * 1024);
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(60));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Close();
                       self->Respond();
                     });
  }

  void Respond() {
    http::request<http::string_body> req = parser_->release();
    parser_.reset();
    keep_alive_ = req.keep_alive();
    res_.emplace(http::status::ok, 11);
    res_->set(http::field::content_type, "text/plain");
    res_->keep_alive(keep_alive_);
    res_->body() = "ok\n";
    res_->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(30));
    http::async_write(stream_, *res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || !self->keep_alive_) return self->Close();
      self->Read();
    });
  }

  void Close() {
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(2));
    stream_.async_shutdown([self = shared_from_this()](beast::error_code) {
      beast::error_code ignored;
      beast::get_lowest_layer(self->stream_).socket().close(ignored);
    });
  }

  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> res_;
  bool keep_alive_ = true;
};

void Accept(tcp::acceptor& acceptor, net::io_context& ioc, ssl::context& ctx) {
  acceptor.async_accept(net::make_strand(ioc), [&](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket), ctx)->Start();
    }
    if (acceptor.is_open()) Accept(acceptor, ioc, ctx);
  });
}

}  // namespace

int main(int argc, char** argv) {
  constexpr char kUsage[] = "poolcoord-hello-tls --port=N --cert=FILE --key=FILE [--threads=N]";
  int port = 0;
  std::string cert, key;
  int threads = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  poolcoord::base::FlagSet flags;
  flags.Int("port", &port, 0, 65535, "The port to listen on, on 127.0.0.1 (required).");
  flags.String("cert", &cert, "The certificate chain, PEM (required).");
  flags.String("key", &key, "Its private key, PEM (required).");
  flags.Int("threads", &threads, 1, 1024, "I/O threads.");
  poolcoord::bench::ParseFlags(flags, argc, argv, 1, kUsage);
  if (port == 0 || cert.empty() || key.empty()) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 2;
  }

  ssl::context ctx{ssl::context::tls_server};
  SSL_CTX* native = ctx.native_handle();
  // The same options as apiservice/tls_server.cc, so the comparison is like for like.
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION |
                                  SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  if (SSL_CTX_use_certificate_chain_file(native, cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(native, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    std::fprintf(stderr, "cannot load %s / %s\n", cert.c_str(), key.c_str());
    return 2;
  }

  net::io_context ioc(threads);
  tcp::acceptor acceptor(net::make_strand(ioc));
  tcp::endpoint ep(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  beast::error_code ec;
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "listen on 127.0.0.1:%d: %s\n", port, ec.message().c_str());
    return 1;
  }
  Accept(acceptor, ioc, ctx);

  net::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) { ioc.stop(); });

  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (std::thread& t : pool) t.join();
  return 0;
}
