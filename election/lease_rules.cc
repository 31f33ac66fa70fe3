#include "election/lease_rules.h"

#include <algorithm>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/quote.h"
#include "store/api_error.h"
#include "base/microtime.h"
#include "base/status_macros.h"

namespace poolcoord::election {

namespace {

using store::FieldCause;
using store::Kind;
using store::Object;
using store::ObjectPtr;

constexpr int64_t kMicrosPerSecond = 1'000'000;

std::string Seconds(int64_t micros) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(micros) / kMicrosPerSecond);
  return buf;
}


std::string HolderOf(const Object& lease) { return lease.spec.holder_identity.value_or(""); }
int32_t TransitionsOf(const Object& lease) { return lease.spec.lease_transitions.value_or(0); }

std::string MicroOrUnset(const std::optional<int64_t>& us) {
  return us ? base::FormatMicroTime(*us) : std::string("<unset>");
}

const char* PluralOf(const Object& o) { return store::InfoFor(o.kind).plural; }
const char* KindNameOf(const Object& o) { return store::InfoFor(o.kind).kind_name; }

absl::Status Invalid(const Object& o, std::vector<FieldCause> causes) {
  return store::InvalidError(KindNameOf(o), o.metadata.name, std::move(causes));
}

// A refused write or delete of `o` (kube-apiserver's admission denial wording).
absl::Status Forbidden(const Object& o, std::string_view detail) {
  return store::ForbiddenError(PluralOf(o), o.metadata.name, detail);
}

// kubectl apply --server-side adds "re-run with --force-conflicts" to every 409
// of an apply; the lease rule's 409 is no field manager conflict, so it says so.
constexpr char kNotAManagerConflict[] =
    " (a rule of the lease, not a field manager conflict: --force-conflicts does not change it)";

}  // namespace

bool RenewsLease(const store::Object* current, const store::Object& proposed) {
  return current == nullptr || proposed.spec.renew_time_us != current->spec.renew_time_us ||
         proposed.spec.holder_identity != current->spec.holder_identity;
}

namespace {

// The server's time of the last renewal moves only with a renewal or an
// acquisition: a Lease is renewed by its holder setting renewTime, never by a
// label, an annotation or another field (whoever writes them). Otherwise
// `proposed` keeps the stored status.observedTime and observed_monotonic_us it
// already carries. Returns whether it stamped.
bool Stamp(const base::Clock& clock, const Object* current, Object& proposed) {
  if (!RenewsLease(current, proposed)) return false;
  proposed.status.observed_time_us = clock.NowMicros();
  proposed.observed_monotonic_us = clock.MonotonicMicros();
  return true;
}

}  // namespace

void LeaseRules::StampPoolLease(const store::Object* current, store::Object& proposed) const {
  Stamp(*clock_, current, proposed);
  DelegationProofs* proofs = options_.delegation_proofs;
  if (proofs != nullptr && proofs->mode() != ProofMode::kOff && !HolderOf(proposed).empty()) {
    proofs->MaybeIssueChallenge(proposed);
  }
}

LeaseRules::LeaseRules(const base::Clock* clock, const MembershipIndex* membership,
                       LeaseRulesOptions options)
    : clock_(clock), membership_(membership), options_(std::move(options)) {}

int64_t LeaseRules::RemainingMicros(const store::Object& lease) const {
  const int64_t duration_us =
      static_cast<int64_t>(lease.spec.lease_duration_seconds.value_or(0)) * kMicrosPerSecond;
  if (lease.observed_monotonic_us != 0) {
    return lease.observed_monotonic_us + duration_us - clock_->MonotonicMicros();
  }
  // Not observed by this process (e.g. read back from a shared store): the
  // server's own wall time of the last renewal is the best evidence left.
  if (lease.status.observed_time_us) {
    return *lease.status.observed_time_us + duration_us - clock_->NowMicros();
  }
  return -1;  // never observed by any server: treat as expired
}

std::string LeaseRules::Until(const store::Object& lease) const {
  const int64_t remaining = RemainingMicros(lease);
  return absl::StrCat("until ", base::FormatMicroTime(clock_->NowMicros() + remaining), " (",
                      Seconds(remaining), " from now, on the server's clock)");
}

