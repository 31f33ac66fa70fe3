// The fleet scenario: agents as state machines ticked by a few worker threads.
//
// Time: scheduling and measurement use this machine's steady clock (µs);
// server timestamps (status.observedTime, wall clock) are mapped onto it with
// the wall-minus-steady offset taken at start. Server and simulator share the
// machine, so the two views agree to well under a millisecond.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "election/leader_elector.h"
#include "election/pool_lease_lock.h"
#include "election/sim/sim.h"
#include "rapidjson/document.h"
#include "store/microtime.h"

namespace poolcoord::sim {
namespace {

constexpr int64_t kSec = 1'000'000;
constexpr int64_t kNever = INT64_MAX;
constexpr char kDelegatedPath[] = "/apis/coordination.pool/v1alpha1/delegatedleases";

int64_t S(double seconds) { return static_cast<int64_t>(seconds * 1e6); }

struct Fleet;

// A LeaseLock as the agent's network sees it: requests fail without leaving
// the process while the agent is cut off from the cloud (or dead).
class AgentLock : public election::LeaseLock {
 public:
  AgentLock(Fleet* fleet, int agent, std::unique_ptr<election::PoolLeaseLock> inner)
      : fleet_(fleet), agent_(agent), inner_(std::move(inner)) {}
  absl::StatusOr<election::VersionedRecord> Get() override;
  absl::StatusOr<std::string> Create(const election::LeaderElectionRecord& r) override;
  absl::StatusOr<std::string> Update(const election::LeaderElectionRecord& r,
                                     const std::string& v) override;
  std::string Identity() const override { return inner_->Identity(); }
  std::string Describe() const override { return inner_->Describe(); }

 private:
  template <typename F>
  auto Timed(F f) -> decltype(f());
  Fleet* fleet_;
  int agent_;
  std::unique_ptr<election::PoolLeaseLock> inner_;
};

struct Agent {
  int id = 0;
  int pool = 0;
  int slot = 0;
  std::string node;
  std::string token;
  int64_t skew_us = 0;
  std::unique_ptr<SkewedClock> clock;
  std::unique_ptr<AgentLock> lock;
  std::unique_ptr<election::LeaderElector> elector;
  int64_t elector_due = 0;
  int64_t next_hb = 0;
  int64_t next_delegate = 0;
  // Fault schedule (steady µs; kNever when none).
  std::atomic<int64_t> death_at{kNever};
  int64_t cut_from = kNever, cut_until = kNever;
  std::atomic<bool> alive{true};
  std::atomic<bool> killed{false};  // leader kill: dies at the next tick
  std::atomic<bool> believes_leading{false};
  int64_t lead_since = 0;
  // Leader state, reset per term: the LAN heartbeat last delegated per member
  // and the resourceVersion of each member's DelegatedLease as we last saw it.
  std::vector<int64_t> delegated_hb;
  std::unordered_map<int, std::string> dl_version;
};

struct Pool {
  std::string name;
  std::vector<int> agents;
  int64_t cut_from = kNever, cut_until = kNever;  // whole-pool partition
  // The modelled LAN: each member's last heartbeat (steady µs) and whether it
  // said "I cannot reach the cloud" (yurthub's delegate request).
  absl::Mutex mu;
  std::vector<int64_t> lan_hb;
  std::vector<bool> lan_cut;
  std::atomic<int> believers{0};
  std::atomic<int64_t> kill_at{0};  // pending failover measurement
  std::atomic<int64_t> last_uncovered{0};  // last time no alive member reached the cloud
  std::atomic<bool> ever_led{false};
};

// The cloud's view of one node's heartbeats.
struct NodeView {
  int64_t last_seen = 0;
  int64_t last_observed_wall = 0;  // DelegatedLease status.observedTime, wall µs
  bool gap_counted = false;
};

struct DlEvent {
  int64_t rv;
  int pool;
  std::string delegate;
};
struct PlEvent {
  int64_t rv;
  std::string holder;
};

struct Fleet {
  const Options& o;
  store::KubeClient* client;
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<std::unique_ptr<Pool>> pools;
  std::unordered_map<std::string, int> agent_by_node;
  std::unordered_map<std::string, int> pool_by_name;
  int64_t start = 0, end = 0, warmup = 0;
  int64_t wall_minus_mono = 0;
  std::atomic<bool> stopping{false};
  Latencies latency;
  Latencies tick_lag;  // how late agents are ticked: the simulator's own overload
  std::atomic<int64_t> requests{0}, request_errors{0}, conflicts{0}, forbidden{0};
  std::atomic<int64_t> dl_writes{0}, dl_refused{0};

