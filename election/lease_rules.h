// The lease rules of DESIGN.md "The rules", in one place, shared by the REST
// handlers (PoolLease, DelegatedLease writes) and the admission webhook.
//
// Every Admit* method runs inside Store::Update, so the state it reads (through
// the TxnReader) cannot change before the write it approves is stored.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "base/clock.h"
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
};

class LeaseRules {
 public:
  LeaseRules(const base::Clock* clock, const MembershipIndex* membership, LeaseRulesOptions options);

  // Checks a write of the main resource (create: current == nullptr) by `user`
  // and stamps the server-owned fields on `proposed`: status.observedTime,
  // observed_monotonic_us, the pool label, leader_term. `proposed` already
  // carries server metadata (uid, creationTimestamp, ...) and the current status.
  // Errors: PermissionDenied (403), Aborted (409 Conflict), InvalidArgument (422
  // Invalid with causes), each with a message a person can act on.
  absl::Status AdmitWrite(const base::UserInfo& user, const store::ObjectPtr& current,
                          store::Object& proposed, store::TxnReader& reader) const;

  // Checks a write of the status subresource (only status may change).
  absl::Status AdmitStatusWrite(const base::UserInfo& user, const store::Object& current,
                                store::Object& proposed) const;

  // Checks a delete: for a DelegatedLease, its pool's leader or the node itself.
  absl::Status AdmitDelete(const base::UserInfo& user, const store::Object& current,
                           store::TxnReader& reader) const;

  // True when the PoolLease is held (non-empty holder) and not expired on the
  // server's monotonic clock.
  bool PoolLeaseLive(const store::Object& pool_lease) const;
  // Microseconds the lease has left (negative once expired).
  int64_t RemainingMicros(const store::Object& lease) const;
  // True when the DelegatedLease is live and belongs to the current, live term of
  // its pool's PoolLease (DESIGN.md).
  bool DelegationCurrent(const store::Object& delegated, const store::Object* pool_lease) const;

  const LeaseRulesOptions& options() const { return options_; }
  const base::Clock* clock() const { return clock_; }
  const MembershipIndex* membership() const { return membership_; }

 private:
  absl::Status AdmitPoolLeaseWrite(const base::UserInfo& user, const store::ObjectPtr& current,
                                   store::Object& proposed) const;
  absl::Status AdmitDelegatedLeaseWrite(const base::UserInfo& user, const store::ObjectPtr& current,
                                        store::Object& proposed, store::TxnReader& reader) const;

  const base::Clock* clock_;
  const MembershipIndex* membership_;
  LeaseRulesOptions options_;
};

}  // namespace poolcoord::election
