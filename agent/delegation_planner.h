// The pool leader's delegation decisions, as pure logic: what to write, when
// to stop, how to take the server's answers (docs/agent.md "Delegation").
//
// The planner decides; the caller executes. Plan() returns the requests due now
// (at most one in flight per member), the caller sends each one — unless its
// evidence went stale while it waited (now ≥ evidence_deadline_mono_us: it is
// then reported as kSkipped, never sent) — and hands every answer back to
// OnResult(). Nothing here performs I/O or reads a clock, so every decision is
// tested with plain values.
//
// The rules, for each member M (never the leader itself), while leading:
// - Write M's DelegatedLease when M's latest verified heartbeat is fresh
//   (peer_table.h) and says "cut off", once per heartbeat: renewTime = the
//   leader's wall-clock time of that heartbeat's arrival (kept strictly
//   increasing within the term, so a step of the leader's clock does not turn
//   into 409s), leaseDurationSeconds = the freshness bound rounded up, so the
//   DelegatedLease is live about as long as its evidence is fresh.
// - Stop when the evidence stops: a stale or missing heartbeat writes nothing,
//   and the last DelegatedLease runs out on its own on the server's clock.
// - Withhold a heartbeat the server would refuse as a proof, and
//   wait for the member's next one: one that arrived before this term began
//   (the previous leader may have written it already: a replay; or it carries
//   the previous leader's challenge, stale by the takeover), or, when the
//   caller passes the usable challenges to Plan (the server issues them:
//   AgentCore::UsableChallenges), one whose challenge is not among them or
//   that carries none (a member that has not heard one yet: "missing").
//   Counted in stats().withheld.
// - Delete M's DelegatedLease when M's fresh heartbeat says "reachable" and this
//   term wrote one (one from an earlier term no longer belongs to the current
//   leader, so the forwarder ignores it already; the server collects it).
// - The server's answers are obeyed, never retried blindly:
//     403 (or 401)  the server says we do not lead this pool (a deposed leader,
//                   or membership moved): stop every write, step down
//                   (OnResult returns true; the caller cancels its elector and
//                   campaigns anew, which re-reads the PoolLease);
//     403, term lapsed  the server says we do not lead, and that nobody else
//                   does: its message tells us we may take the PoolLease now
//                   (it is gone, e.g. a server restarted on the memory store,
//                   or unheld, or expired with nobody taking it since;
//                   election/lease_rules.cc's refusal): stop every write as
//                   for any 403 (OnResult returns true), but the caller
//                   campaigns again at once instead of backing off;
//     403 on spec.proof  the server refused this member's proof (a cause with
//                   field spec.proof, docs/verifiable-delegation.md: a stale
//                   challenge, a replay, ...): the leader still leads, so only
//                   this evidence is dropped; the member's next heartbeat
//                   (carrying a newer challenge) is tried;
//     409           a stale resourceVersion (or renewTime going backwards, or
//                   "already exists"): forget the version; the next request is
//                   a re-read, then at most one informed retry of the same
//                   evidence (the write budget below);
//     404           on update or delete: the object is gone; a write creates it;
//     422           our request is invalid (e.g. the server's view of the pool
//                   differs): nothing is written for M for refusal_backoff;
//     unavailable   transport error, timeout, 5xx, 429: the outcome is unknown,
//                   so the version is forgotten and this evidence is not tried
//                   again; the next heartbeat (one interval later) is.
//   Each heartbeat of M leads to at most max_writes_per_evidence writes (the
//   second only after a re-read that followed a 409 or a 404) and the reads
//   they need: a read is planned only when a write may follow it.
//
// Thread-safety: none; one owner (the agent's cloud side).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/heartbeat_verifier.h"
#include "agent/peer_table.h"
#include "agent/pool_view.h"

