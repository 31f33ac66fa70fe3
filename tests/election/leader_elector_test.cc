#define BOOST_TEST_MODULE leader_elector
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "election/leader_elector.h"
#include "election/lease_lock.h"

namespace poolcoord::election {
namespace {

using std::chrono::seconds;

constexpr int64_t kSec = 1'000'000;

// The server side of the fake: one record with a resourceVersion, as
// kube-apiserver's optimistic concurrency has it (no lease rules: client-go runs
// against plain Leases).
class FakeLeaseServer {
 public:
  absl::StatusOr<VersionedRecord> Get() {
    absl::MutexLock l(&mu_);
    ++gets_;
    if (!record_) return absl::NotFoundError("poolleases \"p\" not found");
    return VersionedRecord{*record_, std::to_string(rv_)};
  }
  absl::StatusOr<std::string> Create(const LeaderElectionRecord& r) {
    absl::MutexLock l(&mu_);
    if (record_) return absl::AlreadyExistsError("already exists");
    record_ = r;
    ++writes_;
    return std::to_string(++rv_);
  }
  absl::StatusOr<std::string> Update(const LeaderElectionRecord& r, const std::string& version) {
    absl::MutexLock l(&mu_);
    if (!record_) return absl::NotFoundError("not found");
    if (version != std::to_string(rv_)) return absl::AbortedError("the object has been modified");
    record_ = r;
    ++writes_;
    return std::to_string(++rv_);
  }
  // Someone else (an admin labelling the object) writes: the version moves on.
  void Touch() {
    absl::MutexLock l(&mu_);
    ++rv_;
  }
  void Set(const LeaderElectionRecord& r) {
    absl::MutexLock l(&mu_);
    record_ = r;
    ++rv_;
  }
  LeaderElectionRecord record() {
    absl::MutexLock l(&mu_);
    return record_.value_or(LeaderElectionRecord{});
  }
  int gets() {
    absl::MutexLock l(&mu_);
    return gets_;
  }
  int writes() {
    absl::MutexLock l(&mu_);
    return writes_;
  }

 private:
  absl::Mutex mu_;
  std::optional<LeaderElectionRecord> record_ ABSL_GUARDED_BY(mu_);
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 100;
  int gets_ ABSL_GUARDED_BY(mu_) = 0;
  int writes_ ABSL_GUARDED_BY(mu_) = 0;
};

// One candidate's view of the server, with fault injection.
class FakeLock : public LeaseLock {
 public:
  FakeLock(FakeLeaseServer* server, std::string id) : server_(server), id_(std::move(id)) {}
  absl::StatusOr<VersionedRecord> Get() override {
    if (clock_ != nullptr) get_times_.push_back(clock_->MonotonicMicros());
    if (down_) return absl::UnavailableError("connection refused");
    auto r = server_->Get();
    if (get_latch_ != nullptr) get_latch_->arrive_and_wait();
    return r;
  }
  absl::StatusOr<std::string> Create(const LeaderElectionRecord& r) override {
    if (down_) return absl::UnavailableError("connection refused");
    return server_->Create(r);
  }
  absl::StatusOr<std::string> Update(const LeaderElectionRecord& r,
                                     const std::string& v) override {
    if (down_) return absl::UnavailableError("connection refused");
    if (conflicts_before_update_ > 0) {
      --conflicts_before_update_;
      server_->Touch();
    }
    ++updates_;
    return server_->Update(r, v);
  }
  std::string Identity() const override { return id_; }
  std::string Describe() const override { return "poolleases/p"; }

  std::atomic<bool> down_{false};
  int conflicts_before_update_ = 0;  // another writer slips in before our next updates
  int updates_ = 0;
  std::latch* get_latch_ = nullptr;
  const base::Clock* clock_ = nullptr;      // set: every Get's monotonic time goes to get_times_
  std::vector<int64_t> get_times_;  // a follower's polls (a leader's fast path skips Get)

