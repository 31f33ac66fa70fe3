// The marks poolcoord's forwarder (controllers/forwarder.h) leaves on the
// cloud's objects of a delegated node, and that others read: the agent tells
// its kubelet's renewals from forwarded ones by them, tests and operators find
// delegated nodes by them. All of the forwarder's state lives in these marks,
// so a restart of poolcoord loses nothing.
//
// On the node's Lease (kube-node-lease/<node>):
//   annotation openyurt.io/delegate-heartbeat: "true"    (kDelegateAnnotation,
//              election/lease_rules.h) the Lease is delegated
//   annotation coordination.pool/delegated-since          MicroTime delegation began
//   annotation coordination.pool/forwarded-renew-time     the renewTime forwarded last
//   annotation coordination.pool/carried-renew-time       a returning kubelet's renewal
//              carried past the last forwarded renewTime (its clock runs behind)
//   label      coordination.pool/delegated=true            to list and watch marked Leases
// On the Node: the taint node.openyurt.io/unschedulable=true:NoSchedule once
// the node has been delegated for --delegation-taint-after.
#pragma once

namespace poolcoord::election {

inline constexpr char kDelegatedSinceAnnotation[] = "coordination.pool/delegated-since";
inline constexpr char kForwardedRenewTimeAnnotation[] = "coordination.pool/forwarded-renew-time";
inline constexpr char kCarriedRenewTimeAnnotation[] = "coordination.pool/carried-renew-time";
inline constexpr char kDelegatedLabel[] = "coordination.pool/delegated";
inline constexpr char kUnschedulableTaint[] = "node.openyurt.io/unschedulable";

}  // namespace poolcoord::election
