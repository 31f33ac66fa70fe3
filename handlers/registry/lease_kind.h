// What the lease-shaped kinds (PoolLease, DelegatedLease) share, so that each
// kind's file holds only what is its own:
// - status is the server's: dropped on create, kept on an update of the main
//   resource (status.proof and status.challenges, behind Object::delegation,
//   too); an update is validated as a create is;
// - /status is written by system:masters and the forwarder (--forwarder-user,
//   election/'s AdmitStatusWrite);
// - the leaseDurationSeconds check and the Renewed printer column;
// - the structural schema server-side apply merges by (MergeSchema): ObjectMeta's
//   rules (labels and annotations granular maps, finalizers a set, ownerReferences
//   a map list keyed by uid of atomic references, managedFields atomic), the
//   kind's spec fields (ResourceInfo::spec_fields, all scalars) and the status
//   fields, merged field by field.
//
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "handlers/registry/strategy.h"
#include "handlers/table.h"
#include "store/api_error.h"
#include "store/object.h"

namespace poolcoord::handlers::registry {

class LeaseKind : public Strategy {
 public:
  void PrepareForCreate(const WriteContext& ctx, store::Object& object) const override;
  void PrepareForUpdate(const WriteContext& ctx, store::Object& object,
                        const store::Object& old) const override;
  std::vector<store::FieldCause> ValidateUpdate(const WriteContext& ctx,
                                                const store::Object& object,
                                                const store::Object& old) const override {
    return Validate(ctx, object);
  }
  absl::Status AdmitStatusUpdate(const WriteContext& ctx, const store::Object& current,
                                 store::Object& proposed) const override;
  const ssa::Schema& MergeSchema() const override;
};

// The upper bound of leaseDurationSeconds: the rules' --max-lease-duration, or
// its default when the server runs without rules.
int32_t MaxLeaseDurationSeconds(const WriteContext& ctx);

// spec.leaseDurationSeconds: 1 to `max_seconds` (FieldValueInvalid otherwise);
// when `required`, also present (FieldValueRequired): the server judges expiry
// from it.
void ValidateLeaseDuration(const store::LeaseSpec& spec, int32_t max_seconds, bool required,
                           std::vector<store::FieldCause>& causes);

// The age of spec.renewTime, a column of every lease-shaped kind.
inline constexpr TableColumn kRenewedColumn{
    "Renewed", "string", "",
    "Time elapsed since spec.renewTime, the holder's (or, for a DelegatedLease, the pool "
    "leader's) last renewal on its own clock.",
    0};

}  // namespace poolcoord::handlers::registry