std::string LeaseRules::AcquireHint(const store::Object* pool_lease, const std::string& pool,
                                    const std::string& node) const {
  if (pool_lease == nullptr) {
    return absl::StrCat("pool ", base::GoQuote(pool), " has no poollease; ", base::GoQuote(node),
                        " may create poollease ", base::GoQuote(pool),
                        " with spec.holderIdentity ", base::GoQuote(node));
  }
  const std::string holder = HolderOf(*pool_lease);
  const int32_t next = TransitionsOf(*pool_lease) + 1;
  const std::string how = absl::StrCat(" with spec.holderIdentity ", base::GoQuote(node),
                                       " and spec.leaseTransitions ", next);
  if (holder.empty()) {
    return absl::StrCat("poollease ", base::GoQuote(pool), " is not held by anyone; ",
                        base::GoQuote(node), " may acquire it now,", how);
  }
  const int64_t remaining = RemainingMicros(*pool_lease);
  if (remaining <= 0) {
    return absl::StrCat("poollease ", base::GoQuote(pool), " held by ", base::GoQuote(holder),
                        " expired ", Seconds(-remaining), " ago and nobody has taken it since; ",
                        base::GoQuote(node), " may acquire it now,", how);
  }
  return absl::StrCat("poollease ", base::GoQuote(pool), " is held by ", base::GoQuote(holder), " ",
                      Until(*pool_lease), ", and each renewal by ", base::GoQuote(holder),
                      " moves that on; ", base::GoQuote(node),
                      " may acquire it only once it has expired or been released,", how);
}

bool LeaseRules::PoolLeaseLive(const store::Object& pool_lease) const {
  return !HolderOf(pool_lease).empty() && RemainingMicros(pool_lease) > 0;
}

bool LeaseRules::LeadsPool(const std::string& node, const std::string& pool,
                           const store::Object* pool_lease) const {
  return membership_->PoolOf(node) == pool && pool_lease != nullptr &&
         HolderOf(*pool_lease) == node && PoolLeaseLive(*pool_lease);
}

bool LeaseRules::DelegationCurrent(const store::Object& delegated,
                                   const store::Object* pool_lease) const {
  if (pool_lease == nullptr || !PoolLeaseLive(*pool_lease)) return false;
  if (!delegated.status.leader_term) return false;
  const store::LeaderTerm term{pool_lease->metadata.uid, TransitionsOf(*pool_lease)};
  return *delegated.status.leader_term == term && RemainingMicros(delegated) > 0;
}

