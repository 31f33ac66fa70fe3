// Replay protection for one sender's heartbeats: a sequence number is accepted
// once per boot id.
//
// Per boot id, the highest sequence accepted and a 64-wide bitmap below it (the
// anti-replay window of IPsec, RFC 4303 §3.4.3): a number above the highest is
// new; one within the window is new when its bit is clear; one below the window
// is refused (a heartbeat that old is no evidence anyway). The last kMaxBoots
// boot ids are remembered, least recently accepted evicted first; a boot id
// not among them starts a fresh window. So a replay is refused for every boot
// the receiver has seen since it started; what it never saw (a boot older than
// its own start, or more than kMaxBoots restarts ago) can be replayed once per
// heartbeat. Replays never silence a live sender: nothing replayed can move its
// current boot's window, and its next heartbeat is new whatever came before.
// The server's challenge bounds the rest: a replayed heartbeat carries an old
// challenge, which the server refuses.
//
// Thread-safety: none; one owner.
#pragma once

#include <cstdint>
#include <vector>

#include "agent/heartbeat.h"

namespace poolcoord::agent {

class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 64;
  static constexpr size_t kMaxBoots = 8;

  // True when (boot, sequence) has not been accepted before and is not below
  // its boot's window. Changes nothing (call before the signature check, so a
  // forged datagram cannot move the window).
  bool IsNew(const BootId& boot, uint64_t sequence) const;
  // Records an accepted (boot, sequence); it must be IsNew. Returns true when it
  // is now the newest of its boot (above the previous highest, or the boot's
  // first), i.e. the sender's latest heartbeat.
  bool Accept(const BootId& boot, uint64_t sequence, uint64_t tick);

 private:
  struct Boot {
    BootId id{};
    uint64_t highest = 0;
    uint64_t bitmap = 0;  // bit i: highest - i was accepted
    uint64_t last_used = 0;
  };
  const Boot* Find(const BootId& boot) const;
  std::vector<Boot> boots_;
};

inline const ReplayWindow::Boot* ReplayWindow::Find(const BootId& boot) const {
  for (const Boot& b : boots_) {
    if (b.id == boot) return &b;
  }
  return nullptr;
}

inline bool ReplayWindow::IsNew(const BootId& boot, uint64_t sequence) const {
  const Boot* b = Find(boot);
  if (b == nullptr || sequence > b->highest) return true;
  const uint64_t back = b->highest - sequence;
  if (back >= kWindow) return false;
  return (b->bitmap & (uint64_t{1} << back)) == 0;
}

inline bool ReplayWindow::Accept(const BootId& boot, uint64_t sequence, uint64_t tick) {
  Boot* b = const_cast<Boot*>(Find(boot));
  if (b == nullptr) {
    if (boots_.size() >= kMaxBoots) {
      auto oldest = boots_.begin();
      for (auto it = boots_.begin(); it != boots_.end(); ++it) {
        if (it->last_used < oldest->last_used) oldest = it;
      }
      boots_.erase(oldest);
    }
    boots_.push_back(Boot{boot, sequence, 1, tick});
    return true;
  }
  b->last_used = tick;
  if (sequence > b->highest) {
    const uint64_t shift = sequence - b->highest;
    b->bitmap = shift >= kWindow ? 1 : (b->bitmap << shift) | 1;
    b->highest = sequence;
    return true;
  }
  b->bitmap |= uint64_t{1} << (b->highest - sequence);
  return false;
}

}  // namespace poolcoord::agent
