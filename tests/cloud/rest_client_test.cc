#define BOOST_TEST_MODULE rest_client
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "cloud/errors.h"
#include "cloud/rest_client.h"

namespace poolcoord::cloud {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A throw-away directory with a self-signed serving certificate for 127.0.0.1
// (made with the openssl CLI) and a second, unrelated one.
struct Pki {
  Pki() {
    dir = fs::temp_directory_path() / ("kube-client-test-" + std::to_string(getpid()));
    fs::create_directories(dir);
    Make("server");
    Make("other");
  }
  ~Pki() { fs::remove_all(dir); }
  void Make(const std::string& name) {
    const std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
        (dir / (name + ".key")).string() + " -out " + (dir / (name + ".crt")).string() +
        " >/dev/null 2>&1";
    BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0);
  }
  std::string Path(const std::string& f) const { return (dir / f).string(); }
  fs::path dir;
};

// A minimal HTTPS/1.1 server on 127.0.0.1:<free port> that echoes each request
// as "METHOD PATH|authorization|content-type|body". Paths: /code/<n> answers
// with status n and a metav1.Status body; /watch streams three lines and ends;
// /hang never answers.
class EchoServer {
 public:
  explicit EchoServer(const Pki& pki) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    BOOST_TEST_REQUIRE(SSL_CTX_use_certificate_file(ctx_, pki.Path("server.crt").c_str(),
                                                    SSL_FILETYPE_PEM) == 1);
    BOOST_TEST_REQUIRE(SSL_CTX_use_PrivateKey_file(ctx_, pki.Path("server.key").c_str(),
                                                   SSL_FILETYPE_PEM) == 1);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_TEST_REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~EchoServer() {
    stopping_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    acceptor_.join();
    for (auto& t : conns_) t.join();
    SSL_CTX_free(ctx_);
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections_;
      conns_.emplace_back([this, c] { Serve(c); });
    }
  }
  void Serve(int c) {
    timeval tv{5, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    SSL* ssl = SSL_new(ctx_);
    SSL_set_fd(ssl, c);
    if (SSL_accept(ssl) == 1) {
      std::string buf;
      char tmp[4096];
      while (!stopping_) {
        size_t end;
        while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
          int n = SSL_read(ssl, tmp, sizeof tmp);
          if (n <= 0) goto done;
          buf.append(tmp, n);
        }
        std::string head = buf.substr(0, end);
        buf.erase(0, end + 4);
        auto header = [&](const std::string& name) -> std::string {
          std::string lower = head;
          for (auto& ch : lower) ch = static_cast<char>(std::tolower(ch));
          size_t p = lower.find("\r\n" + name + ":");
          if (p == std::string::npos) return "";
          size_t s = p + name.size() + 3;
          while (s < head.size() && head[s] == ' ') ++s;
          return head.substr(s, head.find("\r\n", s) - s);
        };
        size_t clen = std::strtoul(header("content-length").c_str(), nullptr, 10);
        while (buf.size() < clen) {
          int n = SSL_read(ssl, tmp, sizeof tmp);
          if (n <= 0) goto done;
          buf.append(tmp, n);
        }
        std::string body = buf.substr(0, clen);
        buf.erase(0, clen);
        std::string line = head.substr(0, head.find("\r\n"));
        std::string method = line.substr(0, line.find(' '));
        std::string path = line.substr(method.size() + 1, line.rfind(' ') - method.size() - 1);
        if (path == "/hang") {
          std::this_thread::sleep_for(std::chrono::seconds(2));
          goto done;
        }
        std::string out;
        if (path == "/fail-once" && fail_once_.exchange(false)) {
          out = "HTTP/1.1 503 X\r\nContent-Length: 0\r\n\r\n";
          SSL_write(ssl, out.data(), static_cast<int>(out.size()));
          continue;
        }
        if (path == "/watch") {
          std::string chunks;
          for (const char* l : {"{\"type\":\"ADDED\"}\n", "{\"type\":\"MODIFIED\"}\n{\"type\":",
                                "\"DELETED\"}\n"}) {
            char size[32];
            snprintf(size, sizeof size, "%zx\r\n", strlen(l));
            chunks += std::string(size) + l + "\r\n";
          }
          out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n";
        } else {
          int code = 200;
          std::string payload = method + " " + path + "|" + header("authorization") + "|" +
                                header("content-type") + "|" + body;
          if (path.rfind("/code/", 0) == 0) {
            code = std::atoi(path.c_str() + 6);
            payload = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                      "\"message\":\"told to fail\",\"reason\":\"" +
                      std::string(code == 409 ? "Conflict" : "Whatever") + "\",\"code\":" +
                      std::to_string(code) + "}";
          }
          out = "HTTP/1.1 " + std::to_string(code) + " X\r\nContent-Length: " +
                std::to_string(payload.size()) + "\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n" +
                payload;
        }
        SSL_write(ssl, out.data(), static_cast<int>(out.size()));
      }
    }
  done:
    SSL_free(ssl);
    close(c);
  }

  SSL_CTX* ctx_;
  int fd_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;

 public:
  std::atomic<bool> fail_once_{true};

 private:
  std::vector<std::thread> conns_;
};

