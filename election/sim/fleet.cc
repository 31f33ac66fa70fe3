// The fleet scenario: agents as state machines ticked by a few worker threads.
//
// Time: scheduling and measurement use this machine's steady clock (µs);
// server timestamps (status.observedTime, wall clock) are mapped onto it with
// the wall-minus-steady offset taken at start. Server and simulator share the
// machine, so the two views agree to well under a millisecond.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <set>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "election/leader_elector.h"
#include "election/pool_lease_lock.h"
#include "election/sim/sim.h"
#include "rapidjson/document.h"
#include "base/microtime.h"

namespace poolcoord::sim {
namespace {

constexpr int64_t kSec = 1'000'000;
constexpr int64_t kNever = INT64_MAX;
constexpr char kDelegatedPath[] = "/apis/coordination.pool/v1alpha1/delegatedleases";
constexpr char kStale[] = "LAN heartbeat no longer fresh";

int64_t S(double seconds) { return static_cast<int64_t>(seconds * 1e6); }

struct Fleet;

// One leader term: a PoolLease object (metadata.uid) at one
// spec.leaseTransitions, as the server stamps it into a DelegatedLease's
// status.leaderTerm (store/object_codec.cc).
struct Term {
  std::string uid;
  int transitions = -1;  // -1: none
  bool known() const { return transitions >= 0; }
  bool operator==(const Term&) const = default;
  bool operator<(const Term& o) const {
    return std::tie(uid, transitions) < std::tie(o.uid, o.transitions);
  }
  std::string ToString() const {
    return known() ? absl::StrCat("(", uid.substr(0, 8), ",", transitions, ")") : "(none)";
  }
};

// What a write response says about the stored object.
struct Stored {
  std::string rv, uid, holder;
  int transitions = 0;
  Term leader_term;            // DelegatedLease status.leaderTerm
  int64_t observed_wall = 0;   // status.observedTime, wall µs; 0 when absent
};

absl::StatusOr<Stored> ParseStored(std::string_view body) {
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  if (d.HasParseError() || !d.IsObject()) return absl::InvalidArgumentError("not a JSON object");
  auto obj = [](const rapidjson::Value& v, const char* k) -> const rapidjson::Value* {
    if (!v.IsObject()) return nullptr;
    auto it = v.FindMember(k);
    return it == v.MemberEnd() || !it->value.IsObject() ? nullptr : &it->value;
  };
  auto str = [](const rapidjson::Value* v, const char* k) -> std::string {
    if (v == nullptr) return "";
    auto it = v->FindMember(k);
    return it == v->MemberEnd() || !it->value.IsString() ? "" : it->value.GetString();
  };
  auto integer = [](const rapidjson::Value* v, const char* k, int dflt) -> int {
    if (v == nullptr) return dflt;
    auto it = v->FindMember(k);
    return it == v->MemberEnd() || !it->value.IsInt() ? dflt : it->value.GetInt();
  };
  Stored s;
  const rapidjson::Value* md = obj(d, "metadata");
  const rapidjson::Value* spec = obj(d, "spec");
  const rapidjson::Value* status = obj(d, "status");
  s.rv = str(md, "resourceVersion");
  s.uid = str(md, "uid");
  s.holder = str(spec, "holderIdentity");
  s.transitions = integer(spec, "leaseTransitions", 0);
  if (const rapidjson::Value* lt = status ? obj(*status, "leaderTerm") : nullptr) {
    s.leader_term.uid = str(lt, "poolLeaseUID");
    s.leader_term.transitions = integer(lt, "leaseTransitions", 0);
  }
  if (std::string t = str(status, "observedTime"); !t.empty()) {
    if (auto w = base::ParseMicroTime(t); w.ok()) s.observed_wall = *w;
  }
  return s;
}

// A LeaseLock over the PoolLease API as the agent's network sees it: requests
// fail without leaving the process while the agent is cut off (or dead). It
// speaks the same requests as election::PoolLeaseLock, and hands every
// successful write's response (the stored PoolLease: uid, leaseTransitions,
// holder) to the term ledger: the agents' own acquisitions, not a watch, say
// who acquired which term.
class AgentLock : public election::LeaseLock {
 public:
  AgentLock(Fleet* fleet, int agent, std::string pool, std::string identity)
      : fleet_(fleet), agent_(agent), pool_(std::move(pool)), identity_(std::move(identity)) {}
  absl::StatusOr<election::VersionedRecord> Get() override;
  absl::StatusOr<std::string> Create(const election::LeaderElectionRecord& r) override;
  absl::StatusOr<std::string> Update(const election::LeaderElectionRecord& r,
                                     const std::string& v) override;
  std::string Identity() const override { return identity_; }
  std::string Describe() const override { return "poolleases/" + pool_; }

