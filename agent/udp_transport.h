// The pool LAN over one UDP socket (poolcoord-agent's transport): no per-peer
// sockets or threads; the LAN thread sends from it and reads it in batches.
//
// Addresses (PoolView member values) are an IP literal ("10.0.0.7", "fd00::7"),
// sent to at the agent's --heartbeat-port, or an IP literal with its own port
// ("127.0.0.1:7401", "[::1]:7401": several agents on one host, in tests).
//
// Thread-safety: Send from any thread; Receive from one thread at a time.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/lan_transport.h"

namespace poolcoord::agent {

class UdpTransport : public LanTransport {
 public:
  // Binds `bind_address` (an IP literal; "0.0.0.0" or "::" for every address)
  // at `port` (0: any free port). Errors: InvalidArgument for a bad address,
  // Unavailable when the socket cannot be made or bound (the errno's text).
  static absl::StatusOr<std::unique_ptr<UdpTransport>> Open(const std::string& bind_address,
                                                            uint16_t port, uint16_t peer_port);
  ~UdpTransport() override;
  UdpTransport(const UdpTransport&) = delete;
  UdpTransport& operator=(const UdpTransport&) = delete;

  absl::Status Send(const std::string& address, absl::string_view datagram) override;

  // Waits up to `timeout_ms` (0: not at all) for datagrams and hands each one
  // to `on_datagram` with the wall-clock time (µs) the kernel stamped on its
  // arrival (SO_TIMESTAMPNS; 0 when missing), up to a batch; returns how many.
  // A datagram longer than the largest the agent accepts is handed over cut to
  // one byte more than that, so the decoder counts it as oversized.
  // Interrupted waits return 0.
  absl::StatusOr<int> Receive(
      int timeout_ms, const std::function<void(absl::string_view, int64_t)>& on_datagram);

  uint16_t port() const { return port_; }

 private:
  UdpTransport(int fd, int family, uint16_t port, uint16_t peer_port);
  absl::StatusOr<sockaddr_storage> Resolve(const std::string& address, socklen_t* len);

  const int fd_;
  const int family_;
  const uint16_t port_;
  const uint16_t peer_port_;
  absl::Mutex mu_;
  std::map<std::string, std::pair<sockaddr_storage, socklen_t>> resolved_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::agent
