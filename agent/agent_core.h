// The agent core: one node's in-pool heartbeats, its view of the cloud, its
// election and, as leader, its delegation decisions — the logic of
// poolcoord-agent, free of sockets, HTTP and real time, so the simulator drives
// the very same code (docs/agent.md).
//
// Two sides, each driven by one thread (or both by one):
// - the LAN side: OnDatagram() for every datagram received, LanStep() when due.
//   Each round (every heartbeat interval, and at once when the heartbeat's
//   flags change) signs one heartbeat and sends it to every member; the
//   certificate goes along with the first certificate_push_rounds rounds, after
//   SetIdentity(), and every certificate_repeat_rounds rounds. A heartbeat naming
//   an unknown certificate makes it ask the sender (at the sender's known
//   address, at most once per certificate_request_interval); a member's request
//   is answered the same way. The first round waits for the first cloud probe
//   (at most request_timeout), so a restarted agent's first heartbeat already
//   says the right thing: it rejoins within one interval.
//   Challenges (docs/verifiable-delegation.md "After a failover or
//   a restart"): a leader sends a round at once when the challenge it relays
//   changes (it took the PoolLease, or a renewal's answer brought a new one);
//   a member cut off from the cloud sends one at once when its leader's
//   challenge comes from a new leader, or replaces one it held for
//   proof_max_age - freshness bound or longer (a failover, a server that was
//   down): its next proof then reaches the leader within the LAN's delay
//   instead of up to one interval later. Either is deferred to
//   min_round_gap_us after the previous round, never dropped.
// - the cloud side: CloudStep() when due. It reads the node's own Lease every
//   probe period (cloud_reachability.h), campaigns for the PoolLease with the
//   client-go LeaderElector only while the cloud sees the node, cancels the
//   elector at once when that stops, and as leader executes the
//   DelegationPlanner's decisions (delegation_planner.h), within a time budget
//   per step so the elector's renewals are never starved. After the server
//   refuses a write with 403 it steps down and does not campaign again for
//   step_down_backoff, unless the 403 says the PoolLease is free for it to
//   take (TermLapsed, delegation_planner.h: gone, unheld, or expired with
//   nobody taking it): then it campaigns again at once, as nobody else
//   leads. It keeps the pool's recent challenges from every
//   PoolLease answer (read or written, leading or not) with its own monotonic
//   time of first sight, and as leader sends a member's heartbeat as a proof
//   only when its challenge is one the server would take (UsableChallenges);
//   otherwise the heartbeat is withheld and the member's next one is tried.
// Without an AgentCloud (nullptr), only the LAN side runs (benchmarks).
//
// Thread-safety: OnDatagram/LanStep from one thread; CloudStep/Shutdown from
// one thread (maybe the same); SetPool, SetIdentity, set_server_challenge and
// every accessor from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/agent_cloud.h"
#include "agent/cloud_reachability.h"
#include "agent/delegation_planner.h"
#include "agent/heartbeat_verifier.h"
#include "agent/lan_transport.h"
#include "agent/node_certificate.h"
#include "agent/peer_table.h"
#include "agent/pool_view.h"
#include "base/clock.h"
#include "election/leader_elector.h"

