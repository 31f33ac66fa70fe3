#include "agent/sim/faults.h"

#include <algorithm>
#include <cmath>

namespace poolcoord::sim {

namespace {
int64_t Us(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e6)); }
double MaxGrace(const Options& o) { return *std::max_element(o.graces_s.begin(), o.graces_s.end()); }
}  // namespace

FaultPlan DrawFaults(const Options& o, const Roster& roster, int64_t start, Rng faults, Rng lying) {
  FaultPlan plan;
  const double dur = o.duration_s;
  const double warm = std::min(std::max(1.5 * o.lease_duration_s, 20.0), dur / 3);
  plan.start = start;
  plan.warmup = start + Us(warm);
  plan.end = start + Us(dur);
  auto at = [&](double from, double to) { return start + Us(faults.Uniform(from, std::max(from, to))); };
  plan.pools.resize(roster.pools.size());
  for (PoolFaults& p : plan.pools) {
    if (faults.Chance(o.pool_partition_ratio)) {
      p.cut_from = at(warm, dur * 0.6);
      p.cut_until = p.cut_from + Us(faults.Uniform(30, 90));
    }
    p.lying = lying.Chance(o.lying_pool_ratio);
  }
  plan.nodes.resize(roster.nodes.size());
  for (NodeFaults& n : plan.nodes) {
    n.skew_us = Us(faults.Uniform(-1, 1) * o.clock_skew_s);
    if (faults.Chance(o.dead_ratio)) n.death = at(warm, dur - 1.2 * MaxGrace(o));
    if (faults.Chance(o.partition_ratio)) {
      n.cut_from = at(warm, dur * 0.7);
      n.cut_until = n.cut_from + Us(faults.Uniform(30, 120));
    }
    if (faults.Chance(o.clock_jump_ratio)) {
      const double span = std::max(o.clock_skew_s, 10.0);
      n.step_us = Us(faults.Uniform(-span, span));
      n.step_at = at(warm, dur * 0.8);
    }
  }
  return plan;
}

std::vector<int64_t> FaultPlan::KillTimes(const Options& o) const {
  std::vector<int64_t> out;
  if (o.leader_kill_interval_s <= 0) return out;
  const int64_t until = end - Us(o.lease_duration_s + 2 * 2.2 * o.retry_period_s + 5);
  for (int64_t t = warmup; t < until; t += Us(o.leader_kill_interval_s)) out.push_back(t);
  return out;
}

bool MayKill(int64_t now, int64_t lead_since, bool pool_cut, int believers,
             int64_t min_tenure_us) {
  return believers == 1 && !pool_cut && now - lead_since >= min_tenure_us;
}

int64_t KillTenure(const Options& o) { return Us(MaxGrace(o) + o.lease_duration_s); }

}  // namespace poolcoord::sim
