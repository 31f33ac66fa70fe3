// The cloud cluster's objects that poolcoord reads and writes, as plain structs
// (the fields of k8s.io/api we use, named as there). Times are microseconds
// since the Unix epoch (MicroTime/Time on the wire, base/microtime.h).
//
// Round trips: a Lease read and written back keeps what a PUT must keep
// (labels, annotations, ownerReferences, finalizers; managedFields are left out
// and so kept by the server, as client-go's typed clients do). Nodes are only
// ever patched, so Node carries just what we read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/types.h"
#include "base/user_info.h"

namespace poolcoord::cloud {

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  std::optional<bool> controller;
  std::optional<bool> block_owner_deletion;
  bool operator==(const OwnerReference&) const = default;
};

struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string namespace_;
  std::string uid;
  std::string resource_version;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<OwnerReference> owner_references;
  std::vector<std::string> finalizers;
  // Set by the server (whole seconds); sent back unchanged, as client-go's typed
  // objects are, and ignored by the server on writes.
  std::optional<int64_t> creation_timestamp_us;
  bool operator==(const ObjectMeta&) const = default;
};

// The spec and status of a coordination.k8s.io/v1 Lease and of poolcoord's
// kinds (coordination.pool/v1alpha1), which mirror it: the group's own types
// (api/types.h), read and written by the group's one codec (api/codec.h).
using api::DelegationChallenge;
using api::DelegationFields;
using api::LeaderTerm;
using api::LeaseSpec;
using api::LeaseStatus;

// A coordination.k8s.io/v1 Lease, or poolcoord's PoolLease (cluster-scoped,
// named after its pool). Status and the delegation fields are PoolLeases'
// only (coordination.k8s.io Leases have no status), written by the server:
// read, never sent (the server keeps its own on every write of the main
// resource). delegation.challenges, newest first: the first is the pool's
// current challenge, which the leader relays to its members (empty from a
// server without verifiable delegation).
struct Lease {
  ObjectMeta metadata;
  LeaseSpec spec;
  LeaseStatus status;
  DelegationFields delegation;
  // When the server last saw spec.renewTime change, on its own clock: the
  // managedFields[].time of the entry that owns f:spec.f:renewTime (whole
  // seconds, so the change came at most 1 s after it; a manager's time moves
  // with each of its writes that changes a field, as k8s.io/apiserver's field
  // manager keeps it). Dates a renewTime written by a clock we cannot trust.
  // Read only, never sent; absent where the server keeps no managedFields.
  std::optional<int64_t> renew_time_written_us;
  bool operator==(const Lease&) const = default;
};

struct LeaseList {
  std::string resource_version;
  std::vector<Lease> items;
};

// poolcoord's DelegatedLease (coordination.pool/v1alpha1, cluster-scoped, named
// after the node): a node's heartbeat as its pool leader renews it. A write
// may carry the member's proof (delegation.proof); what the server verified
// comes back in delegation.accepted_proof.
struct DelegatedLease {
  ObjectMeta metadata;
  LeaseSpec spec;
  LeaseStatus status;
  DelegationFields delegation;
  bool operator==(const DelegatedLease&) const = default;
};

struct DelegatedLeaseList {
  std::string resource_version;
  std::vector<DelegatedLease> items;
};

// core/v1 Taint.
struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  std::optional<int64_t> time_added_us;
  bool operator==(const Taint&) const = default;
};

// core/v1 NodeAddress: type InternalIP, ExternalIP, Hostname, ...
struct NodeAddress {
  std::string type;
  std::string address;
  bool operator==(const NodeAddress&) const = default;
};

struct Node {
  ObjectMeta metadata;
  std::vector<Taint> taints;          // spec.taints
  std::vector<NodeAddress> addresses;  // status.addresses (read only: the agent's pool peers)
};

struct NodeList {
  std::string resource_version;
  std::vector<Node> items;
};

// core/v1 Event (the fields a recorder fills).
struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
};

struct Event {
  ObjectMeta metadata;
  ObjectReference involved_object;
  std::string reason;
  std::string message;
  std::string type = "Normal";  // or Warning
  std::string source_component;
  int64_t first_timestamp_us = 0;
  int64_t last_timestamp_us = 0;
  int64_t event_time_us = 0;  // MicroTime
  int32_t count = 1;
  std::string reporting_controller;
  std::string reporting_instance;
  std::string action;
};

// authentication.k8s.io/v1 TokenReview.
struct TokenReview {
  std::string token;                   // spec.token
  std::vector<std::string> audiences;  // spec.audiences
  // status
  bool authenticated = false;
  base::UserInfo user;
  std::string error;
};

// authorization.k8s.io/v1 SubjectAccessReview.
struct ResourceAttributes {
  std::string namespace_;
  std::string verb;
  std::string group;
  std::string version;
  std::string resource;
  std::string subresource;
  std::string name;
};
struct NonResourceAttributes {
  std::string path;
  std::string verb;
};
struct SubjectAccessReview {
  // spec
  std::optional<ResourceAttributes> resource_attributes;
  std::optional<NonResourceAttributes> non_resource_attributes;
  base::UserInfo user;  // spec.user, spec.uid, spec.groups, spec.extra
  // status
  bool allowed = false;
  bool denied = false;
  std::string reason;
  std::string evaluation_error;
};

struct ConfigMap {
  ObjectMeta metadata;
  std::map<std::string, std::string> data;
};

struct ConfigMapList {
  std::string resource_version;
  std::vector<ConfigMap> items;
};

// One event of a watch (metav1.WatchEvent): ADDED, MODIFIED, DELETED, BOOKMARK
// (then only object.metadata.resource_version is set). ERROR events end the
// watch as an error instead (IsResourceExpired for 410).
template <typename T>
struct WatchEvent {
  std::string type;
  T object;
};

// client-go's metav1.ListOptions, the parts we use.
struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;
  bool allow_watch_bookmarks = false;
  int timeout_seconds = 0;  // watches: 0 = the server's default
};

}  // namespace poolcoord::cloud