namespace poolcoord::agent {

// What a leader knows when it decides what to write, for a DelegationForger.
struct LeaderView {
  std::shared_ptr<const NodeIdentity> identity;  // the leader's own
  std::shared_ptr<const PoolView> pool;
  // Each member's latest verified heartbeat, fresh or not.
  std::map<std::string, std::shared_ptr<const VerifiedHeartbeat>> latest;
  // When each member was last heard at all (monotonic µs; a heartbeat whose
  // signature lazy verification skipped counts).
  std::map<std::string, int64_t> heard;
  std::string server_challenge;  // the pool's current challenge ("" none)
  int64_t now_mono_us = 0;
  int64_t now_wall_us = 0;
  int32_t lease_duration_seconds = 0;  // what the honest planner writes
  FreshnessOptions freshness;
};

// A lying leader, the attack verifiable delegation stops: for test builds and
// the simulator only (agent/testing/forging_leader.h; poolcoord-agent-forging,
// compiled with POOLCOORD_FORGE_LIVENESS, and poolcoord-sim's lying-leader
// fault). The shipped poolcoord-agent never sets one: no flag reaches it.
class DelegationForger {
 public:
  virtual ~DelegationForger() = default;
  // Called on the cloud side on every step while leading, after the honest
  // planner's writes; makes its own writes through `cloud`.
  virtual void Step(AgentCloud* cloud, const LeaderView& view) = 0;
};

struct AgentOptions {
  FreshnessOptions freshness;  // heartbeat interval and margin
  // probe_period_us 0: the heartbeat interval.
  ReachabilityOptions reachability{.probe_period_us = 0};
  int certificate_push_rounds = 3;
  int certificate_repeat_rounds = 12;  // once a minute at 5 s
  int64_t certificate_request_interval_us = 1'000'000;
  // The PoolLease election (client-go's defaults, as yurthub's).
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  uint64_t jitter_seed = 0;
  // lease_duration_seconds 0: the freshness bound rounded up, at most
  // proof_max_age_seconds.
  DelegationOptions delegation{.lease_duration_seconds = 0};
  // The server's --delegation-proof-max-age: a proven write's
  // leaseDurationSeconds may not exceed it (422 otherwise).
  int32_t proof_max_age_seconds = 15;
  int64_t delegation_budget_us = 500'000;
  // The earliest a round follows the previous one when it is sent early for
  // a challenge (see the file comment).
  int64_t min_round_gap_us = 1'000'000;
  int64_t step_down_backoff_us = 15'000'000;
  // All zero: random (one per AgentCore, i.e. per agent start).
  BootId boot_id{};
  // Check a heartbeat's signature only where a decision rests on it
  // (heartbeat_verifier.h "Lazy signature checks"): it says "cut off" or
  // "leader", or this leader delegated its sender; others once per
  // sample period. Off: every heartbeat.
  bool lazy_verification = true;
  int64_t verification_sample_period_us = 30'000'000;
  // Shared check results for many agents in one process (the simulator);
  // not owned; null for a real agent.
  VerificationMemo* verification_memo = nullptr;
  // Test builds and the simulator only (see DelegationForger).
  std::shared_ptr<DelegationForger> forger;
};

struct AgentStats {
  std::atomic<int64_t> rounds{0};               // heartbeats signed
  std::atomic<int64_t> challenge_rounds{0};     // of those, sent early for a challenge
  std::atomic<int64_t> datagrams_sent{0};
  std::atomic<int64_t> send_errors{0};
  std::atomic<int64_t> certificates_sent{0};
  std::atomic<int64_t> certificate_requests_sent{0};
  std::atomic<int64_t> certificate_requests_answered{0};
  std::atomic<int64_t> probes{0};
  std::atomic<int64_t> probe_failures{0};
  std::atomic<int64_t> elections_won{0};
};

// A consistent picture for /metrics, /readyz and logs.
struct AgentStatus {
  bool reachable = false;  // cloud_reachability.h
  bool seen = false;       // what the heartbeats say
  bool leading = false;
  std::string leader;      // the PoolLease holder last observed ("" unknown)
  size_t members = 0;      // in the pool, self included
  // Members whose latest heartbeat (decoded, from a member, new, with a known
  // certificate; its signature checked when needed) arrived within the
  // freshness bound.
  size_t peers_heard = 0;
  // Members whose latest *verified* heartbeat is fresh (evidence).
  size_t peers_fresh = 0;
  uint64_t sequence = 0;   // of the last heartbeat sent
};

class AgentCore {
 public:
  // `identity`, `ca`, `clock`, `lan` required; `cloud` may be null (LAN only).
  // None owned but `identity`/`ca` (shared); all must outlive the core.
  // InvalidArgument for inconsistent options (as the LeaderElector's).
  static absl::StatusOr<std::unique_ptr<AgentCore>> New(
      std::shared_ptr<const NodeIdentity> identity, std::shared_ptr<const CertificateAuthority> ca,
      const base::Clock* clock, LanTransport* lan, AgentCloud* cloud, AgentOptions options);
  ~AgentCore();
  AgentCore(const AgentCore&) = delete;
  AgentCore& operator=(const AgentCore&) = delete;

  // The pool (members joined or left). Its self must be this node.
  void SetPool(std::shared_ptr<const PoolView> pool);
  // A rotated certificate and key (same node): pushed to every member again.
  void SetIdentity(std::shared_ptr<const NodeIdentity> identity);
  // The challenge the server issued (read from the PoolLease by the
  // leader); relayed in the leader's heartbeats. The cloud side sets it from
  // AgentCloud::PoolChallenges() (the first) after each elector step while
  // leading, and when it takes the PoolLease, before its heartbeats say "leader".
  void set_server_challenge(std::string challenge);
  // The challenge this node's next heartbeat carries: the server's, when it
  // leads; else the one its leader relayed last.
  std::string challenge() const;

  // LAN side. A datagram received now, or at the given times (the kernel's
  // stamp, when the loop reads in batches).
  void OnDatagram(absl::string_view bytes);
  void OnDatagram(absl::string_view bytes, int64_t arrival_mono_us, int64_t arrival_wall_us);
  // Sends what is due; returns the monotonic µs of the next due round. A
  // driver should also call it soon after CloudStep changed the status (the
  // flags go out at once).
  int64_t LanStep();

  // Cloud side. Returns the monotonic µs it wants to run next.
  int64_t CloudStep();
  // Cloud side, at exit: ends the election (releasing a held PoolLease).
  void Shutdown();

