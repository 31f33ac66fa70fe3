#define BOOST_TEST_MODULE apiservice_tls_server
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "apiservice/pki.h"
#include "apiservice/tls_server.h"

namespace poolcoord::apiservice {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The test's client writes to connections the server may have closed.
struct IgnoreSigpipe {
  IgnoreSigpipe() { signal(SIGPIPE, SIG_IGN); }
};
BOOST_TEST_GLOBAL_FIXTURE(IgnoreSigpipe);

struct HttpResponse {
  int status = 0;
  std::multimap<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool chunked = false;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// A blocking HTTPS/1.1 client on OpenSSL, with socket timeouts so a broken
// server fails the test instead of hanging it.
class Conn {
 public:
  Conn(int port, const CertKeyPem* client = nullptr, bool handshake = true,
       const std::string& alpn = "") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (!connected_ || !handshake) return;
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (client != nullptr) {
      BIO* cb = BIO_new_mem_buf(client->cert_pem.data(), static_cast<int>(client->cert_pem.size()));
      X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
      BIO_free(cb);
      BIO* kb = BIO_new_mem_buf(client->key_pem.data(), static_cast<int>(client->key_pem.size()));
      EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
      BIO_free(kb);
      SSL_CTX_use_certificate(ctx_, cert);
      SSL_CTX_use_PrivateKey(ctx_, key);
      X509_free(cert);
      EVP_PKEY_free(key);
    }
    ssl_ = SSL_new(ctx_);
    if (!alpn.empty()) {
      SSL_set_alpn_protos(ssl_, reinterpret_cast<const unsigned char*>(alpn.data()),
                          static_cast<unsigned>(alpn.size()));
    }
    SSL_set_fd(ssl_, fd_);
    handshaken_ = SSL_connect(ssl_) == 1;
  }
  ~Conn() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  bool handshaken() const { return handshaken_; }
  int fd() const { return fd_; }
  SSL* ssl() const { return ssl_; }

  // The serving certificate's serial, upper-case hex ("" without one).
  std::string PeerSerial() const {
    X509* cert = ssl_ != nullptr ? SSL_get1_peer_certificate(ssl_) : nullptr;
    if (cert == nullptr) return "";
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
    char* hex = BN_bn2hex(bn);
    std::string out = hex;
    OPENSSL_free(hex);
    BN_free(bn);
    X509_free(cert);
    return out;
  }

  // The CNs of the CAs the server's CertificateRequest named.
  std::vector<std::string> RequestedCaNames() const {
    std::vector<std::string> out;
    STACK_OF(X509_NAME)* names = SSL_get_client_CA_list(ssl_);
    for (int i = 0; names != nullptr && i < sk_X509_NAME_num(names); ++i) {
      char cn[256] = "";
      X509_NAME_get_text_by_NID(sk_X509_NAME_value(names, i), NID_commonName, cn, sizeof(cn));
      out.push_back(cn);
    }
    return out;
  }

  // Reads until the server closes; false when it has not within `bound` (the
  // socket's own 5 s receive timeout keeps each read bounded).
  bool ClosedByServerWithin(std::chrono::seconds bound) {
    const auto deadline = Clock::now() + bound;
    char tmp[256];
    while (Clock::now() < deadline) {
      int n = handshaken_ ? SSL_read(ssl_, tmp, sizeof(tmp))
                          : static_cast<int>(::recv(fd_, tmp, sizeof(tmp), 0));
      if (n > 0) continue;
      if (handshaken_ && SSL_get_error(ssl_, n) == SSL_ERROR_SYSCALL &&
          (errno == EAGAIN || errno == EWOULDBLOCK)) {
        continue;  // our receive timeout, not the server
      }
      if (!handshaken_ && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      return true;
    }
    return false;
  }

  bool Send(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      int n = SSL_write(ssl_, data.data() + done, static_cast<int>(std::min<size_t>(data.size() - done, 1 << 20)));
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads one response; status 0 when the connection ended first.
  HttpResponse Read() {
    HttpResponse r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!More()) return r;
    }
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    (void)absl::SimpleAtoi(status_line.substr(9, 3), &r.status);
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t next = head.find("\r\n", pos);
      if (next == std::string::npos) next = head.size();
      std::string line = head.substr(pos, next - pos);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.headers.emplace(name, value);
      pos = next + 2;
    }
    if (r.Header("transfer-encoding") == "chunked") {
      r.chunked = true;
      for (;;) {
        std::string chunk;
        if (!ReadChunk(&chunk)) {
          r.status = -r.status;  // ended without the final chunk
          return r;
        }
        if (chunk.empty()) break;
        r.body += chunk;
        chunks_.push_back(chunk);
      }
    } else {
      size_t length = 0;
      (void)absl::SimpleAtoi(r.Header("content-length"), &length);
      while (buf_.size() < length) {
        if (!More()) return r;
      }
      r.body = buf_.substr(0, length);
      buf_.erase(0, length);
    }
    return r;
  }