struct Fixture {
  Pki pki;
  EchoServer server{pki};
  std::unique_ptr<RestClient> Client(RestConfig cfg) {
    cfg.server = server.url();
    auto c = RestClient::New(cfg);
    BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
    return *std::move(c);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(requests)

BOOST_FIXTURE_TEST_CASE(verbs_body_token_and_keepalive, Fixture) {
  RestConfig cfg;
  cfg.tls.ca_file = pki.Path("server.crt");
  cfg.bearer_token = "secret";
  auto client = Client(cfg);
  auto r = client->Get("/apis/x?watch=false");
  BOOST_TEST_REQUIRE(r.ok(), r.status().ToString());
  BOOST_TEST(*r == "GET /apis/x?watch=false|Bearer secret||");
  r = client->Put("/p", "{\"a\":1}");
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(*r == "PUT /p|Bearer secret|application/json|{\"a\":1}");
  r = client->Post("/p", "{}", {.bearer_token = "per-request"});
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(*r == "POST /p|Bearer per-request|application/json|{}");
  r = client->Patch("/p", kMergePatch, "{\"b\":2}");
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(*r == "PATCH /p|Bearer secret|application/merge-patch+json|{\"b\":2}");
  r = client->Delete("/p");
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->rfind("DELETE /p|", 0) == 0);
  BOOST_TEST(server.connections() == 1, "sequential requests reuse one connection");
}

BOOST_FIXTURE_TEST_CASE(ca_data_and_error_statuses, Fixture) {
  RestConfig cfg;
  cfg.tls.ca_data = ReadAll(pki.Path("server.crt"));
  auto client = Client(cfg);
  absl::Status s = client->Get("/code/409").status();
  BOOST_TEST(cloud::IsConflict(s), s.ToString());
  BOOST_TEST(absl::IsAborted(s));
  BOOST_TEST(std::string(s.message()).find("told to fail") != std::string::npos);
  // Unknown reasons ("Whatever") fall back to the code, as apimachinery's do.
  BOOST_TEST(cloud::IsNotFound(client->Get("/code/404").status()));
  BOOST_TEST(cloud::IsForbidden(client->Get("/code/403").status()));
  BOOST_TEST(cloud::IsInvalid(client->Get("/code/422").status()));
  BOOST_TEST(absl::IsInvalidArgument(client->Get("/code/422").status()));
  BOOST_TEST(cloud::IsServiceUnavailable(client->Get("/code/503").status()));
  BOOST_TEST(cloud::IsResourceExpired(client->Get("/code/410").status()));
  BOOST_TEST(StatusFromResponse(201, "").ok());
  absl::Status exists =
      StatusFromResponse(409, "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"message\":\"m\"}");
  BOOST_TEST(cloud::IsAlreadyExists(exists));
  BOOST_TEST(!cloud::IsConflict(exists));
  BOOST_TEST(absl::IsAlreadyExists(exists));
}

BOOST_FIXTURE_TEST_CASE(idempotent_requests_are_retried, Fixture) {
  RestConfig cfg;
  cfg.tls.ca_file = pki.Path("server.crt");
  auto client = Client(cfg);
  server.fail_once_ = true;
  BOOST_TEST(client->Post("/fail-once", "{}").status().ToString().find("503") != std::string::npos,
             "a POST is never retried");
  server.fail_once_ = true;
  auto r = client->Get("/fail-once");
  BOOST_TEST(r.ok(), r.status().ToString());
  cfg.retry.max_attempts = 1;
  server.fail_once_ = true;
  BOOST_TEST(cloud::IsServiceUnavailable(Client(cfg)->Get("/fail-once").status()));
}

BOOST_FIXTURE_TEST_CASE(untrusted_server_is_transport_error, Fixture) {
  RestConfig cfg;
  cfg.tls.ca_file = pki.Path("other.crt");
  auto r = Client(cfg)->Get("/");
  BOOST_TEST(absl::IsUnavailable(r.status()), r.status().ToString());
  cfg.tls.insecure_skip_verify = true;
  BOOST_TEST(Client(cfg)->Get("/").ok());
}

BOOST_FIXTURE_TEST_CASE(timeout_is_deadline_exceeded, Fixture) {
  RestConfig cfg;
  cfg.tls.ca_file = pki.Path("server.crt");
  cfg.timeout = std::chrono::milliseconds(300);
  auto client = Client(cfg);
  const auto start = std::chrono::steady_clock::now();
  auto r = client->Get("/hang");
  BOOST_TEST(absl::IsDeadlineExceeded(r.status()), r.status().ToString());
  BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500)));
}

