#include "controllers/delegation_marks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "election/lease_marks.h"
#include "election/lease_rules.h"

namespace poolcoord::controllers {
namespace {

constexpr const char* kOurAnnotations[] = {election::kDelegatedSinceAnnotation,
                                           election::kForwardedRenewTimeAnnotation,
                                           election::kCarriedRenewTimeAnnotation};

bool IsOurTaint(const cloud::Taint& t) { return t.key == election::kUnschedulableTaint; }

}  // namespace

bool CarriesDelegationMarks(const cloud::Lease& lease) {
  if (lease.metadata.labels.count(election::kDelegatedLabel) > 0) return true;
  return std::any_of(std::begin(kOurAnnotations), std::end(kOurAnnotations),
                     [&](const char* key) { return lease.metadata.annotations.count(key) > 0; });
}

bool StripDelegationMarks(cloud::Lease* lease) {
  size_t removed = lease->metadata.annotations.erase(election::kDelegateAnnotation);
  for (const char* key : kOurAnnotations) removed += lease->metadata.annotations.erase(key);
  removed += lease->metadata.labels.erase(election::kDelegatedLabel);
  return removed > 0;
}

bool HasUnschedulableTaint(const cloud::Node& node) {
  return std::any_of(node.taints.begin(), node.taints.end(), IsOurTaint);
}

absl::StatusOr<bool> SetUnschedulableTaint(cloud::NodeInterface* nodes, const std::string& name,
                                           bool present, int conflict_retries) {
  for (int attempt = 0; attempt <= conflict_retries; ++attempt) {
    absl::StatusOr<cloud::Node> got = nodes->Get(name);
    if (!got.ok()) return got.status();
    if (HasUnschedulableTaint(*got) == present) return false;
    std::vector<cloud::Taint> taints = got->taints;
    if (present) {
      taints.push_back(
          cloud::Taint{election::kUnschedulableTaint, "true", "NoSchedule", std::nullopt});
    } else {
      taints.erase(std::remove_if(taints.begin(), taints.end(), IsOurTaint), taints.end());
    }
    absl::StatusOr<cloud::Node> patched = nodes->Patch(
        name, cloud::kMergePatch, cloud::TaintsMergePatch(taints, got->metadata.resource_version));
    if (cloud::IsConflict(patched.status())) continue;
    if (!patched.ok()) return patched.status();
    return true;
  }
  return absl::AbortedError(absl::StrCat("Node ", name, " still conflicting after ",
                                         conflict_retries, " retries"));
}

}  // namespace poolcoord::controllers