  // For streams read piecewise: the status line and headers only.
  HttpResponse ReadHead() {
    HttpResponse r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!More()) return r;
    }
    (void)absl::SimpleAtoi(buf_.substr(9, 3), &r.status);
    r.chunked = buf_.substr(0, end).find("Transfer-Encoding: chunked") != std::string::npos;
    buf_.erase(0, end + 4);
    return r;
  }

  // One chunk's data ("" for the final chunk); false when the stream broke.
  bool ReadChunk(std::string* out) {
    size_t eol;
    while ((eol = buf_.find("\r\n")) == std::string::npos) {
      if (!More()) return false;
    }
    size_t size = std::strtoul(buf_.substr(0, eol).c_str(), nullptr, 16);
    while (buf_.size() < eol + 2 + size + 2) {
      if (!More()) return false;
    }
    *out = buf_.substr(eol + 2, size);
    buf_.erase(0, eol + 2 + size + 2);
    return true;
  }

  // What the server sends until it closes the connection (a body delimited by
  // the close, as for an HTTP/1.0 client).
  std::string ReadUntilClosed() {
    while (More()) {
    }
    std::string out;
    out.swap(buf_);
    return out;
  }

  // True when the peer closed (EOF) with nothing more sent.
  // Waits (up to the socket timeout) for the server to close the connection: true
  // when it closed (close_notify, EOF or reset) without sending anything; false on
  // data, or when the read timed out with the connection still open.
  bool ClosedWithoutData() {
    if (!buf_.empty()) return false;
    char tmp[256];
    int n = SSL_read(ssl_, tmp, sizeof(tmp));
    if (n > 0) return false;
    const int err = SSL_get_error(ssl_, n);
    return err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE;
  }

 private:
  bool More() {
    char tmp[65536];
    int n = SSL_read(ssl_, tmp, sizeof(tmp));
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool handshaken_ = false;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string buf_;
  std::vector<std::string> chunks_;
};

// "chunk-1\n" .. "chunk-N\n", one per Poll, then the end.
class CountedChunks final : public handlers::StreamSource {
 public:
  explicit CountedChunks(int n) : n_(n) {}
  Step Poll(std::string* out, const std::function<void()>&, Clock::time_point*) override {
    out->append(absl::StrCat("chunk-", ++sent_, "\n"));
    return sent_ < n_ ? Step::kData : Step::kEnd;
  }

 private:
  const int n_;
  int sent_ = 0;
};

// `count` chunks of `size` bytes at once (chunk i filled with 'a' + i % 26), then
// the end: more than a socket takes without the client reading.
class BigChunks final : public handlers::StreamSource {
 public:
  BigChunks(int count, size_t size) : count_(count), size_(size) {}
  static std::string Expected(int count, size_t size) {
    std::string all;
    for (int i = 0; i < count; ++i) all.append(size, static_cast<char>('a' + i % 26));
    return all;
  }
  Step Poll(std::string* out, const std::function<void()>&, Clock::time_point*) override {
    out->append(size_, static_cast<char>('a' + sent_ % 26));
    return ++sent_ < count_ ? Step::kData : Step::kEnd;
  }

 private:
  const int count_;
  const size_t size_;
  int sent_ = 0;
};

// "tick\n" every 20 ms, woken by the transport's timer only; `ended` turns true
// when the transport lets go of it.
class Ticker final : public handlers::StreamSource {
 public:
  explicit Ticker(std::atomic<bool>* ended) : ended_(ended) {}
  ~Ticker() override { *ended_ = true; }
  Step Poll(std::string* out, const std::function<void()>&, Clock::time_point* wake_at) override {
    const Clock::time_point now = Clock::now();
    if (now < next_) {
      *wake_at = next_;
      return Step::kWait;
    }
    next_ = now + std::chrono::milliseconds(20);
    out->append("tick\n");
    return Step::kData;
  }

 private:
  std::atomic<bool>* ended_;
  Clock::time_point next_{};
};

// Lines pushed from a test thread, delivered through the wake-up call alone
// (no deadline), as a store watcher wakes a watch.
class PushedLines final : public handlers::StreamSource {
 public:
  void Push(std::string line) {
    std::function<void()> wake;
    {
      absl::MutexLock lock(&mu_);
      lines_ += line;
      wake = std::move(wake_);
      wake_ = nullptr;
    }
    if (wake) wake();
  }
  void Finish() {
    std::function<void()> wake;
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      wake = std::move(wake_);
      wake_ = nullptr;
    }
    if (wake) wake();
  }
  Step Poll(std::string* out, const std::function<void()>& wake, Clock::time_point*) override {
    absl::MutexLock lock(&mu_);
    out->swap(lines_);
    lines_.clear();
    if (finished_) return Step::kEnd;
    if (!out->empty()) return Step::kData;
    wake_ = wake;
    return Step::kWait;
  }

 private:
  absl::Mutex mu_;
  std::string lines_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
};

// A server with a trivial handler on 127.0.0.1:0:
//   /echo    the request as text: method, path, query, x-group lines, body
//   /peer    the client certificate's subject, or "none"
//   /stream  three chunks
//   /many    1,000 small chunks, all ready at once
//   /big     40 chunks of 200 KiB, all ready at once
//   /forever a chunk every 20 ms until cancelled
//   /pushed  a line whenever the test calls Push on its source (Fixture::pushed)
//   /block   "released" once the test notifies Fixture::release (the handler waits)
struct Fixture {
  Fixture(int io_threads = 2, std::chrono::milliseconds idle = std::chrono::seconds(120),
          std::chrono::milliseconds read_header = std::chrono::seconds(32),
          int handler_threads = 0,
          std::chrono::milliseconds body = std::chrono::seconds(60)) {
    std::string tmpl = (fs::temp_directory_path() / "tls_test.XXXXXX").string();
    dir = mkdtemp(tmpl.data());
    CertSpec ca_spec;
    ca_spec.common_name = "test-ca";
    ca_spec.is_ca = true;
    ca = *CreateCertificate(ca_spec, nullptr);
    CertSpec server_spec;
    server_spec.common_name = "server";
    server_spec.server_auth = true;
    server_spec.ip_addresses = {"127.0.0.1"};
    server_pair = *CreateCertificate(server_spec, &ca);
    std::ofstream(dir + "/s.crt") << server_pair.cert_pem;
    std::ofstream(dir + "/s.key") << server_pair.key_pem;
    std::ofstream(dir + "/ca.crt") << ca.cert_pem;

    TlsServerOptions o;
    o.bind_address = "127.0.0.1";
    o.port = 0;
    o.cert_file = dir + "/s.crt";
    o.key_file = dir + "/s.key";
    o.client_ca_files = {dir + "/ca.crt"};
    o.io_threads = io_threads;
    o.handler_threads = handler_threads;
    o.idle_timeout = idle;
    o.read_header_timeout = read_header;
    o.body_timeout = body;
    absl::StatusOr<std::unique_ptr<TlsServer>> s = TlsServer::Start(
        o, [this](handlers::Request& r, const ConnectionInfo& c) { return Handle(r, c); });
    BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
    server = *std::move(s);
  }
  ~Fixture() {
    server.reset();
    fs::remove_all(dir);
  }

