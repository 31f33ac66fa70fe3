#include "kubectl-pool/pools.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "cloud/errors.h"

namespace poolcoord::kubectl_pool {

absl::StatusOr<Snapshot> Fetch(const PoolClients& clients, const std::string& pool_label,
                               const std::string& only_pool) {
  Snapshot s;
  s.pool_label = pool_label;
  // Our own kinds first: an error there (no APIService, forbidden) is the one to report.
  absl::StatusOr<cloud::LeaseList> leases = clients.pool_leases->List({});
  if (!leases.ok()) return leases.status();
  s.pool_leases = std::move(leases->items);
  cloud::ListOptions dl_options;
  if (!only_pool.empty()) dl_options.field_selector = absl::StrCat("spec.poolName=", only_pool);
  absl::StatusOr<cloud::DelegatedLeaseList> dls = clients.delegated_leases->List(dl_options);
  if (!dls.ok()) return dls.status();
  s.delegated_leases = std::move(dls->items);

  if (clients.nodes != nullptr) {
    cloud::ListOptions node_options;
    node_options.label_selector =
        only_pool.empty() ? pool_label : absl::StrCat(pool_label, "=", only_pool);
    absl::StatusOr<cloud::NodeList> nodes = clients.nodes->List(node_options);
    if (nodes.ok()) {
      s.members_from = MembersFrom::kNodes;
      s.nodes = std::move(nodes->items);
    } else if (cloud::IsForbidden(nodes.status())) {
      s.warnings.push_back(absl::StrCat("cannot list Nodes (", cloud::MessageOf(nodes.status()),
                                        "): members are taken from the DelegatedLeases"));
    } else if (!cloud::IsNotFound(nodes.status())) {
      return nodes.status();
    }
  }

  std::optional<int64_t> now = clients.server_now_us ? clients.server_now_us() : std::nullopt;
  if (now.has_value()) {
    s.server_now_us = *now;
  } else {
    s.server_now_us = clients.local_now_us ? clients.local_now_us() : 0;
    s.server_time_from_date = false;
    s.warnings.push_back(
        "the server sent no Date header: expiry is judged on this machine's clock");
  }
  return s;
}

namespace {

Delegation DelegationOf(const cloud::DelegatedLease& dl, const std::optional<cloud::Lease>& pl,
                        bool pool_lease_live, int64_t now) {
  Delegation d;
  d.delegate = dl.spec.delegate.value_or("");
  d.renew_time_us = dl.spec.renew_time_us;
  d.observed_time_us = dl.status.observed_time_us;
  d.lease_duration_seconds = dl.spec.lease_duration_seconds.value_or(0);
  if (d.observed_time_us) {
    d.expiry_us = *d.observed_time_us + int64_t{d.lease_duration_seconds} * 1'000'000;
    d.live = *d.expiry_us > now;
  }
  if (pl && pool_lease_live && dl.status.leader_term) {
    d.current_term = dl.status.leader_term->pool_lease_uid == pl->metadata.uid &&
                     dl.status.leader_term->lease_transitions ==
                         pl->spec.lease_transitions.value_or(0);
  }
  d.since_us = dl.metadata.creation_timestamp_us;
  if (d.live && d.since_us) d.delegated_for_us = std::max<int64_t>(0, now - *d.since_us);
  return d;
}

}  // namespace

absl::StatusOr<std::vector<PoolView>> BuildPools(const Snapshot& snapshot,
                                                 const std::string& only_pool) {
  const int64_t now = snapshot.server_now_us;
  std::map<std::string, PoolView> pools;
  auto pool = [&](const std::string& name) -> PoolView& {
    PoolView& p = pools[name];
    p.name = name;
    return p;
  };
  for (const auto& pl : snapshot.pool_leases) {
    PoolView& p = pool(pl.metadata.name);
    p.pool_lease = pl;
    p.leader = pl.spec.holder_identity.value_or("");
    p.term = pl.spec.lease_transitions.value_or(0);
    if (pl.status.observed_time_us) {
      p.expiry_us = *pl.status.observed_time_us +
                    int64_t{pl.spec.lease_duration_seconds.value_or(0)} * 1'000'000;
      p.expired = *p.expiry_us <= now;
    }
  }
  // Members by pool, then by name.
  std::map<std::string, std::map<std::string, Member>> members;
  if (snapshot.members_from == MembersFrom::kNodes) {
    for (const auto& n : snapshot.nodes) {
      auto label = n.metadata.labels.find(snapshot.pool_label);
      if (label == n.metadata.labels.end() || label->second.empty()) continue;
      pool(label->second);
      members[label->second][n.metadata.name].name = n.metadata.name;
    }
  }
  for (const auto& dl : snapshot.delegated_leases) {
    const std::string pool_name = dl.spec.pool_name.value_or("");
    if (pool_name.empty()) continue;
    PoolView& p = pool(pool_name);
    const bool pool_lease_live = p.pool_lease && !p.leader.empty() && !p.expired && p.expiry_us;
    Member& m = members[pool_name][dl.metadata.name];
    if (m.name.empty()) {
      m.name = dl.metadata.name;
      m.in_pool = snapshot.members_from == MembersFrom::kDelegatedLeases;
    }
    m.delegation = DelegationOf(dl, p.pool_lease, pool_lease_live, now);
  }
  std::vector<PoolView> out;
  for (auto& [name, p] : pools) {
    if (!only_pool.empty() && name != only_pool) continue;
    for (auto& [node, m] : members[name]) {
      if (m.in_pool) ++p.member_count;
      if (m.delegation && m.delegation->live) {
        ++p.delegated;
        const auto& d = *m.delegation;
        if (!p.longest || d.delegated_for_us > p.longest->delegation->delegated_for_us) {
          p.longest = m;
        }
      }
      p.members.push_back(std::move(m));
    }
    out.push_back(std::move(p));
  }
  if (!only_pool.empty() && out.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "pool \"", only_pool, "\" not found: no PoolLease, no DelegatedLease",
        snapshot.members_from == MembersFrom::kNodes
            ? absl::StrCat(" and no Node labelled ", snapshot.pool_label, "=", only_pool)
            : "",
        " names it"));
  }
  return out;
}

}  // namespace poolcoord::kubectl_pool