 private:
  absl::StatusOr<base::HttpResponse> Send(const char* method, const std::string& path,
                                           const std::string& body);
  absl::StatusOr<std::string> Written(absl::StatusOr<base::HttpResponse> r);
  Fleet* fleet_;
  int agent_;
  std::string pool_, identity_;
  std::string last_object_json_;  // only the agent's own (one at a time) tick uses it
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
  // The term of this agent's last successful PoolLease write (its own tick
  // only), and the term it believes it leads (guarded by its pool's mu).
  Term term;
  Term lead_term;
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
  // Last DelegatedLease write for this node whose outcome is unknown (transport
  // error, timeout, 5xx): it may have been stored without our hearing of it.
  int64_t last_unknown_write = 0;
};

// A DelegatedLease change seen on the watch.
struct DlEvent {
  int64_t rv;
  int pool;
  int node;
  int64_t observed_wall;
  std::string delegate;
};
struct PlEvent {
  int64_t rv;
  std::string holder;
  int transitions;
};

// An accepted DelegatedLease write, from its response.
struct DlWrite {
  int pool;
  int writer;          // agent id
  int node;            // agent id of the node written for
  int64_t sent;        // steady µs just before the request left
  int64_t done;        // steady µs when the response arrived
  int64_t hb;          // steady µs of the LAN heartbeat delegated
  int64_t observed_wall;
  Term term;           // status.leaderTerm of the stored object
};

// Who acquired a term, from the acquirer's own write responses.
struct TermEntry {
  int acquirer;
  int64_t first_done;  // steady µs of the first response naming this term
};

struct Fleet {
  const Options& o;
  cloud::RestClient* client;
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<std::unique_ptr<Pool>> pools;
  std::unordered_map<std::string, int> agent_by_node;
  std::unordered_map<std::string, int> pool_by_name;
  int64_t start = 0, end = 0, warmup = 0;
  int64_t wall_minus_mono = 0;
  std::atomic<bool> stopping{false};
  base::StreamControl watch_control;  // ends the watches at once on stop
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
  int64_t unverifiable_gaps ABSL_GUARDED_BY(view_mu) = 0;
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
  std::atomic<int64_t> same_term_overlaps{0};  // two believers of one term: impossible
  std::atomic<int64_t> max_overlap{0};         // µs two beliefs (different terms) overlapped
  std::atomic<int64_t> stale_evidence_skipped{0};
  // DelegatedLease watch outages that lost events (a re-list): steady µs.
  std::vector<std::pair<int64_t, int64_t>> dl_blind ABSL_GUARDED_BY(view_mu);
  std::atomic<int64_t> dl_watch_down_since{0};
  // The PoolLease watch has delivered every PoolLease change up to this
  // revision; DelegatedLease events beyond it cannot be matched.
  std::atomic<int64_t> pl_complete_rv{0};

  // The term ledger and every accepted DelegatedLease write (responses only).
  absl::Mutex term_mu;
  std::map<std::pair<int, Term>, TermEntry> ledger ABSL_GUARDED_BY(term_mu);
  std::vector<DlWrite> dl_log ABSL_GUARDED_BY(term_mu);
  std::vector<std::string> term_incidents ABSL_GUARDED_BY(term_mu);
  int64_t term_conflicts ABSL_GUARDED_BY(term_mu) = 0;  // one term, two holders
  int64_t unparsed_responses ABSL_GUARDED_BY(term_mu) = 0;
  absl::Mutex failover_mu;
  std::vector<int64_t> failovers ABSL_GUARDED_BY(failover_mu);
  std::atomic<int64_t> kills{0};

  // Scheduler.
  std::mutex q_mu;
  std::condition_variable q_cv;
  std::priority_queue<std::pair<int64_t, int>, std::vector<std::pair<int64_t, int>>,
                      std::greater<>>
      queue;

  Fleet(const Options& opts, cloud::RestClient* c) : o(opts), client(c) {}

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
    StoppedLeading(a);
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

  // Beliefs are judged by term: client-go has no fencing, so a deposed leader
  // that is ticked late may still believe while its successor leads a newer
  // term (the server fences its writes; the term checks verify that). Two
  // believers of the same term would mean the server gave one term to two
  // acquirers.
  void StartedLeading(Agent& a) {
    const int64_t now = MonoMicros();
    Pool& p = *pools[a.pool];
    std::vector<std::string> overlaps;
    {
      absl::MutexLock l(&p.mu);
      a.believes_leading = true;
      a.lead_since = now;
      a.lead_term = a.term;
      for (int id : p.agents) {
        const Agent& b = *agents[id];
        if (id == a.id || !b.believes_leading) continue;
        const bool same = b.lead_term == a.lead_term;
        (same ? same_term_overlaps : belief_overlaps)++;
        overlaps.push_back(absl::StrFormat(
            "t=%.1fs %s: %s starts leading term %s while %s still believes it leads term %s%s",
            Rel(now), p.name, a.node, a.lead_term.ToString(), b.node, b.lead_term.ToString(),
            same ? " (SAME TERM)" : " (deposed, fenced by the server)"));
      }
      p.believers++;
    }
    a.delegated_hb.assign(p.agents.size(), 0);
    a.dl_version.clear();
    a.next_delegate = now;
    p.ever_led = true;
    if (!overlaps.empty()) {
      absl::MutexLock l(&view_mu);
      for (auto& s : overlaps) Incident(std::move(s));
    }
    if (int64_t k = p.kill_at.exchange(0); k != 0) {
      absl::MutexLock l(&failover_mu);
      failovers.push_back(now - k);
    }
  }
  void StoppedLeading(Agent& a) {
    Pool& p = *pools[a.pool];
    const int64_t now = MonoMicros();
    absl::MutexLock l(&p.mu);
    if (!a.believes_leading) return;
    a.believes_leading = false;
    p.believers--;
    for (int id : p.agents) {
      const Agent& b = *agents[id];
      if (id == a.id || !b.believes_leading) continue;
      const int64_t overlap = now - std::max(a.lead_since, b.lead_since);
      int64_t cur = max_overlap.load();
      while (overlap > cur && !max_overlap.compare_exchange_weak(cur, overlap)) {
      }
    }
  }