  handlers::Response Handle(handlers::Request& r, const ConnectionInfo& c) {
    handlers::Response resp;
    resp.SetHeader("Content-Type", "text/plain");
    if (r.path == "/stream") {
      resp.stream = std::make_shared<CountedChunks>(3);
      return resp;
    }
    if (r.path == "/many") {
      resp.stream = std::make_shared<CountedChunks>(1000);
      return resp;
    }
    if (r.path == "/big") {
      resp.stream = std::make_shared<BigChunks>(40, 200 * 1024);
      return resp;
    }
    if (r.path == "/forever") {
      resp.stream = std::make_shared<Ticker>(&stream_ended);
      return resp;
    }
    if (r.path == "/pushed") {
      auto source = std::make_shared<PushedLines>();
      {
        absl::MutexLock lock(&pushed_mu);
        pushed.push_back(source);
      }
      resp.stream = source;
      return resp;
    }
    if (r.path == "/block") {
      blocked.Notify();
      release.WaitForNotification();
      resp.body = "released";
      return resp;
    }
    if (r.path == "/peer") {
      if (!c.peer) {
        resp.body = "none";
      } else {
        char buf[256];
        X509_NAME_oneline(X509_get_subject_name(c.peer->leaf()), buf, sizeof(buf));
        resp.body = buf;
      }
      return resp;
    }
    std::vector<std::string> query, groups;
    for (const auto& [k, v] : r.query) query.push_back(k + "=" + v);
    for (const auto& [k, v] : r.headers) {
      if (k == "x-group") groups.push_back(v);
    }
    resp.body = absl::StrCat(r.method, "\n", r.path, "\n", absl::StrJoin(query, "&"), "\n",
                             absl::StrJoin(groups, "|"), "\n", c.remote_address, "\n", r.body);
    return resp;
  }

  std::vector<std::string> Lines(const std::string& body) {
    std::vector<std::string> out;
    size_t pos = 0;
    for (int i = 0; i < 5; ++i) {
      size_t nl = body.find('\n', pos);
      out.push_back(body.substr(pos, nl - pos));
      pos = nl + 1;
    }
    out.push_back(body.substr(pos));
    return out;
  }

  // Opens `n` streams of /pushed into `conns`; returns their sources in the
  // order the server accepted them (the order of `conns`).
  std::vector<std::shared_ptr<PushedLines>> OpenPushedStreams(
      int n, std::vector<std::unique_ptr<Conn>>& conns);

  // A serving pair from the same CA, for rotation.
  CertKeyPem NewServingPair(const std::string& cn) {
    CertSpec spec;
    spec.common_name = cn;
    spec.server_auth = true;
    spec.ip_addresses = {"127.0.0.1"};
    return *CreateCertificate(spec, &ca);
  }

  std::string dir;
  CertKeyPem ca;
  CertKeyPem server_pair;
  std::unique_ptr<TlsServer> server;
  std::atomic<bool> stream_ended{false};
  absl::Notification blocked;  // a /block handler is waiting
  absl::Notification release;  // lets it answer
  absl::Mutex pushed_mu;
  std::vector<std::shared_ptr<PushedLines>> pushed ABSL_GUARDED_BY(pushed_mu);
};

std::string Get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

std::vector<std::shared_ptr<PushedLines>> Fixture::OpenPushedStreams(
    int n, std::vector<std::unique_ptr<Conn>>& conns) {
  for (int i = 0; i < n; ++i) {
    conns.push_back(std::make_unique<Conn>(server->port()));
    BOOST_REQUIRE(conns.back()->Send(Get("/pushed")));
    BOOST_REQUIRE(conns.back()->ReadHead().status == 200);
  }
  absl::MutexLock lock(&pushed_mu);
  BOOST_REQUIRE(pushed.size() == static_cast<size_t>(n));
  return pushed;
}

BOOST_FIXTURE_TEST_SUITE(TlsServerTest, Fixture)

BOOST_AUTO_TEST_CASE(KeepAliveServesTwoRequestsOnOneConnection) {
  Conn c(server->port());
  BOOST_REQUIRE(c.handshaken());
  BOOST_REQUIRE(c.Send(Get("/echo")));
  HttpResponse a = c.Read();
  BOOST_REQUIRE(c.Send(Get("/echo?second=1")));
  HttpResponse b = c.Read();
  BOOST_TEST(a.status == 200);
  BOOST_TEST(b.status == 200);
  BOOST_TEST(a.Header("content-length") == std::to_string(a.body.size()));
  BOOST_TEST(Lines(b.body)[2] == "second=1");
  // Same connection: same client port.
  BOOST_TEST(Lines(a.body)[4] == Lines(b.body)[4]);
  BOOST_TEST(a.Header("connection") != "close");
}

