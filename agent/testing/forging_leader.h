// A pool leader that forges liveness (the attack verifiable delegation stops),
// for tests only: the test build poolcoord-agent-forging (agent/main.cc
// compiled with POOLCOORD_FORGE_LIVENESS) and poolcoord-sim's lying-leader
// fault. Never part of the shipped agent: this folder is outside the agent
// library's sources.
//
// Besides the honest planner's writes, every `period` it writes the
// DelegatedLease of each pool member it has not heard from within the freshness
// bound — a dead member, or one cut off from the pool too — the way a compromised or buggy
// leader would keep it "alive":
// - a member heard before: its latest heartbeat is replayed as the proof (its
//   challenge goes stale, its sequence was accepted already);
// - a member never heard: a heartbeat is fabricated in its name ("cut off",
//   with the pool's current challenge), signed with the leader's own key and
//   sent with the leader's own certificate.
// With --delegation-proof=off the server takes every such write (false
// liveness); with required it refuses each one (403 on spec.proof).
//
// Thread-safety: none; called from the agent's cloud side only.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "agent/agent_core.h"

namespace poolcoord::agent {

struct ForgingStats {
  std::atomic<int64_t> attempts{0};  // forged creates/updates sent
  std::atomic<int64_t> accepted{0};  // ... the server took (false liveness written)
  std::atomic<int64_t> refused_proof{0};  // ... refused with a 403 on spec.proof
  std::atomic<int64_t> refused_other{0};  // ... any other error
};

class ForgingLeader : public DelegationForger {
 public:
  // `ca`: the cluster CA (to hold the leader's own certificate as the proof's).
  explicit ForgingLeader(std::shared_ptr<const CertificateAuthority> ca,
                         int64_t period_us = 5'000'000)
      : ca_(std::move(ca)), period_us_(period_us) {}

  void Step(AgentCloud* cloud, const LeaderView& view) override;

  const ForgingStats& stats() const { return stats_; }

 private:
  struct Target {
    std::string resource_version;  // "" unknown
    int64_t next_us = 0;
    int64_t last_renew_us = 0;
  };
  void ForgeOne(AgentCloud* cloud, const LeaderView& view, const std::string& node, Target& t);

  const std::shared_ptr<const CertificateAuthority> ca_;
  const int64_t period_us_;
  std::map<std::string, Target> targets_;
  ForgingStats stats_;
};

}  // namespace poolcoord::agent