  // A successful PoolLease write (create, takeover or renewal) by `agent`: the
  // response is the stored object, so (uid, leaseTransitions) -> holder is the
  // server's own word. One term has exactly one acquirer.
  void RecordLeaseWrite(int agent, const std::string& body, int64_t done) {
    Agent& a = *agents[agent];
    auto st = ParseStored(body);
    absl::MutexLock l(&term_mu);
    if (!st.ok() || st->uid.empty()) {
      ++unparsed_responses;
      return;
    }
    if (st->holder.empty()) return;  // a release names no acquirer
    const Term t{st->uid, st->transitions};
    if (st->holder != a.node) {
      ++term_conflicts;
      if (term_incidents.size() < 20) {
        term_incidents.push_back(absl::StrFormat(
            "%s wrote PoolLease %s but the stored holder is %s (term %s)", a.node,
            pools[a.pool]->name, st->holder, t.ToString()));
      }
      return;
    }
    a.term = t;
    auto [it, inserted] = ledger.try_emplace({a.pool, t}, TermEntry{agent, done});
    if (inserted) return;
    it->second.first_done = std::min(it->second.first_done, done);
    if (it->second.acquirer != agent) {
      ++term_conflicts;
      if (term_incidents.size() < 20) {
        term_incidents.push_back(absl::StrFormat(
            "term %s of %s returned to two holders: %s and %s", t.ToString(), pools[a.pool]->name,
            agents[it->second.acquirer]->node, a.node));
      }
    }
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
      } else if (absl::IsDeadlineExceeded(s) && s.message() == kStale) {
        a.delegated_hb[m] = hb;  // too old by now; the member's next heartbeat will do
      } else if (absl::IsPermissionDenied(s)) {
        dl_refused++;
        return;  // deposed: the server fenced us; the elector will notice
      }
    }
  }