BOOST_AUTO_TEST_CASE(AlpnSelectsHttp11) {
  std::string protos = std::string("\x02h2\x08http/1.1", 12);
  Conn c(server->port(), nullptr, true, protos);
  BOOST_REQUIRE(c.handshaken());
  const unsigned char* selected = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(c.ssl(), &selected, &len);
  BOOST_TEST(std::string(reinterpret_cast<const char*>(selected), len) == "http/1.1");
  BOOST_TEST(SSL_version(c.ssl()) >= TLS1_2_VERSION);
}

BOOST_AUTO_TEST_CASE(ChunkedRequestBodyIsJoined) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n"));
  HttpResponse r = c.Read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(Lines(r.body)[5] == "hello world!");
}

BOOST_AUTO_TEST_CASE(RepeatedHeaderLinesReachTheHandler) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/echo", "X-Group: system:nodes\r\nx-group: a,b\r\nX-GROUP: c\r\n")));
  HttpResponse r = c.Read();
  BOOST_TEST(Lines(r.body)[3] == "system:nodes|a,b|c");
}

BOOST_AUTO_TEST_CASE(PathAndQueryAreDecoded) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/echo/a%20b+c?labelSelector=a+in+%28x%2Cy%29&flag")));
  HttpResponse r = c.Read();
  std::vector<std::string> l = Lines(r.body);
  BOOST_TEST(l[0] == "GET");
  BOOST_TEST(l[1] == "/echo/a b+c");
  BOOST_TEST(l[2] == "labelSelector=a in (x,y)&flag=");
}

BOOST_AUTO_TEST_CASE(ClientCertificateIsRequestedNotRequired) {
  Conn without(server->port());
  BOOST_REQUIRE(without.handshaken());
  BOOST_REQUIRE(without.Send(Get("/peer")));
  BOOST_TEST(without.Read().body == "none");

  CertSpec spec;
  spec.common_name = "alice";
  spec.organizations = {"dev"};
  spec.client_auth = true;
  CertKeyPem alice = *CreateCertificate(spec, &ca);
  Conn with(server->port(), &alice);
  BOOST_REQUIRE(with.handshaken());
  BOOST_REQUIRE(with.Send(Get("/peer")));
  BOOST_TEST(with.Read().body.find("CN=alice") != std::string::npos);

  // A certificate from a CA the server never heard of still completes the
  // handshake: verification is the authenticator's job (401 there).
  CertSpec rogue_spec;
  rogue_spec.common_name = "rogue";
  rogue_spec.is_ca = true;
  CertKeyPem rogue_ca = *CreateCertificate(rogue_spec, nullptr);
  CertKeyPem mallory = *CreateCertificate(spec, &rogue_ca);
  Conn rogue(server->port(), &mallory);
  BOOST_REQUIRE(rogue.handshaken());
  BOOST_REQUIRE(rogue.Send(Get("/peer")));
  BOOST_TEST(rogue.Read().body.find("CN=alice") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(StreamedResponseDeliversChunksThenKeepsTheConnection) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/stream")));
  HttpResponse r = c.Read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.chunked);
  BOOST_TEST(r.Header("content-length") == "");
  BOOST_TEST(r.body == "chunk-1\nchunk-2\nchunk-3\n");
  BOOST_REQUIRE(c.Send(Get("/echo?after=stream")));
  HttpResponse next = c.Read();
  BOOST_TEST(next.status == 200);
  BOOST_TEST(Lines(next.body)[2] == "after=stream");
}

// HTTP/1.0 has no chunked transfer coding (RFC 9112 section 6.1): a newcomer's
// HTTP/1.0 watch got `Transfer-Encoding: chunked` and chunk framing. A stream to
// such a client is its raw data, ended by closing the connection, as Go's
// net/http serves kube-apiserver's watches to HTTP/1.0 clients.
BOOST_AUTO_TEST_CASE(AStreamToAnHttp10ClientIsUnchunkedAndEndsWithTheConnection) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send("GET /stream HTTP/1.0\r\nHost: x\r\n\r\n"));
  HttpResponse head = c.ReadHead();
  BOOST_TEST(head.status == 200);
  BOOST_TEST(!head.chunked);
  BOOST_TEST(c.ReadUntilClosed() == "chunk-1\nchunk-2\nchunk-3\n");
}

// A chunk goes to OpenSSL at once when the socket takes it, and asynchronously
// for what it does not take: a stream far larger than the socket's buffers,
// read only once the server had to wait, arrives whole, in order and framed, and
// so do 1,000 chunks ready at once (written a few per turn of the I/O thread);
// the connection then serves the next request.
BOOST_AUTO_TEST_CASE(ChunksTheSocketCannotTakeAtOnceArriveWholeAndInOrder) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/big")));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the buffers fill meanwhile
  HttpResponse big = c.Read();
  BOOST_TEST(big.status == 200);
  BOOST_TEST(big.chunked);
  BOOST_TEST(big.body.size() == 40u * 200 * 1024);
  BOOST_TEST((big.body == BigChunks::Expected(40, 200 * 1024)));
  BOOST_REQUIRE(c.Send(Get("/many")));
  HttpResponse many = c.Read();
  BOOST_TEST(many.status == 200);
  std::string expected;
  for (int i = 1; i <= 1000; ++i) absl::StrAppend(&expected, "chunk-", i, "\n");
  BOOST_TEST((many.body == expected));
  BOOST_REQUIRE(c.Send(Get("/echo?after=big")));
  BOOST_TEST(Lines(c.Read().body)[2] == "after=big");
}

