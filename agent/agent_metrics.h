// poolcoord-agent's /metrics: the core's counters mirrored into the process's
// metrics registry (base/metrics.h renders them) at each scrape.
//
//   poolcoord_agent_leader                          1 while this agent holds its pool's PoolLease
//   poolcoord_agent_cloud_reachable                 1 while kube-apiserver answers (cloud_reachability.h)
//   poolcoord_agent_cloud_sees_node                 1 while the heartbeats say "reachable"
//   poolcoord_agent_pool_members                    members of the pool, this node included
//   poolcoord_agent_peers_heard                     members heard within the freshness bound
//   poolcoord_agent_peers_fresh                     members with a fresh verified heartbeat
//   poolcoord_agent_heartbeats_sent_total           heartbeat rounds signed (one datagram per member each)
//   poolcoord_agent_datagrams_sent_total            datagrams sent ({result="ok|error"})
//   poolcoord_agent_heartbeats_received_total       {result="verified|heard"} (heartbeat_verifier.h)
//   poolcoord_agent_heartbeats_dropped_total        {reason} — every drop reason, 0 included
//   poolcoord_agent_certificate_requests_total      {direction="sent|answered"}
//   poolcoord_agent_delegations_written_total       DelegatedLease creates/updates accepted
//   poolcoord_agent_delegations_deleted_total
//   poolcoord_agent_delegations_refused_total       {reason="conflict|forbidden|invalid"}
//   poolcoord_agent_delegation_errors_total         transport errors, timeouts, 5xx, 429
//   poolcoord_agent_delegations_skipped_total       evidence went stale before the write left
//   poolcoord_agent_delegated_nodes                 members this term delegates now
//   poolcoord_agent_step_downs_total                leadership given up after a 403
//   poolcoord_agent_lapsed_terms_total              a 403 with the PoolLease free: campaigned again
//   poolcoord_agent_elections_won_total
//   poolcoord_agent_cloud_probes_total              {result="read|failed"}
//
// Thread-safety: Update/Render from any thread (one at a time).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "agent/agent_core.h"
#include "base/metrics.h"

namespace poolcoord::agent {

class AgentMetrics {
 public:
  // Neither owned; both must outlive this object.
  AgentMetrics(const AgentCore* core, base::MetricsRegistry* registry);
  // Mirrors the core's counters and the status, then renders the registry.
  std::string Render();

 private:
  // A counter mirrored from a monotonic source value.
  void Mirror(base::Counter& counter, int64_t value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentCore* const core_;
  base::MetricsRegistry* const registry_;
  absl::Mutex mu_;
  std::map<const base::Counter*, int64_t> exported_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::agent
