// --scenario=elector: the LeaderElector over PoolLeaseLock against the real
// server, with short timings on the real clock. Each check uses its own pool
// (ec-a ... ec-f) and deletes that PoolLease first. Margins are generous so a
// loaded machine does not fail them; the tight bounds are in
// tests/election/leader_elector_test.cc on a fake clock.
#include <atomic>
#include <cstdio>
#include <functional>
#include <iostream>
#include <latch>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "election/leader_elector.h"
#include "election/pool_lease_lock.h"
#include "agent/sim/sim.h"

namespace poolcoord::sim {
namespace {

constexpr int64_t kSec = 1'000'000;

// A PoolLeaseLock whose network can be cut, remembering its last accepted write.
class FlakyLock : public election::LeaseLock {
 public:
  FlakyLock(cloud::RestClient* client, const Options& o, const std::string& pool,
            const std::string& node)
      : clients_(client, {.bearer_token = TokenFor(o, "system:node:" + node)}),
        inner_(clients_.LeaseShaped(cloud::PoolLeases()), pool, node) {}
  absl::StatusOr<election::VersionedRecord> Get() override {
    if (down) return absl::UnavailableError("cut off");
    return inner_.Get();
  }
  absl::StatusOr<std::string> Create(const election::LeaderElectionRecord& r) override {
    if (down) return absl::UnavailableError("cut off");
    auto v = inner_.Create(r);
    if (v.ok()) last_write = MonoMicros();
    return v;
  }
  absl::StatusOr<std::string> Update(const election::LeaderElectionRecord& r,
                                     const std::string& version) override {
    if (down) return absl::UnavailableError("cut off");
    auto v = inner_.Update(r, version);
    if (v.ok()) last_write = MonoMicros();
    return v;
  }
  std::string Identity() const override { return inner_.Identity(); }
  std::string Describe() const override { return inner_.Describe(); }

  std::atomic<bool> down{false};
  std::atomic<int64_t> last_write{0};

 private:
  cloud::Clientset clients_;  // this node's identity over the shared connections
  election::PoolLeaseLock inner_;
};

struct Cand {
  std::unique_ptr<FlakyLock> lock;
  std::unique_ptr<election::LeaderElector> e;
  bool leading = false;
  int started = 0;
  int stopped = 0;
  bool killed = false;
  int64_t next = 0;
  int64_t started_at = 0;
  int64_t stopped_at = 0;
};

struct Timing {
  double lease = 3, renew = 2, retry = 0.5;
  bool release = false;
};

class Harness {
 public:
  Harness(const Options& o, cloud::RestClient* client, std::string pool)
      : o_(o), client_(client), pool_(std::move(pool)) {
    (void)client_->Send("DELETE", absl::StrCat(election::kPoolLeasesPath, "/", pool_), "");
  }
  Cand& Add(int node, Timing t = {}) {
    auto c = std::make_unique<Cand>();
    Cand* cp = c.get();
    c->lock = std::make_unique<FlakyLock>(client_, o_, pool_, absl::StrCat(pool_, "-", node));
    election::LeaderElectionConfig cfg;
    cfg.lock = c->lock.get();
    cfg.lease_duration = absl::Seconds(t.lease);
    cfg.renew_deadline = absl::Seconds(t.renew);
    cfg.retry_period = absl::Seconds(t.retry);
    cfg.release_on_cancel = t.release;
    cfg.jitter_seed = o_.seed + node + 1;
    cfg.callbacks.on_started_leading = [this, cp] {
      cp->leading = true;
      ++cp->started;
      cp->started_at = MonoMicros();
      for (auto& other : cands_) {
        if (other.get() != cp && other->leading && !other->killed) overlap_ = true;
      }
    };
    cfg.callbacks.on_stopped_leading = [cp] {
      if (cp->leading) cp->stopped_at = MonoMicros();
      cp->leading = false;
      ++cp->stopped;
    };
    auto e = election::LeaderElector::New(cfg);
    if (!e.ok()) {
      std::cerr << e.status() << "\n";
      std::exit(2);
    }
    c->e = *std::move(e);
    c->next = MonoMicros();
    cands_.push_back(std::move(c));
    return *cp;
  }
  // Steps due candidates until `pred` or `seconds` pass; returns whether pred held.
  bool RunUntil(const std::function<bool()>& pred, double seconds) {
    const int64_t deadline = MonoMicros() + static_cast<int64_t>(seconds * kSec);
    while (true) {
      if (pred && pred()) return true;
      const int64_t now = MonoMicros();
      if (now >= deadline) return false;
      int64_t next = deadline;
      for (auto& c : cands_) {
        if (c->killed || c->e->phase() == election::LeaderElector::Phase::kStopped) continue;
        if (c->next <= now) c->next = c->e->Step();
        next = std::min(next, c->next);
      }
      const int64_t wait = std::min<int64_t>(next - MonoMicros(), 20'000);
      if (wait > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait));
    }
  }
  void RunFor(double seconds) { RunUntil(nullptr, seconds); }
  int Leaders() const {
    int n = 0;
    for (auto& c : cands_) n += c->leading && !c->killed;
    return n;
  }
  Cand* Leader() {
    for (auto& c : cands_) {
      if (c->leading && !c->killed) return c.get();
    }
    return nullptr;
  }
  Cand* Follower() {
    for (auto& c : cands_) {
      if (!c->leading && !c->killed) return c.get();
    }
    return nullptr;
  }
  absl::StatusOr<election::VersionedRecord> Record() {
    auto r = client_->Send("GET", absl::StrCat(election::kPoolLeasesPath, "/", pool_), "");
    if (!r.ok()) return r.status();
    if (r->status != 200) return cloud::StatusFromResponse(r->status, r->body);
    return election::ParseLeaseRecord(r->body);
  }
  bool overlap() const { return overlap_; }

