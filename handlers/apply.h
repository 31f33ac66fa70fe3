// Server-side apply (PATCH application/apply-patch+yaml) as kube-apiserver does
// it: structured-merge-diff's merge.Updater.Apply plus k8s.io/apiserver's
// fieldmanager wrappers around it.
//
// Apply(live, config) for manager M:
// 1. merges `config` onto `live` (typed_json.h Merge);
// 2. M's Apply entry becomes exactly the fields `config` sets (less the fields
//    nobody owns, managed_fields.h FilterOwnedFields);
// 3. a field M applied last time and leaves out now is removed from the object,
//    unless another manager (or M's new configuration) still owns it or something
//    below it;
// 4. a field whose value changes and that another manager owns is a conflict:
//    409 Conflict (ApplyConflictError) unless `force`, which takes it from them;
//    a field that changes value is no longer owned by anyone else; fields that
//    disappear are owned by nobody;
// 5. M's time becomes now when the object changed.
// Live objects without any managedFields first get a "before-first-apply" Update
// entry owning every field they have, so an apply conflicts with what was there.
// For manager "kubectl" (kubectl apply --server-side), conflicts with fields whose
// value still equals the object's kubectl.kubernetes.io/last-applied-configuration
// annotation are allowed, and an existing annotation is rewritten to the applied
// configuration, so objects made with client-side `kubectl apply` move over.
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "handlers/managed_fields.h"
#include "rapidjson/document.h"

namespace poolcoord::handlers::ssa {

inline constexpr char kLastAppliedAnnotation[] = "kubectl.kubernetes.io/last-applied-configuration";

struct ApplyOptions {
  const SchemaNode* schema = nullptr;  // the object's root
  // The fields a write of `subresource` resets (FilterOwnedFields); nullptr: none.
  const FieldSet* reset_fields = nullptr;
  std::string manager;
  std::string api_version;
  std::string subresource;
  int64_t now_s = 0;
  bool force = false;
};

struct ApplyResult {
  rapidjson::Value object;  // allocated with the caller's allocator
  Managers managers;
  bool changed = false;  // the object (not only its managedFields) differs from live
};

struct Conflict {
  Manager manager;  // the other manager (its fields are not filled in)
  Path path;
};

// `live` is the current object without metadata.managedFields (nullptr: it does
// not exist yet); `managers` its entries. `config` must have passed Validate.
// Errors: ApplyConflictError.
absl::StatusOr<ApplyResult> Apply(const rapidjson::Value* live, const rapidjson::Value& config,
                                  Managers managers, const ApplyOptions& options,
                                  rapidjson::Document::AllocatorType& allocator);

// 409 Conflict, reason Conflict, one cause of type FieldManagerConflict per
// conflict (message `conflict with "m" using v1`, field ".spec.x"), and
// kube-apiserver's message:
//   Apply failed with 1 conflict: conflict with "m": .spec.replicas
//   Apply failed with 2 conflicts: conflicts with "a":\n- .spec.x\n- .spec.y
absl::Status ApplyConflictError(std::vector<Conflict> conflicts);

// An applied configuration as JSON in the form kube-apiserver writes it into the
// last-applied annotation: keys sorted, compact, Go's string escapes, and a
// trailing newline.
std::string LastAppliedJson(const rapidjson::Value& config);

}  // namespace poolcoord::handlers::ssa
