// What the lease-shaped kinds (PoolLease, DelegatedLease) share, so that each
// kind's file holds only what is its own:
// - status is the server's: dropped on create, kept on an update of the main
//   resource (status.proof and status.challenges, behind Object::delegation,
//   too); spec is kept on a write of /status; status.observedTime (and the
//   monotonic time beside it) only the lease rules stamp, on a renewal: every
//   write keeps it, and nobody owns it (ResetFields); an update is validated as
//   a create is;
// - /status is written by system:masters only (election/'s AdmitStatusWrite);
// - the renewal's merge patch of spec fields, applied without the JSON round
//   trip (FastMergePatch);
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

class LeaseStrategy : public Strategy {
 public:
  void PrepareForCreate(const WriteContext& ctx, store::Object& object) const override;
  void PrepareForUpdate(const WriteContext& ctx, Subresource subresource, store::Object& object,
                        const store::Object& old) const override;
  const ssa::FieldSet& ResetFields(Subresource subresource) const override;
  // A merge patch whose only member is "spec" setting holderIdentity (string),
  // leaseDurationSeconds and leaseTransitions (int32), renewTime and
  // acquireTime (valid MicroTimes), each only if the kind has it on the wire
  // (store::ResourceInfo::spec_fields), and the write-only proof (an object of
  // the strings heartbeat and certificate). Not: metadata, status, null
  // members, other fields, wrong types, a time that does not parse.
  store::MutableObjectPtr FastMergePatch(const store::Object& current,
                                         const rapidjson::Value& patch) const override;
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
