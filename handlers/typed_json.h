// Server-side apply's operations on JSON values typed by a structural schema
// (handlers/ssa_schema.h), as structured-merge-diff/v4's typed package defines
// them: validation of an applied configuration, the set of fields a value sets,
// the comparison of two values, the merge of a configuration onto a live object,
// and the removal of fields.
//
// A `const rapidjson::Value*` of nullptr means "absent" (a JSON null is a value).
// Fields the schema does not declare are treated as atomic leaves everywhere but
// in Validate, which refuses them. Pure functions; values must not be shared
// with another thread while in use.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "handlers/field_set.h"
#include "handlers/ssa_schema.h"
#include "rapidjson/document.h"

namespace poolcoord::handlers::ssa {

using Allocator = rapidjson::Document::AllocatorType;

// Checks an applied configuration against the schema, as structured-merge-diff's
// typed conversion does before it merges. InvalidArgument, the message naming
// the path as kube-apiserver does:
//   ".spec.foo: field not declared in schema"
//   ".spec.replicas: expected numeric (int or float), got string"
//   ".metadata.finalizers: duplicate entries for key [=\"a\"]"
//   ".metadata.ownerReferences: element 0: associative list with keys has an
//    element that omits key field \"uid\" (and doesn't have default value)"
absl::Status Validate(const rapidjson::Value& value, const SchemaNode& node);

// The path element that names `item` in `list` (a set: its value; a map list: its
// key fields; otherwise its index). InvalidArgument as Validate words it.
absl::StatusOr<PathElement> ListItemElement(const SchemaNode& list, const rapidjson::Value& item,
                                            int index);

// The fields `value` sets: every scalar, atomic map or list, item of a set or map
// list and key of a map[string]T, and every empty map or list.
FieldSet ToFieldSet(const rapidjson::Value& value, const SchemaNode& node);

// What changed from `lhs` to `rhs`: leaves added, removed or modified, and the maps
// and lists (not leaves) that appeared or disappeared as a whole.
struct Comparison {
  FieldSet added;
  FieldSet removed;
  FieldSet modified;
  bool IsSame() const { return added.Empty() && removed.Empty() && modified.Empty(); }
};
Comparison Compare(const rapidjson::Value* lhs, const rapidjson::Value* rhs,
                   const SchemaNode& node);

// `rhs` merged onto `lhs` (at most one of them absent): leaves, atomic maps and
// lists take rhs's value; granular maps merge key by key; sets and map lists merge
// item by item, keeping lhs's order and placing rhs's new items where rhs has them.
rapidjson::Value Merge(const rapidjson::Value* lhs, const rapidjson::Value* rhs,
                       const SchemaNode& node, Allocator& allocator);

// Removes every member of `set` from `value` (with everything below it); maps and
// lists that become empty stay, empty.
void RemoveItems(rapidjson::Value& value, const FieldSet& set, const SchemaNode& node,
                 Allocator& allocator);

}  // namespace poolcoord::handlers::ssa
