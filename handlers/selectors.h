// Label and field selectors of list and watch requests (?labelSelector=,
// ?fieldSelector=), with the grammar and the matching rules of
// k8s.io/apimachinery/pkg/labels and pkg/fields.
//
// Both types are values: cheap to copy, immutable after Parse, safe to share
// between threads. A default-constructed selector matches everything.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "store/object.h"

namespace poolcoord::handlers {

class LabelSelector {
 public:
  // selection.Operator. kGreaterThan/kLessThan are the `gt`/`lt` of the grammar,
  // written `k>5` / `k<5`, comparing integer label values.
  enum class Operator {
    kEquals,        // k=v, k==v
    kNotEquals,     // k!=v
    kIn,            // k in (a,b)
    kNotIn,         // k notin (a,b)
    kExists,        // k
    kDoesNotExist,  // !k
    kGreaterThan,   // k>5
    kLessThan,      // k<5
  };

  struct Requirement {
    std::string key;
    Operator op = Operator::kExists;
    std::vector<std::string> values;  // sorted, without duplicates
  };

  LabelSelector() = default;  // matches everything

  // Parses `text` (already query-decoded). Comma means AND; whitespace around
  // tokens is ignored; "" (or only whitespace) selects everything. Keys must be
  // qualified names and values label values (handlers/validation.h).
  // Errors: 400 BadRequest (store::BadRequestError) with labels.Parse's wording,
  // e.g. "unable to parse requirement: found '', expected: in, notin, =, ==, !=,
  // gt, lt" or "found ')', expected: ',' or 'end of string'".
  static absl::StatusOr<LabelSelector> Parse(std::string_view text);

  // True when every requirement holds. As Kubernetes: != and notin also match
  // objects without the key; =, in, gt and lt require it.
  // Takes the object's labels as stored: no copy per object or watch event.
  bool Matches(const store::StringMap& labels) const;

  bool Empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

class FieldSelector {
 public:
  struct Term {
    std::string field;
    bool negated = false;  // true for !=
    std::string value;     // unescaped
  };

  FieldSelector() = default;  // matches everything

  // Parses `text` (already query-decoded): terms `field=value`, `field==value` or
  // `field!=value` joined by commas; in values, '\,', '\=' and '\\' escape those
  // characters (fields.EscapeValue). Whitespace around field names and values is
  // trimmed. Errors, all 400 BadRequest:
  // - a term without an operator: "invalid selector: '<text>'; can't understand '<term>'";
  // - a bad escape or an unescaped '=' or ',' in a value;
  // - a field outside `supported_fields`, worded as
  //   runtime.DefaultMetaV1FieldSelectorConversion:
  //   `"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"`.
  static absl::StatusOr<FieldSelector> Parse(std::string_view text,
                                             const std::vector<std::string>& supported_fields);

  // `get` returns a field's value on the object, nullopt when it has none; an
  // absent value compares as "" for both = and != (as fields.Set does).
  bool Matches(const std::function<std::optional<std::string>(std::string_view field)>& get) const;

  // The name when some term pins metadata.name with = or ==
  // (fields.Selector.RequiresExactMatch), so a caller can fetch one object instead
  // of listing. Other terms still apply: filter the result with Matches.
  std::optional<std::string> ExactName() const;

  bool Empty() const { return terms_.empty(); }
  const std::vector<Term>& terms() const { return terms_; }

 private:
  std::vector<Term> terms_;
};

}  // namespace poolcoord::handlers