 private:
  FakeLeaseServer* server_;
  std::string id_;
};

struct Candidate {
  Candidate(FakeLeaseServer* server, std::string id) : lock(server, std::move(id)) {}
  FakeLock lock;
  std::unique_ptr<LeaderElector> elector;
  bool leading = false;
  int started = 0;
  int stopped = 0;
  bool killed = false;  // no longer stepped: the process died
  int64_t next = 0;
  std::vector<std::string> new_leaders;
  int64_t started_at = -1;
  int64_t stopped_at = -1;
};

struct Timings {
  absl::Duration lease = absl::Seconds(15);
  absl::Duration renew = absl::Seconds(10);
  absl::Duration retry = absl::Seconds(2);
  bool release = false;
  bool tight = false;  // LeaderElectionConfig::tight_follower_polls
};

class Fleet {
 public:
  // The first candidate of an empty fleet, leading after the first second.
  Candidate& AddFirstLeader(const std::string& id, Timings t = {}) {
    Candidate& c = Add(id, t);
    RunUntil(1 * kSec);
    BOOST_REQUIRE(c.leading);
    return c;
  }

  Candidate& Add(const std::string& id, Timings t = {}) {
    auto c = std::make_unique<Candidate>(&server, id);
    Candidate* cp = c.get();
    LeaderElectionConfig cfg;
    cfg.lock = &cp->lock;
    cfg.lease_duration = t.lease;
    cfg.renew_deadline = t.renew;
    cfg.retry_period = t.retry;
    cfg.release_on_cancel = t.release;
    cfg.tight_follower_polls = t.tight;
    cfg.clock = &clock;
    cp->lock.clock_ = &clock;
    cfg.jitter_seed = 1000 + candidates.size();
    cfg.callbacks.on_started_leading = [this, cp] {
      cp->leading = true;
      ++cp->started;
      cp->started_at = clock.MonotonicMicros();
      for (auto& other : candidates) {
        BOOST_TEST_REQUIRE(!(other.get() != cp && other->leading && !other->killed),
                           "two candidates lead at once");
      }
    };
    cfg.callbacks.on_stopped_leading = [this, cp] {
      cp->leading = false;
      ++cp->stopped;
      cp->stopped_at = clock.MonotonicMicros();
    };
    cfg.callbacks.on_new_leader = [cp](const std::string& id) { cp->new_leaders.push_back(id); };
    auto e = LeaderElector::New(cfg);
    BOOST_TEST_REQUIRE(e.ok(), e.status().ToString());
    cp->elector = *std::move(e);
    cp->next = clock.MonotonicMicros();
    candidates.push_back(std::move(c));
    return *cp;
  }

  // Steps every live candidate when due, moving the fake clock from due time to
  // due time, until the monotonic clock reaches `until_us`.
  void RunUntil(int64_t until_us) {
    while (true) {
      int64_t next = LeaderElector::kNever;
      for (auto& c : candidates) {
        if (!c->killed && c->elector->phase() != LeaderElector::Phase::kStopped) {
          next = std::min(next, c->next);
        }
      }
      if (next > until_us) {
        Advance(until_us);
        return;
      }
      Advance(next);
      for (auto& c : candidates) {
        if (!c->killed && c->next <= clock.MonotonicMicros() &&
            c->elector->phase() != LeaderElector::Phase::kStopped) {
          c->next = c->elector->Step();
        }
      }
    }
  }
  // Runs until `pred` holds or `limit_us` passes; returns the time it held.
  template <typename Pred>
  int64_t RunUntilTrue(Pred pred, int64_t limit_us, int64_t granularity = kSec / 10) {
    while (!pred()) {
      if (Now() >= limit_us) return -1;
      RunUntil(std::min(limit_us, Now() + granularity));
    }
    return Now();
  }
  void Advance(int64_t to) {
    if (to > Now()) clock.Advance(std::chrono::microseconds(to - Now()));
  }
  int64_t Now() const { return clock.MonotonicMicros(); }
  int Leaders() const {
    int n = 0;
    for (auto& c : candidates) n += (c->leading && !c->killed) ? 1 : 0;
    return n;
  }
  Candidate* Leader() {
    for (auto& c : candidates) {
      if (c->leading && !c->killed) return c.get();
    }
    return nullptr;
  }
  void Restart(Candidate& c) {
    c.elector->Restart();
    c.next = Now();
  }

