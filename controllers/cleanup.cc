#include "controllers/cleanup.h"

#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "cloud/errors.h"
#include "controllers/delegation_marks.h"
#include "election/lease_marks.h"
#include "election/lease_rules.h"

namespace poolcoord::controllers {
namespace {

void Fail(CleanupPass* pass, const std::string& object, const char* what,
          const absl::Status& status) {
  pass->errors.push_back(absl::StrCat(object, ": ", what, ": ", status.message()));
}

// Clears our marks from one Lease (as listed), re-reading it after a Conflict.
void ClearLease(cloud::LeaseInterface* leases, cloud::Lease lease, int conflict_retries,
                CleanupPass* pass) {
  const std::string name = lease.metadata.name;
  const std::string object = absl::StrCat("Lease ", lease.metadata.namespace_, "/", name);
  for (int attempt = 0;; ++attempt) {
    // Someone took them off since (the forwarder, for a kubelet that is back).
    if (!CarriesDelegationMarks(lease)) return;
    StripDelegationMarks(&lease);
    absl::StatusOr<cloud::Lease> written = leases->Update(lease);
    if (written.ok()) {
      pass->leases_cleared.push_back(name);
      return;
    }
    if (cloud::IsNotFound(written.status())) return;  // gone with its Node
    if (!cloud::IsConflict(written.status())) {
      return Fail(pass, object, "removing our marks", written.status());
    }
    if (attempt >= conflict_retries) {
      return Fail(pass, object, "removing our marks",
                  absl::AbortedError(absl::StrCat("still conflicting after ", conflict_retries,
                                                  " retries")));
    }
    absl::StatusOr<cloud::Lease> got = leases->Get(name);
    if (cloud::IsNotFound(got.status())) return;
    if (!got.ok()) return Fail(pass, object, "reading it again after a conflict", got.status());
    lease = *std::move(got);
  }
}

// Whether another delegator holds node `name`: its Lease carries the delegate
// annotation but none of our marks. Errors: the cloud's, except NotFound (no
// Lease: nobody does).
absl::StatusOr<bool> DelegatedByOthers(cloud::LeaseInterface* leases, const std::string& name) {
  absl::StatusOr<cloud::Lease> lease = leases->Get(name);
  if (cloud::IsNotFound(lease.status())) return false;
  if (!lease.ok()) return lease.status();
  return !CarriesDelegationMarks(*lease) &&
         lease->metadata.annotations.count(election::kDelegateAnnotation) > 0;
}

std::string Names(const std::vector<std::string>& names) {
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

CleanupPass CleanupOnce(const CleanupCloud& cloud, int conflict_retries) {
  CleanupPass pass;
  // Our label with any value: the forwarder writes "true", but a Lease
  // labelled otherwise is no less ours.
  cloud::ListOptions selector;
  selector.label_selector = election::kDelegatedLabel;
  absl::flat_hash_set<std::string> marked;
  absl::StatusOr<cloud::LeaseList> leases = cloud.node_leases->List(selector);
  if (!leases.ok()) {
    Fail(&pass, "node Leases", "listing those with our label", leases.status());
  } else {
    for (cloud::Lease& lease : leases->items) {
      if (!CarriesDelegationMarks(lease)) continue;
      marked.insert(lease.metadata.name);
      ClearLease(cloud.node_leases, std::move(lease), conflict_retries, &pass);
    }
  }
  // Taints cannot be selected on: every Node is listed.
  absl::StatusOr<cloud::NodeList> nodes = cloud.nodes->List(cloud::ListOptions{});
  if (!nodes.ok()) {
    Fail(&pass, "Nodes", "listing them", nodes.status());
    return pass;
  }
  for (const cloud::Node& node : nodes->items) {
    if (!HasUnschedulableTaint(node)) continue;
    const std::string& name = node.metadata.name;
    const std::string object = absl::StrCat("Node ", name);
    if (!marked.contains(name)) {
      absl::StatusOr<bool> others = DelegatedByOthers(cloud.node_leases, name);
      if (!others.ok()) {
        Fail(&pass, object, "reading its Lease to tell whose taint it is", others.status());
        continue;
      }
      if (*others) {
        pass.taints_kept.push_back(name);
        continue;
      }
    }
    absl::StatusOr<bool> changed =
        SetUnschedulableTaint(cloud.nodes, name, /*present=*/false, conflict_retries);
    if (cloud::IsNotFound(changed.status())) continue;
    if (!changed.ok()) {
      Fail(&pass, object, "removing our taint", changed.status());
    } else if (*changed) {
      pass.taints_removed.push_back(name);
    }
  }
  return pass;
}

absl::StatusOr<CleanupReport> Cleanup(const CleanupCloud& cloud, const base::Clock* clock,
                                      const CleanupOptions& options) {
  const int64_t deadline = clock->MonotonicMicros() + options.timeout.count();
  auto sleep = options.sleep ? options.sleep : [](std::chrono::microseconds d) {
    std::this_thread::sleep_for(d);
  };
  CleanupReport report;
  for (;;) {
    const CleanupPass pass = CleanupOnce(cloud, options.conflict_retries);
    ++report.passes;
    report.leases_cleared += static_cast<int>(pass.leases_cleared.size());
    report.taints_removed += static_cast<int>(pass.taints_removed.size());
    report.taints_kept = pass.taints_kept;
    base::LogInfo(
        "cleanup: pass ", report.passes, ": ",
        pass.cleared_something()
            ? absl::StrCat("removed our marks from the Leases of ", Names(pass.leases_cleared),
                           ", our taint ", election::kUnschedulableTaint, " from the Nodes ",
                           Names(pass.taints_removed))
            : "nothing of ours found",
        pass.taints_kept.empty()
            ? ""
            : absl::StrCat("; the taint kept on ", Names(pass.taints_kept),
                           " (their Leases are delegated by someone else)"),
        pass.errors.empty() ? "" : absl::StrCat("; ", pass.errors.size(), " failure(s)"));
    for (const std::string& e : pass.errors) base::LogWarning("cleanup: ", e);
    if (report.passes >= 2 && pass.clean()) return report;
    if (clock->MonotonicMicros() + options.quiet_period.count() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "gave up after ", report.passes, " passes in ", options.timeout.count() / 1'000'000,
          " s: ",
          !pass.errors.empty()
              ? absl::StrCat(pass.errors.size(), " failure(s), the first: ", pass.errors.front())
              : absl::StrCat("the last pass still found marks (Leases of ",
                             Names(pass.leases_cleared), "; taints on ",
                             Names(pass.taints_removed),
                             "): a server of the release may still be running")));
    }
    sleep(options.quiet_period);
  }
}

}  // namespace poolcoord::controllers
