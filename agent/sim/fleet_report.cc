// The integration run's summary (fleet.h): what happened, and what the
// monitors judged, as text on stdout and as JSON (--summary-json).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/sim/fleet.h"

namespace poolcoord::sim {
namespace {
constexpr int64_t kSec = 1'000'000;
int64_t S(double seconds) { return static_cast<int64_t>(seconds * 1e6); }
}  // namespace

int ReportFleet(Fleet& f, int64_t request_timeout) {
  const Options& o = f.o;
  CloudModel* cloud_model = f.cloud_model;
  const int total = static_cast<int>(f.agents.size());
  // False liveness (monitors.h): from the accepted writes and the cloud's
  // signs of life of the nodes that died.
  std::vector<int64_t> death(f.agents.size(), kNever);
  std::vector<std::vector<int64_t>> changes(f.agents.size());
  for (auto& a : f.agents) {
    death[a->id] = a->death_at.load();
    changes[a->id] = cloud_model->Changes(a->node);
  }
  const int64_t allowance = f.Fresh() + S(std::ceil(o.heartbeat_interval_s + 2)) + 5 * kSec +
                            request_timeout + kSec;
  const FalseLivenessReport liveness =
      FalseLiveness(f.roster, f.ledger.Writes(), death, changes, f.Fresh(), allowance, f.end);
  const TermLedger::Report terms = f.ledger.Check();
  int never_led = 0;
  for (int p = 0; p < o.pools; ++p) {
    if (!f.beliefs.EverLed(p) && f.plan.pools[p].cut_from == kNever) ++never_led;
  }
  std::vector<int64_t> fo = f.beliefs.failovers();
  std::sort(fo.begin(), fo.end());
  auto pct = [](const std::vector<int64_t>& v, double p) -> double {
    if (v.empty()) return 0;
    return v[std::min(v.size() - 1, static_cast<size_t>(p / 100 * v.size()))] / 1e6;
  };
  // What the agents' LANs carried, summed over every agent.
  int64_t hb_verified = 0, hb_heard = 0, hb_dropped = 0, delegated_written = 0, step_downs = 0;
  for (auto& a : f.agents) {
    hb_verified += a->core->verifier_stats().heartbeats_accepted.load();
    hb_heard += a->core->verifier_stats().heartbeats_heard.load();
    for (size_t r = 0; r < agent::kDropReasonCount; ++r) {
      if (static_cast<agent::DropReason>(r) == agent::DropReason::kUnknownCertificate) continue;
      hb_dropped += a->core->verifier_stats().dropped[r].load();
    }
    delegated_written += a->core->delegation_stats().written.load();
    step_downs += a->core->delegation_stats().step_downs.load();
  }
  const std::vector<int64_t> false_evictions_by_grace = f.verdict.false_evictions();
  const std::vector<int64_t> wholepool_gaps = f.verdict.wholepool_gaps();
  const std::vector<int64_t> uncovered_gaps = f.verdict.uncovered_gaps();
  const int64_t max_alive_age = f.verdict.max_alive_age_us();
  const int64_t total_requests = f.requests.load();
  int dead = 0, partitioned = 0, pool_cut = 0;
  for (auto& a : f.agents) {
    dead += a->death_at.load() != kNever ? 1 : 0;
    partitioned += f.plan.nodes[a->id].cut_from != kNever && f.plan.nodes[a->id].cut_from < f.end ? 1 : 0;
  }
  for (const PoolFaults& p : f.plan.pools) pool_cut += p.cut_from != kNever ? 1 : 0;
  int lying_pools = 0;
  int64_t forged = 0, forged_accepted = 0, forged_refused_proof = 0;
  for (const PoolFaults& p : f.plan.pools) lying_pools += p.lying ? 1 : 0;
  // The honest planners' proofs the server refused, by rule (a forging
  // leader's own writes are counted apart), and the heartbeats they withheld
  // because the server would refuse them (after a failover, ...).
  std::map<std::string, int64_t> honest_refused;
  int64_t honest_refused_total = 0, withheld = 0, challenge_rounds = 0;
  for (auto& a : f.agents) {
    if (a->core == nullptr) continue;
    for (const auto& [rule, n] : a->core->proof_refusals()) {
      honest_refused[rule] += n;
      honest_refused_total += n;
    }
    withheld += a->core->delegation_stats().withheld.load();
    challenge_rounds += a->core->stats().challenge_rounds.load();
  }
  std::string honest_rules;
  for (const auto& [rule, n] : honest_refused) {
    absl::StrAppend(&honest_rules, honest_rules.empty() ? " (" : ", ", rule, " ", n);
  }
  if (!honest_rules.empty()) honest_rules += ")";
  for (auto& a : f.agents) {
    if (a->forger == nullptr) continue;
    forged += a->forger->stats().attempts.load();
    forged_accepted += a->forger->stats().accepted.load();
    forged_refused_proof += a->forger->stats().refused_proof.load();
  }

  int64_t false_evictions = 0;
  for (int64_t x : false_evictions_by_grace) false_evictions += x;
  const bool ok_evict = false_evictions == 0;
  const bool ok_live = liveness.writes == 0 && liveness.cloud == 0;
  const bool ok_terms = terms.violations() == 0;
  const bool ok_overlap = f.beliefs.same_term_overlaps() == 0;
  const bool ok_led = never_led == 0;
  const bool ok_lan = hb_dropped == 0;
  const bool ok = ok_evict && ok_live && ok_terms && ok_overlap && ok_led && ok_lan;
  auto mark = [](bool good) { return good ? "ok" : "FAIL"; };
  const double p50 = f.latency.Percentile(50) / 1e3, p99 = f.latency.Percentile(99) / 1e3,
               p999 = f.latency.Percentile(99.9) / 1e3;
  auto ll = [](int64_t v) { return static_cast<long long>(v); };

  std::printf("\n== poolcoord-sim summary ==\n");
  std::printf("%-52s %s\n", "agents (pools x nodes)",
              absl::StrFormat("%d (%d x %d), the agent core", total, o.pools, o.nodes_per_pool).c_str());
  std::printf("%-52s %.0f s, seed %llu\n", "duration", o.duration_s,
              static_cast<unsigned long long>(o.seed));
  std::printf("%-52s %d dead, %d cut off, %d whole pools cut off\n", "faults injected", dead,
              partitioned, pool_cut);
  std::printf("%-52s %lld\n", "leader kills", ll(f.kills.load()));
  std::printf("%-52s %lld (%.0f/s)\n", "requests to the server", ll(total_requests),
              total_requests / o.duration_s);
  std::printf("%-52s p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n", "request latency", p50, p99, p999);
  std::printf("%-52s p99 %.1f ms, max %.1f ms\n", "scheduler lag (agent ticked late by)",
              f.tick_lag.Percentile(99) / 1e3, f.tick_lag.Percentile(100) / 1e3);
  std::printf("%-52s %lld errors, %lld conflicts (409), %lld forbidden (403)\n", "request outcomes",
              ll(f.request_errors.load()), ll(f.conflicts.load()), ll(f.forbidden.load()));
  std::printf("%-52s %lld datagrams, %lld verified, %lld heard, %lld dropped  %s\n",
              "LAN heartbeats (signed, every agent)", ll(f.datagrams.load()), ll(hb_verified),
              ll(hb_heard), ll(hb_dropped), mark(ok_lan));
  std::printf("%-52s %lld accepted, %lld refused (fenced), %lld proofs refused, %lld step-downs\n",
              "DelegatedLease writes", ll(f.dl_writes.load()), ll(f.dl_refused.load()),
              ll(f.dl_proof_refused.load()), ll(step_downs));
  std::printf("%-52s %lld refused%s, %lld withheld, %lld early rounds\n",
              "honest proofs (refused by rule / withheld by the leader)", ll(honest_refused_total),
              honest_rules.c_str(), ll(withheld), ll(challenge_rounds));
  std::printf("%-52s %d pools; forged writes %lld: %lld accepted, %lld refused on proof, %lld other\n",
              "lying leaders (forge liveness)", lying_pools, ll(forged), ll(forged_accepted),
              ll(forged_refused_proof), ll(forged - forged_accepted - forged_refused_proof));
  std::printf("%-52s %lld writes, %lld taint patches, %lld requests\n",
              "the server's forwarder in the modelled cloud", ll(cloud_model->server_lease_writes()),
              ll(cloud_model->taints_set()), ll(cloud_model->server_requests()));
  std::printf("%-52s %lld\n", "cloud Lease writes whose renewTime did not grow",
              ll(cloud_model->renewals_not_counted()));
  std::printf("%-52s %.1f s\n", "oldest cloud Lease of an alive node (in reach)",
              max_alive_age / 1e6);
  std::printf("%-52s %zu, p50 %.1f s, max %.1f s\n", "failovers after leader kills", fo.size(),
              pct(fo, 50), fo.empty() ? 0.0 : fo.back() / 1e6);
  const int pending = f.beliefs.PendingKills();
  std::printf("%-52s %d\n", "kills without failover (no candidate left)", pending);
  for (size_t g = 0; g < o.graces_s.size(); ++g) {
    std::printf("%-52s %lld whole-pool, %lld no member in reach (apart)\n",
                absl::StrFormat("cloud Leases >= %.0fs old, explained", o.graces_s[g]).c_str(),
                ll(wholepool_gaps[g]), ll(uncovered_gaps[g]));
    std::printf("%-52s %lld  %s\n",
                absl::StrFormat("false evictions at grace %.0fs (alive, Lease too old)", o.graces_s[g]).c_str(),
                ll(false_evictions_by_grace[g]), mark(false_evictions_by_grace[g] == 0));
  }
  std::printf("%-52s %lld  %s\n", "false liveness (written after death)", ll(liveness.writes),
              mark(liveness.writes == 0));
  std::printf("%-52s %lld  %s\n", "false liveness (cloud Lease renewed after death)",
              ll(liveness.cloud), mark(liveness.cloud == 0));
  std::printf("%-52s %lld terms acquired, %lld writes checked, %lld of unknown term\n",
              "term ledger (from responses)", ll(terms.terms), ll(terms.writes), ll(terms.unknown_term));
  std::printf("%-52s %lld  %s\n", "  writes in a term acquired by another node", ll(terms.other_term),
              mark(terms.other_term == 0));
  std::printf("%-52s %lld  %s\n", "  one term carried by two writers", ll(terms.shared_term),
              mark(terms.shared_term == 0));
  std::printf("%-52s %lld  %s\n", "  writes in a term older than one acquired", ll(terms.stale_term),
              mark(terms.stale_term == 0));
  std::printf("%-52s %lld  %s\n", "  accepted writes without status.leaderTerm", ll(terms.no_term),
              mark(terms.no_term == 0));
  std::printf("%-52s %lld  %s\n", "  one term returned to two holders", ll(terms.term_conflicts),
              mark(terms.term_conflicts == 0));
  std::printf("%-52s %lld  %s\n", "term violations (total)", ll(terms.violations()), mark(ok_terms));
  std::printf("%-52s %lld  %s\n", "overlapping beliefs in the same term",
              ll(f.beliefs.same_term_overlaps()), mark(ok_overlap));
  std::printf("%-52s %lld, longest %.1f s  (reported)\n", "beliefs overlapping a deposed leader's",
              ll(f.beliefs.overlaps()), f.beliefs.max_overlap_us() / 1e6);
  std::printf("%-52s %d  %s\n", "pools never led (not cut off)", never_led, mark(ok_led));
  if (terms.unparsed > 0) std::printf("%-52s %lld\n", "unparsable write responses", ll(terms.unparsed));
  for (const auto& s : terms.details) std::printf("term: %s\n", s.c_str());
  for (const auto& s : f.verdict.incidents()) std::printf("incident: %s\n", s.c_str());
  for (const auto& s : f.beliefs.incidents()) std::printf("incident: %s\n", s.c_str());
  for (const auto& s : liveness.details) std::printf("incident: %s\n", s.c_str());
  std::printf("result: %s\n", ok ? "PASS" : "FAIL");
  std::fflush(stdout);

  if (!o.summary_json.empty()) {
    std::string graces;
    for (size_t g = 0; g < o.graces_s.size(); ++g) {
      absl::StrAppend(&graces, g ? "," : "",
                      absl::StrFormat("{\"grace_s\":%.0f,\"false_evictions\":%lld,\"wholepool_gaps\":%lld,"
                                      "\"uncovered_gaps\":%lld}",
                                      o.graces_s[g], ll(false_evictions_by_grace[g]), ll(wholepool_gaps[g]),
                                      ll(uncovered_gaps[g])));
    }
    std::ofstream js(o.summary_json);
    js << absl::StrFormat(
        "{\"agents\":%d,\"pools\":%d,\"duration_s\":%.0f,\"requests\":%lld,"
        "\"request_errors\":%lld,\"latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f},"
        "\"dl_writes\":%lld,\"dl_refused\":%lld,\"forwarder_lease_writes\":%lld,"
        "\"renewals_not_counted\":%lld,\"max_alive_lease_age_s\":%.3f,\"false_evictions\":%lld,\"graces\":[%s],"
        "\"false_liveness\":%lld,\"cloud_false_liveness\":%lld,\"datagrams\":%lld,"
        "\"heartbeats_verified\":%lld,\"heartbeats_heard\":%lld,\"heartbeats_dropped\":%lld,"
        "\"terms_acquired\":%lld,\"term_writes_checked\":%lld,"
        "\"unknown_term_writes\":%lld,\"term_violations\":%lld,\"other_term_writes\":%lld,"
        "\"shared_term_writes\":%lld,\"stale_term_writes\":%lld,\"no_term_writes\":%lld,"
        "\"term_conflicts\":%lld,\"same_term_overlaps\":%lld,\"belief_overlaps\":%lld,"
        "\"max_overlap_s\":%.3f,\"never_led\":%d,\"kills\":%lld,\"failovers\":%zu,"
        "\"failover_p50_s\":%.3f,\"failover_max_s\":%.3f,\"dead\":%d,\"cut_off\":%d,\"pools_cut\":%d,"
        "\"scheduler_lag_p99_ms\":%.1f,\"dl_proof_refused\":%lld,\"lying_pools\":%d,"
        "\"forged_writes\":%lld,\"forged_accepted\":%lld,\"forged_refused_proof\":%lld,"
        "\"honest_proof_refused\":%lld,\"proofs_withheld\":%lld,\"ok\":%s}\n",
        total, o.pools, o.duration_s, ll(total_requests), ll(f.request_errors.load()), p50, p99, p999,
        ll(f.dl_writes.load()), ll(f.dl_refused.load()), ll(cloud_model->server_lease_writes()),
        ll(cloud_model->renewals_not_counted()), max_alive_age / 1e6, ll(false_evictions), graces, ll(liveness.writes),
        ll(liveness.cloud), ll(f.datagrams.load()), ll(hb_verified), ll(hb_heard),
        ll(hb_dropped), ll(terms.terms), ll(terms.writes), ll(terms.unknown_term),
        ll(terms.violations()), ll(terms.other_term), ll(terms.shared_term), ll(terms.stale_term),
        ll(terms.no_term), ll(terms.term_conflicts), ll(f.beliefs.same_term_overlaps()),
        ll(f.beliefs.overlaps()), f.beliefs.max_overlap_us() / 1e6, never_led, ll(f.kills.load()),
        fo.size(), pct(fo, 50), fo.empty() ? 0.0 : fo.back() / 1e6, dead, partitioned, pool_cut,
        f.tick_lag.Percentile(99) / 1e3, ll(f.dl_proof_refused.load()), lying_pools, ll(forged),
        ll(forged_accepted), ll(forged_refused_proof), ll(honest_refused_total), ll(withheld),
        ok ? "true" : "false");
  }
  return ok ? 0 : 1;
}

}  // namespace poolcoord::sim