absl::Status LeaseRules::AdmitPoolLeaseWrite(const base::UserInfo& user, const store::ObjectPtr& current,
                                             store::Object& proposed) const {
  const std::string& pool = proposed.metadata.name;
  const std::string new_holder = HolderOf(proposed);
  if (user.IsMaster()) {
    StampPoolLease(current.get(), proposed);
    return absl::OkStatus();
  }

  const std::string node = user.NodeName();
  if (node.empty()) {
    return Forbidden(proposed, absl::StrCat(
        "user ", base::GoQuote(user.username), " is not a node: only nodes of pool ", base::GoQuote(pool),
        " (system:node:<name> in group system:nodes) may write its poollease"));
  }
  if (!membership_->Loaded()) {
    return store::ServiceUnavailableError(
        "pool membership is not loaded yet; retry in a few seconds");
  }
  if (!membership_->IsMember(node, pool)) {
    const auto own = membership_->PoolOf(node);
    return Forbidden(proposed, absl::StrCat(
        "node ", base::GoQuote(node), " is not a member of pool ", base::GoQuote(pool), " (it belongs to ",
        own ? absl::StrCat("pool ", base::GoQuote(*own)) : std::string("no pool"),
        "); only members of a pool may acquire or renew its poollease"));
  }
  if (!new_holder.empty() && new_holder != node) {
    return Forbidden(proposed, absl::StrCat(
        "node ", base::GoQuote(node), " may not acquire pool lease ", base::GoQuote(pool),
        " for another node (", base::GoQuote(new_holder), "): a member acquires or renews it only ",
        "for itself, with spec.holderIdentity ", base::GoQuote(node)));
  }

  if (current == nullptr) {
    // Creating the lease: an acquisition (new term) or an unheld lease; client-go
    // creates with leaseTransitions 0, but any valid count is accepted.
    StampPoolLease(nullptr, proposed);
    return absl::OkStatus();
  }

  const std::string cur_holder = HolderOf(*current);
  const int32_t cur_transitions = TransitionsOf(*current);
  const int32_t new_transitions = TransitionsOf(proposed);
  auto transitions_must_stay = [&](const char* why) -> absl::Status {
    if (new_transitions == cur_transitions) return absl::OkStatus();
    return Invalid(proposed, {store::FieldInvalid(
                                 "spec.leaseTransitions", std::to_string(new_transitions),
                                 absl::StrCat("must stay ", cur_transitions, " when ", why))});
  };
  // Acquiring (or releasing) a lease another member holds and keeps live.
  auto held_by_other_live = [&](bool release) -> absl::Status {
    return store::ConflictError(
        PluralOf(proposed), pool,
        absl::StrCat(release ? absl::StrCat("poollease ", base::GoQuote(pool), " is held by ",
                                            base::GoQuote(cur_holder), " ", Until(*current),
                                            "; only ", base::GoQuote(cur_holder),
                                            " may release it before then")
                             : AcquireHint(current.get(), pool, node),
                     kNotAManagerConflict));
  };

  if (!new_holder.empty() && cur_holder == node) {
    // The holder renews: allowed after expiry too, since nobody took the lease in
    // between (client-go keeps acquireTime and leaseTransitions).
    std::vector<FieldCause> renew_causes;
    if (proposed.spec.acquire_time_us != current->spec.acquire_time_us) {
      renew_causes.push_back(store::FieldInvalid(
          "spec.acquireTime", MicroOrUnset(proposed.spec.acquire_time_us),
          absl::StrCat("must stay ", MicroOrUnset(current->spec.acquire_time_us),
                       " when the holder renews its lease")));
    }
    if (new_transitions != cur_transitions) {
      renew_causes.push_back(store::FieldInvalid(
          "spec.leaseTransitions", std::to_string(new_transitions),
          absl::StrCat("must stay ", cur_transitions, " when the holder renews its lease")));
    }
    if (!renew_causes.empty()) return Invalid(proposed, std::move(renew_causes));
  } else if (!new_holder.empty()) {
    // Acquisition by `node`: the lease must be released or expired.
    if (!cur_holder.empty() && RemainingMicros(*current) > 0) return held_by_other_live(false);
    if (new_transitions != cur_transitions + 1) {
      return Invalid(proposed,
                     {store::FieldInvalid(
                         "spec.leaseTransitions", std::to_string(new_transitions),
                         absl::StrCat("must be ", cur_transitions + 1, " (the current ",
                                      cur_transitions, " + 1) when acquiring the lease"))});
    }
  } else {
    // An empty holder: the holder releasing (client-go ReleaseOnCancel keeps the
    // count), an edit of an unheld lease, or clearing a lease whose holder expired.
    if (!cur_holder.empty() && cur_holder != node && RemainingMicros(*current) > 0) {
      return held_by_other_live(true);
    }
    if (absl::Status s = transitions_must_stay("releasing or editing an unheld lease"); !s.ok()) {
      return s;
    }
  }
  StampPoolLease(current.get(), proposed);
  return absl::OkStatus();
}

absl::Status LeaseRules::CheckDelegatedLeaseWriter(const base::UserInfo& user,
                                                   const std::string& name) const {
  if (!user.IsMaster() && user.NodeName().empty()) {
    return store::ForbiddenError(
        store::InfoFor(Kind::kDelegatedLease).plural, name,
        absl::StrCat("user ", base::GoQuote(user.username),
                     " is not a node: only the current leader of node ", base::GoQuote(name),
                     "'s pool (system:node:<name> in group system:nodes) may write its "
                     "delegatedlease"));
  }
  if (!membership_->Loaded()) {
    return store::ServiceUnavailableError(
        "pool membership is not loaded yet; retry in a few seconds");
  }
  return absl::OkStatus();
}

