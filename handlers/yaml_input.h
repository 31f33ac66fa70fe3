// The body of an apply patch (application/apply-patch+yaml): YAML, or JSON (what
// kubectl sends), turned into a JSON document as kube-apiserver's
// sigs.k8s.io/yaml does: YAML 1.1 scalars as go-yaml v2 resolves them (null/~,
// true/yes/on/y, false/no/off/n, ints in decimal, 0x, 0o/0-octal and 0b, floats;
// quoted scalars stay strings), non-string keys as their text, only the first
// document, aliases expanded (at most kMaxYamlNodes nodes in all).
// Invalid UTF-8 becomes U+FFFD first (json_input.h). A key repeated within one
// mapping is reported with its line (`line 3: key "x" already set in map`) and
// the last one wins.
// Thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "handlers/json_input.h"

namespace poolcoord::handlers {

inline constexpr size_t kMaxYamlNodes = 100000;

// Errors, 400 BadRequest worded as kube-apiserver's apply patcher does:
// "error decoding YAML: ..." (malformed YAML or JSON, an alias bomb, nesting over
// 512 levels).
absl::StatusOr<JsonBody> ParseYamlBody(std::string_view body);

}  // namespace poolcoord::handlers
