// Each member's latest verified heartbeat, and the freshness rule
// (docs/agent.md "Freshness").
//
// A member's latest verified heartbeat is *fresh* while
//     now − its arrival < heartbeat interval + margin
// on the receiver's monotonic clock: arrival is stamped when the heartbeat
// passed verification, so neither the sender's clock nor the receiver's wall
// clock takes part. One lost heartbeat makes the evidence stale until the next
// one arrives: stale evidence is never used (a dead node must not be kept
// alive), and the DelegatedLease written from the last fresh one runs out on
// its own.
//
// Only a sender's newest heartbeat (HeartbeatVerifier::Result::newest) is
// recorded; a late, older one changes nothing.
//
// The challenge: the challenge a member puts in its own heartbeat is
// the one in the most recently arrived verified heartbeat flagged `leader`
// (the leader relays the server's current challenge in its heartbeats). The
// table also keeps who relayed it (node and boot id) and since when (the
// arrival of the first heartbeat carrying it), so a member can tell a new
// leader's challenge, or one that replaces a challenge held too long, from the
// routine replacement (AgentCore heartbeats at once for those).
//
// Thread-safety: none; the owner serializes access.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/heartbeat_verifier.h"
#include "agent/pool_view.h"

namespace poolcoord::agent {

struct FreshnessOptions {
  int64_t heartbeat_interval_us = 5'000'000;
  // Covers the sender's timer slop and the LAN's delay, not a lost heartbeat.
  int64_t margin_us = 2'000'000;

  int64_t bound_us() const { return heartbeat_interval_us + margin_us; }
};

class PeerTable {
 public:
  explicit PeerTable(FreshnessOptions options = {}) : options_(options) {}

  // Records an accepted heartbeat when it is the sender's newest.
  void Record(std::shared_ptr<const VerifiedHeartbeat> heartbeat, bool newest);
  // Forgets members that left the pool.
  void Retain(const PoolView& pool);

  // The member's latest verified heartbeat, or null.
  std::shared_ptr<const VerifiedHeartbeat> Latest(const std::string& node) const;
  // The freshness rule at monotonic time `now_mono_us`.
  bool Fresh(const VerifiedHeartbeat& heartbeat, int64_t now_mono_us) const {
    return now_mono_us - heartbeat.arrival_mono_us < options_.bound_us();
  }
  bool IsFresh(const std::string& node, int64_t now_mono_us) const;
  // Members whose latest heartbeat is fresh ("peers heard").
  size_t CountFresh(int64_t now_mono_us) const;
  // Every member's latest heartbeat, by node name.
  const std::map<std::string, std::shared_ptr<const VerifiedHeartbeat>>& all() const {
    return latest_;
  }

  // The challenge of the most recent leader-flagged heartbeat ("" if none).
  const std::string& LeaderChallenge() const { return leader_challenge_; }
  // Who relayed it: "<node>/<boot id hex>" of that heartbeat ("" if none).
  const std::string& LeaderChallengeSource() const { return leader_challenge_source_; }
  // Monotonic µs of the first arrival of a leader heartbeat carrying it
  // (INT64_MIN if none).
  int64_t LeaderChallengeSince() const { return leader_challenge_since_us_; }
  const FreshnessOptions& options() const { return options_; }

 private:
  FreshnessOptions options_;
  std::map<std::string, std::shared_ptr<const VerifiedHeartbeat>> latest_;
  std::string leader_challenge_;
  std::string leader_challenge_source_;
  int64_t leader_challenge_arrival_us_ = INT64_MIN;
  int64_t leader_challenge_since_us_ = INT64_MIN;
};

inline void PeerTable::Record(std::shared_ptr<const VerifiedHeartbeat> heartbeat, bool newest) {
  if (!newest || heartbeat == nullptr) return;
  const Heartbeat& hb = heartbeat->heartbeat();
  if (hb.leader && heartbeat->arrival_mono_us >= leader_challenge_arrival_us_) {
    std::string source = hb.node + "/" + BootIdHex(hb.boot_id);
    if (hb.challenge != leader_challenge_ || source != leader_challenge_source_) {
      leader_challenge_ = hb.challenge;
      leader_challenge_source_ = std::move(source);
      leader_challenge_since_us_ = heartbeat->arrival_mono_us;
    }
    leader_challenge_arrival_us_ = heartbeat->arrival_mono_us;
  }
  latest_[hb.node] = std::move(heartbeat);
}

inline void PeerTable::Retain(const PoolView& pool) {
  for (auto it = latest_.begin(); it != latest_.end();) {
    it = pool.IsMember(it->first) && it->first != pool.self ? std::next(it) : latest_.erase(it);
  }
}

inline std::shared_ptr<const VerifiedHeartbeat> PeerTable::Latest(const std::string& node) const {
  auto it = latest_.find(node);
  return it == latest_.end() ? nullptr : it->second;
}

inline bool PeerTable::IsFresh(const std::string& node, int64_t now_mono_us) const {
  auto it = latest_.find(node);
  return it != latest_.end() && Fresh(*it->second, now_mono_us);
}

inline size_t PeerTable::CountFresh(int64_t now_mono_us) const {
  size_t n = 0;
  for (const auto& [node, hb] : latest_) n += Fresh(*hb, now_mono_us) ? 1 : 0;
  return n;
}

}  // namespace poolcoord::agent
