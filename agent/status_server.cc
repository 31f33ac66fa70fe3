#include "agent/status_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace poolcoord::agent {
namespace {

constexpr size_t kMaxHead = 8192;
constexpr int kHeadTimeoutMs = 2000;

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 400: return "Bad Request";
    case 500: return "Internal Server Error";
    default: return "Service Unavailable";
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    off += static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<StatusServer>> StatusServer::Open(const std::string& address, int port,
                                                                 std::map<std::string, Handler> routes) {
  sockaddr_in6 a6{};
  sockaddr_in a4{};
  sockaddr* sa;
  socklen_t len;
  int family;
  if (inet_pton(AF_INET, address.c_str(), &a4.sin_addr) == 1) {
    a4.sin_family = AF_INET;
    a4.sin_port = htons(static_cast<uint16_t>(port));
    sa = reinterpret_cast<sockaddr*>(&a4);
    len = sizeof(a4);
    family = AF_INET;
  } else if (inet_pton(AF_INET6, address.c_str(), &a6.sin6_addr) == 1) {
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons(static_cast<uint16_t>(port));
    sa = reinterpret_cast<sockaddr*>(&a6);
    len = sizeof(a6);
    family = AF_INET6;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("\"", address, "\" is not an IP address"));
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, sa, len) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("listening on ", address, ":", port, ": ", std::strerror(e)));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const int bound_port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                                 : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return std::unique_ptr<StatusServer>(new StatusServer(fd, bound_port, std::move(routes)));
}

StatusServer::StatusServer(int fd, int port, std::map<std::string, Handler> routes)
    : fd_(fd), port_(port), routes_(std::move(routes)) {}

StatusServer::~StatusServer() {
  Stop();
  ::close(fd_);
}

void StatusServer::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Serve(); });
}

void StatusServer::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void StatusServer::Serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    Answer(client);
    ::close(client);
  }
}

void StatusServer::Answer(int client) {
  std::string head;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHeadTimeoutMs);
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < kMaxHead) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return;
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return;
    const ssize_t n = ::recv(client, buf, sizeof(buf), 0);
    if (n <= 0) return;
    head.append(buf, static_cast<size_t>(n));
  }
  StatusResponse r;
  const size_t line_end = head.find("\r\n");
  const std::string line = head.substr(0, line_end);
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (line_end == std::string::npos || sp1 == std::string::npos || sp2 == sp1) {
    r = {400, "bad request\n"};
  } else {
    const std::string method = line.substr(0, sp1);
    std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    auto it = routes_.find(path);
    if (it == routes_.end()) {
      r = {404, "not found\n"};
    } else if (method != "GET" && method != "HEAD") {
      r = {405, "only GET\n"};
    } else {
      r = it->second();
      if (method == "HEAD") r.body.clear();
    }
  }
  WriteAll(client, absl::StrCat("HTTP/1.1 ", r.status, " ", Reason(r.status),
                                "\r\nContent-Type: ", r.content_type,
                                "\r\nContent-Length: ", r.body.size(),
                                "\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
                                r.body));
}

}  // namespace poolcoord::agent
