// The LAN side's thread: one UDP socket read in batches, the core's heartbeat
// rounds when due. poolcoord-agent runs it; the benchmark runs it too, so the
// figures are the agent's own.
//
// Thread-safety: runs on the calling thread until *stop turns true.
#pragma once

#include <atomic>

#include "agent/agent_core.h"
#include "agent/udp_transport.h"
#include "base/clock.h"

namespace poolcoord::agent {

// Wakes when the next round is due and at least every kLanWakeMicros (so
// flags the cloud side changed go out within that), and reads every datagram
// that arrived meanwhile in one batch: at 500 peers that is ~20 wake-ups a
// second instead of ~110, a third of the agent's CPU when it checks few
// signatures. Each datagram's arrival is the kernel's stamp, not the time it
// was read, so batching does not make evidence look younger.
inline constexpr int64_t kLanWakeMicros = 50'000;

// Returns when *stop is true (checked at least every kLanWakeMicros), or with
// the socket's error. `alive`, when given, gets the monotonic time of each
// iteration (a liveness probe's input).
absl::Status RunLanLoop(AgentCore* core, UdpTransport* udp, const base::Clock* clock,
                        const std::atomic<bool>* stop, std::atomic<int64_t>* alive = nullptr);

}  // namespace poolcoord::agent
