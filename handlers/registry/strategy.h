// A strategy per kind: everything the API does with one kind of
// coordination.pool/v1alpha1, as k8s.io/apiserver splits it between the
// rest.RESTCreateStrategy / RESTUpdateStrategy / RESTDeleteStrategy of a kind
// and of its status subresource, its ResetFieldsStrategy, its TableConvertor and
// its GetAttrs (selectable fields), plus its OpenAPI schema. One file per kind
// holds one Strategy (handlers/registry/<plural>.cc); one generic registry
// store (generic_store.h) serves the verbs of every kind and calls the strategy
// at fixed points; registry.h lists the kinds. No file but a kind's own names
// the kind or one of its fields (scripts/check-layers.py checks it; the files of
// each kind are listed in docs/architecture.md, "A kind's files").
//
// Adding a kind: a new handlers/registry/<plural>.cc defining a Strategy (and a
// store::ResourceInfo when the kind is not built into store/), and one line in
// registry.cc.
//
// The order of a write (generic_store.cc), each error in its precedence:
//   create  ObjectMeta checks (422) -> PrepareForCreate, then inside the store's
//           atomic step: already exists (409) -> CheckWriter (403/503) ->
//           Validate (422) -> warnings (the finalizers', handlers/validation.h's
//           FinalizerWarnings, then WarningsOnCreate) -> Canonicalize -> Admit
//   update  inside the atomic step: missing (404) -> the body (PUT) or the patch
//           applied to the stored object (PATCH) -> preconditions: resourceVersion,
//           uid (409) -> PrepareForUpdate -> ObjectMeta checks (422) -> server
//           metadata carried over -> CheckWriter -> ValidateUpdate (422) ->
//           warnings (FinalizerWarnings of those added, WarningsOnUpdate) ->
//           Canonicalize -> Admit
//   status  as update, but with the stored metadata (managedFields aside) and
//           PrepareForUpdate of the status subresource, and AdmitStatusUpdate in
//           place of CheckWriter..Admit
//   delete  inside the atomic step: missing (404) -> preconditions (409) ->
//           AdmitDelete -> finalizers
// CheckWriter, Admit, AdmitStatusUpdate and AdmitDelete are admission: they run
// only when the server has lease rules (WriteContext::rules); handler tests run
// without them. Validation always runs.
//
// Strategies are stateless singletons: every method is const and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "base/user_info.h"
#include "handlers/field_set.h"
#include "handlers/openapi_schema.h"
#include "handlers/ssa_schema.h"
#include "handlers/table.h"
#include "store/api_error.h"
#include "store/object.h"
#include "store/object_codec.h"
#include "rapidjson/document.h"
#include "store/store.h"

namespace poolcoord::election {
class LeaseRules;
}  // namespace poolcoord::election

namespace poolcoord::handlers::registry {

// The part of an object a write goes to: the main resource, or the status
// subresource (/status).
enum class Subresource { kMain, kStatus };

// Who writes, and the rules the write answers to.
struct WriteContext {
  const base::UserInfo& user;
  // The lease rules: their configuration (--max-lease-duration), the pool
  // membership, the admission checks. nullptr when the server runs without them
  // (handler tests): admission hooks are then not called, and validation checks
  // what it can without them.
  const election::LeaseRules* rules = nullptr;
};

// A field selector a kind supports beyond metadata.name and metadata.namespace
// (k8s: the fields.Set of GetAttrs). An absent value reads as "".
struct SelectableField {
  std::string_view path;  // "spec.nodeName"
  std::string (*value)(const store::Object& object);
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Names (plural, kind, short name), the wire fields of the spec, the Go
  // struct names of decode errors.
  virtual const store::ResourceInfo& Info() const = 0;
  store::Kind kind() const { return Info().kind; }
  // Every kind of the group is cluster-scoped (nodes and pools are).
  bool NamespaceScoped() const { return false; }

  // --- create (rest.RESTCreateStrategy)

  // Normalizes a new object before it is validated: drops what clients may not
  // set (status). Server metadata (uid, creationTimestamp, generation) is the
  // generic store's.
  virtual void PrepareForCreate(const WriteContext& ctx, store::Object& object) const = 0;
  // The kind's field checks (422): one cause per bad field, all of them at once.
  // Must not change the object.
  virtual std::vector<store::FieldCause> Validate(const WriteContext& ctx,
                                                  const store::Object& object) const = 0;
  // Warning headers for a create that passed validation (299 "..."), as
  // "path.to.field: message".
  virtual std::vector<std::string> WarningsOnCreate(const WriteContext& ctx,
                                                    const store::Object& object) const {
    return {};
  }
  // Brings a validated object into its canonical form before it is stored.
  virtual void Canonicalize(store::Object& object) const {}

  // --- update (rest.RESTUpdateStrategy)

