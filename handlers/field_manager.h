// The field manager: the one place where the REST handlers meet server-side apply
// and metadata.managedFields (k8s.io/apiserver's fieldmanager.FieldManager). As
// kube-apiserver's endpoint handlers do, the REST handlers call RecordUpdate on
// the object of every create, update and non-apply patch before the registry
// store gets it, and ApplyConfiguration for an apply patch; everything else (the
// FieldsV1 sets, the structural merge, conflicts) lives in field_set.h,
// typed_json.h, managed_fields.h and apply.h, and each kind's schema in its
// strategy (registry::Strategy::MergeSchema).
//
// Objects are compared as the JSON clients see, without managedFields, under the
// kind's schema. The renewal fast path: an update that changes only spec fields
// its manager's Update entry already owns (and no other entry owns) only sets
// that entry's time to now (seconds), without encoding anything; what each entry
// owns of the spec is cached beside it (store::ManagedFieldsEntry::owner_hint),
// so a lease holder renewing every few seconds pays a few compares.
// Thread-compatible; no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "handlers/field_set.h"
#include "handlers/ssa_schema.h"
#include "rapidjson/document.h"
#include "store/object.h"

namespace poolcoord::handlers {

struct FieldManagerRequest {
  store::Kind kind{};
  const ssa::SchemaNode* schema = nullptr;  // the kind's MergeSchema().root()
  // The fields a write of `subresource` resets (the kind's
  // registry::Strategy::ResetFields); nullptr: none.
  const ssa::FieldSet* reset_fields = nullptr;
  // The fieldManager query parameter, else the manager kube-apiserver derives
  // from the User-Agent (ssa::ManagerFromUserAgent); invalid UTF-8 as U+FFFD.
  std::string manager;
  std::string subresource;  // "" or "status"
  int64_t now_s = 0;        // seconds since the epoch
};

// The manager a request writes as: ?fieldManager= when given, else from its
// User-Agent ("kubectl/v1.32.0 (linux/amd64)" -> "kubectl").
std::string RequestManager(std::string_view field_manager, std::string_view user_agent);

// Sets next.metadata.managed_fields for a create (live == nullptr), an update or
// a non-apply patch. `next` arrives with the entries the request carried
// (unchanged from `live` for a patch that does not touch them) and leaves with
// the entries to store: the request's when it sent valid ones (a single empty
// entry resets them), else the live object's, updated for what changed from
// `live` to `next` (managed_fields.h). Call it after the server-owned fields were
// copied from `live` and before admission mutates `next`, as kube-apiserver
// records the change a client asked for, not the server's own stamps.
void RecordUpdate(const store::Object* live, store::Object& next, const FieldManagerRequest& r);

// An applied configuration checked before it is applied. Errors (400 BadRequest,
// kube-apiserver's messages): not a JSON object; apiVersion/kind not ours
// ("invalid object type: coordination.pool/v1, Kind=Widget"); it sets
// metadata.managedFields ("metadata.managedFields must be nil"); a field the
// schema does not declare, a value of the wrong type, a repeated set item
// ("failed to create typed patch object (/name; coordination.pool/v1alpha1,
// Kind=Widget): .spec.foo: field not declared in schema"; kube-apiserver
// answers these 500, a client error is 400 here); a name that is not the URL's.
absl::Status CheckApplyConfiguration(const rapidjson::Value& config, store::Kind kind,
                                     const ssa::SchemaNode& schema, std::string_view url_name);

struct AppliedObject {
  store::MutableObjectPtr object;  // with its managedFields
  bool changed = false;            // false: the object stays as it is (no write)
};

// Applies a checked configuration to `live` (nullptr: the object does not exist
// and the apply creates it). The result carries the live object's server-owned
// fields as they were; the caller prepares it like any update or create.
// Errors: 409 Conflict (ssa::ApplyConflictError) naming each other manager and
// field, unless `force`; whatever decoding the merged object reports (400/422).
absl::StatusOr<AppliedObject> ApplyConfiguration(const store::Object* live,
                                                 const rapidjson::Value& config,
                                                 const FieldManagerRequest& r, bool force);

}  // namespace poolcoord::handlers
