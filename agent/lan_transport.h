// The pool LAN as the agent core sees it: datagrams out to a member's address.
// Datagrams in are handed to AgentCore::OnDatagram by whoever reads them (the
// UDP socket loop of poolcoord-agent, the simulator's modelled LAN).
//
// Thread-safety: implementations state their own; AgentCore calls Send from its
// LAN side only.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace poolcoord::agent {

class LanTransport {
 public:
  virtual ~LanTransport() = default;
  // Sends one datagram to `address` (a PoolView member address). Best effort,
  // as UDP is: an error is counted by the caller and never retried (the next
  // round sends again). InvalidArgument for an address it cannot parse.
  virtual absl::Status Send(const std::string& address, absl::string_view datagram) = 0;
};

}  // namespace poolcoord::agent