absl::Status LeaseRules::NotLeaderRefusal(const store::Object& proposed, const std::string& writer,
                                          const std::string& pool,
                                          const store::Object* pool_lease) const {
  const std::string& name = proposed.metadata.name;
  const auto writer_pool = membership_->PoolOf(writer);
  if (writer_pool != pool) {
    return Forbidden(proposed, absl::StrCat(
        "node ", base::GoQuote(writer), " belongs to ",
        writer_pool ? absl::StrCat("pool ", base::GoQuote(*writer_pool)) : std::string("no pool"),
        ", not to pool ", base::GoQuote(pool), " of node ", base::GoQuote(name),
        "; only the leader of pool ", base::GoQuote(pool),
        " (the holder of its live poollease) may write its nodes' delegatedleases, and ",
        !pool_lease                   ? std::string("the pool has no poollease")
        : !PoolLeaseLive(*pool_lease) ? std::string("the pool has no live leader now")
                                      : absl::StrCat("its leader is ",
                                                     base::GoQuote(HolderOf(*pool_lease)), " ",
                                                     Until(*pool_lease))));
  }
  const std::string holder = pool_lease ? HolderOf(*pool_lease) : "";
  if (!pool_lease || holder != writer) {
    return Forbidden(proposed, absl::StrCat(
        "node ", base::GoQuote(writer), " is not the leader of pool ", base::GoQuote(pool),
        ", and only the pool's leader (the holder of its live poollease) may write its nodes' "
        "delegatedleases: ",
        AcquireHint(pool_lease, pool, writer), "; then it may write them"));
  }
  const int64_t remaining = RemainingMicros(*pool_lease);
  if (remaining <= 0) {
    return Forbidden(proposed, absl::StrCat(
        "node ", base::GoQuote(writer), " is not the leader of pool ", base::GoQuote(pool),
        " now: its poollease ", base::GoQuote(pool), " expired ", Seconds(-remaining),
        " ago; nobody has taken it since, so ", base::GoQuote(writer),
        " may renew it (a new spec.renewTime, the same acquireTime and leaseTransitions) and "
        "then write delegatedleases"));
  }
  return store::InternalError(absl::StrCat("node ", writer, " leads pool ", pool,
                                           " and was refused as if it did not"));
}

absl::Status LeaseRules::AdmitDelegatedLeaseWrite(const base::UserInfo& user,
                                                  const store::ObjectPtr& current,
                                                  store::Object& proposed,
                                                  store::TxnReader& reader) const {
  const std::string& name = proposed.metadata.name;
  const auto& spec = proposed.spec;
  if (!spec.pool_name || !spec.renew_time_us) {
    return store::InternalError(absl::StrCat("delegatedleases/", name,
                                             " reached the lease rules without validation"));
  }
  // Validation made spec.poolName the node's pool in the membership.
  const std::optional<std::string>& pool = spec.pool_name;
  const bool master = user.IsMaster();
  const std::string writer = user.NodeName();
  ObjectPtr pool_lease = reader.Get(Kind::kPoolLease, *pool);
  std::optional<store::LeaderTerm> term;
  if (pool_lease) term = store::LeaderTerm{pool_lease->metadata.uid, TransitionsOf(*pool_lease)};

  if (!master && !LeadsPool(writer, *pool, pool_lease.get())) {
    return NotLeaderRefusal(proposed, writer, *pool, pool_lease.get());
  }
  if (!master) {
    // renewTime is on the leader's clock: comparable only within one term. The
    // stored value counts no later than the server's own time of that renewal:
    // a leader's clock that ran ahead (edge clocks are often minutes off, and a
    // newcomer's one patch of 2099 refused every renewal of the term) would
    // otherwise hold the term's later, truthful renewals back until its time.
    if (current && current->status.leader_term == term && current->spec.renew_time_us) {
      int64_t floor_us = *current->spec.renew_time_us;
      if (current->status.observed_time_us) floor_us = std::min(floor_us, *current->status.observed_time_us);
      if (*spec.renew_time_us < floor_us) {
        return store::ConflictError(
            PluralOf(proposed), name,
            absl::StrCat("renewTime ", base::FormatMicroTime(*spec.renew_time_us), " is older than ",
                         base::FormatMicroTime(floor_us),
                         floor_us == *current->spec.renew_time_us
                             ? " written in this term"
                             : " (when the server took this term's last renewal)",
                         " (poollease ", base::GoQuote(*pool), ", leaseTransitions ",
                         term->lease_transitions,
                         "); renewTime must not go backwards within one leader term"));
      }
    }
    if (DelegationProofs* proofs = options_.delegation_proofs;
        proofs != nullptr && proofs->mode() != ProofMode::kOff) {
      const auto& proof = store::DelegationOf(proposed).proof;
      if (proof) {
        std::optional<store::AcceptedProof> last;
        if (current) last = store::DelegationOf(*current).accepted_proof;
        auto accepted = proofs->Verify(*proof, name, *pool, *pool_lease, last,
                                       spec.lease_duration_seconds);
        if (!accepted.ok()) return accepted.status();
        store::MutableDelegation(proposed).accepted_proof = *std::move(accepted);
      } else if (proofs->mode() == ProofMode::kRequired) {
        return proofs->ProofRequired(name, *pool);
      } else {
        proofs->CountUnproven();
      }
    }
  }

  if (Stamp(*clock_, current.get(), proposed)) {
    // A renewal belongs to the term it was written in; another write keeps the
    // term (and the expired mark) of the renewal the lease still carries.
    proposed.status.leader_term = term;
    proposed.status.expired = false;
  }
  proposed.metadata.labels.Set(kPoolLabel, *pool);  // unchanged on a renewal: no copy
  // Write-only (as a Secret's stringData): checked above, never stored.
  store::ClearDelegationProof(proposed);
  return absl::OkStatus();
}

