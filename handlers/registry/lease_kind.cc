#include "handlers/registry/lease_kind.h"

#include <array>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "election/lease_rules.h"

namespace poolcoord::handlers::registry {
namespace {

using ssa::ListType;
using ssa::ScalarType;
using ssa::Schema;
using ssa::SchemaNode;

// metav1.ObjectMeta as k8s.io/apimachinery declares its merge rules.
const SchemaNode* ObjectMeta(Schema& s) {
  const SchemaNode* str = s.Scalar(ScalarType::kString);
  const SchemaNode* integer = s.Scalar(ScalarType::kInteger);
  const SchemaNode* boolean = s.Scalar(ScalarType::kBoolean);
  const SchemaNode* owner_reference = s.Struct({{"apiVersion", str},
                                                {"blockOwnerDeletion", boolean},
                                                {"controller", boolean},
                                                {"kind", str},
                                                {"name", str},
                                                {"uid", str}},
                                               /*atomic=*/true);
  const SchemaNode* managed_fields_entry = s.Struct({{"apiVersion", str},
                                                     {"fieldsType", str},
                                                     {"fieldsV1", s.Map(str, /*atomic=*/true)},
                                                     {"manager", str},
                                                     {"operation", str},
                                                     {"subresource", str},
                                                     {"time", str}});
  return s.Struct({
      {"annotations", s.Map(str)},
      {"creationTimestamp", str},
      {"deletionGracePeriodSeconds", integer},
      {"deletionTimestamp", str},
      {"finalizers", s.List(str, ListType::kSet)},
      {"generateName", str},
      {"generation", integer},
      {"labels", s.Map(str)},
      {"managedFields", s.List(managed_fields_entry, ListType::kAtomic)},
      {"name", str},
      {"namespace", str},
      {"ownerReferences", s.List(owner_reference, ListType::kMap, {"uid"})},
      {"resourceVersion", str},
      {"selfLink", str},
      {"uid", str},
  });
}

// Every lease-shaped kind accepts every status field (store/object_codec.cc
// decodes them all), so that a client's read-modify-write never trips on one.
const SchemaNode* Status(Schema& s) {
  const SchemaNode* str = s.Scalar(ScalarType::kString);
  const SchemaNode* integer = s.Scalar(ScalarType::kInteger);
  return s.Struct({
      // The delegation challenges (PoolLease; issue 15): written whole by the server.
      {"challenges",
       s.List(s.Struct({{"issueTime", str}, {"value", str}}), ListType::kAtomic)},
      {"expired", s.Scalar(ScalarType::kBoolean)},
      {"leaderTerm", s.Struct({{"leaseTransitions", integer}, {"poolLeaseUID", str}})},
      {"observedTime", str},
      // The last accepted delegation proof (DelegatedLease; issue 15).
      {"proof", s.Struct({{"bootID", str}, {"challenge", str}, {"sequence", integer}})},
  });
}

// The LeaseSpec fields: their wire names and JSON types.
struct SpecFieldType {
  uint32_t bit;
  const char* name;
  bool integer;
};
constexpr SpecFieldType kSpecFieldTypes[] = {
    {store::kSpecAcquireTime, "acquireTime", false},
    {store::kSpecDelegate, "delegate", false},
    {store::kSpecHolderIdentity, "holderIdentity", false},
    {store::kSpecLeaseDurationSeconds, "leaseDurationSeconds", true},
    {store::kSpecLeaseTransitions, "leaseTransitions", true},
    {store::kSpecPoolName, "poolName", false},
    {store::kSpecRenewTime, "renewTime", false},
};

const Schema* BuildLeaseSchema(const store::ResourceInfo& info) {
  auto* s = new Schema();
  const SchemaNode* str = s->Scalar(ScalarType::kString);
  const SchemaNode* integer = s->Scalar(ScalarType::kInteger);
  std::vector<std::pair<std::string, const SchemaNode*>> spec;
  for (const SpecFieldType& f : kSpecFieldTypes) {
    if (info.spec_fields & f.bit) spec.emplace_back(f.name, f.integer ? integer : str);
  }
  // spec.proof (DelegatedLease; write-only, never in a live object).
  if (info.spec_fields & store::kSpecProof) {
    spec.emplace_back("proof", s->Struct({{"certificate", str}, {"heartbeat", str}}));
  }
  s->set_root(s->Struct({{"apiVersion", str},
                         {"kind", str},
                         {"metadata", ObjectMeta(*s)},
                         {"spec", s->Struct(std::move(spec))},
                         {"status", Status(*s)}}));
  return s;
}

}  // namespace

const ssa::Schema& LeaseKind::MergeSchema() const {
  // One schema per kind, built on first use from the kind's spec fields.
  static std::array<std::once_flag, store::kMaxKinds> once;
  static std::array<const Schema*, store::kMaxKinds> schemas{};
  const size_t i = static_cast<size_t>(kind());
  std::call_once(once[i], [&] { schemas[i] = BuildLeaseSchema(Info()); });
  return *schemas[i];
}

void LeaseKind::PrepareForCreate(const WriteContext&, store::Object& object) const {
  object.status = store::LeaseStatus{};
  store::ClearDelegationStatus(object);
}

void LeaseKind::PrepareForUpdate(const WriteContext&, store::Object& object,
                                 const store::Object& old) const {
  object.status = old.status;
  store::CopyDelegationStatus(object, old);
}

absl::Status LeaseKind::AdmitStatusUpdate(const WriteContext& ctx, const store::Object& current,
                                          store::Object& proposed) const {
  return ctx.rules->AdmitStatusWrite(ctx.user, current, proposed);
}

int32_t MaxLeaseDurationSeconds(const WriteContext& ctx) {
  return ctx.rules ? ctx.rules->options().max_lease_duration_seconds
                   : election::LeaseRulesOptions{}.max_lease_duration_seconds;
}

void ValidateLeaseDuration(const store::LeaseSpec& spec, int32_t max_seconds, bool required,
                           std::vector<store::FieldCause>& causes) {
  if (spec.lease_duration_seconds) {
    const int32_t d = *spec.lease_duration_seconds;
    if (d < 1 || d > max_seconds) {
      causes.push_back(store::FieldInvalid(
          "spec.leaseDurationSeconds", std::to_string(d),
          absl::StrCat("must be between 1 and ", max_seconds, " seconds (--max-lease-duration)")));
    }
  } else if (required) {
    causes.push_back(store::FieldRequired(
        "spec.leaseDurationSeconds",
        absl::StrCat("the server judges expiry from it; set 1 to ", max_seconds, " seconds")));
  }
}

}  // namespace poolcoord::handlers::registry
