// The receiver's side of the LAN: every datagram a peer sends goes through
// HeartbeatVerifier::Receive, which accepts it or drops it with one reason;
// nothing a peer sends is trusted otherwise.
//
// A heartbeat is accepted only when, in this order (cheap checks first, so a
// flood of junk costs no signature checks):
//   1. it fits kMaxDatagramBytes and decodes (oversized / malformed /
//      unsupported_version);
//   2. its pool is ours and its node a member of our pool other than us
//      (foreign_pool / own_node);
//   3. its (boot id, sequence) is new (replay; replay_window.h);
//   4. the certificate it names by fingerprint is one we verified
//      (unknown_certificate: the caller asks the sender for it, and the
//      heartbeat waits, one per member, to be judged again when that
//      certificate arrives), names the same node (wrong_identity) and is within
//      its validity now (expired_certificate);
//   5. the signature verifies with that certificate's key (bad_signature).
// Only then is the sequence recorded. (A heartbeat counted as
// unknown_certificate may thus be accepted later, when its certificate comes.)
//
// Lazy signature checks (VerifierOptions::needed): a signature check costs
// 30-100 µs of CPU (RSA 2048 / ECDSA P-256), about all an agent spends on the
// LAN, and in a healthy pool nobody acts on a heartbeat that says "reachable".
// With `needed` set, a heartbeat that passed checks 1-4 has its signature
// checked when needed(heartbeat) says a decision may rest on it (the agent: it
// says "cut off", or "leader", or it comes from a member this leader
// delegated), or when the sender's last verified heartbeat is older than
// sample_period (so a forger or a broken key shows in bad_signature within that
// period). Otherwise it is only *heard* (Result kHeard): counted, never
// recorded, never evidence, never trusted.
//
// A certificate datagram is verified once (node_certificate.h: chain to the
// cluster CA at the current wall time, client certificate of a node, supported
// key) and cached by fingerprint; a certificate of a node outside our pool is
// foreign_pool. Each node keeps at most kCertificatesPerNode certificates
// (first out: the oldest that never verified a heartbeat, then the least
// recently used, so a rotation overlaps and certificates replayed at us do not
// push out the one in use), certificates of nodes that left the pool are
// forgotten, and refused fingerprints are remembered (kRefusedMemory) so a
// repeated bad certificate costs a hash, not a chain verification.
//
// Thread-safety: Receive/SetPool/Certificates from one thread at a time; the
// counters (stats()) may be read from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "agent/heartbeat.h"
#include "agent/node_certificate.h"
#include "agent/pool_view.h"
#include "agent/replay_window.h"
#include "agent/verification_memo.h"
#include "base/clock.h"

namespace poolcoord::agent {

enum class DropReason {
  kOversized,
  kMalformed,
  kUnsupportedVersion,
  kForeignPool,
  kOwnNode,
  kReplay,
  kUnknownCertificate,
  kMalformedCertificate,
  kUnknownAuthority,
  kExpiredCertificate,
  kWrongIdentity,
  kUnsupportedKey,
  kBadSignature,
  kCount,  // not a reason
};
inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kCount);
// The metric label: "bad_signature", "foreign_pool", ...
const char* DropReasonName(DropReason reason);

// A heartbeat that passed every check, with what a proof needs (the
// signed bytes, the signature and the certificate) and when it arrived.
struct VerifiedHeartbeat {
  SignedHeartbeat signed_heartbeat;
  std::shared_ptr<const NodeCertificate> certificate;
  int64_t arrival_mono_us = 0;  // the receiver's monotonic clock
  int64_t arrival_wall_us = 0;  // the receiver's wall clock (a DelegatedLease renewTime)

  const Heartbeat& heartbeat() const { return signed_heartbeat.heartbeat; }
};

struct VerifierStats {
  std::atomic<int64_t> heartbeats_accepted{0};
  std::atomic<int64_t> heartbeats_heard{0};       // lazy: signature not needed
  std::atomic<int64_t> certificates_accepted{0};  // newly cached
  std::atomic<int64_t> certificate_requests{0};   // received from members
  std::array<std::atomic<int64_t>, kDropReasonCount> dropped{};
};

