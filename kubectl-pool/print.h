// How `kubectl pool` prints pools: a table like kubectl get's, a describe page
// like kubectl describe's, and -o json / -o yaml in one stable shape.
//
// The JSON/YAML shape (documented in docs/kubectl-pool.md; fields are only ever
// added): a List-like object
//   {"apiVersion": "kubectl-pool.coordination.pool/v1alpha1", "kind": "PoolList",
//    "metadata": {}, "serverTime": MicroTime, "serverTimeSource": "Date"|"Local",
//    "membersFrom": "Nodes"|"DelegatedLeases", "poolLabel": "...",
//    "items": [Pool, ...]}
// with one Pool per pool (kind "Pool"; `describe -o json` prints that one Pool):
//   {"apiVersion", "kind": "Pool", "metadata": {"name"},
//    "leader": string|null, "term": int|null,
//    "poolLease": null | {"uid", "resourceVersion", "holderIdentity",
//        "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions",
//        "observedTime", "expiryTime", "expired", "expiresInSeconds"},
//    "memberCount": int, "delegated": int,
//    "longestDelegation": null | {"node", "since", "delegatedSeconds"},
//    "members": [{"name", "inPool", "delegation": null | {"delegate",
//        "renewTime", "observedTime", "leaseDurationSeconds",
//        "expiryTime", "live", "currentTerm", "since", "delegatedSeconds"}}]}
// Times are MicroTime strings (RFC 3339, 6 fractional digits, UTC) or null;
// seconds are whole numbers, negative expiresInSeconds meaning "expired ago".
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/human_duration.h"
#include "kubectl-pool/pools.h"

namespace poolcoord::kubectl_pool {

// A duration as kubectl prints ages (apimachinery's duration.HumanDuration):
// "45s", "3m20s", "25m", "5h10m", "3d4h", "400d", "2y10d" (base/human_duration.h).
using base::HumanDuration;

// "in 12s" when `at_us` lies ahead of `now_us`, else "expired 3m ago".
std::string RelativeExpiry(int64_t at_us, int64_t now_us);

// Columns: NAME, LEADER, TERM, EXPIRES, MEMBERS (NODES|DELEGATEDLEASES),
// DELEGATED, LONGEST DELEGATION; cells "<none>" where there is nothing.
std::string FormatTable(const std::vector<PoolView>& pools, const Snapshot& snapshot);

// The pool's lease details, then each member with its last delegated renewal
// (renewTime on the leader's clock, status.observedTime on the server's) and
// who wrote it (spec.delegate).
std::string FormatDescribe(const PoolView& pool, const Snapshot& snapshot);

enum class Format { kJson, kYaml };
// The PoolList of `pools`; with `single`, the one Pool of pools[0] alone.
std::string FormatObjects(const std::vector<PoolView>& pools, const Snapshot& snapshot,
                          Format format, bool single);

}  // namespace poolcoord::kubectl_pool
