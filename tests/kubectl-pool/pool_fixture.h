// A cloud of pools for kubectl-pool's tests, over the fake typed clients
// (tests/cloud_fakes.h), at a fixed server time:
//   hangzhou  PoolLease held by hz-1, term 3, 15 s, renewed 4 s ago (expires in 11 s);
//             Nodes hz-1..hz-4; DelegatedLeases hz-3 (live, this term, begun
//             2m10s ago), hz-2 (live, an earlier term, begun 20 s ago), hz-4
//             (expired 10 s ago), and "stray" (live, names hangzhou, but its Node
//             is labelled beijing)
//   beijing   PoolLease held by bj-1, term 0, 10 s, renewed 70 s ago (expired 60 s ago);
//             Nodes bj-1, bj-2, stray
//   released  PoolLease released (no holder), term 1; no members
#pragma once

#include <optional>
#include <string>

#include "kubectl-pool/pools.h"
#include "tests/cloud_fakes.h"

namespace poolcoord::kubectl_pool::testing {

inline constexpr int64_t kNow = 1'767'225'600'000'000;  // 2026-01-01T00:00:00Z, the server's
inline constexpr int64_t kSecond = 1'000'000;
inline constexpr char kLabel[] = "apps.openyurt.io/nodepool";

inline cloud::Lease PoolLease(const std::string& pool, const std::string& holder, int duration,
                              int transitions, int64_t observed) {
  cloud::Lease l;
  l.metadata.name = pool;
  l.metadata.uid = "uid-" + pool;
  l.metadata.resource_version = "7";
  if (!holder.empty()) l.spec.holder_identity = holder;
  l.spec.lease_duration_seconds = duration;
  l.spec.lease_transitions = transitions;
  l.spec.acquire_time_us = observed - 100 * kSecond;
  l.spec.renew_time_us = observed - 250'000;  // the leader's clock runs a little behind
  l.status.observed_time_us = observed;
  return l;
}

inline cloud::DelegatedLease Delegated(const std::string& node, const std::string& pool,
                                       const std::string& delegate, int64_t observed,
                                       int64_t created, int transitions) {
  cloud::DelegatedLease d;
  d.metadata.name = node;
  d.metadata.creation_timestamp_us = created;
  d.spec.holder_identity = node;
  d.spec.pool_name = pool;
  d.spec.delegate = delegate;
  d.spec.lease_duration_seconds = 40;
  d.spec.renew_time_us = observed - 300'000;
  d.status.observed_time_us = observed;
  d.status.leader_term = cloud::LeaderTerm{"uid-" + pool, transitions};
  return d;
}

inline cloud::Node LabelledNode(const std::string& name, const std::string& pool) {
  cloud::Node n;
  n.metadata.name = name;
  if (!pool.empty()) n.metadata.labels[kLabel] = pool;
  return n;
}

struct FakeCloud {
  FakeCloud() {
    pool_leases.Put(PoolLease("hangzhou", "hz-1", 15, 3, kNow - 4 * kSecond));
    pool_leases.Put(PoolLease("beijing", "bj-1", 10, 0, kNow - 70 * kSecond));
    pool_leases.Put(PoolLease("released", "", 15, 1, kNow - 5 * kSecond));
    delegated.Put(Delegated("hz-3", "hangzhou", "hz-1", kNow - 2 * kSecond, kNow - 130 * kSecond, 3));
    delegated.Put(Delegated("hz-2", "hangzhou", "hz-1", kNow - 1 * kSecond, kNow - 20 * kSecond, 2));
    delegated.Put(Delegated("hz-4", "hangzhou", "hz-1", kNow - 50 * kSecond, kNow - 60 * kSecond, 3));
    delegated.Put(Delegated("stray", "hangzhou", "hz-1", kNow - 3 * kSecond, kNow - 5 * kSecond, 3));
    for (const char* n : {"hz-1", "hz-2", "hz-3", "hz-4"}) nodes.Put(LabelledNode(n, "hangzhou"));
    for (const char* n : {"bj-1", "bj-2", "stray"}) nodes.Put(LabelledNode(n, "beijing"));
    nodes.Put(LabelledNode("unlabelled", ""));
  }
  PoolClients Clients(bool with_nodes = true) {
    PoolClients c;
    c.pool_leases = &pool_leases;
    c.delegated_leases = &delegated;
    c.nodes = with_nodes ? &nodes : nullptr;
    c.server_now_us = [this] { return server_now; };
    c.local_now_us = [] { return kNow + 3600 * kSecond; };  // this machine is an hour off
    return c;
  }
  poolcoord::testing::FakeLeases pool_leases;
  poolcoord::testing::FakeDelegatedLeases delegated;
  poolcoord::testing::FakeNodes nodes;
  std::optional<int64_t> server_now = kNow;
};

}  // namespace poolcoord::kubectl_pool::testing
