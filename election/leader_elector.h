// A leader elector with client-go's tools/leaderelection semantics
// (client-go's tools/leaderelection), over any LeaseLock.
//
// - A candidate polls the lock every RetryPeriod × [1, 2.2) (JitterUntil with
//   JitterFactor 1.2). It may take the lock when the record names no holder, or
//   when the record has not changed for the record's leaseDurationSeconds as
//   measured on the candidate's *own monotonic clock* since it first observed
//   that record. Record timestamps are never compared with the local clock, so
//   any constant clock offset between candidates is harmless.
//   LeaderElectionConfig::tight_follower_polls (off by default) departs from
//   this on purpose: shorter polls and one poll at the observed expiry.
// - The leader renews every RetryPeriod; a renewal round retries every
//   RetryPeriod until RenewDeadline has passed without success, then leadership
//   ends (OnStoppedLeading) and, with release_on_cancel, the lock is released
//   after OnStoppedLeading has returned.
// - Writes carry the version read (optimistic concurrency): of two candidates
//   racing for one record, one gets Aborted (409) and stays a follower.
// - There is no fencing: a leader learns it lost only when a renewal fails, so
//   work guarded by leadership must tolerate a short overlap or be fenced by the
//   server (poolcoord fences DelegatedLease writes by term).
//
// Two ways to drive it:
// - Run() blocks: acquire, lead, return when leadership ends or Stop() is
//   called (cancellation). OnStoppedLeading fires exactly once per Run, even
//   when this candidate never led (as client-go's deferred call does).
// - Step() performs whatever is due now and returns the monotonic time of the
//   next step, so a test with a FakeClock, or a simulator ticking thousands of
//   electors from a few threads, drives the same state machine Run() uses.
//
// Callbacks run synchronously on the thread that calls Run()/Step()/Cancel()
// (client-go starts them as goroutines); they must return quickly and hand
// long work to a thread of their own. OnStartedLeading's work must end when
// OnStoppedLeading is called.
//
// Thread-safety: Run/Step/Cancel/Restart/TryAcquireOrRenew from one thread at a
// time; Stop, IsLeader, GetLeader, Healthy, ObservedRecord and phase from any.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "election/lease_lock.h"

namespace poolcoord::election {

struct LeaderCallbacks {
  // Required. This candidate became the leader.
  std::function<void()> on_started_leading;
  // Required. The run ended: leadership lost or never gained, or cancelled.
  std::function<void()> on_stopped_leading;
  // Optional. The observed holder changed (also on the first observation of a
  // holder); the argument is the new holder identity (maybe our own).
  std::function<void(const std::string&)> on_new_leader;
};

struct LeaderElectionConfig {
  LeaseLock* lock = nullptr;  // not owned; must outlive the elector
  // client-go's core defaults: 15 s / 10 s / 2 s.
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  // On cancellation (Stop/Cancel) and when leadership is lost, write the record
  // back with holderIdentity "" and leaseDurationSeconds 1 so the next candidate
  // need not wait a full lease.
  bool release_on_cancel = false;
  std::string name;  // for logs and metrics labels
  LeaderCallbacks callbacks;
  const base::Clock* clock = nullptr;  // nullptr: RealClock
  // Seed of the jitter source; 0 draws one from std::random_device.
  uint64_t jitter_seed = 0;
  // A deliberate departure from client-go, for a faster handover; off keeps
  // client-go's acquire loop exactly (the simulator and most tests rely on it).
  // When on, a candidate that does not hold the lock
  // - waits retry_period × [0.5, 1) between acquire polls instead of client-go's
  //   [1, 2.2) (still jittered, so candidates do not poll in lockstep): it sees
  //   each renewal less than one retry_period after it was written;
  // - when the record it observed names another holder and has not expired yet,
  //   polls again no later than kExpiryPollDelayMicros after that record
  //   expires on its own clock (observed time + the record's
  //   leaseDurationSeconds), so it takes over at expiry, not up to a poll later.
  // A dead leader is then replaced within leaseDuration + retry_period + request
  // latency (client-go: leaseDuration + 4.4 × retry_period), for about twice
  // the GETs per waiting candidate. Expiry is judged exactly as without it, so
  // no candidate takes over earlier. poolcoord's replica election turns it on
  // (handover within leaseDuration + 2 × retryPeriod).
  bool tight_follower_polls = false;
  // Optional. While it returns false, a candidate that does not hold the lock
  // reads the record on its usual schedule (so expiry keeps counting from its
  // observations) but never writes it: it waits without competing. A holder
  // renews regardless. Not in client-go; poolcoord's forwarding shards use it
  // so that each replica takes only the shards assigned to it, yet takes them
  // the moment they expire.
  std::function<bool()> may_acquire;
};

// What the three timings are called in LeaderElector::ValidateTimings' errors:
// client-go's field names, or a process's flags.
struct TimingNames {
  const char* lease_duration = "leaseDuration";
  const char* renew_deadline = "renewDeadline";
  const char* retry_period = "retryPeriod";
};

class LeaderElector {
 public:
  // client-go's wait.Jitter factor for the acquire loop.
  static constexpr double kJitterFactor = 1.2;
  // tight_follower_polls: the acquire-loop wait is retry_period × [this, 1).
  static constexpr double kTightPollMinFactor = 0.5;
  // tight_follower_polls: the expiry poll comes this long (µs) after the
  // observed expiry, as expiry is strict (observed + duration < now) and a few
  // ms cover a real clock's wake-up slop.
  static constexpr int64_t kExpiryPollDelayMicros = 5'000;
  static constexpr int64_t kNever = INT64_MAX;

