#include "handlers/registry/lease_kind.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "election/lease_rules.h"

namespace poolcoord::handlers::registry {

void LeaseKind::PrepareForCreate(const WriteContext&, store::Object& object) const {
  object.status = store::LeaseStatus{};
}

void LeaseKind::PrepareForUpdate(const WriteContext&, store::Object& object,
                                 const store::Object& old) const {
  object.status = old.status;
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
