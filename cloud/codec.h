// JSON encoding and decoding of the typed objects (cloud/types.h), as the
// cloud's kube-apiserver (and poolcoord's server) speaks them; the spec and
// status of the lease-shaped kinds by the group's one codec (api/codec.h).
// Used by the real clients; tests use it to check what a client sent.
//
// Decoding is lenient the way client-go's is: unknown fields are ignored, a
// field of the wrong JSON type is left at its zero value, an unparseable time is
// left unset. Only a body that is not a JSON object is an error
// (InvalidArgument). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cloud/types.h"

namespace poolcoord::cloud {

std::string EncodeLease(const Lease& lease, const std::string& api_version,
                        const std::string& kind);
absl::StatusOr<Lease> DecodeLease(std::string_view json);
absl::StatusOr<LeaseList> DecodeLeaseList(std::string_view json);

// poolcoord's DelegatedLeases. The body of a create or update: metadata, and
// spec with the proof when delegation.proof is set (status is the server's).
std::string EncodeDelegatedLease(const DelegatedLease& lease);
absl::StatusOr<DelegatedLease> DecodeDelegatedLease(std::string_view json);
absl::StatusOr<DelegatedLeaseList> DecodeDelegatedLeaseList(std::string_view json);

absl::StatusOr<Node> DecodeNode(std::string_view json);
absl::StatusOr<NodeList> DecodeNodeList(std::string_view json);
// {"metadata":{"resourceVersion":rv},"spec":{"taints":[...]}}: a merge patch that
// replaces the taints on condition that the Node is still at `resource_version`
// (omitted when empty: no precondition).
std::string TaintsMergePatch(const std::vector<Taint>& taints, const std::string& resource_version);

std::string EncodeEvent(const Event& event);
absl::StatusOr<Event> DecodeEvent(std::string_view json);

std::string EncodeTokenReview(const TokenReview& review);
absl::StatusOr<TokenReview> DecodeTokenReview(std::string_view json);

std::string EncodeSubjectAccessReview(const SubjectAccessReview& review);
// The review's spec alone, in Go's field order with empty fields left out (a
// stable cache key for equal reviews).
std::string EncodeSubjectAccessReviewSpec(const SubjectAccessReview& review);
absl::StatusOr<SubjectAccessReview> DecodeSubjectAccessReview(std::string_view json);

absl::StatusOr<ConfigMap> DecodeConfigMap(std::string_view json);
absl::StatusOr<ConfigMapList> DecodeConfigMapList(std::string_view json);

// One line of a watch stream. `decode` reads the object. An ERROR event is
// returned as its Kubernetes error (the metav1.Status it carries).
absl::StatusOr<WatchEvent<Lease>> DecodeLeaseWatchEvent(std::string_view line);
absl::StatusOr<WatchEvent<Node>> DecodeNodeWatchEvent(std::string_view line);
absl::StatusOr<WatchEvent<ConfigMap>> DecodeConfigMapWatchEvent(std::string_view line);

// "?labelSelector=...&..." for `options` (percent-escaped; "" when empty);
// `watch` adds watch=true and the watch parameters.
std::string ListQuery(const ListOptions& options, bool watch);

}  // namespace poolcoord::cloud
