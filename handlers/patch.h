// PATCH bodies applied to the JSON form of an object: JSON merge patch (RFC 7386,
// application/merge-patch+json; kubectl label/annotate/patch --type=merge) and
// JSON patch (RFC 6902, application/json-patch+json). Strategic merge patch is
// merge patch for our kinds: they have no lists with patch strategies. (A kind
// may apply a merge patch of its own faster: Strategy::FastMergePatch.)
//
// RapidJSON, no exceptions. The caller parses the body (malformed JSON is its 400),
// applies, then decodes and validates the result as an update. Functions are
// reentrant; the values passed in must not be shared with another thread.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "rapidjson/document.h"

namespace poolcoord::handlers {

// kube-apiserver's cap on the operations of one JSON patch (handlers/patch.go).
inline constexpr size_t kMaxJsonPatchOperations = 10000;

// RFC 7386 MergePatch(target, patch): when `patch` is an object, each member
// merges recursively into `target` (which becomes an object first if it is not),
// a null member deletes the key, and members keep their order; any other `patch`
// replaces `target` outright. `allocator` owns the values added to `target`.
// Always returns OK: every JSON document is a valid merge patch.
absl::Status ApplyMergePatch(rapidjson::Value& target, const rapidjson::Value& patch,
                             rapidjson::Document::AllocatorType& allocator);

// RFC 6902: applies the operations of `ops` in order (add, with "-" to append to
// an array; remove; replace; move; copy; test), with RFC 6901 pointers ("~1" is
// '/', "~0" is '~'). All or nothing: on error `doc` is left unchanged. Errors:
// - 400 BadRequest: `ops` is not an array of objects, an op is unknown or lacks
//   "path" (or "from" for move/copy, "value" for add/replace/test), or a pointer
//   is malformed (non-empty without a leading '/', or a bad '~' escape). Checked
//   for every operation before any is applied;
// - 413 RequestEntityTooLarge: more than kMaxJsonPatchOperations operations;
// - 422 Invalid, as kube-apiserver answers a patch that fails to apply
//   (NewGenericServerResponse(422) in k8s.io/apiserver's patch handler):
//   a path that does not exist for remove/replace/move/copy/test, an add whose
//   parent does not exist or whose array index is out of range, a move into its
//   own child, and a failed test, reported as
//   `test operation failed: path "/spec/x": found 33, expected 1`.
absl::Status ApplyJsonPatch(rapidjson::Document& doc, const rapidjson::Value& ops);

}  // namespace poolcoord::handlers