// Streams are driven by the I/O threads: a source woken from another thread
// delivers at once, and a few hundred open streams add no thread.
BOOST_AUTO_TEST_CASE(WokenStreamsDeliverWithoutAThreadEach) {
  auto threads = [] {
    return std::distance(fs::directory_iterator("/proc/self/task"), fs::directory_iterator{});
  };
  const auto threads_before = threads();
  constexpr int kStreams = 200;
  std::vector<std::unique_ptr<Conn>> conns;
  std::vector<std::shared_ptr<PushedLines>> sources = OpenPushedStreams(kStreams, conns);
  BOOST_TEST(threads() == threads_before);
  for (int i = 0; i < kStreams; ++i) sources[i]->Push(absl::StrCat("event-", i, "\n"));
  for (int i = 0; i < kStreams; ++i) {
    std::string chunk;
    BOOST_REQUIRE(conns[i]->ReadChunk(&chunk));
    BOOST_TEST(chunk == absl::StrCat("event-", i, "\n"));
  }
  // Two pushes before the transport polls again leave in one or two chunks, in order.
  sources[0]->Push("a\n");
  sources[0]->Push("b\n");
  sources[0]->Finish();
  std::string all, chunk;
  while (conns[0]->ReadChunk(&chunk) && !chunk.empty()) all += chunk;
  BOOST_TEST(all == "a\nb\n");
  // The connection serves the next request after the stream's end.
  BOOST_REQUIRE(conns[0]->Send(Get("/echo?after=pushed")));
  BOOST_TEST(Lines(conns[0]->Read().body)[2] == "after=pushed");
}

// Wake-ups are queued per I/O thread and served in turns of a
// few streams (StreamWaker). A burst that wakes streams whose clients have gone
// (closed before or while the burst runs) skips them, and every live stream
// still gets its event, whichever turn it falls in.
BOOST_AUTO_TEST_CASE(ABurstOfWakeUpsSkipsStreamsWhoseClientLeft) {
  constexpr int kStreams = 150;
  std::vector<std::unique_ptr<Conn>> conns;
  std::vector<std::shared_ptr<PushedLines>> sources = OpenPushedStreams(kStreams, conns);
  for (int i = 0; i < kStreams; i += 3) conns[i].reset();  // every third client leaves
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kStreams; ++i) sources[i]->Push(absl::StrCat("event-", round, "-", i, "\n"));
    for (int i = 0; i < kStreams; ++i) {
      if (!conns[i]) continue;
      std::string got, chunk;
      const std::string want = absl::StrCat("event-", round, "-", i, "\n");
      while (got.size() < want.size() && conns[i]->ReadChunk(&chunk)) got += chunk;
      BOOST_REQUIRE_EQUAL(got, want);
    }
  }
  Conn other(server->port());
  BOOST_REQUIRE(other.Send(Get("/echo?after=burst")));
  BOOST_TEST(Lines(other.Read().body)[2] == "after=burst");
}

// The input that showed connections hang (a newcomer's watch loop): clients
// that open a large stream, read 100 bytes and close while the server still
// has most of it to send, each followed at once by the next connection. The
// closed stream's pending read had its wait completed by the reset before the
// close, and then ran OpenSSL on the descriptor number, which the next
// connection had been accepted on: it took that client's handshake bytes, and
// the new connection was dropped at its handshake timeout. Every connection
// must be served.
BOOST_AUTO_TEST_CASE(AStreamClosedMidBacklogLeavesTheNextConnectionAlone) {
  // The old code failed within 17-229 rounds in 12 of 12 runs (about 15 rounds
  // a second on the shared machine); bounded by rounds and time.
  constexpr int kRounds = 600;
  const auto give_up = Clock::now() + std::chrono::seconds(30);
  int rounds = 0;
  int failed_round = -1;
  std::string failure;
  for (; rounds < kRounds && Clock::now() < give_up; ++rounds) {
    Conn c(server->port());
    if (!c.handshaken()) {
      failed_round = rounds;
      failure = "handshake failed";
      break;
    }
    if (!c.Send(Get("/big"))) {
      failed_round = rounds;
      failure = "request not sent";
      break;
    }
    char head[100];
    size_t got = 0;
    while (got < sizeof(head)) {
      const int n = SSL_read(c.ssl(), head + got, static_cast<int>(sizeof(head) - got));
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got < sizeof(head) || std::string_view(head, 12) != "HTTP/1.1 200") {
      failed_round = rounds;
      failure = absl::StrCat("read ", got, " bytes of the answer");
      break;
    }
  }  // each client closes with most of the stream unread (a reset)
  BOOST_TEST_MESSAGE(rounds << " rounds");
  BOOST_TEST(failed_round == -1, "round " << failed_round << " of " << rounds << ": " << failure);
  Conn after(server->port());
  BOOST_REQUIRE(after.Send(Get("/echo?after=aborted")));
  BOOST_TEST(Lines(after.Read().body)[2] == "after=aborted");
}

// The input that showed a hang: the next request arrives while the stream is
// still open (a client that pipelines, or one quicker than the final chunk).
// It must be answered after the stream ends, not left unparsed in the buffer.
BOOST_AUTO_TEST_CASE(RequestSentDuringAStreamIsServedAfterIt) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/pushed")));
  BOOST_REQUIRE(c.ReadHead().status == 200);
  std::shared_ptr<PushedLines> source;
  {
    absl::MutexLock lock(&pushed_mu);
    BOOST_REQUIRE(pushed.size() == 1u);
    source = pushed[0];
  }
  BOOST_REQUIRE(c.Send(Get("/echo?after=early")));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the server reads it meanwhile
  source->Push("last\n");
  source->Finish();
  std::string all, chunk;
  while (c.ReadChunk(&chunk) && !chunk.empty()) all += chunk;
  BOOST_TEST(all == "last\n");
  HttpResponse next = c.Read();
  BOOST_TEST(next.status == 200);
  BOOST_TEST(Lines(next.body)[2] == "after=early");
}