  AgentStatus status() const;
  // Whether this agent leads its pool now (cheaper than status()).
  bool leading() const;
  const AgentStats& stats() const { return stats_; }
  const VerifierStats& verifier_stats() const { return verifier_.stats(); }
  const DelegationStats& delegation_stats() const { return planner_.stats(); }
  // The server's refusals of this agent's proofs, by the rule its 403 names
  // ("stale_challenge", "replay", ...; docs/verifiable-delegation.md).
  std::map<std::string, int64_t> proof_refusals() const;
  const BootId& boot_id() const { return boot_id_; }
  const AgentOptions& options() const { return options_; }
  // The latest verified heartbeat of a member (tests, the simulator's checks).
  std::shared_ptr<const VerifiedHeartbeat> LatestOf(const std::string& node) const;

  // Cloud side only. The challenges a proof may carry now for this
  // leader to send it: each listed in the last PoolLease answer, current in
  // an answer to this term's own PoolLease writes (so a member's heartbeat
  // still carrying the previous leader's challenge, stale by the takeover, is
  // not sent), and first seen by this agent no more than proof_max_age - 1 s ago
  // (its age on the server is at least that). nullopt while the server lists
  // none, or its newest went unrenewed for 2 x proof_max_age (it issues none:
  // no filter). The server's check
  // (election/delegation_proof.h) stays the judge; this only keeps an honest
  // leader from sending what it would refuse.
  std::optional<std::set<std::string>> UsableChallenges(int64_t now_mono_us) const;

 private:
  AgentCore(std::shared_ptr<const NodeIdentity> identity, std::shared_ptr<const CertificateAuthority> ca,
            const base::Clock* clock, LanTransport* lan, AgentCloud* cloud, AgentOptions options);
  void SyncVerifierPool();
  void SendRound(int64_t now);
  void SendTo(const std::string& node, const std::string& address, const std::string& datagram);
  void Probe(int64_t now);
  void Campaign(int64_t now);
  void Delegate(int64_t now);
  void Forge();
  void Execute(const DelegationAction& action);
  void OnCloudRequest(bool answered);
  bool SignatureNeeded(const Heartbeat& heartbeat) const;
  void UpdateWatched();
  // After each elector step: the challenges of the PoolLease answer.
  void ObserveChallenges(int64_t now_mono_us);

  const AgentOptions options_;
  const base::Clock* const clock_;
  LanTransport* const lan_;
  AgentCloud* const cloud_;
  BootId boot_id_;
  AgentStats stats_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const NodeIdentity> identity_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PoolView> pool_ ABSL_GUARDED_BY(mu_);
  uint64_t pool_generation_ ABSL_GUARDED_BY(mu_) = 0;
  PeerTable peers_ ABSL_GUARDED_BY(mu_);
  bool reachable_ ABSL_GUARDED_BY(mu_) = false;
  bool seen_ ABSL_GUARDED_BY(mu_) = false;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  bool probed_ ABSL_GUARDED_BY(mu_) = false;
  std::string server_challenge_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> heard_ ABSL_GUARDED_BY(mu_);  // node -> arrival (monotonic µs)
  std::set<std::string> watched_ ABSL_GUARDED_BY(mu_);          // DelegationPlanner::Watched()
  int identity_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> proof_refusals_ ABSL_GUARDED_BY(mu_);  // rule -> count

  // LAN side only.
  HeartbeatVerifier verifier_;
  uint64_t verifier_pool_generation_ = UINT64_MAX;
  int64_t start_us_;
  bool started_ = false;
  uint64_t sequence_ = 0;
  int64_t next_round_us_ = 0;
  bool sent_seen_ = false, sent_leading_ = false;
  int64_t last_round_us_ = INT64_MIN;
  // The challenge the last round carried, who relayed it ("self" when
  // leading) and since when the member had it.
  std::string sent_challenge_, sent_challenge_source_;
  int64_t sent_challenge_since_us_ = INT64_MIN;
  int sent_identity_generation_ = -1;
  int push_rounds_left_ = 0;
  std::map<std::string, int64_t> last_request_to_;   // node -> monotonic µs
  std::map<std::string, int64_t> last_answer_to_;

  // Cloud side only.
  CloudReachability reachability_;
  DelegationPlanner planner_;
  std::unique_ptr<election::LeaderElector> elector_;
  std::deque<DelegationAction> pending_;
  int64_t next_probe_us_ = 0;
  int64_t next_elector_us_ = 0;
  int64_t campaign_after_us_ = INT64_MIN;
  std::vector<std::string> listed_challenges_;           // the last answer's, newest first
  std::map<std::string, int64_t> challenge_first_sight_;  // value -> monotonic µs
  std::set<std::string> term_challenges_;                // current in this term's answers
};

}  // namespace poolcoord::agent