absl::Status LeaseRules::AdmitStatusWrite(const base::UserInfo& user, const store::Object& current,
                                          store::Object& proposed) const {
  // Server-internal: never writable through any API. observedTime too: the
  // server's time of the last renewal (the generic registry store keeps it as
  // well, before this runs).
  proposed.observed_monotonic_us = current.observed_monotonic_us;
  proposed.status.observed_time_us = current.status.observed_time_us;
  if (user.IsMaster()) return absl::OkStatus();
  // The rules stamp every status field on the writes they admit, and no
  // component writes status of its own (the forwarder keeps its record on the
  // cloud Lease): only an administrator repairing an object may.
  return Forbidden(current, absl::StrCat("user ", base::GoQuote(user.username),
                                         " may not write its status: the server writes it, and "
                                         "only system:masters may repair it"));
}

absl::Status LeaseRules::AdmitDelegatedLeaseDelete(const base::UserInfo& user,
                                                   const store::Object& current,
                                                   store::TxnReader& reader) const {
  if (user.IsMaster()) return absl::OkStatus();
  const std::string node = user.NodeName();
  const std::string& name = current.metadata.name;
  if (!node.empty() && node == name) return absl::OkStatus();  // the node itself
  std::string pool = current.spec.pool_name.value_or("");
  if (pool.empty()) pool = membership_->PoolOf(name).value_or("");
  ObjectPtr pool_lease = pool.empty() ? nullptr : reader.Get(Kind::kPoolLease, pool);
  if (!node.empty() && LeadsPool(node, pool, pool_lease.get())) {
    return absl::OkStatus();  // the pool's current leader
  }
  if (const auto own = membership_->PoolOf(node);
      !node.empty() && own != pool && pool_lease && HolderOf(*pool_lease) == node &&
      PoolLeaseLive(*pool_lease)) {
    // It still holds the lease of the pool it left: say why that is not enough,
    // in the words of the write's refusal.
    return Forbidden(current, absl::StrCat(
        "node ", base::GoQuote(node), " belongs to ",
        own ? absl::StrCat("pool ", base::GoQuote(*own)) : std::string("no pool"),
        ", not to pool ", base::GoQuote(pool), " of node ", base::GoQuote(name),
        "; a node moved out of a pool leads it no more, though it still holds poollease ",
        base::GoQuote(pool), ", so it may not delete it (only the node itself or the pool's "
        "leader may)"));
  }
  return Forbidden(current, absl::StrCat(
      "user ", base::GoQuote(user.username),
      " may not delete it: only the node itself or the current leader of its pool",
      pool.empty() ? std::string()
                   : absl::StrCat(" ", base::GoQuote(pool), " (the holder of its live poollease",
                                  pool_lease && PoolLeaseLive(*pool_lease)
                                      ? absl::StrCat(", now ", base::GoQuote(HolderOf(*pool_lease)))
                                      : std::string(", which nobody holds now"),
                                  ")"),
      " may"));
}

absl::Status LeaseRules::AdmitPoolLeaseDelete(const base::UserInfo& user,
                                              const store::Object& current) const {
  // The holder may release by deleting; a lease that is not live (released or
  // expired) may be cleaned up by any member; a live lease held by another
  // member may not be pulled from under its holder.
  if (user.IsMaster()) return absl::OkStatus();
  const std::string node = user.NodeName();
  const std::string& pool = current.metadata.name;
  if (node.empty() || !membership_->IsMember(node, pool)) {
    return Forbidden(current, absl::StrCat(
        "user ", base::GoQuote(user.username), " may not delete it: only members of pool ",
        base::GoQuote(pool), " (or system:masters) may"));
  }
  const std::string holder = HolderOf(current);
  if (holder.empty() || holder == node || !PoolLeaseLive(current)) return absl::OkStatus();
  return store::ConflictError(
      PluralOf(current), pool,
      absl::StrCat("poollease ", base::GoQuote(pool), " is held by ", base::GoQuote(holder), " ",
                   Until(current), "; only ", base::GoQuote(holder),
                   " may delete it before then, and any member once it has expired"));
}

}  // namespace poolcoord::election
