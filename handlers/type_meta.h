// The apiVersion and kind of a create or update body, checked as kube-apiserver
// checks them for a custom resource before and after decoding it (the JSON
// serializer's version/kind sniffing, k8s.io/apiserver's create and update
// handlers): a body must name its kind and our group/version.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "rapidjson/document.h"
#include "store/object.h"

namespace poolcoord::handlers {

// What the body says it is.
struct BodyTypeMeta {
  std::string api_version;  // "" when absent or null
  std::string kind;
};

// Reads apiVersion and kind from the parsed body `doc` (the request's bytes
// are `body`, for the messages) for a write of `kind`. Errors, 400 BadRequest,
// each as kube-apiserver words it, `<summary>` being the body's first 30 bytes
// (" ..." after them when longer; hex unless the body starts with '{'):
// - `doc` not an object, or apiVersion/kind (first in document order) not a
//   string: "the object provided is unrecognized (must be of type Widget):
//   couldn't get version/kind; json parse error: json: cannot unmarshal number
//   into Go struct field .apiVersion of type string (<summary>)";
// - no kind (absent, null, ""; also a body that is JSON null): "the object
//   provided is unrecognized (must be of type Widget): Object 'Kind' is
//   missing in '<the whole body>' (<summary>)";
// - apiVersion not ours (also absent): "the API version in the data (v1) does
//   not match the expected API version (coordination.pool/v1alpha1)".
// A kind that is not ours passes here: the decoder refuses it (422, kind: must
// be Widget), as kube-apiserver's custom resource validator does.
absl::StatusOr<BodyTypeMeta> CheckBodyTypeMeta(const rapidjson::Value& doc, std::string_view body,
                                               store::Kind kind);

// The 400 for a body with nothing in it (only whitespace), which never parses:
// "the object provided is unrecognized (must be of type Widget): couldn't get
// version/kind; json parse error: unexpected end of JSON input (<summary>)".
absl::Status EmptyBodyError(std::string_view body, store::Kind kind);

// The prefix of a decoding error of a body that names its kind and version, as
// k8s.io/apiserver's handlers word it: `Widget in version "v1alpha1" cannot be
// handled as a Widget: ` (the body's kind and version, then ours).
std::string CannotBeHandledAs(const BodyTypeMeta& type_meta, store::Kind kind);

}  // namespace poolcoord::handlers
