// Sets of field paths, as server-side apply records ownership: the model of
// sigs.k8s.io/structured-merge-diff/v4 fieldpath (Set, Path, PathElement) and its
// FieldsV1 JSON encoding, which metadata.managedFields[].fieldsV1 carries.
//
// A path is a sequence of elements, each one of:
//   - a field of a map or struct:          f:<name>       printed .name
//   - an item of an associative list,      k:{"uid":"x"}  printed [uid="x"]
//     by the values of its key fields
//   - an item of a set (a list of scalars) v:"x"          printed [="x"]
//   - an item of a list by index           i:3            printed [3]
// A FieldSet holds paths as a trie: at each level a sorted set of member elements
// (paths that end here) and a sorted map from element to child set. FieldsV1 is
// that trie as JSON: {"f:spec":{"f:replicas":{}}}, with "." marking a path that
// is a member and also has children ({"f:labels":{".":{},"f:a":{}}}).
//
// Values in k: and v: elements are JSON scalars (null, bool, number, string); the
// set orders elements as structured-merge-diff does (fields, then keys, then
// values, then indices; numbers < strings < bools < null), so ToJson() writes the
// same text kube-apiserver writes for the same set.
//
// All types are values; functions are pure and thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "rapidjson/document.h"

namespace poolcoord::handlers::ssa {

// A JSON scalar: null, bool, integer, floating point or string.
class Scalar {
 public:
  Scalar() = default;  // null
  static Scalar Bool(bool b);
  static Scalar Int(int64_t i);
  static Scalar Double(double d);
  static Scalar String(std::string s);
  // The scalar `v` holds; false when `v` is an array or object.
  static bool FromJson(const rapidjson::Value& v, Scalar* out);

  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  const std::string& str() const { return std::get<std::string>(v_); }

  // Compact JSON: "x" (JSON-escaped), 3, 1.5, true, null.
  std::string ToJson() const;
  // As structured-merge-diff's value.ToString prints it in a path: strings
  // Go-quoted ("x"), the rest as JSON.
  std::string ToPathString() const;
  rapidjson::Value ToValue(rapidjson::Document::AllocatorType& allocator) const;

  // Total order: numbers (integers and floats compared by value) < strings <
  // bools < null.
  friend int Compare(const Scalar& a, const Scalar& b);
  friend bool operator==(const Scalar& a, const Scalar& b) { return Compare(a, b) == 0; }

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string> v_;
};

class PathElement {
 public:
  enum class Type : uint8_t { kField, kKey, kValue, kIndex };

  static PathElement Field(std::string name);
  // Key fields in any order; they are kept sorted by name.
  static PathElement Key(std::vector<std::pair<std::string, Scalar>> fields);
  static PathElement Value(Scalar value);
  static PathElement Index(int index);

  Type type() const { return type_; }
  const std::string& field() const { return name_; }
  const std::vector<std::pair<std::string, Scalar>>& key() const { return key_; }
  const Scalar& value() const { return value_; }
  int index() const { return index_; }

  // The FieldsV1 key: "f:spec", "k:{\"uid\":\"x\"}", "v:\"x\"", "i:3".
  std::string ToFieldsV1Key() const;
  // Parses a FieldsV1 key. InvalidArgument for a malformed one; NotFound for a
  // key of an unknown kind (structured-merge-diff skips those).
  static absl::StatusOr<PathElement> FromFieldsV1Key(std::string_view key);
  // ".spec", "[uid=\"x\"]", "[=\"x\"]", "[3]".
  std::string ToString() const;

  friend int Compare(const PathElement& a, const PathElement& b);
  friend bool operator==(const PathElement& a, const PathElement& b) {
    return Compare(a, b) == 0;
  }
  friend bool operator<(const PathElement& a, const PathElement& b) { return Compare(a, b) < 0; }

