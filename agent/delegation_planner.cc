#include "agent/delegation_planner.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "agent/agent_cloud.h"
#include "cloud/errors.h"

namespace poolcoord::agent {

const char* DelegationActionName(DelegationAction::Kind kind) {
  switch (kind) {
    case DelegationAction::Kind::kRead: return "read";
    case DelegationAction::Kind::kCreate: return "create";
    case DelegationAction::Kind::kUpdate: return "update";
    case DelegationAction::Kind::kDelete: return "delete";
  }
  return "unknown";
}

const char* DelegationOutcomeName(DelegationOutcome outcome) {
  switch (outcome) {
    case DelegationOutcome::kOk: return "ok";
    case DelegationOutcome::kNotFound: return "not_found";
    case DelegationOutcome::kConflict: return "conflict";
    case DelegationOutcome::kAlreadyExists: return "already_exists";
    case DelegationOutcome::kForbidden: return "forbidden";
    case DelegationOutcome::kTermLapsed: return "term_lapsed";
    case DelegationOutcome::kProofRefused: return "proof_refused";
    case DelegationOutcome::kInvalid: return "invalid";
    case DelegationOutcome::kUnavailable: return "unavailable";
    case DelegationOutcome::kSkipped: return "skipped";
  }
  return "unknown";
}

bool TermLapsed(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kPermissionDenied) return false;
  const std::string message = cloud::MessageOf(status);
  return absl::StrContains(message, "\" may create poollease ") ||
         absl::StrContains(message, "\" may acquire it now,") ||
         absl::StrContains(message, "\" may renew it ");
}

DelegationOutcome OutcomeFromStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return DelegationOutcome::kOk;
    case absl::StatusCode::kNotFound: return DelegationOutcome::kNotFound;
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kFailedPrecondition: return DelegationOutcome::kConflict;
    case absl::StatusCode::kAlreadyExists: return DelegationOutcome::kAlreadyExists;
    case absl::StatusCode::kPermissionDenied:
      if (cloud::HasCauseField(status, "spec.proof")) return DelegationOutcome::kProofRefused;
      return TermLapsed(status) ? DelegationOutcome::kTermLapsed : DelegationOutcome::kForbidden;
    case absl::StatusCode::kUnauthenticated: return DelegationOutcome::kForbidden;
    case absl::StatusCode::kInvalidArgument: return DelegationOutcome::kInvalid;
    default: return DelegationOutcome::kUnavailable;
  }
}

void DelegationPlanner::SetDelegated(Member& m, bool delegated) {
  if (m.delegated != delegated) stats_.delegated.fetch_add(delegated ? 1 : -1);
  m.delegated = delegated;
}

std::set<std::string> DelegationPlanner::Watched() const {
  std::set<std::string> out;
  if (!leading_) return out;
  for (const auto& [node, m] : members_) {
    if (m.wrote_in_term && m.object != Member::Object::kAbsent) out.insert(node);
  }
  return out;
}

void DelegationPlanner::StartLeading(int64_t now_mono_us) {
  StopLeading();
  leading_ = true;
  ++term_;
  term_start_us_ = now_mono_us;
}

void DelegationPlanner::StopLeading() {
  leading_ = false;
  members_.clear();
  stats_.delegated.store(0);
}

std::vector<DelegationAction> DelegationPlanner::Plan(const PeerTable& peers, const PoolView& pool,
                                                      int64_t now_mono_us,
                                                      const std::set<std::string>* usable_challenges) {
  std::vector<DelegationAction> actions;
  if (!leading_) return actions;
  // Members that left the pool are forgotten (their objects are not ours to
  // judge any more).
  for (auto it = members_.begin(); it != members_.end();) {
    if (pool.IsMember(it->first)) {
      ++it;
    } else {
      SetDelegated(it->second, false);
      it = members_.erase(it);
    }
  }
  for (const auto& [node, address] : pool.members) {
    if (node == pool.self) continue;
    std::shared_ptr<const VerifiedHeartbeat> ev = peers.Latest(node);
    if (ev == nullptr || !peers.Fresh(*ev, now_mono_us)) continue;  // no evidence: write nothing
    Member& m = members_[node];
    if (m.in_flight || now_mono_us < m.blocked_until_us) continue;
    const Heartbeat& hb = ev->heartbeat();
    if (hb.boot_id != m.boot || hb.sequence != m.sequence) {
      m.boot = hb.boot_id;
      m.sequence = hb.sequence;
      m.writes = 0;
      m.written = false;
    }
    if (m.writes >= options_.max_writes_per_evidence) continue;

    DelegationAction a;
    a.node = node;
    a.term = term_;
    if (!hb.cloud_reachable) {
      if (m.written) continue;
      // A proof the server would refuse is not sent: the member's next
      // heartbeat is (see the header).
      if (ev->arrival_mono_us < term_start_us_ ||
          (usable_challenges != nullptr &&
           (!SendsProof(*ev) || usable_challenges->count(hb.challenge) == 0))) {
        m.writes = options_.max_writes_per_evidence;
        stats_.withheld.fetch_add(1);
        continue;
      }
      if (m.object == Member::Object::kUnknown) {
        a.kind = DelegationAction::Kind::kRead;
      } else {
        a.kind = m.object == Member::Object::kPresent ? DelegationAction::Kind::kUpdate
                                                      : DelegationAction::Kind::kCreate;
        a.resource_version = m.resource_version;
        a.renew_time_us = m.last_renew_us == INT64_MIN
                              ? ev->arrival_wall_us
                              : std::max(ev->arrival_wall_us, m.last_renew_us + 1);
        a.lease_duration_seconds = options_.lease_duration_seconds;
        a.evidence = ev;
        a.evidence_deadline_mono_us = ev->arrival_mono_us + peers.options().bound_us();
      }
    } else {
      // The member reaches the cloud: remove what this term wrote for it.
      if (m.object == Member::Object::kPresent) {
        a.kind = DelegationAction::Kind::kDelete;
        a.resource_version = m.resource_version;
      } else if (m.object == Member::Object::kUnknown && m.wrote_in_term) {
        a.kind = DelegationAction::Kind::kRead;
      } else {
        continue;
      }
    }
    m.in_flight = true;
    if (a.kind != DelegationAction::Kind::kRead) ++m.writes;
    actions.push_back(std::move(a));
  }
  return actions;
}