 private:
  const Options& o_;
  cloud::RestClient* client_;
  std::string pool_;
  std::vector<std::unique_ptr<Cand>> cands_;
  bool overlap_ = false;
};

struct Checker {
  int failed = 0;
  std::string current;
  bool Expect(bool cond, const std::string& what) {
    if (!cond) {
      ++failed;
      std::printf("  FAIL %s: %s\n", current.c_str(), what.c_str());
    }
    return cond;
  }
};

}  // namespace

int RunElectorChecks(const Options& o, cloud::RestClient* client) {
  Checker ck;
  auto check = [&](const char* name, const std::function<void()>& body) {
    ck.current = name;
    const int before = ck.failed;
    const int64_t t0 = MonoMicros();
    body();
    std::printf("%s %s (%.1fs)\n", ck.failed == before ? "PASS" : "FAIL", name,
                (MonoMicros() - t0) / 1e6);
    std::fflush(stdout);
  };
  const double kMargin = 1.5;  // seconds of slack for scheduling on a loaded machine

  check("two_electors_exactly_one_leads", [&] {
    Harness h(o, client, "ec-a");
    Cand& a = h.Add(0);
    Cand& b = h.Add(1);
    ck.Expect(h.RunUntil([&] { return h.Leaders() == 1; }, 10), "nobody led within 10 s");
    h.RunFor(5);
    ck.Expect(h.Leaders() == 1, "exactly one leader after 5 s more");
    ck.Expect(a.started + b.started == 1, "leadership changed hands without a failure");
    ck.Expect(!h.overlap(), "two leaders at once");
    ck.Expect(a.e->GetLeader() == b.e->GetLeader() && !a.e->GetLeader().empty(),
              "candidates disagree on the leader");
    auto rec = h.Record();
    ck.Expect(rec.ok() && rec->record.holder_identity == a.e->GetLeader(),
              "the server's record names another holder");
  });

  check("killed_leader_handover_within_lease_plus_2_retry", [&] {
    Harness h(o, client, "ec-b");
    h.Add(0);
    h.Add(1);
    if (!ck.Expect(h.RunUntil([&] { return h.Leaders() == 1; }, 10), "nobody led")) return;
    h.RunFor(3);
    Cand* leader = h.Leader();
    Cand* follower = h.Follower();
    leader->killed = true;
    const int64_t killed = MonoMicros();
    const bool took = h.RunUntil([&] { return follower->leading; }, 20);
    ck.Expect(took, "the follower never took over");
    if (!took) return;
    const double after_renew = (follower->started_at - leader->lock->last_write) / 1e6;
    const double after_kill = (follower->started_at - killed) / 1e6;
    std::printf("  handover %.2fs after the kill, %.2fs after the last renewal\n", after_kill,
                after_renew);
    ck.Expect(after_renew >= 3.0 - 0.05, "took over before the lease duration passed");
    ck.Expect(after_kill <= 3.0 + 2 * 0.5 * 2.2 + kMargin, "handover slower than lease + 2 polls");
    auto rec = h.Record();
    ck.Expect(rec.ok() && rec->record.lease_transitions == 1, "leaseTransitions not 1");
  });

  check("candidates_respect_the_records_duration", [&] {
    Harness h(o, client, "ec-c");
    Cand& longer = h.Add(0, {6, 4, 0.5});
    if (!ck.Expect(h.RunUntil([&] { return longer.leading; }, 10), "the 6 s candidate never led"))
      return;
    Cand& shorter = h.Add(1, {3, 2, 0.5});
    h.RunFor(2);
    longer.killed = true;
    const int64_t killed = MonoMicros();
    const bool took = h.RunUntil([&] { return shorter.leading; }, 20);
    ck.Expect(took, "the 3 s candidate never took over");
    if (!took) return;
    const double after_renew = (shorter.started_at - longer.lock->last_write) / 1e6;
    std::printf("  3 s candidate took a 6 s record %.2fs after its last renewal\n", after_renew);
    ck.Expect(after_renew >= 6.0 - 0.05, "did not wait the record's 6 s");
    ck.Expect((shorter.started_at - killed) / 1e6 <= 6.0 + 2.2 + kMargin, "took too long");
  });

  check("failing_leader_stops_within_renew_deadline_and_competes_again", [&] {
    Harness h(o, client, "ec-d");
    h.Add(0);
    h.Add(1);
    if (!ck.Expect(h.RunUntil([&] { return h.Leaders() == 1; }, 10), "nobody led")) return;
    h.RunFor(2);
    Cand* a = h.Leader();
    Cand* b = h.Follower();
    a->lock->down = true;
    const int64_t down = MonoMicros();
    const bool stopped = h.RunUntil([&] { return !a->leading; }, 10);
    ck.Expect(stopped, "the cut-off leader kept leading");
    const double stop_after = (a->stopped_at - down) / 1e6;
    std::printf("  cut-off leader stopped after %.2fs\n", stop_after);
    ck.Expect(stop_after <= 2.0 + 0.5 + kMargin, "stopped later than RenewDeadline + RetryPeriod");
    ck.Expect(h.RunUntil([&] { return b->leading; }, 15), "the other never took over");
    ck.Expect(b->started_at >= a->stopped_at, "overlapping leadership");
    a->lock->down = false;
    a->e->Restart();
    a->next = MonoMicros();
    h.RunFor(4);
    ck.Expect(!a->leading && a->e->GetLeader() == b->lock->Identity(),
              "the healed candidate should follow the new leader");
    b->killed = true;
    ck.Expect(h.RunUntil([&] { return a->leading; }, 15), "the healed candidate never led again");
    ck.Expect(a->started == 2, "the healed candidate should have led twice");
  });

  check("n_parallel_takeovers_one_winner", [&] {
    Harness h(o, client, "ec-e");
    Cand& old = h.Add(9, {2, 1.5, 0.5});
    ck.Expect(old.e->TryAcquireOrRenew(), "could not create the lease");
    constexpr int kN = 8;
    std::vector<Cand*> cands;
    for (int i = 0; i < kN; ++i) cands.push_back(&h.Add(i, {2, 1.5, 0.5}));
    for (Cand* c : cands) ck.Expect(!c->e->TryAcquireOrRenew(), "took a live lease");
    std::this_thread::sleep_for(std::chrono::milliseconds(2600));
    std::latch go(kN);
    std::atomic<int> winners{0};
    std::vector<std::thread> threads;
    for (Cand* c : cands) {
      threads.emplace_back([&, c] {
        go.arrive_and_wait();
        if (c->e->TryAcquireOrRenew()) winners++;
      });
    }
    for (auto& t : threads) t.join();
    ck.Expect(winners.load() == 1, absl::StrCat(winners.load(), " winners, want exactly 1"));
    auto rec = h.Record();
    ck.Expect(rec.ok() && rec->record.lease_transitions == 1, "leaseTransitions not 1");
    int believers = 0;
    for (Cand* c : cands) believers += c->e->IsLeader();
    ck.Expect(believers == 1, "more than one candidate believes it holds the lease");
  });

  check("release_on_cancel_then_immediate_takeover", [&] {
    Harness h(o, client, "ec-f");
    Timing t;
    t.release = true;
    Cand& a = h.Add(0, t);
    if (!ck.Expect(h.RunUntil([&] { return a.leading; }, 10), "never led")) return;
    h.RunFor(1);
    a.e->Cancel();
    ck.Expect(a.stopped == 1, "OnStoppedLeading did not fire once");
    auto rec = h.Record();
    ck.Expect(rec.ok() && rec->record.holder_identity.empty() &&
                  rec->record.lease_duration_seconds == 1 && rec->record.lease_transitions == 0,
              "the lease was not released");
    Cand& b = h.Add(1);
    ck.Expect(b.e->TryAcquireOrRenew(), "a released lease must be taken at once");
    rec = h.Record();
    ck.Expect(rec.ok() && rec->record.holder_identity == b.lock->Identity() &&
                  rec->record.lease_transitions == 1,
              "takeover after release must count one transition");
  });

  std::printf("elector checks: %s\n", ck.failed == 0 ? "PASS" : "FAIL");
  return ck.failed == 0 ? 0 : 1;
}

}  // namespace poolcoord::sim
