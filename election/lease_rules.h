// The lease rules of docs/architecture.md "The rules", in one place, shared by the REST
// API (through each kind's strategy, handlers/registry/), the admission webhook
// (admission_rules.h) and the simulator: who may write a PoolLease or a
// DelegatedLease, and when (403 Forbidden, 409 Conflict, 503 while membership
// loads, and the 422 of the leaseTransitions rules, which depend on who holds
// the lease), and what the server stamps on an accepted write. A kind's field
// checks (422 for a bad value, whoever writes) are its strategy's validation,
// which runs before the Admit* checks here: these assume a validated object.
//
// Every Admit* method runs inside Store::Update, so the state it reads (through
// the TxnReader) cannot change before the write it approves is stored.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "base/clock.h"
#include "election/delegation_proof.h"
#include "election/membership.h"
#include "base/user_info.h"
#include "store/object.h"
#include "store/store.h"

namespace poolcoord::election {

inline constexpr char kDelegateAnnotation[] = "openyurt.io/delegate-heartbeat";
inline constexpr char kPoolLabel[] = "coordination.pool/pool";


struct LeaseRulesOptions {
  int32_t max_lease_duration_seconds = 300;   // --max-lease-duration
  std::string forwarder_user;                  // --forwarder-user
  std::vector<std::string> lease_proxy_users;  // --lease-proxy-users
  // Verifiable delegation (--delegation-proof and friends): the proof check of
  // a leader's DelegatedLease write. nullptr: proofs off. Not owned.
  DelegationProofs* delegation_proofs = nullptr;
};

// Whether a write of a lease renews or acquires it: a create (current ==
// nullptr), or a change of spec.renewTime or of spec.holderIdentity (a takeover
// or a release). Only these move the server's time of the last renewal
// (status.observedTime), as in Kubernetes only the holder setting renewTime
// renews a Lease: labels, annotations and other fields renew nothing, whoever
// writes them (system:masters too).
bool RenewsLease(const store::Object* current, const store::Object& proposed);

class LeaseRules {
 public:
  LeaseRules(const base::Clock* clock, const MembershipIndex* membership, LeaseRulesOptions options);

  // A write of a PoolLease (create: current == nullptr) by `user`: members of
  // the pool only, for themselves; a live lease is taken by nobody but its
  // holder (409); a takeover raises leaseTransitions by exactly 1, a renewal
  // keeps it and acquireTime (422). system:masters pass. renewTime is the
  // holder's, informational: expiry is judged from the server's time of the
  // renewal, so no rule orders or bounds it (a holder whose clock stepped back
  // still renews, as with a coordination.k8s.io Lease). On success, when the
  // write renews or acquires (RenewsLease), stamps status.observedTime and
  // observed_monotonic_us on `proposed`, which already carries server metadata
  // and the current status (kept as they are otherwise), and, while the lease is
  // held and delegation proofs are on, a fresh delegation challenge when the
  // current one is a challenge period old (DelegationProofs::MaybeIssueChallenge).
  // Errors: PermissionDenied (403), Aborted (409 Conflict), InvalidArgument (422
  // Invalid with causes), Unavailable (503, membership not loaded), each with a
  // message a person can act on.
  absl::Status AdmitPoolLeaseWrite(const base::UserInfo& user, const store::ObjectPtr& current,
                                   store::Object& proposed) const;

  // Who may write DelegatedLease `name` at all, checked before its fields are:
  // a node identity or system:masters (403), once the membership its validation
  // reads is loaded (503).
  absl::Status CheckDelegatedLeaseWriter(const base::UserInfo& user,
                                         const std::string& name) const;
  // A write of a validated DelegatedLease (spec.poolName = the node's pool):
  // only the current, unexpired holder of the pool's PoolLease (403); renewTime
  // not backwards within one leader term (409; the stored value counts only up to
  // the server's own time of that renewal, status.observedTime, so a leader's
  // clock that ran ahead, even to 2099, blocks nothing); with --delegation-proof
  // required, the member's own fresh, signed proof of life in spec.proof
  // (checked with optional too when given: DelegationProofs::Verify, 403/422).
  // system:masters pass. On success, when the write renews (RenewsLease), stamps
  // status.observedTime, leaderTerm, expired=false and observed_monotonic_us
  // (another write keeps them as stored); always status.proof (a proof
  // accepted) and the label coordination.pool/pool=<pool>; spec.proof is
  // dropped (write-only).
  absl::Status AdmitDelegatedLeaseWrite(const base::UserInfo& user,
                                        const store::ObjectPtr& current, store::Object& proposed,
                                        store::TxnReader& reader) const;

  // Checks a write of the status subresource (only status may change):
  // system:masters only (403 for everyone else; the rules stamp status).
  // status.observedTime is not the client's: the generic registry store keeps the
  // stored value before this runs (as a strategy's PrepareForUpdate would).
  absl::Status AdmitStatusWrite(const base::UserInfo& user, const store::Object& current,
                                store::Object& proposed) const;

  // A delete of a PoolLease: members of the pool; a live lease only by its holder (409).
  absl::Status AdmitPoolLeaseDelete(const base::UserInfo& user,
                                    const store::Object& current) const;
  // A delete of a DelegatedLease: the node itself or its pool's current leader
  // (LeadsPool, the rule of a write).
  absl::Status AdmitDelegatedLeaseDelete(const base::UserInfo& user, const store::Object& current,
                                         store::TxnReader& reader) const;

  // Whether `node` leads `pool` now, and so may write and delete its nodes'
  // DelegatedLeases: a member of `pool` in the membership (a node moved to
  // another pool leads nothing there, even while it still holds the lease) that
  // holds `pool_lease` (the pool's PoolLease, nullptr when it has none) live.
  bool LeadsPool(const std::string& node, const std::string& pool,
                 const store::Object* pool_lease) const;

  // True when the PoolLease is held (non-empty holder) and not expired on the
  // server's monotonic clock.
  bool PoolLeaseLive(const store::Object& pool_lease) const;
  // Microseconds the lease has left (negative once expired).
  int64_t RemainingMicros(const store::Object& lease) const;
  // True when the DelegatedLease is live and belongs to the current, live term of
  // its pool's PoolLease (docs/architecture.md "The rules").
  bool DelegationCurrent(const store::Object& delegated, const store::Object* pool_lease) const;

  const LeaseRulesOptions& options() const { return options_; }
  DelegationProofs* delegation_proofs() const { return options_.delegation_proofs; }
  const base::Clock* clock() const { return clock_; }
  const MembershipIndex* membership() const { return membership_; }

 private:
  const base::Clock* clock_;
  const MembershipIndex* membership_;
  // Stamps an accepted PoolLease write (observed times when it renews, and a
  // challenge).
  void StampPoolLease(const store::Object* current, store::Object& proposed) const;
  // For refusals: the state of PoolLease `pool` (nullptr: there is none) as a
  // member `node` that does not hold it must read it, and what it can do:
  // who holds it and until when on the server's clock (a live holder's
  // renewals move that on), and when and with which spec it may acquire it.
  std::string AcquireHint(const store::Object* pool_lease, const std::string& pool,
                          const std::string& node) const;
  // "until <server time> (12.3s from now)" for a live lease.
  std::string Until(const store::Object& lease) const;
  // Why `writer` may not write DelegatedLease `proposed` of `pool` when it
  // does not lead it (LeadsPool is false): 403, each clause in its own words.
  absl::Status NotLeaderRefusal(const store::Object& proposed, const std::string& writer,
                                const std::string& pool, const store::Object* pool_lease) const;

  LeaseRulesOptions options_;
};

}  // namespace poolcoord::election
