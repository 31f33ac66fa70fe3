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

// coordination.k8s.io/v1 LeaseSpec (and poolcoord's PoolLease, which mirrors it).
struct LeaseSpec {
  std::optional<std::string> holder_identity;
  std::optional<int32_t> lease_duration_seconds;
  std::optional<int64_t> acquire_time_us;
  std::optional<int64_t> renew_time_us;
  std::optional<int32_t> lease_transitions;
  bool operator==(const LeaseSpec&) const = default;
};

// One delegation challenge the server issued to a pool (issue 15,
// docs/verifiable-delegation.md): PoolLease status.challenges[i].
struct DelegationChallenge {
  std::string value;                    // base64 of 32 random bytes
  std::optional<int64_t> issue_time_us;  // the issuing server's wall clock (MicroTime)
  bool operator==(const DelegationChallenge&) const = default;
};

// poolcoord's PoolLease status (coordination.pool/v1alpha1), written by the server
// only; coordination.k8s.io Leases have no status, so it stays empty there. Read
// only: never sent (the server keeps its own on every write of the main resource).
struct PoolLeaseStatus {
  // The server's wall-clock time of the last renewal: the lease expires
  // leaseDurationSeconds after it, on the server's clock.
  std::optional<int64_t> observed_time_us;
  // Newest first: the first is the pool's current challenge, which the leader
  // relays to its members (empty from a server without verifiable delegation).
  std::vector<DelegationChallenge> challenges;
  bool operator==(const PoolLeaseStatus&) const = default;
};

struct Lease {
  ObjectMeta metadata;
  LeaseSpec spec;
  PoolLeaseStatus status;  // PoolLeases only
  bool operator==(const Lease&) const = default;
};

struct LeaseList {
  std::string resource_version;
  std::vector<Lease> items;
};

// poolcoord's DelegatedLease (coordination.pool/v1alpha1, cluster-scoped, named
// after the node): a node's heartbeat as its pool leader renews it.
struct DelegatedLeaseSpec {
  std::optional<std::string> holder_identity;  // the node
  std::optional<int32_t> lease_duration_seconds;
  std::optional<int64_t> renew_time_us;  // the leader's last in-pool observation, its clock
  std::optional<std::string> pool_name;
  std::optional<std::string> delegate;  // the leader that wrote it
  bool operator==(const DelegatedLeaseSpec&) const = default;
};

// One leader term: a PoolLease object (its uid) at one leaseTransitions value.
struct LeaderTerm {
  std::string pool_lease_uid;
  int32_t lease_transitions = 0;
  bool operator==(const LeaderTerm&) const = default;
};

// Written by the server only.
struct DelegatedLeaseStatus {
  // The server's wall-clock time of the last renewal: the heartbeat is
  // live while observed_time_us + leaseDurationSeconds lies ahead on its clock.
  std::optional<int64_t> observed_time_us;
  bool expired = false;
  std::optional<LeaderTerm> leader_term;  // the term it was written in
  bool operator==(const DelegatedLeaseStatus&) const = default;
};

struct DelegatedLease {
  ObjectMeta metadata;
  DelegatedLeaseSpec spec;
  DelegatedLeaseStatus status;
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