  enum class Phase { kAcquiring, kLeading, kStopped };

  // The timing rules of New alone, as client-go's NewLeaderElector states them:
  // lease_duration > renew_deadline > kJitterFactor × retry_period, all > 0.
  // InvalidArgument naming the values as `names` does. For flag validation, so
  // a bad flag fails at start-up with its name.
  static absl::Status ValidateTimings(absl::Duration lease_duration, absl::Duration renew_deadline,
                                      absl::Duration retry_period, const TimingNames& names = TimingNames());

  // Validates as client-go's NewLeaderElector: lock non-null with a non-empty
  // Identity(); lease_duration > renew_deadline > 1.2 × retry_period, all > 0;
  // on_started_leading and on_stopped_leading set. InvalidArgument otherwise.
  static absl::StatusOr<std::unique_ptr<LeaderElector>> New(LeaderElectionConfig config);

  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Blocks until leadership ends or Stop() is called (then releases when
  // configured). May be called again after it returned: the candidate competes
  // anew, keeping what it observed.
  void Run();
  // Makes Run() return (cancellation). Sticky: a later Run() returns at once.
  void Stop();

  // Performs what is due at clock->MonotonicMicros(): one attempt of the
  // acquire loop or of the renew loop, or ending a renewal round whose
  // RenewDeadline passed. Returns the monotonic time (µs) of the next due step,
  // kNever once the phase is kStopped. Calling early does nothing.
  int64_t Step();
  // Ends the current run as a cancellation would: fires OnStoppedLeading, then
  // releases when it was leading and release_on_cancel is set; phase becomes
  // kStopped. No-op when already stopped.
  void Cancel();
  // After kStopped: start competing again (next Step attempts at once).
  void Restart();
  // While acquiring: the next Step polls at once (a caller that learnt that the
  // lock may be free, e.g. its holder is gone, need not wait out the poll
  // interval). Driving thread only.
  void PollNow();

  // One attempt of client-go's tryAcquireOrRenew: true when we hold the lock
  // afterwards. Exposed for tests; Step() is the normal entry.
  bool TryAcquireOrRenew();

  // True when the last observed record names us (client-go's IsLeader).
  bool IsLeader() const;
  // The last observed holder ("" when none).
  std::string GetLeader() const;
  // False only when we are the leader and have not observed our record change
  // (renewed) for lease_duration + tolerance: a wedged leader (client-go's
  // HealthzAdaptor; kube-controller-manager uses 20 s).
  bool Healthy(absl::Duration tolerance) const;
  LeaderElectionRecord ObservedRecord() const;
  // Monotonic µs at which the observed record last changed.
  int64_t ObservedTimeMicros() const;
  Phase phase() const;
  const LeaderElectionConfig& config() const { return config_; }
  const std::string& identity() const { return identity_; }

 private:
  explicit LeaderElector(LeaderElectionConfig config);
  bool Release();
  void SetObservedRecord(const LeaderElectionRecord& record);
  void MaybeReportTransition();
  void EndRun();
  int64_t JitteredRetryMicros();
  // Monotonic µs of the next acquire poll after a failed one, per
  // tight_follower_polls.
  int64_t NextAcquirePollMicros();
  bool IsLeaderLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  int64_t Now() const { return clock_->MonotonicMicros(); }

  const LeaderElectionConfig config_;
  const base::Clock* const clock_;
  const std::string identity_;
  const int64_t lease_us_, renew_deadline_us_, retry_us_;

  // Driving thread only.
  std::mt19937_64 rng_;
  std::string version_;  // resourceVersion of the last record read or written
  std::optional<LeaderElectionRecord> observed_raw_;  // last record read by Get
  std::string reported_leader_;
  int64_t next_due_us_ = 0;
  bool round_active_ = false;
  int64_t round_deadline_us_ = 0;

  mutable absl::Mutex mu_;
  LeaderElectionRecord observed_record_ ABSL_GUARDED_BY(mu_);
  int64_t observed_time_us_ ABSL_GUARDED_BY(mu_) = 0;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kAcquiring;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace poolcoord::election