  // Monitor state.
  absl::Mutex view_mu;
  std::vector<NodeView> views ABSL_GUARDED_BY(view_mu);
  std::vector<int64_t> gaps ABSL_GUARDED_BY(view_mu);  // every heartbeat gap seen, µs
  int64_t false_evictions ABSL_GUARDED_BY(view_mu) = 0;
  int64_t wholepool_gaps ABSL_GUARDED_BY(view_mu) = 0;
  int64_t uncovered_gaps ABSL_GUARDED_BY(view_mu) = 0;
  int64_t false_liveness ABSL_GUARDED_BY(view_mu) = 0;
  int64_t max_gap ABSL_GUARDED_BY(view_mu) = 0;
  std::vector<std::string> incidents ABSL_GUARDED_BY(view_mu);
  std::vector<DlEvent> dl_events ABSL_GUARDED_BY(view_mu);
  std::map<int, std::vector<PlEvent>> pl_events ABSL_GUARDED_BY(view_mu);
  // PoolLease revisions the watch missed (re-lists): (from, to].
  std::vector<std::pair<int64_t, int64_t>> blind ABSL_GUARDED_BY(view_mu);
  int64_t unverifiable = 0;
  std::atomic<int> watch_restarts{0};
  std::atomic<int64_t> belief_overlaps{0};
  absl::Mutex failover_mu;
  std::vector<int64_t> failovers ABSL_GUARDED_BY(failover_mu);
  std::atomic<int64_t> kills{0};

  // Scheduler.
  std::mutex q_mu;
  std::condition_variable q_cv;
  std::priority_queue<std::pair<int64_t, int>, std::vector<std::pair<int64_t, int>>,
                      std::greater<>>
      queue;

  Fleet(const Options& opts, store::KubeClient* c) : o(opts), client(c) {}

  // A LAN heartbeat is fresh for one heartbeat interval plus 2 s: a leader
  // (also a new one) delegates only evidence that young, so the cloud never
  // sees a node alive more than this long after its last sign of life.
  int64_t Fresh() const { return S(o.heartbeat_interval_s + 2); }

  bool CloudOk(const Agent& a, int64_t now) const {
    const Pool& p = *pools[a.pool];
    if (now >= p.cut_from && now < p.cut_until) return false;
    return !(now >= a.cut_from && now < a.cut_until);
  }
  bool PoolCut(const Pool& p, int64_t now) const { return now >= p.cut_from && now < p.cut_until; }

