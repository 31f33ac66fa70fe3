// What `kubectl pool` shows, computed from what the API serves: each pool's
// PoolLease (leader, term, expiry), its members and their DelegatedLeases, all
// judged on the SERVER's clock (its Date header), never this machine's.
//
// Where members come from: the Nodes that carry the pool label (--pool-label,
// OpenYurt's apps.openyurt.io/nodepool by default), when the server has a Nodes
// API (kube-apiserver, which proxies our group through its aggregator); else
// (talking to poolcoord directly) the nodes named by the pool's DelegatedLeases.
// Snapshot::members_from says which, and every output says it too.
//
// A pool is any name that has a PoolLease, a labelled Node or a DelegatedLease
// (spec.poolName). Times are microseconds since the Unix epoch. Pure functions
// over values, apart from Fetch, which calls the clients; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cloud/clientset.h"
#include "cloud/types.h"

namespace poolcoord::kubectl_pool {

inline constexpr char kDefaultPoolLabel[] = "apps.openyurt.io/nodepool";

enum class MembersFrom { kNodes, kDelegatedLeases };

// Everything read from the server, at one moment of its clock.
struct Snapshot {
  std::vector<cloud::Lease> pool_leases;
  std::vector<cloud::DelegatedLease> delegated_leases;
  std::vector<cloud::Node> nodes;  // those carrying pool_label (kNodes only)
  MembersFrom members_from = MembersFrom::kDelegatedLeases;
  std::string pool_label;
  int64_t server_now_us = 0;
  bool server_time_from_date = true;  // false: no Date header, this machine's clock
  std::vector<std::string> warnings;   // printed as "Warning: ..." on stderr
};

// The clients Fetch reads through; tests hand it fakes. `nodes` may be null (no
// Nodes API to ask). `server_now_us` returns the server's current time as its
// last answers' Date headers told it (nullopt: none seen).
struct PoolClients {
  cloud::LeaseInterface* pool_leases = nullptr;
  cloud::DelegatedLeaseInterface* delegated_leases = nullptr;
  cloud::NodeInterface* nodes = nullptr;
  std::function<std::optional<int64_t>()> server_now_us;
  std::function<int64_t()> local_now_us;  // the fallback when no Date was seen
};

// Lists PoolLeases, DelegatedLeases (of `only_pool` when it is not empty) and
// the labelled Nodes. Nodes answering 404 (no Nodes API: poolcoord itself) or
// 403 (not allowed; with a warning) make the DelegatedLeases the member source;
// other errors, and any error listing our own kinds, are returned as they came
// (Kubernetes errors, cloud/errors.h).
absl::StatusOr<Snapshot> Fetch(const PoolClients& clients, const std::string& pool_label,
                               const std::string& only_pool = "");

// One DelegatedLease as a member's delegation.
struct Delegation {
  std::string delegate;                  // spec.delegate
  std::optional<int64_t> renew_time_us;  // spec.renewTime, on the leader's clock
  std::optional<int64_t> observed_time_us;  // status.observedTime, the server's clock
  int32_t lease_duration_seconds = 0;
  std::optional<int64_t> expiry_us;  // observedTime + leaseDurationSeconds
  bool live = false;                 // expiry ahead of the server's now
  bool current_term = false;         // written in the PoolLease's current, live term
  std::optional<int64_t> since_us;   // metadata.creationTimestamp: delegation began
  int64_t delegated_for_us = 0;      // server now - since (0 when unknown or not live)
};

struct Member {
  std::string name;
  // The Node carries this pool's label (always true when members come from
  // DelegatedLeases). False for a node whose DelegatedLease names this pool
  // while its Node is not labelled so.
  bool in_pool = true;
  std::optional<Delegation> delegation;
};

struct PoolView {
  std::string name;
  std::optional<cloud::Lease> pool_lease;
  std::string leader;               // spec.holderIdentity; "" when none
  std::optional<int32_t> term;      // spec.leaseTransitions (0 when unset); none without a PoolLease
  std::optional<int64_t> expiry_us; // status.observedTime + leaseDurationSeconds
  bool expired = false;
  std::vector<Member> members;      // by name
  int member_count = 0;             // members with in_pool
  int delegated = 0;                // live DelegatedLeases of the pool
  std::optional<Member> longest;    // the live delegation that began first
};

// Every pool of the snapshot, by name; with `only_pool`, just that one (NotFound
// when nothing names it).
absl::StatusOr<std::vector<PoolView>> BuildPools(const Snapshot& snapshot,
                                                 const std::string& only_pool = "");

}  // namespace poolcoord::kubectl_pool
