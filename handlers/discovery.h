// Discovery for coordination.pool/v1alpha1, as k8s.io/apiserver serves it for an
// aggregated API server: the legacy documents (/apis, /apis/<group>,
// /apis/<group>/<version>), aggregated discovery v2 and v2beta1 on /apis when the
// Accept header asks for it, /version and /api. Plus the Accept-header parsing the
// other content-negotiating handlers (OpenAPI, Table) share.
//
// Every document is rendered once, on first use, and served from cached bytes:
// the aggregator asks for them every minute. All functions are thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "handlers/http_types.h"

namespace poolcoord::handlers {

// One media range of an Accept header: "application/json;g=x;v=y;as=Z;q=0.5".
// type and subtype are lower-cased; parameter names are lower-cased, values kept.
struct MediaRange {
  std::string type;     // "application", "*"
  std::string subtype;  // "json", "*"
  std::vector<std::pair<std::string, std::string>> params;  // without q
  double q = 1.0;

  // The value of parameter `name` (lower-case), or "" when absent.
  std::string_view Param(std::string_view name) const;
  // application/json, application/*, */* with none of the g/v/as parameters
  // that ask for a different kind (Table, APIGroupDiscoveryList, ...).
  bool IsPlainJson() const;
};

// Splits an Accept header into media ranges in the client's order of preference:
// sorted by q (stable, so equal q keeps header order); ranges with q=0 dropped.
// Parameters may come in any order, with or without spaces around ';' and '='.
// An empty header yields one "*/*" range (HTTP: no Accept means anything).
std::vector<MediaRange> ParseAccept(std::string_view accept);

// A metav1.Status for 406 NotAcceptable, as k8s.io/apiserver's negotiation
// failure reads: "only the following media types are accepted: <accepted>".
Response NotAcceptableResponse(std::string_view accepted);

// True when `if_none_match` (an If-None-Match header value: one entity tag, a
// comma-separated list, or "*") matches the quoted `etag`; weak tags (W/"x") match
// by their opaque part, as RFC 9110 weak comparison does for GET.
bool IfNoneMatchMatches(std::string_view if_none_match, std::string_view etag);

// GET /apis.
// - Accept asks for application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList
//   (or v=v2beta1): 200 APIGroupDiscoveryList of that version (v2 preferred when
//   both are acceptable), Content-Type naming g/v/as, a quoted ETag and
//   Vary: Accept; 304 with an empty body when If-None-Match carries that ETag.
// - Otherwise, if application/json or */* is acceptable: the legacy APIGroupList
//   ({"kind":"APIGroupList","apiVersion":"v1",...}).
// - Otherwise 406 NotAcceptable.
Response ServeApiGroupList(const Request& request);

// GET /apis/coordination.pool: {"kind":"APIGroup","apiVersion":"v1",...}; 406
// when JSON is not acceptable.
Response ServeApiGroup(const Request& request);

// GET /apis/coordination.pool/v1alpha1: the APIResourceList. Served for a request
// without Accept (kube-aggregator's availability check sends none) and for
// application/json or */*; 406 otherwise. Every entry, the status subresources
// included, carries `kind`, because client-go drops entries without one.
Response ServeApiResourceList(const Request& request);

// GET /version: version.Info as kube-apiserver's /version has it. Reports Kubernetes
// 1.32 (see the comment in discovery.cc); gitVersion carries our own version
// ("v1.32.0-poolcoord.<poolcoord_version without the leading v>").
Response ServeVersion(const Request& request, std::string_view poolcoord_version = "v0.1.0");

// GET /api: 404 NotFound Status, the answer every aggregated server built on
// k8s.io/apiserver gives (it installs no legacy core group, and its not-found
// handler answers "the server could not find the requested resource").
// kubectl tolerates it.
Response ServeApiVersions(const Request& request);

// The storage version hash of a kind of ours: base64 of the first 8 bytes of
// sha256("<group>/<version>/<Kind>"), as k8s.io/apiserver's
// endpoints/discovery/storageversionhash.go computes it.
std::string StorageVersionHash(std::string_view kind_name);

}  // namespace poolcoord::handlers