  absl::StatusOr<base::HttpResponse> Request(const Agent& a, const char* method,
                                              const std::string& path, const std::string& body) {
    const int64_t t0 = MonoMicros();
    requests++;
    cloud::RequestOptions ro;
    ro.bearer_token = a.token;
    auto r = client->Send(method, path, body, ro);
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
    const std::string renew = base::FormatMicroTime(hb + wall_minus_mono + a.skew_us);
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
    // The write that carries the evidence: freshness is judged when it leaves
    // (under load a leader's queue of writes may outlast the evidence), and its
    // response is the stored object with the term the server wrote it in.
    auto write = [&](const char* method, const std::string& to,
                     const std::string& rv) -> absl::StatusOr<base::HttpResponse> {
      const int64_t sent = MonoMicros();
      if (sent - hb >= Fresh()) {
        stale_evidence_skipped++;
        return absl::DeadlineExceededError(kStale);
      }
      auto r = Request(a, method, to, body(rv));
      const int64_t done = MonoMicros();
      if (!r.ok() || r->status >= 500 || r->status == 429) {
        absl::MutexLock l(&view_mu);
        views[m.id].last_unknown_write = done;
      } else if (r->status == 200 || r->status == 201) {
        RecordDelegatedWrite(a, m, sent, done, hb, r->body);
      }
      return r;
    };
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto it = a.dl_version.find(member);
      absl::StatusOr<base::HttpResponse> r;
      if (it == a.dl_version.end()) {
        r = Request(a, "GET", path, "");
        if (!r.ok()) return r.status();
        if (r->status == 404) {
          r = write("POST", kDelegatedPath, "");
        } else if (r->status == 200) {
          auto rec = election::ParseLeaseRecord(r->body);
          if (!rec.ok()) return rec.status();
          r = write("PUT", path, rec->version);
        } else {
          return cloud::StatusFromResponse(r->status, r->body);
        }
      } else {
        r = write("PUT", path, it->second);
      }
      if (!r.ok()) return r.status();
      if (r->status == 200 || r->status == 201) {
        auto rec = election::ParseLeaseRecord(r->body);
        if (rec.ok()) a.dl_version[member] = rec->version;
        dl_writes++;
        return absl::OkStatus();
      }
      absl::Status s = cloud::StatusFromResponse(r->status, r->body);
      a.dl_version.erase(member);
      // A stale resourceVersion or a racing create: read again and retry.
      if (!absl::IsAborted(s) && !absl::IsAlreadyExists(s) && !absl::IsNotFound(s)) return s;
    }
    return absl::AbortedError("gave up after conflicts");
  }

  void RecordDelegatedWrite(const Agent& a, const Agent& m, int64_t sent, int64_t done,
                            int64_t hb, const std::string& body) {
    auto st = ParseStored(body);
    if (!st.ok()) {
      absl::MutexLock l(&term_mu);
      ++unparsed_responses;
      return;
    }
    {
      absl::MutexLock l(&term_mu);
      dl_log.push_back({a.pool, a.id, m.id, sent, done, hb, st->observed_wall, st->leader_term});
    }
    // The cloud saw this heartbeat when the server accepted it.
    if (st->observed_wall != 0) Seen(m.id, st->observed_wall - wall_minus_mono);
  }

  // ---------------------------------------------------------------- watches --

  void WatchLoop(const std::string& plural, bool delegated) {
    const std::string base = absl::StrCat("/apis/coordination.pool/v1alpha1/", plural);
    std::string rv;
    std::string last_rv;  // the last revision seen before a re-list
    while (!stopping) {
      if (rv.empty()) {
        auto r = client->Send("GET", base, "");
        if (!r.ok() || r->status != 200) {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          continue;
        }
        rapidjson::Document d;
        d.Parse(r->body.c_str());
        if (d.IsObject() && d.HasMember("metadata") && d["metadata"].HasMember("resourceVersion")) {
          rv = d["metadata"]["resourceVersion"].GetString();
        }
        if (!last_rv.empty()) {
          // Events between last_rv and the list are lost: no verdict there.
          absl::MutexLock l(&view_mu);
          if (delegated) {
            dl_blind.emplace_back(dl_watch_down_since.load(), MonoMicros());
          } else {
            blind.emplace_back(std::atoll(last_rv.c_str()), std::atoll(rv.c_str()));
          }
        }
        if (d.IsObject() && d.HasMember("items") && d["items"].IsArray()) {
          for (auto& item : d["items"].GetArray()) Observe(item, delegated, /*from_list=*/true);
        }
        if (delegated) {
          dl_watch_down_since = 0;
        } else {
          pl_complete_rv = std::atoll(rv.c_str());
        }
      }
      absl::Status s = client->Watch(
          absl::StrCat(base, "?watch=true&allowWatchBookmarks=true&resourceVersion=", rv),
          [&](std::string_view line) {
            rapidjson::Document d;
            d.Parse(line.data(), line.size());
            if (!d.IsObject() || !d.HasMember("type") || !d.HasMember("object")) return true;
            const std::string type = d["type"].GetString();
            const rapidjson::Value& obj = d["object"];
            if (type == "ERROR") {
              if (delegated) dl_watch_down_since = MonoMicros();
              last_rv = rv;
              rv.clear();  // 410 Expired: list again
              return false;
            }
            if (obj.HasMember("metadata") && obj["metadata"].HasMember("resourceVersion")) {
              rv = obj["metadata"]["resourceVersion"].GetString();
            }
            if (type == "ADDED" || type == "MODIFIED") Observe(obj, delegated, false);
            if (!delegated) {
              pl_complete_rv = std::atoll(rv.c_str());
              if (o.pl_watch_delay_ms > 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(
                    static_cast<int64_t>(o.pl_watch_delay_ms * 1000)));
              }
            }
            return true;
          },
          &watch_control);
      if (stopping) break;
      watch_restarts++;
      std::fprintf(stderr, "watch %s ended at rv %s: %s\n", plural.c_str(), rv.c_str(),
                   s.ok() ? (rv.empty() ? "410 Expired, re-listing" : "resuming")
                          : std::string(s.message()).c_str());
      if (!rv.empty()) last_rv = rv;
      if (!s.ok()) {
        if (delegated) dl_watch_down_since = MonoMicros();
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
      const int transitions =
          spec.HasMember("leaseTransitions") && spec["leaseTransitions"].IsInt()
              ? spec["leaseTransitions"].GetInt()
              : 0;
      pl_events[it->second].push_back({rv, str(spec, "holderIdentity"), transitions});
      return;
    }
    auto it = agent_by_node.find(name);
    if (it == agent_by_node.end() || !obj.HasMember("status")) return;
    const std::string observed = str(obj["status"], "observedTime");
    auto wall = base::ParseMicroTime(observed);
    if (!wall.ok()) return;
    const int id = it->second;
    const int64_t seen = *wall - wall_minus_mono;
    {
      absl::MutexLock l(&view_mu);
      NodeView& v = views[id];
      // Only a new status.observedTime is an accepted write; other events (the
      // GC marking it expired) are not heartbeats. A re-list shows only the
      // newest write of each node: a heartbeat, but not one to match.
      if (*wall == v.last_observed_wall) return;
      v.last_observed_wall = *wall;
      if (!from_list) {
        dl_events.push_back({rv, agents[id]->pool, id, *wall, str(spec, "delegate")});
      }
    }
    Seen(id, seen);
  }

  // ---------------------------------------------------------------- monitor --

  // True when the DelegatedLease watch lost events (a re-list) somewhere in
  // [from, to].
  bool DlBlindLocked(int64_t from, int64_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(view_mu) {
    if (int64_t down = dl_watch_down_since.load(); down != 0 && down <= to) return true;
    for (auto [b0, b1] : dl_blind) {
      if (b0 <= to && b1 >= from) return true;
    }
    return false;
  }

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
      } else if (v.last_unknown_write >= v.last_seen && DlBlindLocked(v.last_seen, now)) {
        // A write of unknown outcome fell into a re-list window of the
        // DelegatedLease watch: the cloud may have seen it without our knowing.
        unverifiable_gaps++;
        Incident(absl::StrFormat("t=%.1fs %s: gap of %.1fs not verifiable (write of unknown "
                                 "outcome during a watch re-list)",
                                 Rel(now), a.node, gap / 1e6));
      } else {
        false_evictions++;
        Incident(absl::StrFormat("t=%.1fs %s (pool %s, %s) not seen by the cloud for %.1fs",
                                 Rel(now), a.node, p.name,
                                 CloudOk(a, now) ? "connected" : "cut off", gap / 1e6));
      }
    }
  }

  // The verdict on DelegatedLease writes, from responses alone (no watch, no
  // timing). Every accepted write carries status.leaderTerm, the term the
  // server checked it against under the store lock; the ledger says who
  // acquired each term.
  struct TermReport {
    int64_t writes = 0, terms = 0;
    int64_t other_term = 0;    // written in a term acquired by someone else
    int64_t shared_term = 0;   // two writers, one term
    int64_t stale_term = 0;    // older than a term acquired before the write left
    int64_t no_term = 0;       // accepted without status.leaderTerm
    int64_t unknown_term = 0;  // a term no response named (report only)
    int64_t term_conflicts = 0, unparsed = 0;
    std::vector<std::string> details;
    int64_t violations() const {
      return other_term + shared_term + stale_term + no_term + term_conflicts;
    }
  };

  TermReport CheckTerms() {
    absl::MutexLock l(&term_mu);
    TermReport r;
    r.writes = static_cast<int64_t>(dl_log.size());
    r.terms = static_cast<int64_t>(ledger.size());
    r.term_conflicts = term_conflicts;
    r.unparsed = unparsed_responses;
    r.details = term_incidents;
    auto detail = [&](std::string s) {
      if (r.details.size() < 30) r.details.push_back(std::move(s));
    };
    // Per pool and uid: acquisitions in the order their responses arrived,
    // with the running maximum of leaseTransitions.
    std::map<std::pair<int, std::string>, std::vector<std::pair<int64_t, int>>> acquired;
    for (const auto& [key, e] : ledger) {
      acquired[{key.first, key.second.uid}].emplace_back(e.first_done, key.second.transitions);
    }
    for (auto& [k, v] : acquired) {
      std::sort(v.begin(), v.end());
      for (size_t i = 1; i < v.size(); ++i) v[i].second = std::max(v[i].second, v[i - 1].second);
    }
    std::map<std::pair<int, Term>, int> writer_of;
    for (const DlWrite& w : dl_log) {
      const std::string& pool = pools[w.pool]->name;
      const std::string& writer = agents[w.writer]->node;
      if (!w.term.known()) {
        ++r.no_term;
        detail(absl::StrFormat("%s: write by %s for %s accepted without status.leaderTerm", pool,
                               writer, agents[w.node]->node));
        continue;
      }
      auto [it, inserted] = writer_of.try_emplace({w.pool, w.term}, w.writer);
      if (!inserted && it->second != w.writer) {
        ++r.shared_term;
        detail(absl::StrFormat("%s: term %s carried by writes of %s and %s", pool,
                               w.term.ToString(), agents[it->second]->node, writer));
      }
      auto e = ledger.find({w.pool, w.term});
      if (e == ledger.end()) {
        ++r.unknown_term;
      } else if (e->second.acquirer != w.writer) {
        ++r.other_term;
        detail(absl::StrFormat("t=%.1fs %s: %s wrote %s in term %s, acquired by %s", Rel(w.sent),
                               pool, writer, agents[w.node]->node, w.term.ToString(),
                               agents[e->second.acquirer]->node));
      }
      auto acq = acquired.find({w.pool, w.term.uid});
      if (acq == acquired.end()) continue;
      // The newest term whose acquisition had been answered before this write left.
      auto pos = std::lower_bound(acq->second.begin(), acq->second.end(),
                                  std::make_pair(w.sent, INT_MIN));
      if (pos == acq->second.begin()) continue;
      const int newest = std::prev(pos)->second;
      if (newest > w.term.transitions) {
        ++r.stale_term;
        detail(absl::StrFormat(
            "t=%.1fs %s: %s's write for %s sent after term (%s,%d) was acquired, yet accepted "
            "in older term %s",
            Rel(w.sent), pool, writer, agents[w.node]->node, w.term.uid.substr(0, 8), newest,
            w.term.ToString()));
      }
    }
    return r;
  }

  // False liveness: an accepted write for a node whose evidence cannot be
  // fresh. From a response we know when the write left: after death + Fresh()
  // its evidence was older than Fresh(). A write seen only on the watch (its
  // response was lost) gets the request timeout as in-flight allowance.
  int64_t FalseLiveness(int64_t request_timeout) {
    std::set<std::pair<int, int64_t>> answered;
    int64_t bad = 0;
    std::vector<std::string> found;
    {
      absl::MutexLock l(&term_mu);
      for (const DlWrite& w : dl_log) {
        answered.emplace(w.node, w.observed_wall);
        const int64_t death = agents[w.node]->death_at.load();
        if (death != kNever && w.sent > death + Fresh()) {
          ++bad;
          found.push_back(absl::StrFormat("t=%.1fs %s renewed by %s %.1fs after its death",
                                          Rel(w.sent), agents[w.node]->node,
                                          agents[w.writer]->node, (w.sent - death) / 1e6));
        }
      }
    }
    absl::MutexLock l(&view_mu);
    for (const DlEvent& d : dl_events) {
      if (answered.count({d.node, d.observed_wall})) continue;
      const int64_t death = agents[d.node]->death_at.load();
      const int64_t seen = d.observed_wall - wall_minus_mono;
      if (death != kNever && seen > death + Fresh() + request_timeout + kSec) {
        ++bad;
        found.push_back(absl::StrFormat("t=%.1fs %s renewed by %s %.1fs after its death (watch)",
                                        Rel(seen), agents[d.node]->node, d.delegate,
                                        (seen - death) / 1e6));
      }
    }
    false_liveness = bad;
    for (auto& s : found) Incident(std::move(s));
    return bad;
  }

  // The old, watch-timeline judgement, kept as a cross-check that reports and
  // never fails: each DelegatedLease event is matched (by resourceVersion) with
  // the last PoolLease event before it. It depends on both watches having
  // delivered every event; where the term of the write (from its response)
  // disagrees, the detail says so.
  int64_t WatchTimelineMismatches(std::string* detail, int64_t* behind) {
    std::map<std::pair<int, int64_t>, Term> term_of;  // (node, observedTime) -> term
    {
      absl::MutexLock l(&term_mu);
      for (const DlWrite& w : dl_log) term_of[{w.node, w.observed_wall}] = w.term;
    }
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
      if (d.rv > pl_complete_rv.load()) {
        // The PoolLease watch had not delivered (or, cut off by a re-list that
        // never came before the end, never delivered) the changes up to here:
        // the judgement the simulator used to make, and why it misfired.
        ++unverifiable;
        if (pos->holder != d.delegate && ++*behind <= 3) {
          auto t = term_of.find({d.node, d.observed_wall});
          absl::StrAppend(
              detail, "\n  (PoolLease watch complete only to rv ", pl_complete_rv.load(), ") rv ",
              d.rv, " ", pools[d.pool]->name, ": write by ", d.delegate,
              "; the watch's last PoolLease event: rv ", pos->rv, " holder \"", pos->holder,
              "\" transitions ", pos->transitions,
              t != term_of.end() ? absl::StrCat("; the write's own leaderTerm: ",
                                                t->second.ToString())
                                 : std::string("; write not in the response log"));
        }
        continue;
      }
      bool seen_all = true;
      for (auto [from, to] : blind) {
        if (pos->rv <= to && d.rv > from) seen_all = false;
      }
      if (!seen_all) {
        ++unverifiable;
        continue;
      }
      if (pos->holder == d.delegate) continue;
      ++bad;
      if (detail->size() < 3000) {
        auto t = term_of.find({d.node, d.observed_wall});
        auto after = pos + 1;
        absl::StrAppend(
            detail, "\n  rv ", d.rv, " ", pools[d.pool]->name, ": write by ", d.delegate,
            "; the watch's last PoolLease event before it: rv ", pos->rv, " holder \"",
            pos->holder, "\" transitions ", pos->transitions,
            after != ev.end() ? absl::StrCat("; next: rv ", after->rv, " \"", after->holder,
                                             "\" transitions ", after->transitions)
                              : std::string("; no later event"),
            t != term_of.end() ? absl::StrCat("; the write's own leaderTerm: ", t->second.ToString())
                               : std::string("; write not in the response log"));
      }
    }
    return bad;
  }
};

