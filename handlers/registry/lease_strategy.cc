#include "handlers/registry/lease_strategy.h"

#include <array>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/microtime.h"
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
      // The delegation challenges of a PoolLease: written whole by the server.
      {"challenges",
       s.List(s.Struct({{"issueTime", str}, {"value", str}}), ListType::kAtomic)},
      {"expired", s.Scalar(ScalarType::kBoolean)},
      {"leaderTerm", s.Struct({{"leaseTransitions", integer}, {"poolLeaseUID", str}})},
      {"observedTime", str},
      // The last accepted delegation proof of a DelegatedLease.
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
    {api::kSpecAcquireTime, "acquireTime", false},
    {api::kSpecDelegate, "delegate", false},
    {api::kSpecHolderIdentity, "holderIdentity", false},
    {api::kSpecLeaseDurationSeconds, "leaseDurationSeconds", true},
    {api::kSpecLeaseTransitions, "leaseTransitions", true},
    {api::kSpecPoolName, "poolName", false},
    {api::kSpecRenewTime, "renewTime", false},
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
  if (info.spec_fields & api::kSpecProof) {
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

const ssa::Schema& LeaseStrategy::MergeSchema() const {
  // One schema per kind, built on first use from the kind's spec fields.
  static std::array<std::once_flag, store::kMaxKinds> once;
  static std::array<const Schema*, store::kMaxKinds> schemas{};
  const size_t i = static_cast<size_t>(kind());
  std::call_once(once[i], [&] { schemas[i] = BuildLeaseSchema(Info()); });
  return *schemas[i];
}

void LeaseStrategy::PrepareForCreate(const WriteContext&, store::Object& object) const {
  object.status = store::LeaseStatus{};
  store::ClearDelegationStatus(object);
  object.observed_monotonic_us = 0;
}

void LeaseStrategy::PrepareForUpdate(const WriteContext&, Subresource subresource,
                                     store::Object& object, const store::Object& old) const {
  if (subresource == Subresource::kMain) {
    object.status = old.status;
    store::CopyDelegationStatus(object, old);
  } else {
    object.spec = old.spec;
    store::ClearDelegationProof(object);  // write-only: never stored
    object.status.observed_time_us = old.status.observed_time_us;
  }
  object.observed_monotonic_us = old.observed_monotonic_us;
}

const ssa::FieldSet& LeaseStrategy::ResetFields(Subresource subresource) const {
  // status.observedTime: the server's time of the last renewal, reset on every
  // write of /status (through the main resource all of status is), as
  // kube-apiserver's field manager leaves a strategy's reset fields unowned.
  static const ssa::FieldSet* const kStatusReset = [] {
    auto* s = new ssa::FieldSet();
    s->Insert(ssa::FieldPath({"status", "observedTime"}));
    return s;
  }();
  return subresource == Subresource::kStatus ? *kStatusReset : Strategy::ResetFields(subresource);
}

store::MutableObjectPtr LeaseStrategy::FastMergePatch(const store::Object& current,
                                                      const rapidjson::Value& patch) const {
  if (!patch.IsObject() || patch.MemberCount() != 1) return nullptr;
  const auto& only = *patch.MemberBegin();
  if (std::string_view(only.name.GetString(), only.name.GetStringLength()) != "spec" ||
      !only.value.IsObject() || only.value.MemberCount() == 0) {
    return nullptr;
  }
  // Only fields the kind has on the wire: others take the general path, which
  // reports them as unknown.
  const uint32_t fields = Info().spec_fields;
  store::LeaseSpec spec = current.spec;
  std::optional<store::DelegationProof> proof;
  for (const auto& m : only.value.GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    const rapidjson::Value& v = m.value;
    if ((key == "renewTime" && (fields & api::kSpecRenewTime)) ||
        (key == "acquireTime" && (fields & api::kSpecAcquireTime))) {
      if (!v.IsString()) return nullptr;
      absl::StatusOr<int64_t> us =
          base::ParseMicroTime(std::string_view(v.GetString(), v.GetStringLength()));
      if (!us.ok()) return nullptr;
      (key == "renewTime" ? spec.renew_time_us : spec.acquire_time_us) = *us;
    } else if (key == "holderIdentity" && (fields & api::kSpecHolderIdentity)) {
      if (!v.IsString()) return nullptr;
      spec.holder_identity.emplace(v.GetString(), v.GetStringLength());
    } else if ((key == "leaseDurationSeconds" && (fields & api::kSpecLeaseDurationSeconds)) ||
               (key == "leaseTransitions" && (fields & api::kSpecLeaseTransitions))) {
      if (!v.IsInt()) return nullptr;  // int32 range; 15.0 or 2^40 take the general path
      (key == "leaseDurationSeconds" ? spec.lease_duration_seconds : spec.lease_transitions) =
          v.GetInt();
    } else if (key == "proof" && (fields & api::kSpecProof)) {
      // Both members strings, nothing else (a stored object never has a proof
      // to merge into).
      if (!v.IsObject()) return nullptr;
      proof.emplace();
      for (const auto& pm : v.GetObject()) {
        std::string_view pk(pm.name.GetString(), pm.name.GetStringLength());
        if (!pm.value.IsString()) return nullptr;
        std::string value(pm.value.GetString(), pm.value.GetStringLength());
        if (pk == "heartbeat") {
          proof->heartbeat = std::move(value);
        } else if (pk == "certificate") {
          proof->certificate = std::move(value);
        } else {
          return nullptr;
        }
      }
    } else {
      return nullptr;
    }
  }
  auto next = std::make_shared<store::Object>(current);
  next->spec = std::move(spec);
  if (proof) store::MutableDelegation(*next).proof = std::move(*proof);
  return next;
}

absl::Status LeaseStrategy::AdmitStatusUpdate(const WriteContext& ctx, const store::Object& current,
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