BOOST_AUTO_TEST_CASE(OversizedBodiesGet413) {
  {
    Conn c(server->port());
    std::string body(4 * 1024 * 1024, 'x');
    c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n");
    c.Send(body);  // the server may stop reading early; ignore failures
    HttpResponse r = c.Read();
    BOOST_TEST(r.status == 413);
  }
  {
    Conn c(server->port());
    c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    std::string chunk(1024 * 1024, 'y');
    for (int i = 0; i < 4; ++i) c.Send("100000\r\n" + chunk + "\r\n");
    c.Send("0\r\n\r\n");
    BOOST_TEST(c.Read().status == 413);
  }
  {
    // Exactly the limit is fine.
    Conn c(server->port());
    std::string body(kMaxRequestBodyBytes, 'z');
    BOOST_REQUIRE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
    HttpResponse r = c.Read();
    BOOST_TEST(r.status == 200);
    BOOST_TEST(Lines(r.body)[5].size() == kMaxRequestBodyBytes);
  }
}

BOOST_AUTO_TEST_CASE(MalformedRequestGets400) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send("NOT HTTP AT ALL\r\n\r\n"));
  BOOST_TEST(c.Read().status == 400);
}

// A framing error (a bad chunk size, two different Content-Lengths) is
// answered 400 with "Connection: close", and the connection then ends at once
// with close_notify, as kube-apiserver's net/http ends it. It used to stay open
// for the 2 s drain and end without close_notify.
BOOST_AUTO_TEST_CASE(AFramingErrorIsAnswered400AndTheConnectionEnds) {
  const std::string bad_chunk = "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n";
  const std::string two_lengths = "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}";
  for (const std::string& connection : {std::string(), std::string("Connection: close\r\n")}) {
    for (const std::string& rest : {bad_chunk, two_lengths}) {
      BOOST_TEST_CONTEXT(connection << rest) {
        Conn c(server->port());
        BOOST_REQUIRE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\n" + connection + rest));
        HttpResponse r = c.Read();
        BOOST_TEST(r.status == 400);
        BOOST_TEST(r.Header("connection") == "close");
        char tmp[64];
        const int n = SSL_read(c.ssl(), tmp, sizeof(tmp));
        BOOST_TEST(n <= 0);
        BOOST_TEST(SSL_get_error(c.ssl(), n) == SSL_ERROR_ZERO_RETURN);  // close_notify
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(ShutdownEndsALiveStreamCleanly) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/forever")));
  HttpResponse head = c.ReadHead();
  BOOST_REQUIRE(head.status == 200);
  BOOST_REQUIRE(head.chunked);
  std::string chunk;
  BOOST_REQUIRE(c.ReadChunk(&chunk));
  BOOST_TEST(chunk == "tick\n");

  auto start = Clock::now();
  std::future<bool> done =
      std::async(std::launch::async, [this] { return server->Shutdown(std::chrono::seconds(5)); });
  bool saw_final = false;
  while (c.ReadChunk(&chunk)) {
    if (chunk.empty()) {
      saw_final = true;
      break;
    }
  }
  BOOST_TEST(saw_final);
  BOOST_TEST(done.get());
  BOOST_TEST(stream_ended.load());
  BOOST_TEST((Clock::now() - start < std::chrono::seconds(3)));
  // No new connections after shutdown.
  Conn late(server->port());
  BOOST_TEST(!late.handshaken());
}

// The input that showed a leak: a client that leaves in the middle of a stream.
// Its request must count as finished, or Shutdown waits out the whole grace period.
BOOST_AUTO_TEST_CASE(ClientLeavingAStreamDoesNotHoldShutdown) {
  {
    Conn c(server->port());
    BOOST_REQUIRE(c.Send(Get("/forever")));
    HttpResponse head = c.ReadHead();
    BOOST_REQUIRE(head.status == 200);
    std::string chunk;
    BOOST_REQUIRE(c.ReadChunk(&chunk));
  }  // the client closes its connection here
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!stream_ended.load() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  BOOST_REQUIRE(stream_ended.load());
  auto start = Clock::now();
  BOOST_TEST(server->Shutdown(std::chrono::seconds(5)));
  BOOST_TEST((Clock::now() - start < std::chrono::seconds(2)));
}

BOOST_AUTO_TEST_SUITE_END()

// Handlers on a pool of their own (TlsServerOptions::handler_threads, the
// etcd3 server's setting): one I/O thread, two handler threads.
struct PoolFixture : Fixture {
  PoolFixture()
      : Fixture(/*io_threads=*/1, std::chrono::seconds(120), std::chrono::seconds(32),
                /*handler_threads=*/2) {}
  ~PoolFixture() {  // a test that failed early leaves no handler waiting
    if (!release.HasBeenNotified()) release.Notify();
  }
};

BOOST_FIXTURE_TEST_SUITE(HandlerPool, PoolFixture)

// On etcd3 a handler waits for etcd; on the I/O thread that wait would hold
// back every stream of the thread. On the pool the only I/O thread goes on
// streaming and answering while a handler waits.
BOOST_AUTO_TEST_CASE(AWaitingHandlerHoldsBackNoStreamAndNoOtherRequest) {
  Conn stream(server->port());
  BOOST_REQUIRE(stream.Send(Get("/pushed")));
  BOOST_REQUIRE(stream.ReadHead().status == 200);
  std::shared_ptr<PushedLines> source;
  {
    absl::MutexLock lock(&pushed_mu);
    BOOST_REQUIRE(pushed.size() == 1u);
    source = pushed[0];
  }
  Conn waiting(server->port());
  BOOST_REQUIRE(waiting.Send(Get("/block")));
  BOOST_REQUIRE(blocked.WaitForNotificationWithTimeout(absl::Seconds(10)));

  source->Push("while-blocked\n");
  std::string chunk;
  BOOST_REQUIRE(stream.ReadChunk(&chunk));
  BOOST_TEST(chunk == "while-blocked\n");
  Conn other(server->port());
  BOOST_REQUIRE(other.Send(Get("/echo?during=block")));
  BOOST_TEST(Lines(other.Read().body)[2] == "during=block");

  release.Notify();
  HttpResponse answered = waiting.Read();
  BOOST_TEST(answered.status == 200);
  BOOST_TEST(answered.body == "released");
  // The connection goes on as usual: keep-alive, then a stream from the pool.
  BOOST_REQUIRE(waiting.Send(Get("/stream")));
  HttpResponse streamed = waiting.Read();
  BOOST_TEST(streamed.chunked);
  BOOST_TEST(streamed.body == "chunk-1\nchunk-2\nchunk-3\n");
  source->Finish();
  std::string rest;
  while (stream.ReadChunk(&chunk) && !chunk.empty()) rest += chunk;
  BOOST_TEST(rest == "");
}

// Shutdown with a handler still waiting on the pool: after the grace period it
// still waits for the running handler (as it waited for an I/O thread running
// one), never for queued work, and reports the shutdown unclean.
BOOST_AUTO_TEST_CASE(ShutdownWaitsForARunningHandlerThenStops) {
  Conn waiting(server->port());
  BOOST_REQUIRE(waiting.Send(Get("/block")));
  BOOST_REQUIRE(blocked.WaitForNotificationWithTimeout(absl::Seconds(10)));
  std::future<bool> done =
      std::async(std::launch::async, [this] { return server->Shutdown(std::chrono::milliseconds(100)); });
  BOOST_TEST((done.wait_for(std::chrono::milliseconds(500)) == std::future_status::timeout));
  release.Notify();
  BOOST_TEST(!done.get());  // not clean: a request was still running at the deadline
}

BOOST_AUTO_TEST_SUITE_END()

// A replaced serving certificate is served without a restart (replacing it
// once changed nothing until then).
BOOST_FIXTURE_TEST_SUITE(Rotation, Fixture)

BOOST_AUTO_TEST_CASE(ANewServingCertificateIsServedToNewHandshakesOnly) {
  Conn before(server->port());
  BOOST_REQUIRE(before.handshaken());
  BOOST_REQUIRE(before.Send(Get("/echo")));
  BOOST_REQUIRE(before.Read().status == 200);
  const std::string old_serial = before.PeerSerial();
  CertKeyPem next = NewServingPair("rotated");
  absl::Status st = server->SetServingCertificate(next.cert_pem + ca.cert_pem, next.key_pem);
  BOOST_REQUIRE_MESSAGE(st.ok(), st.ToString());
  Conn after(server->port());
  BOOST_REQUIRE(after.handshaken());
  BOOST_TEST(after.PeerSerial() != old_serial);
  BOOST_REQUIRE(after.Send(Get("/echo")));
  BOOST_TEST(after.Read().status == 200);
  // The keep-alive connection made before goes on with its own handshake.
  BOOST_REQUIRE(before.Send(Get("/echo?again=1")));
  HttpResponse again = before.Read();
  BOOST_TEST(again.status == 200);
  BOOST_TEST(Lines(again.body)[2] == "again=1");
  BOOST_TEST(before.PeerSerial() == old_serial);
}

BOOST_AUTO_TEST_CASE(ABrokenServingCertificateIsRefusedAndTheOldOneServed) {
  Conn first(server->port());
  const std::string serial = first.PeerSerial();
  CertKeyPem other = NewServingPair("other");
  BOOST_TEST(absl::IsInvalidArgument(server->SetServingCertificate(other.cert_pem, server_pair.key_pem)));
  BOOST_TEST(absl::IsInvalidArgument(
      server->SetServingCertificate(other.cert_pem.substr(0, 100), other.key_pem)));
  BOOST_TEST(absl::IsInvalidArgument(server->SetServingCertificate(other.cert_pem, "")));
  Conn second(server->port());
  BOOST_REQUIRE(second.handshaken());
  BOOST_TEST(second.PeerSerial() == serial);
}

BOOST_AUTO_TEST_CASE(TheCertificateRequestNamesTheCurrentClientCas) {
  {
    Conn c(server->port());
    BOOST_REQUIRE(c.handshaken());
    BOOST_TEST(c.RequestedCaNames() == (std::vector<std::string>{"test-ca"}));
  }
  CertSpec spec;
  spec.common_name = "second-ca";
  spec.is_ca = true;
  CertKeyPem second = *CreateCertificate(spec, nullptr);
  // Named once each, even when a bundle repeats one.
  BOOST_REQUIRE(server->SetClientCaNames(ca.cert_pem + second.cert_pem + ca.cert_pem).ok());
  Conn c(server->port());
  BOOST_REQUIRE(c.handshaken());
  BOOST_TEST(c.RequestedCaNames() == (std::vector<std::string>{"test-ca", "second-ca"}));
}

BOOST_AUTO_TEST_SUITE_END()

// One I/O thread makes the point sharper: a stalled handshake must not occupy it.
struct OneThread : Fixture {
  OneThread() : Fixture(1) {}
};

BOOST_FIXTURE_TEST_SUITE(Handshakes, OneThread)

BOOST_AUTO_TEST_CASE(StalledClientDoesNotDelayOthers) {
  Conn stalled(server->port(), nullptr, /*handshake=*/false);
  Conn half(server->port(), nullptr, /*handshake=*/false);
  // Half a ClientHello: a TLS record header promising more than is sent.
  const unsigned char partial[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
  BOOST_REQUIRE(::send(half.fd(), partial, sizeof(partial), 0) == sizeof(partial));
  auto start = Clock::now();
  Conn c(server->port());
  BOOST_REQUIRE(c.handshaken());
  BOOST_REQUIRE(c.Send(Get("/echo")));
  BOOST_TEST(c.Read().status == 200);
  BOOST_TEST((Clock::now() - start < std::chrono::seconds(2)));
}

BOOST_AUTO_TEST_SUITE_END()

// A client that sends half a request header and stalls is closed at the header
// bound, kube-apiserver's ReadHeaderTimeout (32 s), not the idle timeout (200
// such clients were once held 100-125 s).
struct ShortHeaderBound : Fixture {
  ShortHeaderBound() : Fixture(2, std::chrono::seconds(120), std::chrono::milliseconds(500)) {}
};

BOOST_FIXTURE_TEST_SUITE(HeaderBound, ShortHeaderBound)

BOOST_AUTO_TEST_CASE(AStalledHalfHeaderIsClosedWithinTheBound) {
  Conn c(server->port());
  BOOST_REQUIRE(c.handshaken());
  BOOST_REQUIRE(c.Send("GET /version HTTP/1.1\r\nHost: x\r\n"));
  const auto start = Clock::now();
  BOOST_TEST(c.ClosedByServerWithin(std::chrono::seconds(30)));
  // Far below the 120 s idle timeout, which held such clients before.
  BOOST_TEST((Clock::now() - start < std::chrono::seconds(30)));
  BOOST_TEST(server->OpenConnections() <= 1);
}

BOOST_AUTO_TEST_CASE(AHeaderSentByteByByteIsBoundedToo) {
  Conn c(server->port());
  BOOST_REQUIRE(c.handshaken());
  const auto start = Clock::now();
  const std::string request = Get("/echo");
  bool closed = false;
  // One byte every 100 ms would take 2.4 s for the whole header.
  for (char ch : request) {
    if (!c.Send(std::string(1, ch))) {
      closed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST((closed || c.ClosedByServerWithin(std::chrono::seconds(30))));
  BOOST_TEST((Clock::now() - start < std::chrono::seconds(30)));
}

BOOST_AUTO_TEST_CASE(AConnectionThatSendsNothingAfterItsHandshakeIsClosed) {
  Conn c(server->port());
  BOOST_REQUIRE(c.handshaken());
  BOOST_TEST(c.ClosedByServerWithin(std::chrono::seconds(30)));
}

BOOST_AUTO_TEST_CASE(AKeepAliveConnectionMayIdleLongerThanTheHeaderBound) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/echo")));
  BOOST_REQUIRE(c.Read().status == 200);
  // Idle past the header bound (but within the idle timeout): still open, and
  // the next request is served.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  BOOST_REQUIRE(c.Send(Get("/echo?later=1")));
  HttpResponse r = c.Read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(Lines(r.body)[2] == "later=1");
}

BOOST_AUTO_TEST_SUITE_END()

// A body that never completes was closed at the body deadline with no answer.
// kube-apiserver 1.32.6 holds such a request unanswered (620 s measured) and, once
// the body is in, answers it with its timeout filter's 504: we send that answer
// at the deadline and close.
struct ShortBodyBound : Fixture {
  ShortBodyBound()
      : Fixture(2, std::chrono::seconds(120), std::chrono::seconds(32), 0,
                std::chrono::milliseconds(400)) {}
};

BOOST_FIXTURE_TEST_SUITE(BodyBound, ShortBodyBound)

BOOST_AUTO_TEST_CASE(ABodyThatNeverCompletesIsAnswered504AndClosed) {
  Conn c(server->port());
  BOOST_REQUIRE(c.handshaken());
  const auto start = Clock::now();
  BOOST_REQUIRE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"kind\":"));
  HttpResponse r = c.Read();
  BOOST_TEST(r.status == 504);
  BOOST_TEST(r.Header("content-type") == "text/plain; charset=utf-8");
  BOOST_TEST(r.Header("connection") == "close");
  BOOST_TEST(r.body ==
             R"({"metadata":{},"status":"Failure","message":"Timeout: request did not complete within )"
             R"(the allotted timeout","reason":"Timeout","details":{},"code":504})");
  BOOST_TEST((Clock::now() - start >= std::chrono::milliseconds(300)));
  BOOST_TEST(c.ClosedWithoutData());
}

BOOST_AUTO_TEST_CASE(ABodyInTimeIsServed) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  BOOST_REQUIRE(c.Send("cd"));
  HttpResponse r = c.Read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(Lines(r.body)[5] == "abcd");
}

