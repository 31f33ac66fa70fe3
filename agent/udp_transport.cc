#include "agent/udp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/heartbeat.h"

namespace poolcoord::agent {
namespace {

constexpr int kBatch = 64;
constexpr size_t kBufferBytes = kMaxCertificateDatagramBytes + 1;
constexpr int kReceiveBufferBytes = 1 << 20;

// An IP literal (with an optional port) as a socket address of `family`
// (IPv4 addresses become v4-mapped on an IPv6 socket).
bool Parse(const std::string& text, uint16_t default_port, int family, sockaddr_storage* out,
           socklen_t* len) {
  std::string host = text;
  uint16_t port = default_port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return false;
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      uint32_t p;
      if (text[close + 1] != ':' || !absl::SimpleAtoi(text.substr(close + 2), &p) || p == 0 ||
          p > 65535) {
        return false;
      }
      port = static_cast<uint16_t>(p);
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    const size_t colon = text.find(':');
    uint32_t p;
    if (!absl::SimpleAtoi(text.substr(colon + 1), &p) || p == 0 || p > 65535) return false;
    host = text.substr(0, colon);
    port = static_cast<uint16_t>(p);
  }
  std::memset(out, 0, sizeof(*out));
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    if (family == AF_INET) {
      auto* sa = reinterpret_cast<sockaddr_in*>(out);
      sa->sin_family = AF_INET;
      sa->sin_port = htons(port);
      sa->sin_addr = v4;
      *len = sizeof(sockaddr_in);
      return true;
    }
    auto* sa = reinterpret_cast<sockaddr_in6*>(out);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(port);
    sa->sin6_addr.s6_addr[10] = 0xff;
    sa->sin6_addr.s6_addr[11] = 0xff;
    std::memcpy(&sa->sin6_addr.s6_addr[12], &v4, 4);
    *len = sizeof(sockaddr_in6);
    return true;
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1 && family == AF_INET6) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(out);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(port);
    sa->sin6_addr = v6;
    *len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<UdpTransport>> UdpTransport::Open(const std::string& bind_address,
                                                                 uint16_t port, uint16_t peer_port) {
  in_addr v4;
  const int family = inet_pton(AF_INET, bind_address.c_str(), &v4) == 1 ? AF_INET : AF_INET6;
  sockaddr_storage addr;
  socklen_t len = 0;
  if (!Parse(bind_address, port, family, &addr, &len)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bind address \"", bind_address, "\" is not an IP address"));
  }
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  if (family == AF_INET6) {
    int off = 0;  // "::" takes IPv4 peers too
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  }
  int on = 1;  // the kernel's arrival stamp: the loop reads in batches
  ::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
  int rcvbuf = kReceiveBufferBytes;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("binding UDP ", bind_address, " port ", port, ": ",
                                               std::strerror(e)));
  }
  sockaddr_storage bound;
  socklen_t bound_len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const uint16_t bound_port =
      ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                              : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return std::unique_ptr<UdpTransport>(new UdpTransport(fd, family, bound_port, peer_port));
}

UdpTransport::UdpTransport(int fd, int family, uint16_t port, uint16_t peer_port)
    : fd_(fd), family_(family), port_(port), peer_port_(peer_port) {}

UdpTransport::~UdpTransport() { ::close(fd_); }

absl::StatusOr<sockaddr_storage> UdpTransport::Resolve(const std::string& address, socklen_t* len) {
  absl::MutexLock lock(&mu_);
  auto it = resolved_.find(address);
  if (it != resolved_.end()) {
    *len = it->second.second;
    return it->second.first;
  }
  sockaddr_storage addr;
  if (!Parse(address, peer_port_, family_, &addr, len)) {
    return absl::InvalidArgumentError(absl::StrCat("peer address \"", address,
                                                   "\" is not an IP address (with an optional port)"));
  }
  if (resolved_.size() > 4096) resolved_.clear();  // members come and go; keep it bounded
  resolved_.emplace(address, std::make_pair(addr, *len));
  return addr;
}

absl::Status UdpTransport::Send(const std::string& address, absl::string_view datagram) {
  socklen_t len = 0;
  auto addr = Resolve(address, &len);
  if (!addr.ok()) return addr.status();
  const ssize_t n = ::sendto(fd_, datagram.data(), datagram.size(), MSG_DONTWAIT,
                             reinterpret_cast<const sockaddr*>(&*addr), len);
  if (n < 0) return absl::UnavailableError(absl::StrCat("sendto ", address, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::StatusOr<int> UdpTransport::Receive(
    int timeout_ms, const std::function<void(absl::string_view, int64_t)>& on_datagram) {
  if (timeout_ms > 0) {
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0) {
      if (errno == EINTR) return 0;
      return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
    }
    if (r == 0) return 0;
  }
  // One buffer per batch slot, reused across calls of this thread.
  thread_local std::vector<char> buffers(kBatch * kBufferBytes);
  mmsghdr msgs[kBatch];
  iovec iovs[kBatch];
  constexpr size_t kControlBytes = CMSG_SPACE(sizeof(timespec));
  alignas(cmsghdr) char control[kBatch][kControlBytes];
  std::memset(msgs, 0, sizeof(msgs));
  for (int i = 0; i < kBatch; ++i) {
    iovs[i].iov_base = buffers.data() + i * kBufferBytes;
    iovs[i].iov_len = kBufferBytes;
    msgs[i].msg_hdr.msg_iov = &iovs[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_control = control[i];
    msgs[i].msg_hdr.msg_controllen = kControlBytes;
  }
  const int n = ::recvmmsg(fd_, msgs, kBatch, MSG_DONTWAIT, nullptr);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    // ICMP errors of earlier sends surface here (ECONNREFUSED): not ours to fail on.
    if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH) return 0;
    return absl::UnavailableError(absl::StrCat("recvmmsg: ", std::strerror(errno)));
  }
  for (int i = 0; i < n; ++i) {
    int64_t stamp_us = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c != nullptr;
         c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts;
        std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        stamp_us = static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
      }
    }
    on_datagram(absl::string_view(static_cast<const char*>(iovs[i].iov_base), msgs[i].msg_len),
                stamp_us);
  }
  return n;
}

}  // namespace poolcoord::agent
