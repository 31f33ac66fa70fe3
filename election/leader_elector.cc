#include "election/leader_elector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace poolcoord::election {
namespace {

int64_t Micros(absl::Duration d) { return absl::ToInt64Microseconds(d); }

// Release gives up after this many 409s even when RenewDeadline has not passed
// (a fake clock never moves on its own).
constexpr int kMaxReleaseAttempts = 10;

}  // namespace

absl::Status LeaderElector::ValidateTimings(absl::Duration lease_duration,
                                            absl::Duration renew_deadline,
                                            absl::Duration retry_period, const TimingNames& names) {
  if (lease_duration <= renew_deadline) {
    return absl::InvalidArgumentError(absl::StrCat(names.lease_duration, " must be greater than ",
                                                   names.renew_deadline));
  }
  if (renew_deadline <= retry_period * kJitterFactor) {
    return absl::InvalidArgumentError(absl::StrCat(names.renew_deadline, " must be greater than ",
                                                   names.retry_period, "*JitterFactor (1.2)"));
  }
  for (const auto& [value, name] : {std::pair{lease_duration, names.lease_duration},
                                    std::pair{renew_deadline, names.renew_deadline},
                                    std::pair{retry_period, names.retry_period}}) {
    if (value <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be greater than zero"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::New(LeaderElectionConfig config) {
  if (absl::Status timings = ValidateTimings(config.lease_duration, config.renew_deadline,
                                             config.retry_period);
      !timings.ok()) {
    return timings;
  }
  if (!config.callbacks.on_started_leading) {
    return absl::InvalidArgumentError("OnStartedLeading callback must not be nil");
  }
  if (!config.callbacks.on_stopped_leading) {
    return absl::InvalidArgumentError("OnStoppedLeading callback must not be nil");
  }
  if (config.lock == nullptr) return absl::InvalidArgumentError("Lock must not be nil");
  if (config.lock->Identity().empty()) {
    return absl::InvalidArgumentError("Lock identity is empty");
  }
  return std::unique_ptr<LeaderElector>(new LeaderElector(std::move(config)));
}

LeaderElector::LeaderElector(LeaderElectionConfig config)
    : config_(std::move(config)),
      clock_(config_.clock != nullptr ? config_.clock : base::RealClock::Get()),
      identity_(config_.lock->Identity()),
      lease_us_(Micros(config_.lease_duration)),
      renew_deadline_us_(Micros(config_.renew_deadline)),
      retry_us_(Micros(config_.retry_period)),
      rng_(config_.jitter_seed != 0 ? config_.jitter_seed : std::random_device{}()) {
  next_due_us_ = Now();
}

int64_t LeaderElector::JitteredRetryMicros() {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return retry_us_ + static_cast<int64_t>(unit(rng_) * kJitterFactor * retry_us_);
}

int64_t LeaderElector::NextAcquirePollMicros() {
  const int64_t now = Now();
  // client-go: JitterUntil with sliding=true, the wait starts after the attempt.
  if (!config_.tight_follower_polls) return now + JitteredRetryMicros();
  std::uniform_real_distribution<double> factor(kTightPollMinFactor, 1.0);
  int64_t next = now + static_cast<int64_t>(factor(rng_) * retry_us_);
  absl::ReaderMutexLock lock(&mu_);
  if (!observed_record_.holder_identity.empty() && !IsLeaderLocked()) {
    // The same expiry TryAcquireOrRenew judges: the record's duration from when
    // we first saw it, on our own clock.
    const int64_t expiry =
        observed_time_us_ + int64_t{observed_record_.lease_duration_seconds} * 1'000'000;
    if (expiry >= now) next = std::min(next, expiry + kExpiryPollDelayMicros);
  }
  return next;
}

bool LeaderElector::IsLeaderLocked() const {
  return observed_record_.holder_identity == identity_;
}

bool LeaderElector::IsLeader() const {
  absl::ReaderMutexLock lock(&mu_);
  return IsLeaderLocked();
}

std::string LeaderElector::GetLeader() const {
  absl::ReaderMutexLock lock(&mu_);
  return observed_record_.holder_identity;
}

LeaderElectionRecord LeaderElector::ObservedRecord() const {
  absl::ReaderMutexLock lock(&mu_);
  return observed_record_;
}

int64_t LeaderElector::ObservedTimeMicros() const {
  absl::ReaderMutexLock lock(&mu_);
  return observed_time_us_;
}

LeaderElector::Phase LeaderElector::phase() const {
  absl::ReaderMutexLock lock(&mu_);
  return phase_;
}

bool LeaderElector::Healthy(absl::Duration tolerance) const {
  absl::ReaderMutexLock lock(&mu_);
  if (!IsLeaderLocked()) return true;
  return Now() - observed_time_us_ <= lease_us_ + Micros(tolerance);
}

void LeaderElector::SetObservedRecord(const LeaderElectionRecord& record) {
  absl::MutexLock lock(&mu_);
  observed_record_ = record;
  observed_time_us_ = Now();
}

void LeaderElector::MaybeReportTransition() {
  const std::string holder = GetLeader();
  if (holder == reported_leader_) return;
  reported_leader_ = holder;
  if (config_.callbacks.on_new_leader) config_.callbacks.on_new_leader(holder);
}

bool LeaderElector::TryAcquireOrRenew() {
  const int64_t now_wall = clock_->NowMicros();
  LeaderElectionRecord desired;
  desired.holder_identity = identity_;
  desired.lease_duration_seconds = static_cast<int32_t>(config_.lease_duration / absl::Seconds(1));
  desired.renew_time_us = now_wall;
  desired.acquire_time_us = now_wall;

  // 1. Fast path: a leader whose observed lease is still valid writes over the
  // cached version without reading first (k/k #122069). A stale version gets
  // Aborted and we fall back to the slow path.
  bool fast = false;
  LeaderElectionRecord observed;
  {
    absl::ReaderMutexLock lock(&mu_);
    fast = IsLeaderLocked() &&
           observed_time_us_ + int64_t{observed_record_.lease_duration_seconds} * 1'000'000 >
               Now();
    observed = observed_record_;
  }
  if (fast) {
    desired.acquire_time_us = observed.acquire_time_us;
    desired.lease_transitions = observed.lease_transitions;
    absl::StatusOr<std::string> v = config_.lock->Update(desired, version_);
    if (v.ok()) {
      version_ = *std::move(v);
      SetObservedRecord(desired);
      return true;
    }
    desired.acquire_time_us = now_wall;
    desired.lease_transitions = 0;
  }

  // 2. Read the record, or create it.
  absl::StatusOr<VersionedRecord> current = config_.lock->Get();
  const bool may_acquire = !config_.may_acquire || config_.may_acquire();
  if (!current.ok()) {
    if (!absl::IsNotFound(current.status()) || !may_acquire) return false;
    absl::StatusOr<std::string> v = config_.lock->Create(desired);
    if (!v.ok()) return false;
    version_ = *std::move(v);
    SetObservedRecord(desired);
    return true;
  }
  version_ = current->version;

  // 3. observedTime moves only when the record changed since we last read it.
  if (!observed_raw_.has_value() || !(*observed_raw_ == current->record)) {
    SetObservedRecord(current->record);
    observed_raw_ = current->record;
  }
  bool leader;
  int64_t expiry;
  {
    absl::ReaderMutexLock lock(&mu_);
    // Expiry from the *record's* duration (k/k #114872), on our own clock.
    expiry = observed_time_us_ + int64_t{current->record.lease_duration_seconds} * 1'000'000;
    leader = IsLeaderLocked();
  }
  const bool expired = expiry < Now();
  if (!current->record.holder_identity.empty() && !expired && !leader) return false;
  if (!leader && !may_acquire) return false;  // observed, not taken

  // 4. Keep the term when we already hold it; otherwise start a new one.
  if (leader) {
    desired.acquire_time_us = current->record.acquire_time_us;
    desired.lease_transitions = current->record.lease_transitions;
  } else {
    desired.lease_transitions = current->record.lease_transitions + 1;
  }
  absl::StatusOr<std::string> v = config_.lock->Update(desired, version_);
  if (!v.ok()) return false;
  version_ = *std::move(v);
  SetObservedRecord(desired);
  return true;
}

int64_t LeaderElector::Step() {
  Phase phase = this->phase();
  if (phase == Phase::kStopped) return kNever;
  const int64_t now = Now();
  if (now < next_due_us_) return next_due_us_;

  if (phase == Phase::kAcquiring) {
    const bool ok = TryAcquireOrRenew();
    MaybeReportTransition();
    if (!ok) {
      next_due_us_ = NextAcquirePollMicros();
      return next_due_us_;
    }
    {
      absl::MutexLock lock(&mu_);
      phase_ = Phase::kLeading;
    }
    config_.callbacks.on_started_leading();
    // The renew loop's first poll is immediate (PollUntilContextTimeout with
    // immediate=true).
    round_active_ = false;
    next_due_us_ = Now();
    return next_due_us_;
  }

  // kLeading: one poll of a renewal round bounded by RenewDeadline.
  if (!round_active_) {
    round_active_ = true;
    round_deadline_us_ = now + renew_deadline_us_;
  }
  if (now >= round_deadline_us_) {
    MaybeReportTransition();
    EndRun();
    return kNever;
  }
  const bool ok = TryAcquireOrRenew();
  const int64_t end = Now();
  // A renewal finishing past the deadline counts as failed: client-go's request
  // would have been cancelled by the round's context.
  if (ok && end < round_deadline_us_) {
    round_active_ = false;
    MaybeReportTransition();
    next_due_us_ = end + retry_us_;  // wait.Until: RetryPeriod between rounds
    return next_due_us_;
  }
  if (end >= round_deadline_us_) {
    MaybeReportTransition();
    EndRun();
    return kNever;
  }
  // The poll ticker fires RetryPeriod after the attempt started; if the
  // round's deadline comes first, the round fails then.
  next_due_us_ = std::min(now + retry_us_, round_deadline_us_);
  return next_due_us_;
}

void LeaderElector::EndRun() {
  bool was_leading;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kStopped) return;
    was_leading = phase_ == Phase::kLeading;
    phase_ = Phase::kStopped;
  }
  round_active_ = false;
  // The work guarded by the lease stops before the lease is released, so that
  // no next holder acts while it still runs (client-go leaves this to the
  // caller: "ensure all code guarded by this lease has successfully completed
  // prior to cancelling the context").
  config_.callbacks.on_stopped_leading();
  if (was_leading && config_.release_on_cancel) Release();
}

