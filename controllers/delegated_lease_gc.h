// The expiry sweep for DelegatedLeases (docs/architecture.md "The rules"): an
// expired DelegatedLease is marked in status, and removed once it has stayed
// expired for --delegated-lease-gc-period.
#pragma once

#include <cstdint>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "election/lease_rules.h"
#include "store/store.h"

namespace poolcoord::controllers {

struct GcSweepResult {
  int marked_expired = 0;  // status.expired set to true in this sweep
  int deleted = 0;         // removed in this sweep
};

// A DelegatedLease whose server-observed time + leaseDurationSeconds has passed
// (LeaseRules::RemainingMicros <= 0) gets status.expired = true; once it has been
// expired for longer than `gc_period` (--delegated-lease-gc-period, default 5m) it
// is deleted. Each change is one Store::Update that re-checks expiry inside the
// store's atomic step, so a renewal racing the sweep always wins.
//
// Thread-safety: Start/Stop from the owning thread; SweepOnce may run concurrently
// with API writes (not with itself).
class DelegatedLeaseGc {
 public:
  // `store` and `rules` are not owned and must outlive this object.
  DelegatedLeaseGc(store::Store* store, const election::LeaseRules* rules,
                   absl::Duration gc_period = absl::Minutes(5),
                   absl::Duration sweep_interval = absl::Seconds(1));
  ~DelegatedLeaseGc();
  DelegatedLeaseGc(const DelegatedLeaseGc&) = delete;
  DelegatedLeaseGc& operator=(const DelegatedLeaseGc&) = delete;

  // Starts sweeping every `sweep_interval` on a thread of its own.
  void Start();
  // Stops and joins the thread; idempotent.
  void Stop();

  // One pass over every DelegatedLease. Errors of single objects (a concurrent
  // delete, a store shutting down) skip that object.
  GcSweepResult SweepOnce();

 private:
  void Run();

  store::Store* const store_;
  const election::LeaseRules* const rules_;
  const int64_t gc_period_us_;
  const absl::Duration sweep_interval_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace poolcoord::controllers
