// --scenario=term-selftest: the term checks (monitors.h TermLedger) against a
// hand-made history with one violation of each kind (no server): the checker
// itself must be able to fail.
#include <cstdio>

#include "absl/strings/str_format.h"
#include "agent/sim/monitors.h"
#include "agent/sim/sim.h"

namespace poolcoord::sim {

int RunTermSelfTest(const Options& o) {
  (void)o;
  Roster roster;
  roster.pools = {PoolName(0)};
  roster.members = {{0, 1, 2}};
  for (int n = 0; n < 3; ++n) {
    roster.nodes.push_back(NodeName(0, n));
    roster.pool_of.push_back(0);
  }
  TermLedger ledger(&roster);
  auto lease = [&](int holder, int transitions) {
    return absl::StrFormat(
        R"({"kind":"PoolLease","metadata":{"name":"%s","uid":"uid-1","resourceVersion":"9"},)"
        R"("spec":{"holderIdentity":"%s","leaseTransitions":%d}})",
        roster.pools[0], roster.nodes[holder], transitions);
  };
  auto write = [&](int writer, int transitions, int64_t sent) {
    Term t;
    if (transitions >= 0) t = Term{"uid-1", transitions};
    ledger.AddWrite({0, writer, 2, sent, sent + 1, sent - 5, sent, t});
  };
  int failed = 0;
  auto expect = [&](const char* what, int64_t got, int64_t want) {
    std::printf("%-44s %lld (want %lld) %s\n", what, static_cast<long long>(got),
                static_cast<long long>(want), got == want ? "ok" : "FAIL");
    failed += got == want ? 0 : 1;
  };
  // A clean history: n0 leads term 1, n1 takes over term 2 and renews it.
  ledger.RecordLeaseWrite(0, lease(0, 1), 100);
  ledger.RecordLeaseWrite(1, lease(1, 2), 200);
  ledger.RecordLeaseWrite(1, lease(1, 2), 250);
  write(0, 1, 150);
  write(0, 1, 190);  // left before n1's acquisition was answered: not stale
  write(1, 2, 300);
  TermLedger::Report clean = ledger.Check();
  expect("clean history: violations", clean.violations(), 0);
  expect("clean history: writes checked", clean.writes, 3);
  // One of each violation.
  write(0, 2, 310);                               // n1's term, and shared with n1
  write(0, 1, 210);                               // term 1 after term 2 was acquired
  write(2, -1, 320);                              // no leaderTerm
  write(2, 7, 330);                               // a term nobody acquired: unknown only
  ledger.RecordLeaseWrite(2, lease(2, 1), 400);   // term 1 handed to a second holder
  TermLedger::Report bad = ledger.Check();
  expect("writes in another's term", bad.other_term, 1);
  expect("one term, two writers", bad.shared_term, 1);
  expect("stale term", bad.stale_term, 1);
  expect("no leaderTerm", bad.no_term, 1);
  expect("unknown term (reported only)", bad.unknown_term, 1);
  expect("one term, two holders", bad.term_conflicts, 1);
  for (const auto& d : bad.details) std::printf("  %s\n", d.c_str());
  std::printf("result: %s\n", failed == 0 ? "PASS" : "FAIL");
  return failed == 0 ? 0 : 1;
}

}  // namespace poolcoord::sim