  // Whether a PUT of a missing object creates it (false: 404).
  virtual bool AllowCreateOnUpdate() const { return false; }
  // Whether an update without metadata.resourceVersion is accepted (false: 422,
  // "must be specified for an update"). False, as kube-apiserver's Lease
  // strategy and every CRD's: a PUT says which state it replaces.
  virtual bool AllowUnconditionalUpdate() const { return false; }
  // What an update of `subresource` may not set, reset from the stored `old`
  // (PrepareForUpdate of a kind's strategy and of its status strategy): through
  // the main resource status stays as stored, through /status spec does; what
  // only the server writes stays as stored through either. The generic store
  // has already kept the stored metadata for /status (managedFields aside).
  virtual void PrepareForUpdate(const WriteContext& ctx, Subresource subresource,
                                store::Object& object, const store::Object& old) const = 0;
  // The fields a write of `subresource` resets whatever it sends (
  // rest.ResetFieldsStrategy's GetResetFields), beyond what the subresource
  // itself leaves alone (status through the main resource, all but status
  // through /status): nobody owns them (handlers/managed_fields.h). The
  // reference stays valid. Default: none.
  virtual const ssa::FieldSet& ResetFields(Subresource subresource) const {
    static const ssa::FieldSet* const kNone = new ssa::FieldSet();
    return *kNone;
  }
  virtual std::vector<store::FieldCause> ValidateUpdate(const WriteContext& ctx,
                                                        const store::Object& object,
                                                        const store::Object& old) const = 0;
  virtual std::vector<std::string> WarningsOnUpdate(const WriteContext& ctx,
                                                    const store::Object& object,
                                                    const store::Object& old) const {
    return {};
  }

  // --- before the atomic step

  // Work on a write's own fields that depends on nothing stored, run by the
  // handler before the store's atomic step, so that it holds no store lock
  // (the memory store runs every write's step under one lock). Called only
  // with ctx.rules set: with the create's or PUT's object, or, for a merge
  // patch that MergePatchPrechecks and FastMergePatch takes, with the patch
  // applied to an empty object of the kind (name set). It may only prepare
  // what Admit would compute anyway (a cache): Admit judges the write in full,
  // whether or not this ran. Default: nothing.
  virtual void Precheck(const WriteContext& ctx, const store::Object& proposed) const {}
  // Whether a merge patch of the main resource carries something Precheck
  // prepares: only then does the handler apply the patch a second time, onto
  // an empty object, to hand it to Precheck. Default: false.
  virtual bool MergePatchPrechecks(const rapidjson::Value& patch) const { return false; }

  // A merge patch of the main resource applied straight onto a copy of
  // `current`, without encoding the object to JSON, merging and decoding it
  // back: the renewal's path. nullptr for every patch it does not take; the
  // handler then takes the general path, which must give the same object (and
  // reports the errors). Default: takes none.
  virtual store::MutableObjectPtr FastMergePatch(const store::Object& current,
                                                 const rapidjson::Value& patch) const {
    return nullptr;
  }

  // --- admission: the lease rules (election/). Called only with ctx.rules set,
  // inside the store's atomic step, so what they read through `reader` cannot
  // change before the write they approve is stored.

  // Who may write objects of this kind at all, before the body is judged (403;
  // 503 while what validation needs is not loaded). OK by default.
  virtual absl::Status CheckWriter(const WriteContext& ctx, const store::Object& object) const {
    return absl::OkStatus();
  }
  // The rules for a write of the main resource (create: current == nullptr); may
  // stamp server-owned fields on `proposed`.
  virtual absl::Status Admit(const WriteContext& ctx, const store::ObjectPtr& current,
                             store::Object& proposed, store::TxnReader& reader) const = 0;
  // The rules for a write of the /status subresource.
  virtual absl::Status AdmitStatusUpdate(const WriteContext& ctx, const store::Object& current,
                                         store::Object& proposed) const = 0;
  // The rules for a delete (rest.RESTDeleteStrategy).
  virtual absl::Status AdmitDelete(const WriteContext& ctx, const store::Object& current,
                                   store::TxnReader& reader) const = 0;

  // --- reads

  // The printer columns between Name (first) and Age (last), which every kind
  // has (rest.TableConvertor), and one cell per column for an object.
  virtual std::span<const TableColumn> Columns() const = 0;
  virtual void WriteCells(store::JsonWriter& w, const store::Object& object,
                          int64_t now_us) const = 0;
  // Field selectors beyond metadata.name and metadata.namespace.
  virtual std::span<const SelectableField> SelectableFields() const { return {}; }

  // The OpenAPI definitions of the kind, in document order: its spec and status
  // types, then the kind itself (its List definition is generic).
  virtual std::vector<openapi::Definition> Definitions() const = 0;

  // --- server-side apply (handlers/field_manager.h)

  // The kind's structural schema: which maps and lists an apply merges item by
  // item and which it replaces whole, which fields exist (handlers/ssa_schema.h).
  // It says what the x-kubernetes-* extensions of Definitions() and the
  // meta.k8s.io definitions say (tests/handlers/merge_schema_test.cc checks both
  // for every kind). Built once; the reference stays valid.
  virtual const ssa::Schema& MergeSchema() const = 0;
};

// The one instance of a kind's strategy, for its registration function
// (registry.cc): `const Strategy& Widgets() { return Singleton<WidgetStrategy>(); }`.
template <typename KindStrategy>
const Strategy& Singleton() {
  static const KindStrategy* const strategy = new KindStrategy;
  return *strategy;
}

}  // namespace poolcoord::handlers::registry