void LeaderElector::Cancel() { EndRun(); }

void LeaderElector::PollNow() {
  if (phase() == Phase::kAcquiring) next_due_us_ = Now();
}

void LeaderElector::Restart() {
  absl::MutexLock lock(&mu_);
  if (phase_ != Phase::kStopped) return;
  phase_ = Phase::kAcquiring;
  next_due_us_ = Now();
  round_active_ = false;
}

bool LeaderElector::Release() {
  const int64_t deadline = Now() + renew_deadline_us_;
  for (int attempt = 0; attempt < kMaxReleaseAttempts && Now() < deadline; ++attempt) {
    absl::StatusOr<VersionedRecord> current = config_.lock->Get();
    if (!current.ok()) return false;
    version_ = current->version;
    SetObservedRecord(current->record);
    observed_raw_ = current->record;
    if (!IsLeader()) return true;
    const int64_t now_wall = clock_->NowMicros();
    LeaderElectionRecord released;
    released.holder_identity = "";
    released.lease_duration_seconds = 1;
    released.acquire_time_us = now_wall;
    released.renew_time_us = now_wall;
    released.lease_transitions = current->record.lease_transitions;
    absl::StatusOr<std::string> v = config_.lock->Update(released, version_);
    if (v.ok()) {
      version_ = *std::move(v);
      SetObservedRecord(released);
      return true;
    }
    // A 409 means our version went stale (e.g. a renewal landed after our
    // read): read again and retry (k/k #131867).
    if (!absl::IsAborted(v.status())) return false;
  }
  return false;
}

void LeaderElector::Stop() {
  absl::MutexLock lock(&mu_);
  stop_requested_ = true;
}

void LeaderElector::Run() {
  Restart();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_requested_) break;
    }
    const int64_t due = Step();
    if (phase() == Phase::kStopped) return;  // OnStoppedLeading already fired
    const int64_t wait_us = due - Now();
    if (wait_us > 0) {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_requested_), absl::Microseconds(wait_us));
    }
  }
  Cancel();
}

}  // namespace poolcoord::election
