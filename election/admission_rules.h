// The decision of the validating admission webhook for the delegate annotation on
// coordination.k8s.io/v1 Leases in kube-node-lease (docs/architecture.md "The rules", the
// webhook part), as a pure function over fields the handler already decoded.
//
// The delegation checks come from LeaseRules (DelegationCurrent, PoolLeaseLive):
// the API and the webhook share one rule module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "election/lease_rules.h"
#include "base/user_info.h"
#include "store/store.h"

namespace poolcoord::election {

inline constexpr char kNodeLeaseNamespace[] = "kube-node-lease";

// The fields of one Lease (object or oldObject) the webhook reads.
struct AdmissionLease {
  bool present = false;  // false: null/absent in the review (CREATE has no oldObject)
  // The value of openyurt.io/delegate-heartbeat; nullopt when the key is absent.
  std::optional<std::string> delegate_annotation;
  std::optional<std::string> holder_identity;
  std::optional<int64_t> renew_time_us;  // MicroTime, microseconds since the epoch
  bool renew_time_invalid = false;       // renewTime present but not a MicroTime
};

struct AdmissionAttributes {
  std::string operation;  // "CREATE", "UPDATE", ...
  std::string name;       // the Lease's name (= the node, for node leases)
  std::string namespace_name;
  AdmissionLease object;
  AdmissionLease old_object;  // meaningful for UPDATE
  base::UserInfo user;
};

struct AdmissionDecision {
  bool allowed = true;
  // On denial: which rule failed and what would satisfy it.
  std::string message;
  std::vector<std::string> warnings;
};

// Decides a write of a node Lease. Reads membership from rules.membership(),
// and for the forwarder and lease-proxy users the pool's PoolLease and the
// node's DelegatedLease from `store` in one Store::GetAll: a consistent read
// (never a watch cache), so a delegation deleted or replaced before the review
// arrived is never taken as current; on etcd3 one round trip for both. A read
// that fails (etcd unreachable) denies, "retry". Rules, in order:
//  1. no annotation on the object: allowed, whoever writes;
//  2. membership not loaded: denied, "retry";
//  3. validity: value exactly "true", holderIdentity == name, the node in a pool,
//     renewTime not before oldObject's (equal passes);
//  4. by requester: system:masters pass; the node itself may keep an existing
//     annotation unchanged (UPDATE), never add or change it; the forwarder
//     (--forwarder-user) needs a governed pool (a PoolLease exists) and a
//     DelegatedLease of the node that belongs to the current leader; a lease-proxy
//     user (--lease-proxy-users) passes only for pools that are not governed;
//     anyone else is denied.
// Thread-safe; never throws.
AdmissionDecision DecideDelegatedHeartbeat(const AdmissionAttributes& attrs,
                                           const LeaseRules& rules, store::Store* store);

}  // namespace poolcoord::election
