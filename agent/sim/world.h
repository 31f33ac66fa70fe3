// poolcoord-sim's deterministic mode (--deterministic): the whole system in one
// process, on one simulated clock, driven by one seeded scheduler
// (FoundationDB's way; agent/sim/README.md "The deterministic mode").
//
// What runs is the real code: every node's agent core (agent/agent_core.h),
// the server's store, watch cache, lease rules, delegation proofs, GC and
// forwarder (server_model.h), and the modelled kube-apiserver with the node
// lifecycle controller's rule (cloud_model.h). What is modelled: the LAN
// (delays, loss, duplication and so reordering, drawn from the seed), request
// latency (an API request is answered at the instant it is sent), the
// signatures of most nodes (election/node_certificate.h's modelled
// signatures; a sample of nodes signs and is verified for real), and the
// faults. Nothing reads the machine's clock, and no thread but the caller's
// runs, so the same options and seed give the same history, event for event:
// its SHA-256 is the run's digest.
//
// Thread-safety: RunWorld may run on several threads at once (each run owns
// its world); the node certificates minted for the sizes asked are shared
// (minted once per process).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agent/sim/sim.h"

namespace poolcoord::sim {

struct WorldResult {
  bool passed = false;
  std::string digest;  // SHA-256 of the history, hex
  double simulated_s = 0;
  double real_s = 0;
  int64_t events = 0;
  std::string summary;                // a few lines: what happened, what was judged
  // The same as figures, by name (the summary JSON's keys).
  std::vector<std::pair<std::string, double>> counts;
  std::vector<std::string> failures;  // why the run failed (empty when it passed)
};

// One deterministic run of `o` with `seed` (o.seed is not read). Errors in
// the set-up (a certificate that cannot be minted) fail the run with the
// reason in `failures`.
WorldResult RunWorld(const Options& o, uint64_t seed);

// --deterministic: o.seeds runs, seeds o.seed, o.seed + 1, ...; one line per
// seed on stdout, each failing seed with the command that replays it
// (o.replay_command plus --seed). Exit status 0 when every run passed, 1
// otherwise.
int RunDeterministic(const Options& o);

}  // namespace poolcoord::sim