bool DelegationPlanner::OnResult(const DelegationAction& action, DelegationOutcome outcome,
                                 const std::string& resource_version, int64_t now_mono_us) {
  if (!leading_ || action.term != term_) return false;
  auto it = members_.find(action.node);
  if (it == members_.end()) return false;
  Member& m = it->second;
  m.in_flight = false;
  using Kind = DelegationAction::Kind;
  using Object = Member::Object;
  const bool write = action.kind == Kind::kCreate || action.kind == Kind::kUpdate;
  if (write && outcome != DelegationOutcome::kSkipped) m.wrote_in_term = true;

  switch (outcome) {
    case DelegationOutcome::kOk:
      switch (action.kind) {
        case Kind::kRead:
          m.object = Object::kPresent;
          m.resource_version = resource_version;
          break;
        case Kind::kCreate:
        case Kind::kUpdate:
          m.object = Object::kPresent;
          m.resource_version = resource_version;
          m.last_renew_us = action.renew_time_us;
          if (action.evidence != nullptr && action.evidence->heartbeat().boot_id == m.boot &&
              action.evidence->heartbeat().sequence == m.sequence) {
            m.written = true;
          }
          SetDelegated(m, true);
          stats_.written.fetch_add(1);
          break;
        case Kind::kDelete:
          m.object = Object::kAbsent;
          m.resource_version.clear();
          SetDelegated(m, false);
          stats_.deleted.fetch_add(1);
          break;
      }
      return false;
    case DelegationOutcome::kNotFound:
      m.object = Object::kAbsent;
      m.resource_version.clear();
      SetDelegated(m, false);
      return false;
    case DelegationOutcome::kConflict:
    case DelegationOutcome::kAlreadyExists:
      // Someone else's version is newer than ours: re-read before anything else.
      m.object = Object::kUnknown;
      m.resource_version.clear();
      stats_.refused_conflict.fetch_add(1);
      return false;
    case DelegationOutcome::kForbidden:
      stats_.refused_forbidden.fetch_add(1);
      stats_.step_downs.fetch_add(1);
      StopLeading();
      return true;
    case DelegationOutcome::kTermLapsed:
      stats_.refused_forbidden.fetch_add(1);
      stats_.lapsed_terms.fetch_add(1);
      StopLeading();
      return true;
    case DelegationOutcome::kProofRefused:
      // Nothing was written: the object is as it was. This evidence is spent.
      stats_.refused_proof.fetch_add(1);
      m.writes = options_.max_writes_per_evidence;
      return false;
    case DelegationOutcome::kInvalid:
      stats_.refused_invalid.fetch_add(1);
      m.blocked_until_us = now_mono_us + options_.refusal_backoff_us;
      m.object = Object::kUnknown;
      return false;
    case DelegationOutcome::kUnavailable:
      // The request may or may not have been applied: forget the version, and
      // leave this evidence alone (the next heartbeat tries again).
      stats_.errors.fetch_add(1);
      m.object = Object::kUnknown;
      m.resource_version.clear();
      m.writes = options_.max_writes_per_evidence;
      return false;
    case DelegationOutcome::kSkipped:
      stats_.skipped_stale.fetch_add(1);
      if (action.kind != Kind::kRead) --m.writes;
      return false;
  }
  return false;
}

}  // namespace poolcoord::agent