namespace poolcoord::agent {

struct DelegationOptions {
  // The DelegatedLease's leaseDurationSeconds (the agent sets it to the
  // freshness bound rounded up to whole seconds).
  int32_t lease_duration_seconds = 7;
  int64_t refusal_backoff_us = 30'000'000;
  int max_writes_per_evidence = 2;
};

struct DelegationAction {
  enum class Kind { kRead, kCreate, kUpdate, kDelete };
  Kind kind = Kind::kRead;
  std::string node;
  // kCreate/kUpdate: the spec fields the leader chooses (holderIdentity = node,
  // poolName, delegate = the leader and the annotation are the writer's).
  int64_t renew_time_us = 0;
  int32_t lease_duration_seconds = 0;
  // kUpdate/kDelete: the resourceVersion precondition.
  std::string resource_version;
  // kCreate/kUpdate: the heartbeat this write rests on (the write attaches it as
  // the proof), and the monotonic time it goes stale.
  std::shared_ptr<const VerifiedHeartbeat> evidence;
  int64_t evidence_deadline_mono_us = 0;
  uint64_t term = 0;  // the planner's term that planned it (answers of older ones are ignored)
};
const char* DelegationActionName(DelegationAction::Kind kind);

enum class DelegationOutcome {
  kOk,
  kNotFound,
  kConflict,       // 409 Conflict (stale resourceVersion, renewTime backwards)
  kAlreadyExists,  // 409 AlreadyExists on create
  kForbidden,      // 403, 401: not the pool's leader
  kTermLapsed,     // 403: not the leader, and the PoolLease is free for us to take now
  kProofRefused,   // 403 with a cause on spec.proof: this member's proof, not our leadership
  kInvalid,        // 422, 400
  kUnavailable,    // transport error, timeout, 5xx, 429: outcome unknown
  kSkipped,        // not sent: the evidence went stale first
};
const char* DelegationOutcomeName(DelegationOutcome outcome);
// From the absl code of a cloud answer (store::StatusFromKubeResponse's table),
// its causes (cloud::HasCauseField "spec.proof" for kProofRefused) and, for
// another 403, its message (TermLapsed: kTermLapsed).
DelegationOutcome OutcomeFromStatus(const absl::Status& status);
// Whether a 403 refusing a DelegatedLease write says the writer may take the
// pool's PoolLease now: the server's refusal of a writer that does not lead
// (election::LeaseRules, its AcquireHint) says so in its message, as
// `"<node>" may create poollease` (there is none), `may acquire it now` (unheld,
// or its holder's lease expired and nobody took it) or `may renew it` (the
// writer's own lease expired, nobody took it). A refusal naming a live holder
// ("may acquire it only once it has expired or been released"), a writer of
// another pool, or any other 403 says nothing of the kind: false. The
// message carries no structured cause for this, so its wording is the
// contract; tests/agent/delegation_planner_test.cc runs the real rules' refusals
// through it.
bool TermLapsed(const absl::Status& status);

struct DelegationStats {
  std::atomic<int64_t> written{0};   // DelegatedLease creates/updates accepted
  std::atomic<int64_t> deleted{0};
  std::atomic<int64_t> refused_conflict{0};
  std::atomic<int64_t> refused_forbidden{0};
  std::atomic<int64_t> refused_invalid{0};
  std::atomic<int64_t> refused_proof{0};  // 403 on spec.proof: the member skipped
  std::atomic<int64_t> errors{0};    // unavailable
  std::atomic<int64_t> skipped_stale{0};
  std::atomic<int64_t> withheld{0};  // heartbeats not sent: the server would refuse the proof
  std::atomic<int64_t> step_downs{0};
  // 403 with the PoolLease free to take (kTermLapsed): stopped, campaigning again at once.
  std::atomic<int64_t> lapsed_terms{0};
  std::atomic<int64_t> delegated{0};  // gauge: members whose DelegatedLease this term wrote last
};

class DelegationPlanner {
 public:
  explicit DelegationPlanner(DelegationOptions options = {}) : options_(options) {}

  // A new term begins (OnStartedLeading) at monotonic `now_mono_us`:
  // everything learnt before is dropped, and heartbeats that arrived before
  // it are not written.
  void StartLeading(int64_t now_mono_us = INT64_MIN);
  // Leadership ended (OnStoppedLeading, or a step-down): nothing more is planned;
  // answers still in flight are ignored.
  void StopLeading();
  bool leading() const { return leading_; }

  // The requests due at `now_mono_us`. Marks each one in flight until its
  // OnResult. `usable_challenges`: the challenges a proof may carry now; a
  // heartbeat carrying another, or none, is withheld. Null: no filter (the
  // server issues no challenges).
  std::vector<DelegationAction> Plan(const PeerTable& peers, const PoolView& pool,
                                     int64_t now_mono_us,
                                     const std::set<std::string>* usable_challenges = nullptr);
  // The answer to an action Plan returned; `resource_version` of the object
  // after a successful read or write. Returns true when the leader must stop
  // leading (the planner has stopped already): kForbidden (step down) or
  // kTermLapsed (campaign again at once).
  bool OnResult(const DelegationAction& action, DelegationOutcome outcome,
                const std::string& resource_version, int64_t now_mono_us);

  // Members whose heartbeats this term's decisions rest on even when they say
  // "reachable": a DelegatedLease this term wrote may still exist.
  std::set<std::string> Watched() const;

  const DelegationStats& stats() const { return stats_; }
  const DelegationOptions& options() const { return options_; }

 private:
  struct Member {
    enum class Object { kUnknown, kAbsent, kPresent };
    Object object = Object::kUnknown;
    std::string resource_version;
    bool in_flight = false;
    bool wrote_in_term = false;  // this term sent a create/update for it
    bool delegated = false;      // the last accepted write of this term is ours and not deleted
    // The evidence being handled and what it cost so far.
    BootId boot{};
    uint64_t sequence = 0;
    int writes = 0;  // creates, updates and deletes sent for it
    bool written = false;
    int64_t last_renew_us = INT64_MIN;
    int64_t blocked_until_us = INT64_MIN;
  };
  void SetDelegated(Member& m, bool delegated);

  DelegationOptions options_;
  bool leading_ = false;
  uint64_t term_ = 0;
  int64_t term_start_us_ = INT64_MIN;
  std::map<std::string, Member> members_;
  DelegationStats stats_;
};

}  // namespace poolcoord::agent