  void Incident(std::string s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(view_mu) {
    if (incidents.size() < 50) incidents.push_back(std::move(s));
  }
  double Rel(int64_t t) const { return (t - start) / 1e6; }

  // A heartbeat reached the cloud at steady time t.
  void Seen(int node_agent, int64_t t) {
    absl::MutexLock l(&view_mu);
    NodeView& v = views[node_agent];
    if (t <= v.last_seen) return;
    gaps.push_back(t - v.last_seen);
    max_gap = std::max(max_gap, t - v.last_seen);
    v.last_seen = t;
    v.gap_counted = false;
  }

  void Schedule(int agent, int64_t due) {
    {
      std::lock_guard<std::mutex> l(q_mu);
      queue.emplace(due, agent);
    }
    q_cv.notify_one();
  }

  void Worker() {
    std::unique_lock<std::mutex> l(q_mu);
    while (!stopping) {
      if (queue.empty()) {
        q_cv.wait_for(l, std::chrono::milliseconds(100));
        continue;
      }
      auto [due, id] = queue.top();
      const int64_t now = MonoMicros();
      if (due > now) {
        q_cv.wait_for(l, std::chrono::microseconds(std::min<int64_t>(due - now, 100'000)));
        continue;
      }
      queue.pop();
      l.unlock();
      tick_lag.Add(now - due);
      const int64_t next = Tick(*agents[id]);
      l.lock();
      if (next != kNever) queue.emplace(next, id);
    }
  }

  void Die(Agent& a, int64_t now) {
    a.alive = false;
    if (a.death_at.load() > now) a.death_at = now;
    if (a.believes_leading) {
      a.believes_leading = false;
      pools[a.pool]->believers--;
    }
  }

  int64_t Tick(Agent& a) {
    int64_t now = MonoMicros();
    if (!a.alive) return kNever;
    if (a.killed || now >= a.death_at) {
      Die(a, now);
      return kNever;
    }
    if (now >= end) return kNever;
    Pool& pool = *pools[a.pool];
    const bool cloud = CloudOk(a, now);
    if (now >= a.next_hb) {
      // The node's own heartbeat: while it reaches the cloud the cloud sees it
      // directly (counted here, no request: the cloud Lease is not ours to write).
      if (cloud) Seen(a.id, now);
      {
        absl::MutexLock l(&pool.mu);
        pool.lan_hb[a.slot] = now;
        pool.lan_cut[a.slot] = !cloud;
      }
      a.next_hb += S(o.heartbeat_interval_s);
    }
    if (now >= a.elector_due) {
      a.elector_due = a.elector->Step();
      if (a.elector->phase() == election::LeaderElector::Phase::kStopped) {
        // yurthub campaigns again after losing (OpenYurt PR #1145).
        a.elector->Restart();
        a.elector_due = MonoMicros() + S(o.retry_period_s);
      }
    }
    now = MonoMicros();
    if (a.believes_leading && now >= a.next_delegate) {
      Delegate(a, now);
      a.next_delegate = MonoMicros() + kSec;
    }
    int64_t next = std::min({a.next_hb, a.elector_due, a.death_at.load(), end});
    if (a.believes_leading) next = std::min(next, a.next_delegate);
    return next;
  }

  void StartedLeading(Agent& a) {
    const int64_t now = MonoMicros();
    Pool& p = *pools[a.pool];
    a.believes_leading = true;
    a.lead_since = now;
    a.delegated_hb.assign(p.agents.size(), 0);
    a.dl_version.clear();
    a.next_delegate = now;
    p.ever_led = true;
    if (p.believers++ > 0) {
      belief_overlaps++;
      absl::MutexLock l(&view_mu);
      Incident(absl::StrFormat("t=%.1fs %s: %s believes it leads while another does", Rel(now),
                               p.name, a.node));
    }
    if (int64_t k = p.kill_at.exchange(0); k != 0) {
      absl::MutexLock l(&failover_mu);
      failovers.push_back(now - k);
    }
  }
  void StoppedLeading(Agent& a) {
    if (!a.believes_leading) return;
    a.believes_leading = false;
    pools[a.pool]->believers--;
  }

  // Writes a DelegatedLease for every member whose fresh LAN heartbeat says it
  // cannot reach the cloud and that we have not delegated yet.
  void Delegate(Agent& a, int64_t now) {
    if (!CloudOk(a, now)) return;
    Pool& p = *pools[a.pool];
    std::vector<std::pair<int, int64_t>> todo;
    {
      absl::MutexLock l(&p.mu);
      for (size_t m = 0; m < p.agents.size(); ++m) {
        if (static_cast<int>(m) == a.slot || !p.lan_cut[m]) continue;
        const int64_t hb = p.lan_hb[m];
        if (hb > a.delegated_hb[m] && now - hb < Fresh()) todo.emplace_back(m, hb);
      }
    }
    for (auto [m, hb] : todo) {
      if (!a.believes_leading || !CloudOk(a, MonoMicros())) return;
      absl::Status s = WriteDelegated(a, m, hb);
      if (s.ok()) {
        a.delegated_hb[m] = hb;
      } else if (absl::IsPermissionDenied(s)) {
        dl_refused++;
        return;  // deposed: the server fenced us; the elector will notice
      }
    }
  }

  absl::StatusOr<store::KubeResponse> Request(const Agent& a, const char* method,
                                              const std::string& path, const std::string& body) {
    const int64_t t0 = MonoMicros();
    requests++;
    store::KubeRequestOptions ro;
    ro.bearer_token = a.token;
    auto r = client->Do(method, path, body, ro);
    latency.Add(MonoMicros() - t0);
    if (!r.ok()) {
      request_errors++;
    } else if (r->status == 409) {
      conflicts++;
    } else if (r->status == 403) {
      forbidden++;
    } else if (r->status >= 500 || r->status == 429) {
      request_errors++;
    }
    return r;
  }

  absl::Status WriteDelegated(Agent& a, int member, int64_t hb) {
    const Agent& m = *agents[pools[a.pool]->agents[member]];
    const std::string renew = store::FormatMicroTime(hb + wall_minus_mono + a.skew_us);
    auto body = [&](const std::string& rv) {
      return absl::StrCat(
          R"({"apiVersion":"coordination.pool/v1alpha1","kind":"DelegatedLease","metadata":{"name":")",
          m.node, R"(","annotations":{"openyurt.io/delegate-heartbeat":"true"})",
          rv.empty() ? "" : absl::StrCat(R"(,"resourceVersion":")", rv, "\""),
          R"(},"spec":{"holderIdentity":")", m.node,
          R"(","leaseDurationSeconds":40,"renewTime":")", renew, R"(","poolName":")",
          pools[a.pool]->name, R"(","delegate":")", a.node, R"("}})");
    };
    const std::string path = absl::StrCat(kDelegatedPath, "/", m.node);
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto it = a.dl_version.find(member);
      absl::StatusOr<store::KubeResponse> r;
      if (it == a.dl_version.end()) {
        r = Request(a, "GET", path, "");
        if (!r.ok()) return r.status();
        if (r->status == 404) {
          r = Request(a, "POST", kDelegatedPath, body(""));
        } else if (r->status == 200) {
          auto rec = election::ParseLeaseRecord(r->body);
          if (!rec.ok()) return rec.status();
          r = Request(a, "PUT", path, body(rec->version));
        } else {
          return store::StatusFromKubeResponse(*r);
        }
      } else {
        r = Request(a, "PUT", path, body(it->second));
      }
      if (!r.ok()) return r.status();
      if (r->status == 200 || r->status == 201) {
        auto rec = election::ParseLeaseRecord(r->body);
        if (rec.ok()) a.dl_version[member] = rec->version;
        dl_writes++;
        return absl::OkStatus();
      }
      absl::Status s = store::StatusFromKubeResponse(*r);
      a.dl_version.erase(member);
      // A stale resourceVersion or a racing create: read again and retry.
      if (!absl::IsAborted(s) && !absl::IsAlreadyExists(s) && !absl::IsNotFound(s)) return s;
    }
    return absl::AbortedError("gave up after conflicts");
  }

  // ---------------------------------------------------------------- watches --

  void WatchLoop(const std::string& plural, bool delegated) {
    const std::string base = absl::StrCat("/apis/coordination.pool/v1alpha1/", plural);
    std::string rv;
    std::atomic<bool>* cancel = &stopping;
    std::string last_rv;  // the last revision seen before a re-list
    while (!stopping) {
      if (rv.empty()) {
        auto r = client->Get(base);
        if (!r.ok() || r->status != 200) {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          continue;
        }
        rapidjson::Document d;
        d.Parse(r->body.c_str());
        if (d.IsObject() && d.HasMember("metadata") && d["metadata"].HasMember("resourceVersion")) {
          rv = d["metadata"]["resourceVersion"].GetString();
        }
        if (!last_rv.empty() && !delegated) {
          // Events between last_rv and the list are lost: no verdict there.
          absl::MutexLock l(&view_mu);
          blind.emplace_back(std::atoll(last_rv.c_str()), std::atoll(rv.c_str()));
        }
        if (d.IsObject() && d.HasMember("items") && d["items"].IsArray()) {
          for (auto& item : d["items"].GetArray()) Observe(item, delegated, /*from_list=*/true);
        }
      }
      store::KubeRequestOptions ro;
      ro.cancel = cancel;
      absl::Status s = client->Watch(
          absl::StrCat(base, "?watch=true&allowWatchBookmarks=true&resourceVersion=", rv),
          [&](std::string_view line) {
            rapidjson::Document d;
            d.Parse(line.data(), line.size());
            if (!d.IsObject() || !d.HasMember("type") || !d.HasMember("object")) return true;
            const std::string type = d["type"].GetString();
            const rapidjson::Value& obj = d["object"];
            if (type == "ERROR") {
              last_rv = rv;
              rv.clear();  // 410 Expired: list again
              return false;
            }
            if (obj.HasMember("metadata") && obj["metadata"].HasMember("resourceVersion")) {
              rv = obj["metadata"]["resourceVersion"].GetString();
            }
            if (type == "ADDED" || type == "MODIFIED") Observe(obj, delegated, false);
            return true;
          },
          ro);
      if (stopping) break;
      watch_restarts++;
      std::fprintf(stderr, "watch %s ended at rv %s: %s\n", plural.c_str(), rv.c_str(),
                   s.ok() ? (rv.empty() ? "410 Expired, re-listing" : "resuming")
                          : std::string(s.message()).c_str());
      if (!rv.empty()) last_rv = rv;
      if (!s.ok()) {
        rv.clear();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
  }

  void Observe(const rapidjson::Value& obj, bool delegated, bool from_list) {
    if (!obj.HasMember("metadata") || !obj.HasMember("spec")) return;
    const std::string name = obj["metadata"]["name"].GetString();
    const int64_t rv = std::atoll(obj["metadata"]["resourceVersion"].GetString());
    const rapidjson::Value& spec = obj["spec"];
    auto str = [](const rapidjson::Value& v, const char* k) -> std::string {
      return v.HasMember(k) && v[k].IsString() ? v[k].GetString() : "";
    };
    if (!delegated) {
      auto it = pool_by_name.find(name);
      if (it == pool_by_name.end()) return;
      absl::MutexLock l(&view_mu);
      pl_events[it->second].push_back({rv, str(spec, "holderIdentity")});
      return;
    }
    auto it = agent_by_node.find(name);
    if (it == agent_by_node.end() || !obj.HasMember("status")) return;
    const std::string observed = str(obj["status"], "observedTime");
    auto wall = store::ParseMicroTime(observed);
    if (!wall.ok()) return;
    const int id = it->second;
    const int64_t seen = *wall - wall_minus_mono;
    {
      absl::MutexLock l(&view_mu);
      NodeView& v = views[id];
      // Only a new status.observedTime is an accepted write; other events (the
      // GC marking it expired) are not heartbeats.
      if (*wall == v.last_observed_wall || from_list) {
        v.last_observed_wall = *wall;
        return;
      }
      v.last_observed_wall = *wall;
      dl_events.push_back({rv, agents[id]->pool, str(spec, "delegate")});
      const Agent& a = *agents[id];
      // Allowance: evidence from just before death stays fresh for Fresh(),
      // plus 1 s for the write in flight.
      if (a.death_at.load() != kNever && seen > a.death_at.load() + Fresh() + kSec) {
        false_liveness++;
        Incident(absl::StrFormat("t=%.1fs %s renewed by %s %.1fs after its death", Rel(seen),
                                 a.node, str(spec, "delegate"), (seen - a.death_at) / 1e6));
      }
    }
    Seen(id, seen);
  }

  // ---------------------------------------------------------------- monitor --

  // Once a second: coverage per pool and gaps per node.
  void CheckGaps(int64_t now) {
    for (auto& p : pools) {
      bool covered = false;
      for (int id : p->agents) {
        const Agent& a = *agents[id];
        if (a.alive && CloudOk(a, now)) covered = true;
      }
      if (!covered) p->last_uncovered = now;
    }
    absl::MutexLock l(&view_mu);
    for (auto& ap : agents) {
      const Agent& a = *ap;
      NodeView& v = views[a.id];
      if (!a.alive || v.gap_counted) continue;
      const int64_t gap = now - v.last_seen;
      if (gap < S(o.grace_s)) continue;
      v.gap_counted = true;
      const Pool& p = *pools[a.pool];
      if (p.cut_from <= now && p.cut_from != kNever && p.cut_until > v.last_seen) {
        wholepool_gaps++;
      } else if (p.last_uncovered >= v.last_seen) {
        uncovered_gaps++;
      } else {
        false_evictions++;
        Incident(absl::StrFormat("t=%.1fs %s (pool %s, %s) not seen by the cloud for %.1fs",
                                 Rel(now), a.node, p.name,
                                 CloudOk(a, now) ? "connected" : "cut off", gap / 1e6));
      }
    }
  }

  int64_t FencingViolations(std::string* detail) {
    absl::MutexLock l(&view_mu);
    for (auto& [pool, ev] : pl_events) {
      std::sort(ev.begin(), ev.end(), [](auto& x, auto& y) { return x.rv < y.rv; });
    }
    int64_t bad = 0;
    for (const DlEvent& d : dl_events) {
      auto it = pl_events.find(d.pool);
      if (it == pl_events.end()) continue;
      auto& ev = it->second;
      auto pos = std::lower_bound(ev.begin(), ev.end(), d.rv,
                                  [](const PlEvent& e, int64_t rv) { return e.rv < rv; });
      if (pos == ev.begin()) continue;  // before our first view of the PoolLease
      --pos;
      bool seen_all = true;
      for (auto [from, to] : blind) {
        if (pos->rv <= to && d.rv > from) seen_all = false;
      }
      if (!seen_all) {
        ++unverifiable;
        continue;
      }
      if (pos->holder != d.delegate) {
        ++bad;
        if (detail->size() < 2000) {
          auto after = pos + 1;
          absl::StrAppend(detail, "\n  DelegatedLease write at rv ", d.rv, " by ", d.delegate,
                          " while PoolLease ", pools[d.pool]->name, " was held by \"",
                          pos->holder, "\" (rv ", pos->rv, ")",
                          after != ev.end()
                              ? absl::StrCat("; next PoolLease event: rv ", after->rv, " \"",
                                             after->holder, "\"")
                              : std::string("; no later PoolLease event"));
        }
      }
    }
    return bad;
  }
};

template <typename F>
auto AgentLock::Timed(F f) -> decltype(f()) {
  const Agent& a = *fleet_->agents[agent_];
  const int64_t now = MonoMicros();
  if (!a.alive || a.killed || !fleet_->CloudOk(a, now)) {
    return absl::UnavailableError("cut off from the cloud");
  }
  fleet_->requests++;
  auto r = f();
  fleet_->latency.Add(MonoMicros() - now);
  if (!r.ok()) {
    if (absl::IsAborted(r.status())) {
      fleet_->conflicts++;
    } else if (absl::IsPermissionDenied(r.status())) {
      fleet_->forbidden++;
    } else if (!absl::IsNotFound(r.status()) && !absl::IsAlreadyExists(r.status())) {
      fleet_->request_errors++;
    }
  }
  return r;
}

absl::StatusOr<election::VersionedRecord> AgentLock::Get() {
  return Timed([&] { return inner_->Get(); });
}
absl::StatusOr<std::string> AgentLock::Create(const election::LeaderElectionRecord& r) {
  return Timed([&] { return inner_->Create(r); });
}
absl::StatusOr<std::string> AgentLock::Update(const election::LeaderElectionRecord& r,
                                              const std::string& v) {
  return Timed([&] { return inner_->Update(r, v); });
}

void CreateExtraObjects(Fleet& f) {
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < f.o.extra_objects;) {
        const std::string body = absl::StrFormat(
            R"({"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":{"name":"sim-extra-%05d","labels":{"poolcoord-sim/extra":"true"}},"spec":{"leaseDurationSeconds":300}})",
            i);
        auto r = f.client->Post(election::kPoolLeasesPath, body);
        if (!r.ok() || (r->status != 201 && r->status != 409)) failed++;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::cerr << "created " << f.o.extra_objects - failed.load() << " extra PoolLeases ("
            << failed.load() << " failed)\n";
}

}  // namespace

