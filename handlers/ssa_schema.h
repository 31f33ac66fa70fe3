// The structural schema that server-side apply merges by: for each field, whether
// it is a scalar, a map or struct (granular: merged key by key, or atomic:
// replaced whole), or a list (atomic, a set of scalars, or a map keyed by some of
// its items' fields). These are the OpenAPI extensions x-kubernetes-map-type
// (granular|atomic), x-kubernetes-list-type (atomic|set|map) and
// x-kubernetes-list-map-keys, as structured-merge-diff's schema.Map/List model them.
//
// A Schema owns its nodes; build one with the factory methods and keep it for the
// life of the process (nodes point at each other). Read-only use is thread-safe.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace poolcoord::handlers::ssa {

enum class ScalarType { kString, kInteger, kNumber, kBoolean };
enum class ListType { kAtomic, kSet, kMap };

struct SchemaNode {
  enum class Kind { kScalar, kMap, kList };
  Kind kind = Kind::kScalar;
  ScalarType scalar = ScalarType::kString;  // kScalar
  // kMap: true for x-kubernetes-map-type: atomic (the whole map is one value).
  bool atomic = false;
  // kMap: the named fields of a struct; `elements` types every other key (a
  // map[string]T); a key that is neither is not declared in the schema.
  std::vector<std::pair<std::string, const SchemaNode*>> fields;
  const SchemaNode* elements = nullptr;  // kMap values; kList items
  ListType list_type = ListType::kAtomic;  // kList
  std::vector<std::string> keys;         // kList with kMap: x-kubernetes-list-map-keys

  // The type of field `name` of a kMap node, or nullptr when undeclared.
  const SchemaNode* FieldType(std::string_view name) const;
  bool IsNamedField(std::string_view name) const;
};

class Schema {
 public:
  Schema() = default;
  Schema(const Schema&) = delete;
  Schema& operator=(const Schema&) = delete;

  const SchemaNode* Scalar(ScalarType type);
  // A struct: named fields, merged field by field (or replaced whole if atomic).
  const SchemaNode* Struct(std::vector<std::pair<std::string, const SchemaNode*>> fields,
                           bool atomic = false);
  // A map[string]T.
  const SchemaNode* Map(const SchemaNode* elements, bool atomic = false);
  const SchemaNode* List(const SchemaNode* items, ListType type,
                         std::vector<std::string> keys = {});

  void set_root(const SchemaNode* root) { root_ = root; }
  const SchemaNode& root() const { return *root_; }

 private:
  std::deque<SchemaNode> nodes_;
  const SchemaNode* root_ = nullptr;
};

}  // namespace poolcoord::handlers::ssa
