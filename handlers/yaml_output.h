// Responses in YAML (Accept: application/yaml), as kube-apiserver serves them for
// a custom resource: the JSON answer re-encoded as sigs.k8s.io/yaml does (keys
// sorted, block style, empty maps and lists as {} and []).
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "handlers/http_types.h"

namespace poolcoord::handlers {

// Whether the request's Accept header asks for YAML before anything else we
// serve (application/json and its Table/PartialObjectMetadata forms, */*).
bool PrefersYaml(const Request& request);

// `json` (one JSON value) as a YAML document. Strings stay strings: one that a
// YAML 1.1 reader (go-yaml v2, kube-apiserver's) could take for another type
// (true, 1, 2024-01-01, null, "") or that is not plain-safe is double-quoted.
// InvalidArgument when `json` does not parse.
absl::StatusOr<std::string> JsonToYaml(std::string_view json);

// A plain JSON response (Content-Type application/json, no stream) in YAML,
// Content-Type application/yaml; any other response unchanged.
Response ToYamlResponse(Response response);

}  // namespace poolcoord::handlers