int RunFleet(const Options& o, store::KubeClient* client) {
  Fleet f(o, client);
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  if (o.extra_objects > 0) CreateExtraObjects(f);

  f.start = MonoMicros();
  f.wall_minus_mono = WallMicros() - f.start;
  f.end = f.start + S(o.duration_s);
  const double dur = o.duration_s;
  const double warmup = std::min(std::max(1.5 * o.lease_duration_s, 20.0), dur / 3);
  f.warmup = f.start + S(warmup);
  auto at = [&](double from, double to) {
    return f.start + S(from + unit(rng) * std::max(0.0, to - from));
  };

  const int total = o.pools * o.nodes_per_pool;
  f.pools.reserve(o.pools);
  for (int p = 0; p < o.pools; ++p) {
    auto pool = std::make_unique<Pool>();
    pool->name = PoolName(p);
    pool->lan_hb.assign(o.nodes_per_pool, f.start);
    pool->lan_cut.assign(o.nodes_per_pool, false);
    if (unit(rng) < o.pool_partition_ratio) {
      pool->cut_from = at(warmup, dur * 0.6);
      pool->cut_until = pool->cut_from + S(30 + unit(rng) * 60);
    }
    f.pool_by_name[pool->name] = p;
    f.pools.push_back(std::move(pool));
  }
  f.agents.reserve(total);
  {
    absl::MutexLock l(&f.view_mu);
    f.views.assign(total, NodeView{f.start, 0, false});
  }
  const absl::Duration lease = absl::Seconds(o.lease_duration_s);
  const absl::Duration renew = absl::Seconds(o.renew_deadline_s);
  const absl::Duration retry = absl::Seconds(o.retry_period_s);
  for (int p = 0; p < o.pools; ++p) {
    for (int n = 0; n < o.nodes_per_pool; ++n) {
      auto a = std::make_unique<Agent>();
      a->id = static_cast<int>(f.agents.size());
      a->pool = p;
      a->slot = n;
      a->node = NodeName(p, n);
      a->token = TokenFor(o, "system:node:" + a->node);
      a->skew_us = S((unit(rng) * 2 - 1) * o.clock_skew_s);
      a->clock = std::make_unique<SkewedClock>(a->skew_us);
      if (unit(rng) < o.dead_ratio) {
        a->death_at = at(warmup, std::max(warmup, dur - 1.2 * o.grace_s));
      }
      if (unit(rng) < o.partition_ratio) {
        a->cut_from = at(warmup, std::max(warmup, dur * 0.7));
        a->cut_until = a->cut_from + S(30 + unit(rng) * 90);
      }
      // Spread the first heartbeats and the first election attempts.
      a->next_hb = f.start + S(unit(rng) * o.heartbeat_interval_s);
      store::KubeRequestOptions ro;
      ro.bearer_token = a->token;
      a->lock = std::make_unique<AgentLock>(
          &f, a->id,
          std::make_unique<election::PoolLeaseLock>(client, PoolName(p), a->node, ro));
      election::LeaderElectionConfig cfg;
      cfg.lock = a->lock.get();
      cfg.lease_duration = lease;
      cfg.renew_deadline = renew;
      cfg.retry_period = retry;
      cfg.clock = a->clock.get();
      cfg.name = a->node;
      cfg.jitter_seed = o.seed * 1'000'003 + a->id + 1;
      Agent* ap = a.get();
      cfg.callbacks.on_started_leading = [&f, ap] { f.StartedLeading(*ap); };
      cfg.callbacks.on_stopped_leading = [&f, ap] { f.StoppedLeading(*ap); };
      auto e = election::LeaderElector::New(cfg);
      if (!e.ok()) {
        std::cerr << "elector: " << e.status() << "\n";
        return 2;
      }
      a->elector = *std::move(e);
      a->elector_due = f.start + S(unit(rng) * o.retry_period_s);
      f.agent_by_node[a->node] = a->id;
      f.pools[p]->agents.push_back(a->id);
      f.agents.push_back(std::move(a));
    }
  }
  std::cerr << absl::StrFormat(
      "fleet: %d pools x %d nodes = %d agents, %.0fs (warm-up %.0fs), lease %.0f/%.0f/%.0fs, "
      "%d workers\n",
      o.pools, o.nodes_per_pool, total, dur, warmup, o.lease_duration_s, o.renew_deadline_s,
      o.retry_period_s, o.workers);

  std::thread pl_watch([&] { f.WatchLoop("poolleases", false); });
  std::thread dl_watch([&] { f.WatchLoop("delegatedleases", true); });
  for (auto& a : f.agents) f.Schedule(a->id, std::min(a->next_hb, a->elector_due));
  std::vector<std::thread> workers;
  for (int i = 0; i < o.workers; ++i) workers.emplace_back([&] { f.Worker(); });

  // Main loop: leader kills, gap checks, progress.
  int64_t next_kill = o.leader_kill_interval_s > 0 ? f.warmup : kNever;
  // Late kills could not complete their failover before the end.
  const int64_t kill_until =
      f.end - S(o.lease_duration_s + 2 * 2.2 * o.retry_period_s + 5);
  int64_t last_requests = 0;
  for (int64_t tick = f.start + kSec; tick <= f.end; tick += kSec) {
    std::this_thread::sleep_for(std::chrono::microseconds(std::max<int64_t>(0, tick - MonoMicros())));
    const int64_t now = MonoMicros();
    if (now >= next_kill) {
      next_kill += S(o.leader_kill_interval_s);
      std::vector<int> leaders;
      for (auto& a : f.agents) {
        if (a->alive && a->believes_leading && !f.PoolCut(*f.pools[a->pool], now) &&
            f.pools[a->pool]->believers.load() == 1 && now < kill_until) {
          leaders.push_back(a->id);
        }
      }
      if (!leaders.empty()) {
        Agent& victim = *f.agents[leaders[rng() % leaders.size()]];
        f.pools[victim.pool]->kill_at = now;
        victim.death_at = now;
        victim.killed = true;
        f.kills++;
      }
    }
    f.CheckGaps(now);
    int alive = 0, cut = 0, led = 0, believers = 0;
    for (auto& a : f.agents) {
      if (a->alive) {
        ++alive;
        if (!f.CloudOk(*a, now)) ++cut;
      }
    }
    for (auto& p : f.pools) {
      const int b = p->believers.load();
      believers += b;
      led += b > 0 ? 1 : 0;
    }
    const int64_t reqs = f.requests.load();
    int64_t fe, fl, mg;
    {
      absl::MutexLock l(&f.view_mu);
      fe = f.false_evictions;
      fl = f.false_liveness;
      mg = f.max_gap;
    }
    size_t nfail;
    int64_t maxfail = 0;
    {
      absl::MutexLock l(&f.failover_mu);
      nfail = f.failovers.size();
      for (int64_t x : f.failovers) maxfail = std::max(maxfail, x);
    }
    std::fprintf(stderr,
                 "[%4.0fs] alive %d/%d cut %d | pools led %d/%d | %lld req/s p99 %.1fms err %lld "
                 "| lag p99 %.0fms | dl writes %lld | max hb gap %.1fs false-evict %lld false-live %lld overlap "
                 "%lld | failovers %zu max %.1fs\n",
                 f.Rel(now), alive, total, cut, led, o.pools,
                 static_cast<long long>(reqs - last_requests), f.latency.Percentile(99) / 1e3,
                 static_cast<long long>(f.request_errors.load()),
                 f.tick_lag.Percentile(99) / 1e3,
                 static_cast<long long>(f.dl_writes.load()), mg / 1e6, static_cast<long long>(fe),
                 static_cast<long long>(fl), static_cast<long long>(f.belief_overlaps.load()),
                 nfail, maxfail / 1e6);
    last_requests = reqs;
  }
  f.stopping = true;
  f.q_cv.notify_all();
  for (auto& w : workers) w.join();
  pl_watch.join();
  dl_watch.join();

  // ------------------------------------------------------------- summary --
  std::string fencing_detail;
  const int64_t fencing = f.FencingViolations(&fencing_detail);
  int never_led = 0;
  for (auto& p : f.pools) {
    if (!p->ever_led && p->cut_from == kNever) ++never_led;
  }
  std::vector<int64_t> fo;
  {
    absl::MutexLock l(&f.failover_mu);
    fo = f.failovers;
  }
  std::sort(fo.begin(), fo.end());
  auto pct = [](const std::vector<int64_t>& v, double p) -> double {
    if (v.empty()) return 0;
    return v[std::min(v.size() - 1, static_cast<size_t>(p / 100 * v.size()))] / 1e6;
  };
  absl::MutexLock l(&f.view_mu);
  std::vector<int64_t> gaps = f.gaps;
  std::sort(gaps.begin(), gaps.end());
  const int64_t total_requests = f.requests.load();
  int dead = 0, partitioned = 0, pool_cut = 0;
  for (auto& a : f.agents) {
    dead += a->death_at.load() != kNever ? 1 : 0;
    partitioned += a->cut_from != kNever && a->cut_from < f.end ? 1 : 0;
  }
  for (auto& p : f.pools) pool_cut += p->cut_from != kNever ? 1 : 0;

  const bool ok_evict = f.false_evictions == 0;
  const bool ok_live = f.false_liveness == 0;
  const bool ok_fence = fencing == 0;
  const bool ok_overlap = o.allow_belief_overlap || f.belief_overlaps.load() == 0;
  const bool ok_led = never_led == 0;
  const bool ok = ok_evict && ok_live && ok_fence && ok_overlap && ok_led;
  auto mark = [](bool good) { return good ? "ok" : "FAIL"; };

  std::printf("\n== poolcoord-sim summary ==\n");
  std::printf("%-44s %s\n", "agents (pools x nodes)",
              absl::StrFormat("%d (%d x %d)", total, o.pools, o.nodes_per_pool).c_str());
  std::printf("%-44s %.0f s, seed %llu\n", "duration", o.duration_s,
              static_cast<unsigned long long>(o.seed));
  std::printf("%-44s %d dead, %d cut off, %d whole pools cut off\n", "faults injected", dead,
              partitioned, pool_cut);
  std::printf("%-44s %lld\n", "leader kills", static_cast<long long>(f.kills.load()));
  std::printf("%-44s %lld (%.0f/s)\n", "requests", static_cast<long long>(total_requests),
              total_requests / o.duration_s);
  std::printf("%-44s p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n", "request latency",
              f.latency.Percentile(50) / 1e3, f.latency.Percentile(99) / 1e3,
              f.latency.Percentile(99.9) / 1e3);
  std::printf("%-44s p99 %.1f ms, max %.1f ms\n", "scheduler lag (agent ticked late by)",
              f.tick_lag.Percentile(99) / 1e3, f.tick_lag.Percentile(100) / 1e3);
  std::printf("%-44s %lld errors, %lld conflicts (409), %lld forbidden (403)\n", "request outcomes",
              static_cast<long long>(f.request_errors.load()),
              static_cast<long long>(f.conflicts.load()), static_cast<long long>(f.forbidden.load()));
  std::printf("%-44s %lld accepted, %lld refused (fenced)\n", "DelegatedLease writes",
              static_cast<long long>(f.dl_writes.load()), static_cast<long long>(f.dl_refused.load()));
  std::printf("%-44s p50 %.1f s, p99 %.1f s, max %.1f s (%zu gaps)\n", "cloud-seen heartbeat gaps",
              pct(gaps, 50), pct(gaps, 99), gaps.empty() ? 0.0 : gaps.back() / 1e6, gaps.size());
  std::printf("%-44s %zu, p50 %.1f s, max %.1f s\n", "failovers after leader kills", fo.size(),
              pct(fo, 50), fo.empty() ? 0.0 : fo.back() / 1e6);
  int pending = 0;
  for (auto& p : f.pools) pending += p->kill_at.load() != 0 ? 1 : 0;
  std::printf("%-44s %d\n", "kills without failover (no candidate left)", pending);
  std::printf("%-44s %lld\n", "gaps >= grace in whole-pool partitions (apart)",
              static_cast<long long>(f.wholepool_gaps));
  std::printf("%-44s %lld\n", "gaps >= grace with no pool member in reach",
              static_cast<long long>(f.uncovered_gaps));
  std::printf("%-44s %lld  %s\n", "false evictions (alive, reachable, gap>=40s)",
              static_cast<long long>(f.false_evictions), mark(ok_evict));
  std::printf("%-44s %lld  %s\n", "false liveness (renewed after death)",
              static_cast<long long>(f.false_liveness), mark(ok_live));
  std::printf("%-44s %lld  %s\n", "DelegatedLease writes by a non-holder", static_cast<long long>(fencing),
              mark(ok_fence));
  std::printf("%-44s %lld  %s\n", "overlapping leader beliefs",
              static_cast<long long>(f.belief_overlaps.load()),
              o.allow_belief_overlap ? "(allowed)" : mark(ok_overlap));
  std::printf("%-44s %d  %s\n", "pools never led (not cut off)", never_led, mark(ok_led));
  std::printf("%-44s %d (%lld writes not verifiable)\n", "watch reconnects",
              f.watch_restarts.load(), static_cast<long long>(f.unverifiable));
  if (!fencing_detail.empty()) std::printf("fencing: %s\n", fencing_detail.c_str());
  for (const auto& s : f.incidents) std::printf("incident: %s\n", s.c_str());
  std::printf("result: %s\n", ok ? "PASS" : "FAIL");
  std::fflush(stdout);

  if (!o.summary_json.empty()) {
    std::ofstream js(o.summary_json);
    js << absl::StrFormat(
        "{\"agents\":%d,\"pools\":%d,\"duration_s\":%.0f,\"requests\":%lld,\"request_errors\":%lld,"
        "\"latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f},\"dl_writes\":%lld,"
        "\"dl_refused\":%lld,\"max_gap_s\":%.3f,\"false_evictions\":%lld,\"false_liveness\":%lld,"
        "\"fencing_violations\":%lld,\"belief_overlaps\":%lld,\"never_led\":%d,\"kills\":%lld,"
        "\"failovers\":%zu,\"failover_max_s\":%.3f,\"wholepool_gaps\":%lld,"
        "\"uncovered_gaps\":%lld,\"dead\":%d,\"cut_off\":%d,\"pools_cut\":%d,\"ok\":%s}\n",
        total, o.pools, o.duration_s, static_cast<long long>(total_requests),
        static_cast<long long>(f.request_errors.load()), f.latency.Percentile(50) / 1e3,
        f.latency.Percentile(99) / 1e3, f.latency.Percentile(99.9) / 1e3,
        static_cast<long long>(f.dl_writes.load()), static_cast<long long>(f.dl_refused.load()),
        gaps.empty() ? 0.0 : gaps.back() / 1e6, static_cast<long long>(f.false_evictions),
        static_cast<long long>(f.false_liveness), static_cast<long long>(fencing),
        static_cast<long long>(f.belief_overlaps.load()), never_led,
        static_cast<long long>(f.kills.load()), fo.size(), fo.empty() ? 0.0 : fo.back() / 1e6,
        static_cast<long long>(f.wholepool_gaps), static_cast<long long>(f.uncovered_gaps), dead,
        partitioned, pool_cut, ok ? "true" : "false");
  }
  return ok ? 0 : 1;
}

}  // namespace poolcoord::sim
