// Removing the marks the forwarder leaves on a delegated node's cloud objects
// (election/lease_marks.h lists them): the one definition of which keys are
// ours and how they come off, shared by the forwarder when a node is back
// (controllers/forwarder.h) and by the cleanup that runs when poolcoord is
// uninstalled (controllers/cleanup.h).
//
// Ours, on the node's Lease: the label coordination.pool/delegated and the
// annotations coordination.pool/delegated-since, -forwarded-renew-time and
// -carried-renew-time; the annotation openyurt.io/delegate-heartbeat is ours
// only beside them (OpenYurt's lease proxy sets it alone for the pools it
// delegates). On the Node: the taint node.openyurt.io/unschedulable.
//
// Thread-safety: plain functions; the interfaces they are given say for
// themselves.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "cloud/clientset.h"
#include "cloud/types.h"

namespace poolcoord::controllers {

// Whether `lease` carries a mark of ours: the label or one of the
// coordination.pool annotations (the delegate annotation alone is not ours).
bool CarriesDelegationMarks(const cloud::Lease& lease);

// Removes every mark of ours from `lease`, the delegate annotation with them;
// every other annotation and label stays. Returns whether anything was
// removed. Call it only on a Lease that CarriesDelegationMarks, or on one the
// caller knows it delegated.
bool StripDelegationMarks(cloud::Lease* lease);

// Whether `node` carries the unschedulable taint (any value or effect).
bool HasUnschedulableTaint(const cloud::Node& node);

// Adds (`present`) node.openyurt.io/unschedulable=true:NoSchedule to Node
// `name`, or removes every taint with that key: a GET, then a JSON merge patch
// of spec.taints conditional on the resourceVersion read (a taint someone else
// added since is never dropped: Conflict, and the Node is read again), at most
// 1 + `conflict_retries` times. Returns whether the Node changed (false: it was
// already so). Errors: the cloud's (cloud/errors.h), NotFound when there is no
// such Node; Aborted once `conflict_retries` retries conflicted too.
absl::StatusOr<bool> SetUnschedulableTaint(cloud::NodeInterface* nodes, const std::string& name,
                                           bool present, int conflict_retries);

}  // namespace poolcoord::controllers
