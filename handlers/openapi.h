// OpenAPI for coordination.pool/v1alpha1: Swagger 2.0 on /openapi/v2, the OpenAPI
// v3 root on /openapi/v3 and the v3 group-version document on
// /openapi/v3/apis/coordination.pool/v1alpha1, with the caching behaviour of
// k8s.io/kube-openapi (pkg/handler, pkg/handler3).
//
// Both documents describe, for every kind of handlers/registry/, the
// cluster-scoped paths
//   /apis/coordination.pool/v1alpha1/<plural>[/{name}[/status]]
// and the legacy /watch/ paths, every operation tagged with
// x-kubernetes-action and x-kubernetes-group-version-kind (an object), and the
// schemas each kind's strategy states (handlers/openapi_schema.h), plus a List
// per kind, tagged with x-kubernetes-group-version-kind (a list), as kubectl
// explain and kube-aggregator's merge expect. The meta.k8s.io schemas are here. PATCH operations accept
// application/json-patch+json and application/merge-patch+json only: kubectl
// apply sends strategic-merge-patch whenever it is advertised, and we do not
// implement it. They declare the fieldValidation query parameter, so kubectl
// leaves validation to the server instead of fetching protobuf OpenAPI v2.
//
// Documents are rendered once, on first use, and served from cached bytes
// (kube-aggregator downloads them every minute). All functions are thread-safe.
#pragma once

#include <string>

#include "handlers/http_types.h"

namespace poolcoord::handlers {

// GET /openapi/v2: 200 Swagger 2.0 JSON with a quoted ETag; 304 (empty body) when
// If-None-Match matches it; 406 when the Accept header admits no JSON.
Response ServeOpenApiV2(const Request& request);

// GET /openapi/v3: {"paths":{"apis/coordination.pool/v1alpha1":{"serverRelativeURL":
// "/openapi/v3/apis/coordination.pool/v1alpha1?hash=<HEX>"}}}: only our
// group-version key, because kube-aggregator merges the keys as they are into
// kube-apiserver's root. Quoted ETag, 304 on If-None-Match, 406 as above.
Response ServeOpenApiV3Root(const Request& request);

// GET /openapi/v3/apis/coordination.pool/v1alpha1[?hash=X]: the OpenAPI 3.0.0
// document, Content-Type application/json, quoted ETag (the hash).
// - hash equal to the current hash: 200 with Cache-Control "public, immutable",
//   an Expires one year ahead and Vary: Accept (the URL names immutable content);
// - any other hash: 301 to the current hash URL;
// - no hash: 200 with the ETag;
// - If-None-Match matching the ETag: 304 with the same headers and no body;
// - Accept admitting no JSON: 406.
Response ServeOpenApiV3GroupVersion(const Request& request);

// The hash of the current v3 group-version document: upper-case hex SHA-256 of
// its bytes, as kube-openapi's handler3 uses upper-case hex of a digest. It
// changes whenever the document does.
const std::string& OpenApiV3Hash();

}  // namespace poolcoord::handlers