struct VerifierOptions {
  // Off only for the benchmark's comparison: the chain is then verified again
  // for every heartbeat (the cost the cache saves).
  bool cache_verified_certificates = true;
  // Signatures checked where a decision rests on them (see "Lazy signature
  // checks" above). Null: every heartbeat that passes checks 1-4 is checked.
  std::function<bool(const Heartbeat&)> needed;
  int64_t sample_period_us = 30'000'000;
  // Shared check results (verification_memo.h; the simulator's many agents in
  // one process). Not owned; null: every check is made here.
  VerificationMemo* memo = nullptr;
};

class HeartbeatVerifier {
 public:
  static constexpr size_t kCertificatesPerNode = 3;
  static constexpr size_t kRefusedMemory = 256;

  // What Receive made of one datagram.
  struct Result {
    enum class Kind {
      kHeartbeat,           // accepted: `heartbeat` is set
      kHeard,               // passed checks 1-4; signature not needed now (`node`)
      // A member's certificate, accepted (or known already); `heartbeat` is set
      // when a heartbeat waiting for it passed every check with it.
      kCertificate,
      kCertificateRequest,  // a member asks for our certificate: `node`
      kDropped,             // `reason`, `detail`
    };
    Kind kind = Kind::kDropped;
    std::shared_ptr<const VerifiedHeartbeat> heartbeat;
    // kHeartbeat: true when it is the sender's newest (not an older one that
    // arrived late); only the newest is evidence.
    bool newest = false;
    DropReason reason = DropReason::kMalformed;
    std::string detail;
    // kCertificateRequest: the requester; kDropped with kUnknownCertificate: the
    // sender to ask for `fingerprint`.
    std::string node;
    Fingerprint fingerprint{};
  };

  // `ca` must not be null; `clock` not owned, must outlive the verifier.
  HeartbeatVerifier(std::shared_ptr<const CertificateAuthority> ca, const base::Clock* clock,
                    VerifierOptions options = {});

  // Replaces the pool (members joined or left). Certificates and replay state of
  // nodes no longer members are forgotten.
  void SetPool(std::shared_ptr<const PoolView> pool);
  // Judges one datagram (any bytes), received now. Counts it in stats().
  Result Receive(absl::string_view bytes);
  // The same, for a datagram that reached the socket at the given times (the
  // receive loop reads in batches; the kernel stamped its arrival).
  Result Receive(absl::string_view bytes, int64_t arrival_mono_us, int64_t arrival_wall_us);

  // The verified certificate cached for `fingerprint`, or null.
  std::shared_ptr<const NodeCertificate> Certificate(const Fingerprint& fingerprint) const;
  size_t cached_certificates() const { return by_fingerprint_.size(); }
  const VerifierStats& stats() const { return stats_; }

 private:
  struct CachedCertificate {
    std::shared_ptr<const NodeCertificate> certificate;  // verified (cache on)
    std::string der;  // cache off: verified again at each use
    std::string node;
    uint64_t added = 0;
    uint64_t last_used = 0;  // tick of the last heartbeat it verified; 0: none yet
  };
  Result Drop(DropReason reason, std::string detail);
  Result ReceiveHeartbeat(SignedHeartbeat hb, int64_t arrival_mono_us, int64_t arrival_wall_us,
                          bool may_wait);
  Result ReceiveCertificate(std::string der);
  void Remember(const Fingerprint& fingerprint, DropReason reason);
  void Forget(const std::string& node);

  std::shared_ptr<const CertificateAuthority> ca_;
  const base::Clock* clock_;
  const VerifierOptions options_;
  std::shared_ptr<const PoolView> pool_;
  std::map<Fingerprint, CachedCertificate> by_fingerprint_;
  std::map<std::string, std::vector<Fingerprint>> by_node_;
  std::map<Fingerprint, DropReason> refused_;
  std::deque<Fingerprint> refused_order_;
  int64_t refused_last_forget_us_ = 0;
  std::map<std::string, ReplayWindow> replay_;
  std::map<std::string, int64_t> last_verified_us_;  // node -> monotonic µs
  struct Waiting {
    SignedHeartbeat heartbeat;
    int64_t arrival_mono_us = 0, arrival_wall_us = 0;
  };
  std::map<std::string, Waiting> waiting_;  // by node: a heartbeat whose certificate was asked for
  uint64_t tick_ = 0;
  VerifierStats stats_;
};

}  // namespace poolcoord::agent
