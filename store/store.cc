#include "store/store.h"

#include <string>
#include <utility>

namespace poolcoord::store {

WritePlan PlanWrite(Kind kind, std::string_view name, const ObjectPtr& current,
                    MutableObjectPtr& next, bool dry_run) {
  WritePlan plan;
  if (!next) {
    plan.done = !current || dry_run;
    plan.result.deleted = current != nullptr;
    if (dry_run) plan.result.object = current;
    return plan;
  }
  // The key is the identity: keep the object consistent with where it is stored.
  next->kind = kind;
  next->metadata.name = std::string(name);
  plan.result.created = current == nullptr;
  if (dry_run) {
    next->metadata.resource_version = current ? current->metadata.resource_version : 0;
    plan.result.object = std::move(next);
    plan.done = true;
  }
  return plan;
}

absl::StatusOr<std::vector<ObjectPtr>> Store::GetAll(std::span<const ObjectKey> keys) {
  std::vector<ObjectPtr> out;
  out.reserve(keys.size());
  for (const ObjectKey& key : keys) {
    absl::StatusOr<ObjectPtr> got = Get(key.kind, key.name);
    if (got.ok()) {
      out.push_back(*std::move(got));
    } else if (absl::IsNotFound(got.status())) {
      out.push_back(nullptr);
    } else {
      return got.status();
    }
  }
  return out;
}

}  // namespace poolcoord::store
