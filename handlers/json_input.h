// Request bodies decoded as kube-apiserver decodes them, so that nothing a client
// sends can make a stored object, or a later response, invalid JSON:
// - invalid UTF-8 (any byte that does not start or continue a valid sequence) and
//   \u escapes of unpaired UTF-16 surrogates become U+FFFD, one per byte or
//   escape, as Go's encoding/json decodes strings; validation then judges the
//   result (kube-apiserver 1.32 stores "a\ufffd\ufffdb" for "a\xff\xfeb");
// - a key repeated in one JSON object is reported (for fieldValidation: Strict
//   fails with `duplicate field "spec.x"`, Warn warns) and the last one wins, the
//   earlier ones being dropped whole, as encoding/json does.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "rapidjson/document.h"

namespace poolcoord::handlers {

// Replaces each invalid UTF-8 byte of `s` with U+FFFD. Returns false, leaving
// *out alone, when `s` is valid UTF-8.
bool SanitizeUtf8(std::string_view s, std::string* out);

// SanitizeUtf8, and inside JSON strings also \uD800-\uDFFF escapes that are not
// a high surrogate followed by a low one, which become \uFFFD. Returns false,
// leaving *out alone, when there is nothing to replace.
bool SanitizeJsonText(std::string_view json, std::string* out);

// A key that appeared more than once in one object: its path as Go's strict JSON
// decoder names it ("metadata.name", "spec", "[0].value",
// "metadata.ownerReferences[0].uid") and the 1-based line of its repetition.
struct DuplicateField {
  std::string path;
  std::string key;  // the repeated key itself
  int line = 0;
};

struct JsonBody {
  rapidjson::Document doc;
  std::vector<DuplicateField> duplicates;  // in document order
};

// Parses a request body as above. Errors (400 BadRequest): nesting deeper than
// 512 (store::CheckJsonNesting), and malformed JSON ("the request body is not
// valid JSON: <reason> at offset N", naming gzip when the body starts with its
// magic bytes: bodies are read as sent, whatever Content-Encoding says, as
// kube-apiserver reads them).
absl::StatusOr<JsonBody> ParseJsonBody(std::string_view body);

// Finds the keys repeated within one object of `value` and removes all but the
// last of each (recursively), appending their paths to `out` in document order
// (lines are 0: a DOM does not know them). `prefix` is the path of `value`.
void RemoveDuplicateKeys(rapidjson::Value& value, std::vector<DuplicateField>* out,
                         const std::string& prefix = "");

}  // namespace poolcoord::handlers