absl::StatusOr<base::HttpResponse> AgentLock::Send(const char* method, const std::string& path,
                                                    const std::string& body) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive || a.killed || !fleet_->CloudOk(a, MonoMicros())) {
    return absl::UnavailableError("cut off from the cloud");
  }
  return fleet_->Request(a, method, path, body);
}

absl::StatusOr<election::VersionedRecord> AgentLock::Get() {
  auto r = Send("GET", absl::StrCat(election::kPoolLeasesPath, "/", pool_), "");
  if (!r.ok()) return r.status();
  if (r->status != 200) return cloud::StatusFromResponse(r->status, r->body);
  auto rec = election::ParseLeaseRecord(r->body);
  if (!rec.ok()) return rec.status();
  last_object_json_ = std::move(r->body);
  return rec;
}

absl::StatusOr<std::string> AgentLock::Written(absl::StatusOr<base::HttpResponse> r) {
  if (!r.ok()) return r.status();
  if (r->status != 200 && r->status != 201) return cloud::StatusFromResponse(r->status, r->body);
  fleet_->RecordLeaseWrite(agent_, r->body, MonoMicros());
  auto rec = election::ParseLeaseRecord(r->body);
  if (!rec.ok()) return rec.status();
  last_object_json_ = std::move(r->body);
  return rec->version;
}

