// poolcoord-agent's plain-HTTP status endpoints (/healthz, /readyz, /livez,
// /metrics) for the kubelet's probes and Prometheus: GET only, one request per
// connection (Connection: close), served by one thread. A client gets 2 s to
// send its request head (at most 8 KiB) before it is dropped, so a stuck
// client cannot hold the probes.
//
// Thread-safety: Start/Stop from one thread; handlers run on the server's thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace poolcoord::agent {

struct StatusResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

class StatusServer {
 public:
  using Handler = std::function<StatusResponse()>;

  // Binds `address`:`port` (0: an ephemeral port). Unavailable when it cannot.
  static absl::StatusOr<std::unique_ptr<StatusServer>> Open(const std::string& address, int port,
                                                            std::map<std::string, Handler> routes);
  ~StatusServer();
  void Start();
  void Stop();
  int port() const { return port_; }

 private:
  StatusServer(int fd, int port, std::map<std::string, Handler> routes);
  void Serve();
  void Answer(int client);

  const int fd_;
  const int port_;
  const std::map<std::string, Handler> routes_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace poolcoord::agent