 private:
  Type type_ = Type::kField;
  std::string name_;
  std::vector<std::pair<std::string, Scalar>> key_;
  Scalar value_;
  int index_ = 0;
};

using Path = std::vector<PathElement>;

// Appends `s` as a JSON string the way Go's encoding/json writes it (HTML-safe:
// <, >, & and U+2028/U+2029 escaped; \u00xx in lower case), as kube-apiserver's
// FieldsV1 keys and last-applied annotations carry strings.
void AppendGoJsonString(std::string* out, std::string_view s);

// Whether the FieldsV1 text `json` has the field path `fields` (f: elements
// only, e.g. {"spec", "replicas"}) as a member, without parsing it into a set:
// the renewal fast path asks this of every managedFields entry. nullopt when the
// text is not the compact form FieldSet::ToJson writes (escapes in keys, bad JSON):
// the caller must then parse it.
std::optional<bool> FieldsV1HasFieldPath(std::string_view json,
                                         std::initializer_list<std::string_view> fields);

// The fields below the top-level field `parent` that the FieldsV1 text `json`
// has as members (for {"f:spec":{"f:a":{},"f:b":{"f:c":{}}}} and "spec": a), in
// one pass, or nullopt as FieldsV1HasFieldPath. `fn` is called for each.
bool FieldsV1ChildMembers(std::string_view json, std::string_view parent,
                          const std::function<void(std::string_view)>& fn);

// ".spec.replicas", ".metadata.finalizers[=\"a\"]"; "" for the empty path.
std::string PathToString(const Path& path);
// Shorthand for tests and schemas: {"spec", "replicas"} as field elements.
Path FieldPath(std::initializer_list<std::string_view> fields);

class FieldSet {
 public:
  FieldSet() = default;

  bool Empty() const { return members_.empty() && children_.empty(); }
  // Inserting the empty path does nothing.
  void Insert(const Path& path);
  void Insert(const PathElement* begin, const PathElement* end);
  bool Has(const Path& path) const;
  // True when some member starts with `prefix` (including `prefix` itself).
  bool HasPrefix(const Path& prefix) const;

  FieldSet Union(const FieldSet& other) const;
  FieldSet Intersection(const FieldSet& other) const;
  // Members of this set that `other` lacks, level by level: a member of `other`
  // does not remove paths below it.
  FieldSet Difference(const FieldSet& other) const;
  // Like Difference, but a member of `other` also removes every path below it.
  FieldSet RecursiveDifference(const FieldSet& other) const;
  // The paths below `pe` (without `pe`); empty when there are none.
  const FieldSet* Child(const PathElement& pe) const;
  bool IsMember(const PathElement& pe) const;

  // Every member path in order: the members of a level, then its children.
  void Iterate(const std::function<void(const Path&)>& fn) const;
  size_t Size() const;  // number of member paths

  // FieldsV1: a JSON object, compact, keys in the set's order.
  std::string ToJson() const;
  // Parses FieldsV1 (text or a parsed value). InvalidArgument when it is not an
  // object of objects or a key does not parse; keys of unknown kinds are skipped.
  static absl::StatusOr<FieldSet> FromJson(std::string_view json);
  static absl::StatusOr<FieldSet> FromJson(const rapidjson::Value& json);

  friend bool operator==(const FieldSet& a, const FieldSet& b);

 private:
  struct ChildNode;
  void IteratePrefix(Path& prefix, const std::function<void(const Path&)>& fn) const;
  template <typename Writer>
  void WriteContents(Writer& w, bool include_self) const;
  FieldSet* MutableChild(const PathElement& pe);
  static absl::Status ReadLevel(const rapidjson::Value& v, FieldSet* out, bool* is_member);

  std::vector<PathElement> members_;  // sorted, unique
  std::vector<ChildNode> children_;       // sorted by element, unique, never empty sets
};

struct FieldSet::ChildNode {
  PathElement pe;
  FieldSet set;
};

}  // namespace poolcoord::handlers::ssa