BOOST_FIXTURE_TEST_CASE(watch_delivers_lines_across_chunks, Fixture) {
  RestConfig cfg;
  cfg.tls.ca_file = pki.Path("server.crt");
  auto client = Client(cfg);
  std::vector<std::string> lines;
  absl::Status s = client->Watch("/watch", [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  }, nullptr);
  BOOST_TEST(s.ok(), s.ToString());
  BOOST_TEST(lines == (std::vector<std::string>{"{\"type\":\"ADDED\"}", "{\"type\":\"MODIFIED\"}",
                                                "{\"type\":\"DELETED\"}"}));
  lines.clear();
  s = client->Watch("/watch", [&](std::string_view l) {
    lines.emplace_back(l);
    return false;  // stop after the first event
  }, nullptr);
  BOOST_TEST(s.ok());
  BOOST_TEST(lines.size() == 1u);
  s = client->Watch("/code/410", [&](std::string_view) { return true; }, nullptr);
  BOOST_TEST(cloud::IsResourceExpired(s), s.ToString());
}

// The Date header reaches the caller, and the observer sees every answer, errors
// included (kubectl pool reads the server's clock there).
BOOST_FIXTURE_TEST_CASE(date_header_and_response_observer, Fixture) {
  RestConfig cfg;
  cfg.tls.ca_file = pki.Path("server.crt");
  std::vector<std::pair<int, std::string>> seen;
  cfg.response_observer = [&](const base::HttpResponse& r) { seen.emplace_back(r.status, r.date); };
  auto client = Client(cfg);
  auto r = client->Send("GET", "/x", "");
  BOOST_TEST_REQUIRE(r.ok(), r.status().ToString());
  BOOST_TEST(r->date == "Sun, 06 Nov 1994 08:49:37 GMT");
  BOOST_TEST(client->Get("/y").ok());
  BOOST_TEST(cloud::IsForbidden(client->Get("/code/403").status()));
  BOOST_TEST(seen == (std::vector<std::pair<int, std::string>>{
                         {200, "Sun, 06 Nov 1994 08:49:37 GMT"},
                         {200, "Sun, 06 Nov 1994 08:49:37 GMT"},
                         {403, "Sun, 06 Nov 1994 08:49:37 GMT"}}));
}

BOOST_AUTO_TEST_CASE(nothing_listening_is_unavailable) {
  RestConfig cfg;
  cfg.server = "https://127.0.0.1:1";
  auto client = RestClient::New(cfg);
  BOOST_TEST_REQUIRE(client.ok());
  BOOST_TEST(absl::IsUnavailable((*client)->Get("/").status()));
  cfg.server = "127.0.0.1:1";
  BOOST_TEST(absl::IsInvalidArgument(RestClient::New(cfg).status()));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(kubeconfig)

BOOST_FIXTURE_TEST_CASE(current_context_files_and_data, Fixture) {
  const std::string crt = ReadAll(pki.Path("server.crt"));
  const std::string path = pki.Path("kubeconfig");
  WriteFile(path, "apiVersion: v1\nkind: Config\ncurrent-context: b\n"
                  "clusters:\n"
                  "- name: ca\n  cluster:\n    server: " + server.url() + "\n"
                  "    certificate-authority: server.crt\n"
                  "- name: cb\n  cluster:\n    server: " + server.url() + "\n"
                  "    certificate-authority-data: " + absl::Base64Escape(crt) + "\n"
                  "users:\n"
                  "- name: ua\n  user:\n    client-certificate: /abs/c.crt\n    client-key: k.key\n"
                  "- name: ub\n  user:\n    token: tok-b\n"
                  "contexts:\n"
                  "- name: a\n  context: {cluster: ca, user: ua}\n"
                  "- name: b\n  context: {cluster: cb, user: ub}\n");
  auto b = LoadKubeconfig(path);
  BOOST_TEST_REQUIRE(b.ok(), b.status().ToString());
  BOOST_TEST(b->server == server.url());
  BOOST_TEST(b->tls.ca_data == crt);
  BOOST_TEST(b->bearer_token == "tok-b");
  auto client = RestClient::New(*b);
  BOOST_TEST_REQUIRE(client.ok());
  auto r = (*client)->Get("/x");
  BOOST_TEST_REQUIRE(r.ok(), r.status().ToString());
  BOOST_TEST(*r == "GET /x|Bearer tok-b||");

  auto a = LoadKubeconfig(path, "a");
  BOOST_TEST_REQUIRE(a.ok());
  BOOST_TEST(a->tls.ca_file == pki.Path("server.crt"), "relative paths resolve against the file");
  BOOST_TEST(a->tls.cert_file == "/abs/c.crt");
  BOOST_TEST(a->tls.key_file == pki.Path("k.key"));
  BOOST_TEST(a->bearer_token.empty());

  BOOST_TEST(absl::IsInvalidArgument(LoadKubeconfig(path, "nope").status()));
  BOOST_TEST(absl::IsNotFound(LoadKubeconfig(pki.Path("missing")).status()));
  WriteFile(pki.Path("broken"), "clusters: [unclosed\n");
  BOOST_TEST(absl::IsInvalidArgument(LoadKubeconfig(pki.Path("broken")).status()));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::cloud