BOOST_AUTO_TEST_SUITE_END()

struct ShortIdle : Fixture {
  ShortIdle() : Fixture(2, std::chrono::milliseconds(300)) {}
};

BOOST_FIXTURE_TEST_SUITE(Idle, ShortIdle)

BOOST_AUTO_TEST_CASE(IdleConnectionClosedWithoutA408) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/echo")));
  BOOST_TEST(c.Read().status == 200);
  const auto idle_from = Clock::now();
  BOOST_TEST(c.ClosedWithoutData());
  // Closed for being idle (300 ms from the server's last write), not at once.
  BOOST_TEST((Clock::now() - idle_from >= std::chrono::milliseconds(200)));
}

BOOST_AUTO_TEST_CASE(StreamOutlivesTheIdleTimeout) {
  Conn c(server->port());
  BOOST_REQUIRE(c.Send(Get("/forever")));
  BOOST_REQUIRE(c.ReadHead().status == 200);
  auto start = Clock::now();
  std::string chunk;
  int chunks = 0;
  while (Clock::now() - start < std::chrono::milliseconds(900)) {
    BOOST_REQUIRE(c.ReadChunk(&chunk));
    BOOST_REQUIRE(chunk == "tick\n");
    ++chunks;
  }
  BOOST_TEST(chunks > 10);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