absl::StatusOr<std::string> AgentLock::Create(const election::LeaderElectionRecord& r) {
  return Written(
      Send("POST", election::kPoolLeasesPath, election::EncodePoolLease("", pool_, r, "")));
}

absl::StatusOr<std::string> AgentLock::Update(const election::LeaderElectionRecord& r,
                                              const std::string& v) {
  return Written(Send("PUT", absl::StrCat(election::kPoolLeasesPath, "/", pool_),
                      election::EncodePoolLease(last_object_json_, pool_, r, v)));
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
        auto r = f.client->Send("POST", election::kPoolLeasesPath, body);
        if (!r.ok() || (r->status != 201 && r->status != 409)) failed++;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::cerr << "created " << f.o.extra_objects - failed.load() << " extra PoolLeases ("
            << failed.load() << " failed)\n";
}

}  // namespace

// The term checks against a hand-made history with one violation of each
// kind (no server): the checker itself must be able to fail.
int RunTermSelfTest(const Options& o) {
  Fleet f(o, nullptr);
  f.start = 0;
  auto pool = std::make_unique<Pool>();
  pool->name = PoolName(0);
  f.pools.push_back(std::move(pool));
  for (int n = 0; n < 3; ++n) {
    auto a = std::make_unique<Agent>();
    a->id = n;
    a->node = NodeName(0, n);
    f.pools[0]->agents.push_back(n);
    f.agents.push_back(std::move(a));
  }
  auto lease = [&](int holder, int transitions) {
    return absl::StrFormat(
        R"({"kind":"PoolLease","metadata":{"name":"%s","uid":"uid-1","resourceVersion":"9"},)"
        R"("spec":{"holderIdentity":"%s","leaseTransitions":%d}})",
        f.pools[0]->name, f.agents[holder]->node, transitions);
  };
  auto write = [&](int writer, int transitions, int64_t sent) {
    absl::MutexLock l(&f.term_mu);
    Term t;
    if (transitions >= 0) t = Term{"uid-1", transitions};
    f.dl_log.push_back({0, writer, 2, sent, sent + 1, sent - 5, sent, t});
  };
  int failed = 0;
  auto expect = [&](const char* what, int64_t got, int64_t want) {
    std::printf("%-44s %lld (want %lld) %s\n", what, static_cast<long long>(got),
                static_cast<long long>(want), got == want ? "ok" : "FAIL");
    failed += got == want ? 0 : 1;
  };
  // A clean history: n0 leads term 1, n1 takes over term 2 and renews it.
  f.RecordLeaseWrite(0, lease(0, 1), 100);
  f.RecordLeaseWrite(1, lease(1, 2), 200);
  f.RecordLeaseWrite(1, lease(1, 2), 250);
  write(0, 1, 150);
  write(0, 1, 190);  // left before n1's acquisition was answered: not stale
  write(1, 2, 300);
  Fleet::TermReport clean = f.CheckTerms();
  expect("clean history: violations", clean.violations(), 0);
  expect("clean history: writes checked", clean.writes, 3);
  // One of each violation.
  write(0, 2, 310);                          // n1's term, and shared with n1
  write(0, 1, 210);                          // term 1 after term 2 was acquired
  write(2, -1, 320);                         // no leaderTerm
  write(2, 7, 330);                          // a term nobody acquired: unknown only
  f.RecordLeaseWrite(2, lease(2, 1), 400);   // term 1 handed to a second holder
  Fleet::TermReport bad = f.CheckTerms();
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

int RunFleet(const Options& o, cloud::RestClient* client) {
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
      a->lock = std::make_unique<AgentLock>(&f, a->id, PoolName(p), a->node);
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
    int64_t fe, mg;
    {
      absl::MutexLock l(&f.view_mu);
      fe = f.false_evictions;
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
                 "| lag p99 %.0fms | dl writes %lld | max hb gap %.1fs false-evict %lld | belief overlap "
                 "%lld (same term %lld) | failovers %zu max %.1fs\n",
                 f.Rel(now), alive, total, cut, led, o.pools,
                 static_cast<long long>(reqs - last_requests), f.latency.Percentile(99) / 1e3,
                 static_cast<long long>(f.request_errors.load()),
                 f.tick_lag.Percentile(99) / 1e3,
                 static_cast<long long>(f.dl_writes.load()), mg / 1e6, static_cast<long long>(fe),
                 static_cast<long long>(f.belief_overlaps.load()),
                 static_cast<long long>(f.same_term_overlaps.load()),
                 nfail, maxfail / 1e6);
    last_requests = reqs;
  }
  f.stopping = true;
  f.watch_control.Stop();
  f.q_cv.notify_all();
  for (auto& w : workers) w.join();
  pl_watch.join();
  dl_watch.join();

  // ------------------------------------------------------------- summary --
  const int64_t request_timeout = S(std::max(1.0, o.renew_deadline_s / 2));
  f.FalseLiveness(request_timeout);
  const Fleet::TermReport terms = f.CheckTerms();
  std::string watch_detail;
  int64_t watch_behind = 0;
  const int64_t watch_mismatches = f.WatchTimelineMismatches(&watch_detail, &watch_behind);
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
  const bool ok_terms = terms.violations() == 0;
  const bool ok_overlap = f.same_term_overlaps.load() == 0;
  const bool ok_led = never_led == 0;
  const bool ok = ok_evict && ok_live && ok_terms && ok_overlap && ok_led;
  auto mark = [](bool good) { return good ? "ok" : "FAIL"; };
  const double p50 = f.latency.Percentile(50) / 1e3, p99 = f.latency.Percentile(99) / 1e3,
               p999 = f.latency.Percentile(99.9) / 1e3;
  auto ll = [](int64_t v) { return static_cast<long long>(v); };

  std::printf("\n== poolcoord-sim summary ==\n");
  std::printf("%-48s %s\n", "agents (pools x nodes)",
              absl::StrFormat("%d (%d x %d)", total, o.pools, o.nodes_per_pool).c_str());
  std::printf("%-48s %.0f s, seed %llu\n", "duration", o.duration_s,
              static_cast<unsigned long long>(o.seed));
  std::printf("%-48s %d dead, %d cut off, %d whole pools cut off\n", "faults injected", dead,
              partitioned, pool_cut);
  std::printf("%-48s %lld\n", "leader kills", ll(f.kills.load()));
  std::printf("%-48s %lld (%.0f/s)\n", "requests", ll(total_requests),
              total_requests / o.duration_s);
  std::printf("%-48s p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n", "request latency", p50, p99,
              p999);
  std::printf("%-48s p99 %.1f ms, max %.1f ms\n", "scheduler lag (agent ticked late by)",
              f.tick_lag.Percentile(99) / 1e3, f.tick_lag.Percentile(100) / 1e3);
  std::printf("%-48s %lld errors, %lld conflicts (409), %lld forbidden (403)\n",
              "request outcomes", ll(f.request_errors.load()), ll(f.conflicts.load()),
              ll(f.forbidden.load()));
  std::printf("%-48s %lld accepted, %lld refused (fenced), %lld stale evidence dropped\n",
              "DelegatedLease writes", ll(f.dl_writes.load()), ll(f.dl_refused.load()),
              ll(f.stale_evidence_skipped.load()));
  std::printf("%-48s p50 %.1f s, p99 %.1f s, max %.1f s (%zu gaps)\n",
              "cloud-seen heartbeat gaps", pct(gaps, 50), pct(gaps, 99),
              gaps.empty() ? 0.0 : gaps.back() / 1e6, gaps.size());
  std::printf("%-48s %zu, p50 %.1f s, max %.1f s\n", "failovers after leader kills", fo.size(),
              pct(fo, 50), fo.empty() ? 0.0 : fo.back() / 1e6);
  int pending = 0;
  for (auto& p : f.pools) pending += p->kill_at.load() != 0 ? 1 : 0;
  std::printf("%-48s %d\n", "kills without failover (no candidate left)", pending);
  std::printf("%-48s %lld\n", "gaps >= grace in whole-pool partitions (apart)",
              ll(f.wholepool_gaps));
  std::printf("%-48s %lld\n", "gaps >= grace with no pool member in reach",
              ll(f.uncovered_gaps));
  std::printf("%-48s %lld  (reported)\n", "gaps >= grace not verifiable (watch re-list)",
              ll(f.unverifiable_gaps));
  std::printf("%-48s %lld  %s\n", "false evictions (alive, reachable, gap>=40s)",
              ll(f.false_evictions), mark(ok_evict));
  std::printf("%-48s %lld  %s\n", "false liveness (renewed after death)", ll(f.false_liveness),
              mark(ok_live));
  std::printf("%-48s %lld terms acquired, %lld writes checked, %lld of unknown term\n",
              "term ledger (from responses)", ll(terms.terms), ll(terms.writes),
              ll(terms.unknown_term));
  std::printf("%-48s %lld  %s\n", "  writes in a term acquired by another node",
              ll(terms.other_term), mark(terms.other_term == 0));
  std::printf("%-48s %lld  %s\n", "  one term carried by two writers", ll(terms.shared_term),
              mark(terms.shared_term == 0));
  std::printf("%-48s %lld  %s\n", "  writes in a term older than one acquired",
              ll(terms.stale_term), mark(terms.stale_term == 0));
  std::printf("%-48s %lld  %s\n", "  accepted writes without status.leaderTerm",
              ll(terms.no_term), mark(terms.no_term == 0));
  std::printf("%-48s %lld  %s\n", "  one term returned to two holders", ll(terms.term_conflicts),
              mark(terms.term_conflicts == 0));
  std::printf("%-48s %lld  %s\n", "term violations (total)", ll(terms.violations()),
              mark(ok_terms));
  std::printf("%-48s %lld  %s\n", "overlapping beliefs in the same term",
              ll(f.same_term_overlaps.load()), mark(ok_overlap));
  std::printf("%-48s %lld, longest %.1f s  (reported)\n",
              "beliefs overlapping a deposed leader's", ll(f.belief_overlaps.load()),
              f.max_overlap.load() / 1e6);
  std::printf("%-48s %d  %s\n", "pools never led (not cut off)", never_led, mark(ok_led));
  std::printf("%-48s %d (%lld writes not matchable)\n", "watch reconnects",
              f.watch_restarts.load(), ll(f.unverifiable));
  std::printf("%-48s %lld, and %lld past the PoolLease watch  (reported)\n",
              "watch-timeline holder mismatches", ll(watch_mismatches), ll(watch_behind));
  if (terms.unparsed > 0) {
    std::printf("%-48s %lld\n", "unparsable write responses", ll(terms.unparsed));
  }
  for (const auto& s : terms.details) std::printf("term: %s\n", s.c_str());
  if (!watch_detail.empty()) std::printf("watch timeline: %s\n", watch_detail.c_str());
  for (const auto& s : f.incidents) std::printf("incident: %s\n", s.c_str());
  std::printf("result: %s\n", ok ? "PASS" : "FAIL");
  std::fflush(stdout);

  if (!o.summary_json.empty()) {
    std::ofstream js(o.summary_json);
    js << absl::StrFormat(
        "{\"agents\":%d,\"pools\":%d,\"duration_s\":%.0f,\"requests\":%lld,"
        "\"request_errors\":%lld,\"latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f},"
        "\"dl_writes\":%lld,\"dl_refused\":%lld,\"max_gap_s\":%.3f,\"false_evictions\":%lld,"
        "\"wholepool_gaps\":%lld,\"uncovered_gaps\":%lld,\"unverifiable_gaps\":%lld,"
        "\"false_liveness\":%lld,\"terms_acquired\":%lld,\"term_writes_checked\":%lld,"
        "\"unknown_term_writes\":%lld,\"term_violations\":%lld,\"other_term_writes\":%lld,"
        "\"shared_term_writes\":%lld,\"stale_term_writes\":%lld,\"no_term_writes\":%lld,"
        "\"term_conflicts\":%lld,\"same_term_overlaps\":%lld,\"belief_overlaps\":%lld,"
        "\"max_overlap_s\":%.3f,\"watch_mismatches\":%lld,\"watch_behind_mismatches\":%lld,"
        "\"watch_restarts\":%d,"
        "\"never_led\":%d,\"kills\":%lld,\"failovers\":%zu,\"failover_p50_s\":%.3f,"
        "\"failover_max_s\":%.3f,\"dead\":%d,\"cut_off\":%d,\"pools_cut\":%d,"
        "\"scheduler_lag_p99_ms\":%.1f,\"ok\":%s}\n",
        total, o.pools, o.duration_s, ll(total_requests), ll(f.request_errors.load()), p50, p99,
        p999, ll(f.dl_writes.load()), ll(f.dl_refused.load()),
        gaps.empty() ? 0.0 : gaps.back() / 1e6, ll(f.false_evictions), ll(f.wholepool_gaps),
        ll(f.uncovered_gaps), ll(f.unverifiable_gaps), ll(f.false_liveness), ll(terms.terms),
        ll(terms.writes), ll(terms.unknown_term), ll(terms.violations()), ll(terms.other_term),
        ll(terms.shared_term), ll(terms.stale_term), ll(terms.no_term), ll(terms.term_conflicts),
        ll(f.same_term_overlaps.load()), ll(f.belief_overlaps.load()), f.max_overlap.load() / 1e6,
        ll(watch_mismatches), ll(watch_behind), f.watch_restarts.load(), never_led, ll(f.kills.load()), fo.size(),
        pct(fo, 50), fo.empty() ? 0.0 : fo.back() / 1e6, dead, partitioned, pool_cut,
        f.tick_lag.Percentile(99) / 1e3, ok ? "true" : "false");
  }
  return ok ? 0 : 1;
}

}  // namespace poolcoord::sim
