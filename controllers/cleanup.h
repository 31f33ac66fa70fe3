// The cleanup: removes every mark poolcoord's forwarder left in the cloud
// (controllers/delegation_marks.h says which) and ends. What
// `poolcoord-apiserver --cleanup` runs, as the chart's post-delete hook: once
// poolcoord is uninstalled nothing else would ever take them off, and a node
// whose Lease still says "delegated" and whose Node still carries the
// unschedulable taint would keep both after its kubelet is back.
//
// One pass:
// - every Lease of the node-lease namespace carrying our label
//   (coordination.pool/delegated, the forwarder's own selector): our
//   annotations and label removed by a PUT conditional on the resourceVersion
//   read; on Conflict (the kubelet renewed meanwhile) the Lease is read again
//   and, if still marked, written again;
// - every Node with the taint node.openyurt.io/unschedulable: the taint
//   removed by the forwarder's own conditional merge patch — unless the node's
//   Lease carries openyurt.io/delegate-heartbeat without our marks: another
//   delegator (OpenYurt's lease proxy for pools poolcoord does not govern)
//   holds the node, and the taint is its.
//
// The race it ends: while a server of the release still runs (a pod
// terminating after `helm uninstall`), its forwarder marks a delegated node
// again at its next renewal, one renew interval after its last write plus its
// request timeout at most. So passes run `quiet_period` (that sum) apart and
// the cleanup ends only with a pass that found nothing to clear and failed on
// nothing, after at least one full period: never on the first pass, which
// could precede a forward already due. It gives up at `timeout`.
//
// Thread-safety: one call at a time per CleanupCloud; the clients must be
// thread-safe only if shared with other threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/clock.h"
#include "cloud/clientset.h"

namespace poolcoord::controllers {

// The cloud clients the cleanup writes through (not owned).
struct CleanupCloud {
  cloud::LeaseInterface* node_leases = nullptr;  // Leases of the node-lease namespace
  cloud::NodeInterface* nodes = nullptr;
};

struct CleanupOptions {
  int conflict_retries = 5;  // per object and pass, as the forwarder's
  // Between passes: a running forwarder's renew interval plus its request
  // timeout (the server's defaults: 10 s + 5 s).
  std::chrono::microseconds quiet_period = std::chrono::seconds(15);
  // How long Cleanup tries, from its start.
  std::chrono::microseconds timeout = std::chrono::minutes(2);
  // Waits between passes; empty: this thread sleeps. Tests move a FakeClock.
  std::function<void(std::chrono::microseconds)> sleep;
};

// What one pass did, by object name.
struct CleanupPass {
  std::vector<std::string> leases_cleared;   // our marks removed
  std::vector<std::string> taints_removed;   // our taint removed from the Node
  std::vector<std::string> taints_kept;      // someone else's delegation holds the node
  std::vector<std::string> errors;           // "<object>: <what failed>", one per failure
  bool cleared_something() const { return !leases_cleared.empty() || !taints_removed.empty(); }
  bool clean() const { return !cleared_something() && errors.empty(); }
};

// One pass, as the header comment says. Errors of single objects are in the
// result (the pass goes on with the rest); a failed list is one error.
CleanupPass CleanupOnce(const CleanupCloud& cloud, int conflict_retries);

struct CleanupReport {
  int passes = 0;
  int leases_cleared = 0;  // over all passes (a Lease marked again counts again)
  int taints_removed = 0;
  std::vector<std::string> taints_kept;  // of the last pass
};

// Passes `quiet_period` apart until one is clean, at least two. Logs what each
// pass did. Errors: DeadlineExceeded when `timeout` passes first, its message
// saying what the last pass left or failed on.
absl::StatusOr<CleanupReport> Cleanup(const CleanupCloud& cloud, const base::Clock* clock,
                                      const CleanupOptions& options);

}  // namespace poolcoord::controllers
