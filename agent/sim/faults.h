// poolcoord-sim's fault schedule, drawn up front from the seed, the same way in
// both modes (the integration run, fleet.cc, and the deterministic one,
// world.cc): which nodes are cut off from the cloud and when, which die, which
// pools are cut off as a whole or run lying agents, each node's clock skew and
// (deterministic mode) clock step, and which leaders may be killed.
//
// Times are µs on the run's monotonic clock. Faults fall after the warm-up,
// max(1.5 x lease duration, 20 s) but at most a third of the run (see
// agent/sim/README.md for each fault's ranges). Thread-safety: a FaultPlan is
// immutable once drawn.
#pragma once

#include <cstdint>
#include <vector>

#include "agent/sim/monitors.h"
#include "agent/sim/scheduler.h"
#include "agent/sim/sim.h"

namespace poolcoord::sim {

struct NodeFaults {
  int64_t skew_us = 0;  // its wall clock's constant offset
  int64_t death = kNever;
  int64_t cut_from = kNever, cut_until = kNever;  // cut off from the cloud, not its LAN
  int64_t step_at = kNever, step_us = 0;          // its wall clock steps once
};

struct PoolFaults {
  int64_t cut_from = kNever, cut_until = kNever;  // the whole pool cut off
  bool lying = false;                             // every member runs the forging leader
};

struct FaultPlan {
  int64_t start = 0, warmup = 0, end = 0;
  std::vector<NodeFaults> nodes;  // by Roster node id
  std::vector<PoolFaults> pools;  // by Roster pool id

  bool PoolCut(int pool, int64_t t) const { return t >= pools[pool].cut_from && t < pools[pool].cut_until; }
  // Whether `node` (of `pool`) reaches the cloud at `t`.
  bool CloudOk(int node, int pool, int64_t t) const {
    return !PoolCut(pool, t) && !(t >= nodes[node].cut_from && t < nodes[node].cut_until);
  }
  // When a leader is killed (every leader_kill_interval from the warm-up, while
  // a failover can still end before the run does); empty when none.
  std::vector<int64_t> KillTimes(const Options& o) const;
};

// The plan for `roster` over [start, start + duration): pools' faults, then
// nodes', from `faults`; lying pools from `lying` (its own stream, so the other
// faults stay where they are with or without lying pools).
FaultPlan DrawFaults(const Options& o, const Roster& roster, int64_t start, Rng faults, Rng lying);

// Whether a leader may be killed now: the only one believing in its pool (not
// a deposed one still believing), its pool not cut off, and leading for
// `min_tenure_us` at least.
bool MayKill(int64_t now, int64_t lead_since, bool pool_cut, int believers,
             int64_t min_tenure_us);
// The deterministic mode's tenure: the longest grace period + a lease
// duration. Two failovers (each a lease duration and retries; the first may
// be a leader cut off) inside one grace period leave a cut-off member
// undelegated longer than a lease-based election can avoid.
int64_t KillTenure(const Options& o);

}  // namespace poolcoord::sim
