#include "agent/agent_metrics.h"

#include <algorithm>

namespace poolcoord::agent {

AgentMetrics::AgentMetrics(const AgentCore* core, base::MetricsRegistry* registry)
    : core_(core), registry_(registry) {
  // Every drop reason from the start, so a dashboard sees zeros, not gaps.
  auto& dropped = registry_->AddCounter("poolcoord_agent_heartbeats_dropped_total",
                                        "Datagrams from the pool LAN dropped, by reason.", {"reason"});
  for (size_t r = 0; r < kDropReasonCount; ++r) {
    dropped.WithLabels({DropReasonName(static_cast<DropReason>(r))});
  }
}

void AgentMetrics::Mirror(base::Counter& counter, int64_t value) {
  int64_t& seen = exported_[&counter];
  if (value > seen) counter.Inc(static_cast<uint64_t>(value - seen));
  seen = std::max(seen, value);
}

std::string AgentMetrics::Render() {
  base::MetricsRegistry& r = *registry_;
  const AgentStatus s = core_->status();
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    r.AddGauge(name, help).WithLabels({}).Set(v);
  };
  gauge("poolcoord_agent_leader", "1 while this agent holds its pool's PoolLease.", s.leading);
  gauge("poolcoord_agent_cloud_reachable", "1 while kube-apiserver answers this agent's requests.",
        s.reachable);
  gauge("poolcoord_agent_cloud_sees_node",
        "1 while this agent's heartbeats say the cloud sees its node (docs/agent.md).", s.seen);
  gauge("poolcoord_agent_pool_members", "Members of this node's pool, itself included.",
        static_cast<int64_t>(s.members));
  gauge("poolcoord_agent_peers_heard", "Members heard on the LAN within the freshness bound.",
        static_cast<int64_t>(s.peers_heard));
  gauge("poolcoord_agent_peers_fresh", "Members whose latest verified heartbeat is fresh.",
        static_cast<int64_t>(s.peers_fresh));
  const DelegationStats& d = core_->delegation_stats();
  gauge("poolcoord_agent_delegated_nodes", "Members whose DelegatedLease this leader's term writes.",
        d.delegated.load());

  absl::MutexLock lock(&mu_);
  const AgentStats& a = core_->stats();
  const VerifierStats& v = core_->verifier_stats();
  auto counter = [&](const char* name, const char* help) -> base::Counter& {
    return r.AddCounter(name, help).WithLabels({});
  };
  Mirror(counter("poolcoord_agent_heartbeats_sent_total", "Heartbeat rounds signed and sent."),
         a.rounds.load());
  auto& datagrams = r.AddCounter("poolcoord_agent_datagrams_sent_total",
                                 "Datagrams sent on the pool LAN, by result.", {"result"});
  Mirror(datagrams.WithLabels({"ok"}), a.datagrams_sent.load());
  Mirror(datagrams.WithLabels({"error"}), a.send_errors.load());
  auto& received = r.AddCounter("poolcoord_agent_heartbeats_received_total",
                                "Heartbeats accepted: verified (signature checked) or heard.",
                                {"result"});
  Mirror(received.WithLabels({"verified"}), v.heartbeats_accepted.load());
  Mirror(received.WithLabels({"heard"}), v.heartbeats_heard.load());
  auto& dropped = r.AddCounter("poolcoord_agent_heartbeats_dropped_total",
                               "Datagrams from the pool LAN dropped, by reason.", {"reason"});
  for (size_t i = 0; i < kDropReasonCount; ++i) {
    Mirror(dropped.WithLabels({DropReasonName(static_cast<DropReason>(i))}), v.dropped[i].load());
  }
  auto& requests = r.AddCounter("poolcoord_agent_certificate_requests_total",
                                "Certificate requests sent to members and answered.", {"direction"});
  Mirror(requests.WithLabels({"sent"}), a.certificate_requests_sent.load());
  Mirror(requests.WithLabels({"answered"}), a.certificate_requests_answered.load());
  Mirror(counter("poolcoord_agent_delegations_written_total",
                 "DelegatedLease creates and updates the server accepted."),
         d.written.load());
  Mirror(counter("poolcoord_agent_delegations_deleted_total", "DelegatedLeases deleted."),
         d.deleted.load());
  auto& refused = r.AddCounter("poolcoord_agent_delegations_refused_total",
                               "DelegatedLease requests the server refused, by reason.", {"reason"});
  Mirror(refused.WithLabels({"conflict"}), d.refused_conflict.load());
  Mirror(refused.WithLabels({"forbidden"}), d.refused_forbidden.load());
  Mirror(refused.WithLabels({"invalid"}), d.refused_invalid.load());
  Mirror(refused.WithLabels({"proof"}), d.refused_proof.load());
  auto& proof_rules = r.AddCounter(
      "poolcoord_agent_proofs_refused_total",
      "Delegation proofs the server refused, by the rule its 403 names (a subset of "
      "poolcoord_agent_delegations_refused_total{reason=\"proof\"}).",
      {"rule"});
  for (const auto& [rule, n] : core_->proof_refusals()) Mirror(proof_rules.WithLabels({rule}), n);
  Mirror(counter("poolcoord_agent_proofs_withheld_total",
                 "Members' heartbeats the leader did not send as proofs because the server would "
                 "refuse them (received before its term, or a challenge no longer usable); the "
                 "member's next heartbeat is sent instead."),
         d.withheld.load());
  Mirror(counter("poolcoord_agent_challenge_rounds_total",
                 "Heartbeat rounds sent early for a delegation challenge (a leader relaying a new "
                 "one, a cut-off member signing a new leader's)."),
         a.challenge_rounds.load());
  Mirror(counter("poolcoord_agent_delegation_errors_total",
                 "DelegatedLease requests without an answer (transport, timeout, 5xx, 429)."),
         d.errors.load());
  Mirror(counter("poolcoord_agent_delegations_skipped_total",
                 "DelegatedLease writes not sent: their evidence went stale first."),
         d.skipped_stale.load());
  Mirror(counter("poolcoord_agent_step_downs_total", "Leadership given up after the server's 403."),
         d.step_downs.load());
  Mirror(counter("poolcoord_agent_lapsed_terms_total",
                 "Leadership ended by the server's 403 saying the PoolLease was free to take "
                 "(gone, unheld or expired): campaigned again at once."),
         d.lapsed_terms.load());
  Mirror(counter("poolcoord_agent_elections_won_total", "Times this agent became its pool's leader."),
         a.elections_won.load());
  auto& probes = r.AddCounter("poolcoord_agent_cloud_probes_total",
                              "Reads of the node's own Lease, by result.", {"result"});
  Mirror(probes.WithLabels({"read"}), a.probes.load() - a.probe_failures.load());
  Mirror(probes.WithLabels({"failed"}), a.probe_failures.load());
  return r.Render();
}

}  // namespace poolcoord::agent