  base::FakeClock clock;
  FakeLeaseServer server;
  std::vector<std::unique_ptr<Candidate>> candidates;
};

LeaderElectionConfig ValidConfig(FakeLock* lock) {
  LeaderElectionConfig cfg;
  cfg.lock = lock;
  cfg.callbacks.on_started_leading = [] {};
  cfg.callbacks.on_stopped_leading = [] {};
  return cfg;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(rejects_bad_timings_callbacks_lock) {
  FakeLeaseServer server;
  FakeLock lock(&server, "n1");
  BOOST_TEST(LeaderElector::New(ValidConfig(&lock)).ok());

  auto expect_invalid = [](LeaderElectionConfig cfg, const std::string& what) {
    auto e = LeaderElector::New(std::move(cfg));
    BOOST_TEST(absl::IsInvalidArgument(e.status()), what << ": " << e.status().ToString());
  };
  auto cfg = ValidConfig(&lock);
  cfg.lease_duration = cfg.renew_deadline;  // must be strictly greater
  expect_invalid(cfg, "lease == renew");
  cfg = ValidConfig(&lock);
  cfg.renew_deadline = absl::Milliseconds(2400);  // == 1.2 × 2 s
  expect_invalid(cfg, "renew == 1.2 retry");
  cfg.renew_deadline = absl::Milliseconds(2401);
  BOOST_TEST(LeaderElector::New(cfg).ok());
  cfg = ValidConfig(&lock);
  cfg.retry_period = absl::ZeroDuration();
  expect_invalid(cfg, "retry 0");
  cfg = ValidConfig(&lock);
  cfg.lease_duration = absl::Seconds(-1);
  cfg.renew_deadline = absl::Seconds(-2);
  cfg.retry_period = absl::Seconds(-3);
  expect_invalid(cfg, "negative");
  cfg = ValidConfig(&lock);
  cfg.callbacks.on_started_leading = nullptr;
  expect_invalid(cfg, "no OnStartedLeading");
  cfg = ValidConfig(&lock);
  cfg.callbacks.on_stopped_leading = nullptr;
  expect_invalid(cfg, "no OnStoppedLeading");
  cfg = ValidConfig(&lock);
  cfg.lock = nullptr;
  expect_invalid(cfg, "no lock");
  FakeLock anonymous(&server, "");
  expect_invalid(ValidConfig(&anonymous), "empty identity");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(try_acquire_or_renew)

BOOST_AUTO_TEST_CASE(creates_missing_record_for_self) {
  Fleet f;
  Candidate& a = f.Add("n1");
  BOOST_TEST(a.elector->TryAcquireOrRenew());
  const LeaderElectionRecord r = f.server.record();
  BOOST_TEST(r.holder_identity == "n1");
  BOOST_TEST(r.lease_transitions == 0);
  BOOST_TEST(r.lease_duration_seconds == 15);
  BOOST_TEST(r.acquire_time_us == f.clock.NowMicros());
  BOOST_TEST(r.renew_time_us == f.clock.NowMicros());
  BOOST_TEST(a.elector->IsLeader());
}

BOOST_AUTO_TEST_CASE(holder_keeps_term_fast_path_skips_get) {
  Fleet f;
  Candidate& a = f.Add("n1");
  BOOST_TEST(a.elector->TryAcquireOrRenew());
  const LeaderElectionRecord first = f.server.record();
  const int gets = f.server.gets();
  f.clock.Advance(seconds(2));
  BOOST_TEST(a.elector->TryAcquireOrRenew());
  const LeaderElectionRecord second = f.server.record();
  BOOST_TEST(f.server.gets() == gets, "a leader with a valid lease renews without GET");
  BOOST_TEST(second.acquire_time_us == first.acquire_time_us);
  BOOST_TEST(second.lease_transitions == first.lease_transitions);
  BOOST_TEST(second.renew_time_us == first.renew_time_us + 2 * kSec);
}

BOOST_AUTO_TEST_CASE(stale_cached_version_falls_back_to_get) {
  Fleet f;
  Candidate& a = f.Add("n1");
  BOOST_TEST(a.elector->TryAcquireOrRenew());
  f.server.Touch();  // someone else wrote: our cached version is stale
  const int gets = f.server.gets();
  f.clock.Advance(seconds(2));
  BOOST_TEST(a.elector->TryAcquireOrRenew());
  BOOST_TEST(f.server.gets() == gets + 1);
  BOOST_TEST(a.lock.updates_ == 2);  // fast update (409), then the slow-path update
  BOOST_TEST(f.server.record().holder_identity == "n1");
}

BOOST_AUTO_TEST_CASE(follower_waits_record_duration_from_own_observation) {
  Fleet f;
  Candidate& b = f.Add("n2");
  LeaderElectionRecord held{"n1", 15, f.clock.NowMicros() - 3600 * kSec,
                            f.clock.NowMicros() - 3600 * kSec, 4};
  // renewTime an hour old (a skewed or stopped clock): never compared to ours.
  f.server.Set(held);
  BOOST_TEST(!b.elector->TryAcquireOrRenew());
  const int64_t observed = f.Now();
  f.clock.Advance(seconds(15));  // exactly the duration: not yet expired
  BOOST_TEST(!b.elector->TryAcquireOrRenew());
  f.clock.Advance(std::chrono::microseconds(1));
  BOOST_TEST(b.elector->TryAcquireOrRenew());
  const LeaderElectionRecord r = f.server.record();
  BOOST_TEST(r.holder_identity == "n2");
  BOOST_TEST(r.lease_transitions == 5);
  BOOST_TEST(r.acquire_time_us == f.clock.NowMicros());
  BOOST_TEST(f.Now() - observed == 15 * kSec + 1);
}

BOOST_AUTO_TEST_CASE(record_change_restarts_the_wait) {
  Fleet f;
  Candidate& b = f.Add("n2");
  f.server.Set({"n1", 15, 1, 1, 0});
  BOOST_TEST(!b.elector->TryAcquireOrRenew());
  f.clock.Advance(seconds(10));
  f.server.Set({"n1", 15, 1, 2, 0});  // n1 renewed
  BOOST_TEST(!b.elector->TryAcquireOrRenew());
  f.clock.Advance(seconds(10));
  BOOST_TEST(!b.elector->TryAcquireOrRenew(), "20 s since first seen, but 10 s since change");
  f.clock.Advance(seconds(6));
  BOOST_TEST(b.elector->TryAcquireOrRenew());
}

BOOST_AUTO_TEST_CASE(empty_holder_is_taken_at_once) {
  Fleet f;
  Candidate& b = f.Add("n2");
  f.server.Set({"", 1, 1, 1, 7});
  BOOST_TEST(b.elector->TryAcquireOrRenew());
  BOOST_TEST(f.server.record().lease_transitions == 8);
}

BOOST_AUTO_TEST_CASE(n_parallel_takeovers_of_expired_lease_one_winner) {
  Fleet f;
  constexpr int kN = 16;
  for (int i = 0; i < kN; ++i) f.Add("n" + std::to_string(i));
  f.server.Set({"old", 15, 1, 1, 3});
  for (auto& c : f.candidates) BOOST_TEST(!c->elector->TryAcquireOrRenew());
  f.clock.Advance(seconds(16));
  // Every candidate reads the same version before anyone writes.
  std::latch all_read(kN);
  for (auto& c : f.candidates) c->lock.get_latch_ = &all_read;
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (auto& c : f.candidates) {
    threads.emplace_back([&, cp = c.get()] {
      if (cp->elector->TryAcquireOrRenew()) ++winners;
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(winners.load() == 1);
  const LeaderElectionRecord r = f.server.record();
  BOOST_TEST(r.lease_transitions == 4);
  int leaders = 0;
  for (auto& c : f.candidates) leaders += c->elector->IsLeader() ? 1 : 0;
  BOOST_TEST(leaders == 1);
  BOOST_TEST(f.server.writes() == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(loops)

BOOST_AUTO_TEST_CASE(two_electors_exactly_one_leads) {
  Fleet f;
  Candidate& a = f.Add("n1");
  Candidate& b = f.Add("n2");
  f.RunUntil(120 * kSec);
  BOOST_TEST(f.Leaders() == 1);
  BOOST_TEST(a.started + b.started == 1);
  Candidate* leader = f.Leader();
  BOOST_TEST(a.elector->GetLeader() == leader->lock.Identity());
  BOOST_TEST(b.elector->GetLeader() == leader->lock.Identity());
  // OnNewLeader fired once, for the first observed holder.
  BOOST_TEST(a.new_leaders == std::vector<std::string>{leader->lock.Identity()});
  BOOST_TEST(b.new_leaders == std::vector<std::string>{leader->lock.Identity()});
  // A healthy leader writes about every RetryPeriod.
  BOOST_TEST(f.server.writes() >= 50);
  BOOST_TEST(f.server.record().lease_transitions == 0);
}

BOOST_AUTO_TEST_CASE(killed_leader_taken_over_after_lease_duration) {
  Fleet f;
  Candidate& a = f.AddFirstLeader("n1");
  Candidate& b = f.Add("n2");
  f.RunUntil(30 * kSec);
  BOOST_TEST(!b.leading);
  const LeaderElectionRecord last = f.server.record();
  a.killed = true;
  const int64_t killed_at = f.Now();
  // The last renewal happened at most one RetryPeriod before the kill.
  const int64_t last_renew_mono = killed_at - (f.clock.NowMicros() - last.renew_time_us);
  const int64_t took = f.RunUntilTrue([&] { return b.leading; }, killed_at + 60 * kSec);
  BOOST_TEST_REQUIRE(took > 0);
  BOOST_TEST(took - last_renew_mono >= 15 * kSec, "took over before the record expired");
  // LeaseDuration + 2 jittered polls at most (RetryPeriod × 2.2 each).
  BOOST_TEST(took - killed_at <= 15 * kSec + 2 * 4'400'000);
  BOOST_TEST(f.server.record().lease_transitions == 1);
  BOOST_TEST(b.new_leaders == (std::vector<std::string>{"n1", "n2"}));
}

BOOST_AUTO_TEST_CASE(candidates_respect_the_records_duration) {
  // The leader configured 40 s; a 15 s candidate must wait the record's 40 s.
  Fleet f;
  Candidate& a = f.AddFirstLeader("long", {absl::Seconds(40), absl::Seconds(30), absl::Seconds(2)});
  Candidate& b = f.Add("short", {absl::Seconds(15), absl::Seconds(10), absl::Seconds(2)});
  f.RunUntil(10 * kSec);
  a.killed = true;
  const int64_t killed_at = f.Now();
  const int64_t took = f.RunUntilTrue([&] { return b.leading; }, killed_at + 120 * kSec);
  BOOST_TEST_REQUIRE(took > 0);
  BOOST_TEST(took - killed_at >= 38 * kSec);  // ≥ 40 s after the last renewal (≤ 2 s before kill)
  BOOST_TEST(took - killed_at <= 40 * kSec + 2 * 4'400'000);
  BOOST_TEST(f.server.record().lease_duration_seconds == 15);

  // And the other way round: a 40 s candidate takes over a 15 s record after ~15 s.
  Candidate& c = f.Add("long2", {absl::Seconds(40), absl::Seconds(30), absl::Seconds(2)});
  f.RunUntil(f.Now() + 10 * kSec);
  b.killed = true;
  const int64_t killed2 = f.Now();
  const int64_t took2 = f.RunUntilTrue([&] { return c.leading; }, killed2 + 120 * kSec);
  BOOST_TEST_REQUIRE(took2 > 0);
  BOOST_TEST(took2 - killed2 >= 13 * kSec);
  BOOST_TEST(took2 - killed2 <= 15 * kSec + 2 * 4'400'000);
}

BOOST_AUTO_TEST_CASE(leader_survives_transient_failure_within_renew_deadline) {
  Fleet f;
  Candidate& a = f.AddFirstLeader("n1");
  Candidate& b = f.Add("n2");
  f.RunUntil(20 * kSec);
  a.lock.down_ = true;
  f.RunUntil(f.Now() + 7 * kSec);  // < RenewDeadline
  a.lock.down_ = false;
  f.RunUntil(f.Now() + 60 * kSec);
  BOOST_TEST(a.leading);
  BOOST_TEST(a.stopped == 0);
  BOOST_TEST(b.started == 0);
}

BOOST_AUTO_TEST_CASE(failing_leader_stops_within_renew_deadline_then_competes_again) {
  Fleet f;
  Candidate& a = f.AddFirstLeader("n1");
  Candidate& b = f.Add("n2");
  f.RunUntil(20 * kSec);
  const int writes_before = f.server.writes();
  a.lock.down_ = true;
  const int64_t down_at = f.Now();
  const int64_t stopped = f.RunUntilTrue([&] { return !a.leading; }, down_at + 60 * kSec);
  BOOST_TEST_REQUIRE(stopped > 0);
  BOOST_TEST(a.stopped == 1);
  // The round started at most RetryPeriod after the last success; it then has
  // RenewDeadline to succeed.
  BOOST_TEST(stopped - down_at <= 10 * kSec + 2 * kSec);
  BOOST_TEST(stopped - down_at >= 10 * kSec - 2 * kSec);
  BOOST_TEST((a.elector->phase() == LeaderElector::Phase::kStopped));
  BOOST_TEST(!b.leading, "b must still wait for the lease to expire");
  BOOST_TEST(f.server.writes() == writes_before);

  const int64_t took = f.RunUntilTrue([&] { return b.leading; }, down_at + 60 * kSec);
  BOOST_TEST_REQUIRE(took > 0);
  BOOST_TEST(took > stopped, "no overlap: a stopped before b started");

  // a heals and competes again: follower while b renews, leader once b dies.
  a.lock.down_ = false;
  f.Restart(a);
  f.RunUntil(f.Now() + 30 * kSec);
  BOOST_TEST(!a.leading);
  BOOST_TEST(a.elector->GetLeader() == "n2");
  b.killed = true;
  const int64_t back = f.RunUntilTrue([&] { return a.leading; }, f.Now() + 60 * kSec);
  BOOST_TEST(back > 0);
  BOOST_TEST(a.started == 2);
  BOOST_TEST(f.server.record().lease_transitions == 2);
}

BOOST_AUTO_TEST_CASE(release_on_cancel_retries_after_conflict) {
  Fleet f;
  Timings t;
  t.release = true;
  Candidate& a = f.Add("n1", t);
  f.RunUntil(5 * kSec);
  BOOST_TEST_REQUIRE(a.leading);
  const LeaderElectionRecord before = f.server.record();
  const int gets = f.server.gets();
  a.lock.conflicts_before_update_ = 1;  // the first release write meets a 409
  a.elector->Cancel();
  BOOST_TEST(a.stopped == 1);
  const LeaderElectionRecord r = f.server.record();
  BOOST_TEST(r.holder_identity == "");
  BOOST_TEST(r.lease_duration_seconds == 1);
  BOOST_TEST(r.lease_transitions == before.lease_transitions);
  BOOST_TEST(r.acquire_time_us == f.clock.NowMicros());
  BOOST_TEST(r.renew_time_us == f.clock.NowMicros());
  BOOST_TEST(f.server.gets() == gets + 2, "re-GET after the 409");
  BOOST_TEST(!a.elector->IsLeader());

  // The released lease is taken at once, without waiting out any duration.
  Candidate& b = f.Add("n2");
  BOOST_TEST(b.elector->TryAcquireOrRenew());
  BOOST_TEST(f.server.record().lease_transitions == before.lease_transitions + 1);
}

BOOST_AUTO_TEST_CASE(cancel_without_leading_fires_stopped_and_writes_nothing) {
  Fleet f;
  Timings t;
  t.release = true;
  Candidate& a = f.Add("n1");
  f.RunUntil(5 * kSec);
  Candidate& b = f.Add("n2", t);
  f.RunUntil(10 * kSec);
  const LeaderElectionRecord before = f.server.record();
  b.elector->Cancel();
  BOOST_TEST(b.stopped == 1);
  BOOST_TEST(b.started == 0);
  BOOST_TEST((f.server.record() == before));
  BOOST_TEST(a.leading);
}

BOOST_AUTO_TEST_CASE(healthz_fails_only_for_a_wedged_leader) {
  Fleet f;
  Candidate& a = f.AddFirstLeader("n1");
  Candidate& b = f.Add("n2");
  f.RunUntil(10 * kSec);
  const absl::Duration tolerance = absl::Seconds(20);
  BOOST_TEST(a.elector->Healthy(tolerance));
  BOOST_TEST(b.elector->Healthy(tolerance));
  // Wedged: a stops renewing (not stepped), but still believes the record is its.
  a.killed = true;
  const int64_t last = a.elector->ObservedTimeMicros();
  f.Advance(last + 35 * kSec);  // exactly LeaseDuration + tolerance
  BOOST_TEST(a.elector->Healthy(tolerance));
  f.Advance(last + 35 * kSec + 1);
  BOOST_TEST(!a.elector->Healthy(tolerance));
  BOOST_TEST(b.elector->Healthy(tolerance), "a standby is always healthy");
}

BOOST_AUTO_TEST_CASE(run_blocks_until_stop_and_releases) {
  // Real clock, short timings: Run()/Stop() as a process uses them.
  FakeLeaseServer server;
  FakeLock lock(&server, "n1");
  std::atomic<int> started{0}, stopped{0};
  LeaderElectionConfig cfg;
  cfg.lock = &lock;
  cfg.lease_duration = absl::Milliseconds(1500);
  cfg.renew_deadline = absl::Milliseconds(1000);
  cfg.retry_period = absl::Milliseconds(100);
  cfg.release_on_cancel = true;
  cfg.callbacks.on_started_leading = [&] { ++started; };
  cfg.callbacks.on_stopped_leading = [&] { ++stopped; };
  auto e = LeaderElector::New(cfg);
  BOOST_TEST_REQUIRE(e.ok());
  LeaderElector* elector = e->get();
  std::thread runner([&] { elector->Run(); });
  // The acquire, then two renewals a RetryPeriod apart (awaited, not slept for).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.writes() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST(server.writes() >= 3, "renews every RetryPeriod");
  BOOST_TEST(started.load() == 1);
  elector->Stop();
  runner.join();
  BOOST_TEST(stopped.load() == 1);
  BOOST_TEST(server.record().holder_identity == "");
}

BOOST_AUTO_TEST_SUITE_END()

// tight_follower_polls: poolcoord's opt-in departure from client-go's acquire
// loop, for a replica handover within leaseDuration + 2 × retryPeriod. Without
// it the loop must stay client-go's.
BOOST_AUTO_TEST_SUITE(tight_follower_polls)

namespace {

// One handover on the fake clock: n1 (15 s / 10 s / 2 s, client-go) leads, n2
// (same timings, tight_follower_polls as given) follows, n1 dies at `kill_at`.
struct Handover {
  std::vector<int64_t> gaps;  // µs between n2's acquire polls, up to the one that took over
  int64_t last_renew = 0;     // monotonic µs of n1's last renewal
  int64_t observed = 0;       // when n2 first saw that last renewal
  int64_t killed_at = 0;
  int64_t took = -1;          // when n2 started leading
};

Handover RunHandover(bool tight, int64_t kill_at) {
  Handover h;
  Fleet f;
  Candidate& a = f.AddFirstLeader("n1");
  Timings t;
  t.tight = tight;
  Candidate& b = f.Add("n2", t);
  f.RunUntil(kill_at);
  BOOST_TEST_REQUIRE(!b.leading, "n2 took over a lease n1 renews");
  const LeaderElectionRecord last = f.server.record();
  a.killed = true;
  h.killed_at = f.Now();
  h.last_renew = h.killed_at - (f.clock.NowMicros() - last.renew_time_us);
  BOOST_TEST_REQUIRE(f.RunUntilTrue([&] { return b.elector->ObservedRecord() == last; },
                                    h.killed_at + 10 * kSec) > 0);
  BOOST_TEST_REQUIRE(!b.leading);
  h.observed = b.elector->ObservedTimeMicros();
  BOOST_TEST_REQUIRE(f.RunUntilTrue([&] { return b.leading; }, h.killed_at + 60 * kSec) > 0);
  h.took = b.started_at;
  const std::vector<int64_t>& polls = b.lock.get_times_;
  for (size_t i = 1; i < polls.size() && polls[i] <= h.took; ++i) {
    h.gaps.push_back(polls[i] - polls[i - 1]);
  }
  BOOST_TEST_REQUIRE(h.gaps.size() >= 10u);
  BOOST_TEST(h.took - h.last_renew > 15 * kSec, "taken over before the record expired");
  return h;
}

}  // namespace

BOOST_AUTO_TEST_CASE(follower_takes_over_exactly_at_observed_expiry) {
  const Handover h = RunHandover(/*tight=*/true, 40 * kSec);
  // The poll that takes over is scheduled at the observed expiry, not after it.
  BOOST_TEST(h.took == h.observed + 15 * kSec + LeaderElector::kExpiryPollDelayMicros);
  // The last renewal was seen less than one RetryPeriod after it was written.
  BOOST_TEST(h.observed - h.last_renew < 2 * kSec);
  BOOST_TEST(h.took - h.killed_at <= 15 * kSec + 2 * kSec + LeaderElector::kExpiryPollDelayMicros);
}

BOOST_AUTO_TEST_CASE(follower_polls_every_half_to_one_retry_period_jittered) {
  const Handover h = RunHandover(/*tight=*/true, 40 * kSec);
  // Every wait is < RetryPeriod; all but the expiry poll's are ≥ 0.5 × RetryPeriod.
  for (size_t i = 0; i < h.gaps.size(); ++i) {
    BOOST_TEST(h.gaps[i] < 2 * kSec, "gap " << i << ": " << h.gaps[i] << " µs");
    if (i + 1 < h.gaps.size()) BOOST_TEST(h.gaps[i] >= 1 * kSec, "gap " << i << ": " << h.gaps[i] << " µs");
  }
  // Still jittered: candidates must not poll in lockstep.
  const auto [lo, hi] = std::minmax_element(h.gaps.begin(), h.gaps.end() - 1);
  BOOST_TEST(*hi - *lo >= kSec / 4, "gaps " << *lo << ".." << *hi << " µs: no jitter");
}

BOOST_AUTO_TEST_CASE(off_keeps_client_go_polls) {
  const Handover h = RunHandover(/*tight=*/false, 40 * kSec);
  for (size_t i = 0; i < h.gaps.size(); ++i) {
    BOOST_TEST(h.gaps[i] >= 2 * kSec, "gap " << i << ": " << h.gaps[i] << " µs");
    BOOST_TEST(h.gaps[i] < 4'400'000, "gap " << i << ": " << h.gaps[i] << " µs");
  }
  // Takeover at the first ordinary poll after the expiry, not at the expiry.
  BOOST_TEST(h.took > h.observed + 15 * kSec + LeaderElector::kExpiryPollDelayMicros);
  BOOST_TEST(h.took < h.observed + 15 * kSec + 4'400'000);
}

BOOST_AUTO_TEST_CASE(handover_within_lease_plus_one_retry_for_any_kill_time) {
  // Kill times spread over many renewal cycles. Tight: ≤ leaseDuration +
  // RetryPeriod (+ the expiry poll's delay) every time. Off: client-go's bound,
  // and some handovers exceed leaseDuration + RetryPeriod.
  int64_t worst_tight = 0, worst_off = 0;
  int off_over = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t kill_at = 30 * kSec + i * 317'000;
    const Handover tight = RunHandover(true, kill_at);
    const Handover off = RunHandover(false, kill_at);
    worst_tight = std::max(worst_tight, tight.took - tight.killed_at);
    worst_off = std::max(worst_off, off.took - off.killed_at);
    BOOST_TEST(tight.took - tight.killed_at <= 17 * kSec + LeaderElector::kExpiryPollDelayMicros,
               "kill at " << kill_at << ": handover " << tight.took - tight.killed_at << " µs");
    BOOST_TEST(off.took - off.killed_at <= 15 * kSec + 2 * 4'400'000);
    off_over += off.took - off.killed_at > 17 * kSec + LeaderElector::kExpiryPollDelayMicros ? 1 : 0;
  }
  BOOST_TEST_MESSAGE("worst handover: tight " << worst_tight << " µs, client-go " << worst_off << " µs");
  BOOST_TEST(off_over > 0, "client-go's loop never exceeded leaseDuration + RetryPeriod");
}

BOOST_AUTO_TEST_CASE(expiry_poll_uses_the_records_duration) {
  // The record says 40 s; the candidate's own 15 s does not matter.
  Fleet f;
  Timings t;
  t.tight = true;
  Candidate& b = f.Add("n2", t);
  f.server.Set({"n1", 40, 1, 1, 0});
  const int64_t t0 = f.Now();
  b.next = b.elector->Step();
  BOOST_TEST(b.elector->ObservedTimeMicros() == t0);
  BOOST_TEST(b.next - t0 >= 1 * kSec);
  BOOST_TEST(b.next - t0 < 2 * kSec);
  BOOST_TEST_REQUIRE(f.RunUntilTrue([&] { return b.leading; }, t0 + 60 * kSec) > 0);
  BOOST_TEST(b.started_at == t0 + 40 * kSec + LeaderElector::kExpiryPollDelayMicros);
  BOOST_TEST(f.server.record().lease_transitions == 1);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::election
