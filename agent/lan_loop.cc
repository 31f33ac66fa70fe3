#include "agent/lan_loop.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace poolcoord::agent {

absl::Status RunLanLoop(AgentCore* core, UdpTransport* udp, const base::Clock* clock,
                        const std::atomic<bool>* stop, std::atomic<int64_t>* alive) {
  // The kernel stamps arrival on the wall clock; the core judges freshness on
  // the monotonic one. The offset between them is taken once per batch, and a
  // stamp is never later than the read nor more than a second before it (a
  // wall-clock step between the two).
  auto on_datagram = [core, clock](absl::string_view bytes, int64_t stamp_wall_us) {
    const int64_t now_mono = clock->MonotonicMicros(), now_wall = clock->NowMicros();
    const int64_t age = stamp_wall_us > 0 ? std::clamp<int64_t>(now_wall - stamp_wall_us, 0, 1'000'000) : 0;
    core->OnDatagram(bytes, now_mono - age, now_wall - age);
  };
  int64_t next = core->LanStep();
  while (!stop->load(std::memory_order_relaxed)) {
    if (alive != nullptr) alive->store(clock->MonotonicMicros(), std::memory_order_relaxed);
    const int64_t wait_us = std::clamp<int64_t>(next - clock->MonotonicMicros(), 0, kLanWakeMicros);
    if (wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
    // Everything that queued up meanwhile, bounded so a flood cannot hold the
    // heartbeat rounds back (64 x 16 datagrams per wake-up).
    absl::StatusOr<int> n = 1;
    for (int batches = 0; *n > 0 && batches < 16; ++batches) {
      n = udp->Receive(0, on_datagram);
      if (!n.ok()) return n.status();
    }
    next = core->LanStep();
  }
  return absl::OkStatus();
}

}  // namespace poolcoord::agent
