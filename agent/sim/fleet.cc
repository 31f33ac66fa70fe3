// The fleet scenario: every modelled node runs the real agent core
// (agent/agent_core.h) with its own minted kubelet certificate and skewed
// clock; the pools' LANs are modelled (datagrams handed between the agents'
// inboxes); the agents talk to a real poolcoord-apiserver over HTTPS with their
// nodes' tokens; the server's forwarder writes into the modelled cloud
// (cloud_model.h), where modelled kubelets renew their own Leases; and the
// verdict is what the node lifecycle controller would see there.
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
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <queue>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_core.h"
#include "agent/kube_agent_cloud.h"
#include "agent/minted_pki.h"
#include "agent/testing/forging_leader.h"
#include "agent/verification_memo.h"
#include "agent/sim/cloud_model.h"
#include "agent/sim/sim.h"
#include "base/microtime.h"
#include "cloud/codec.h"
#include "election/leader_elector.h"
#include "election/pool_lease_lock.h"
#include "rapidjson/document.h"

namespace poolcoord::sim {
namespace {

constexpr int64_t kSec = 1'000'000;
constexpr int64_t kNever = INT64_MAX;

int64_t S(double seconds) { return static_cast<int64_t>(seconds * 1e6); }

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
struct Fleet;
struct Agent;

// An accepted DelegatedLease write, from its response.
struct DlWrite {
  int pool;
  int writer;          // agent id
  int node;            // agent id of the node written for
  int64_t sent;        // steady µs just before the request left
  int64_t done;        // steady µs when the response arrived
  int64_t hb;          // steady µs the heartbeat it rests on arrived at the writer
  int64_t observed_wall;
  Term term;           // status.leaderTerm of the stored object
};

// Who acquired a term, from the acquirer's own write responses.
struct TermEntry {
  int acquirer;
  int64_t first_done;  // steady µs of the first response naming this term
};

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
  // The pool's recent delegation challenges in the PoolLease last read or
  // written, as election::ResourceLeaseLock::Challenges.
  std::vector<std::string> Challenges() const {
    std::vector<std::string> out;
    auto lease = cloud::DecodeLease(last_object_json_);
    if (lease.ok()) {
      for (const auto& c : lease->delegation.challenges) out.push_back(c.value);
    }
    return out;
  }

 private:
  absl::StatusOr<base::HttpResponse> Send(const char* method, const std::string& path,
                                           const std::string& body);
  absl::StatusOr<std::string> Written(absl::StatusOr<base::HttpResponse> r);
  Fleet* fleet_;
  int agent_;
  std::string pool_, identity_;
  std::string last_object_json_;  // only the agent's own (one at a time) tick uses it
};

// The pool's LAN as one agent sends on it: a datagram goes into the inbox of
// the member named by the address (the simulator's addresses are node names),
// unless the sender or the receiver is dead.
class SimLan : public agent::LanTransport {
 public:
  SimLan(Fleet* fleet, int agent) : fleet_(fleet), agent_(agent) {}
  absl::Status Send(const std::string& address, absl::string_view datagram) override;

 private:
  Fleet* fleet_;
  int agent_;
};

// The cloud as one agent reaches it: its own node Lease from the modelled
// cloud, the PoolLease and DelegatedLeases from the real server (with its
// node's token), nothing at all while it is cut off. Every request's outcome
// feeds the agent's reachability.
class SimCloud : public agent::AgentCloud {
 public:
  SimCloud(Fleet* fleet, int agent, std::unique_ptr<AgentLock> lock)
      : fleet_(fleet), agent_(agent), lock_(std::move(lock)) {}
  absl::StatusOr<agent::NodeLeaseObservation> ReadNodeLease(const std::string& node) override;
  absl::StatusOr<std::string> ReadDelegatedLease(const std::string& node) override;
  absl::StatusOr<std::string> WriteDelegatedLease(const agent::DelegatedLeaseWrite& w) override;
  absl::Status DeleteDelegatedLease(const std::string& node, const std::string& rv) override;
  election::LeaseLock* PoolLeaseLock() override { return this_lock(); }
  std::vector<std::string> PoolChallenges() override { return lock_->Challenges(); }
  void Report(bool answered) { ReportRequest(answered); }

 private:
  election::LeaseLock* this_lock() { return lock_.get(); }
  absl::StatusOr<base::HttpResponse> Send(const char* method, const std::string& path,
                                           const std::string& body);
  Fleet* fleet_;
  int agent_;
  std::unique_ptr<AgentLock> lock_;
};

struct Agent {
  int id = 0;
  int pool = 0;
  int slot = 0;
  std::string node;
  std::string token;
  int64_t skew_us = 0;
  std::unique_ptr<SkewedClock> clock;
  std::unique_ptr<SimLan> lan;
  std::unique_ptr<SimCloud> cloud;
  std::unique_ptr<agent::AgentCore> core;
  // A lying pool's member (--lying-pool-ratio): its leader forges liveness.
  std::shared_ptr<agent::ForgingLeader> forger;
  // One tick at a time per agent; datagrams wait in the inbox for it.
  std::mutex tick_mu;
  absl::Mutex inbox_mu;
  std::vector<std::string> inbox ABSL_GUARDED_BY(inbox_mu);
  std::atomic<bool> wake_pending{false};
  int64_t lan_due = 0, cloud_due = 0, next_kubelet = 0;
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
};

struct Pool {
  std::string name;
  std::vector<int> agents;
  bool lying = false;  // --lying-pool-ratio
  int64_t cut_from = kNever, cut_until = kNever;  // whole-pool partition
  absl::Mutex mu;
  std::atomic<int> believers{0};
  std::atomic<int64_t> kill_at{0};  // pending failover measurement
  std::atomic<int64_t> last_uncovered{0};  // last time no alive member reached the cloud
  std::atomic<bool> ever_led{false};
};

// The verdict's state per node and grace period: the cloud Lease change a
// too-long gap after it was already counted for.
struct NodeView {
  std::vector<int64_t> counted_change;  // per grace: LastChange() already judged
  bool unknown_at_end = false;
};

struct Fleet {
  const Options& o;
  cloud::RestClient* client;
  CloudModel* cloud_model = nullptr;
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
  std::atomic<int64_t> dl_writes{0}, dl_refused{0}, datagrams{0};
  std::atomic<int64_t> dl_proof_refused{0};  // 403 on spec.proof

  // Monitor state.
  absl::Mutex view_mu;
  std::vector<NodeView> views ABSL_GUARDED_BY(view_mu);
  // Per grace period: false evictions, and gaps apart (whole pool cut off; no
  // member in reach).
  std::vector<int64_t> false_evictions ABSL_GUARDED_BY(view_mu);
  std::vector<int64_t> wholepool_gaps ABSL_GUARDED_BY(view_mu);
  std::vector<int64_t> uncovered_gaps ABSL_GUARDED_BY(view_mu);
  int64_t false_liveness ABSL_GUARDED_BY(view_mu) = 0;
  int64_t cloud_false_liveness ABSL_GUARDED_BY(view_mu) = 0;
  int64_t max_alive_age ABSL_GUARDED_BY(view_mu) = 0;  // longest cloud Lease age of an alive, covered node
  std::vector<std::string> incidents ABSL_GUARDED_BY(view_mu);
  std::atomic<int64_t> belief_overlaps{0};
  std::atomic<int64_t> same_term_overlaps{0};  // two believers of one term: impossible
  std::atomic<int64_t> max_overlap{0};         // µs two beliefs (different terms) overlapped

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

  // How long a heartbeat is evidence: the agents' freshness bound.
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

  void Schedule(int agent, int64_t due) {
    {
      std::lock_guard<std::mutex> l(q_mu);
      queue.emplace(due, agent);
    }
    q_cv.notify_one();
  }

  // A datagram for `agent`: into its inbox, and its tick comes at once.
  void Deliver(int agent, absl::string_view datagram) {
    Agent& a = *agents[agent];
    if (!a.alive) return;
    {
      absl::MutexLock l(&a.inbox_mu);
      a.inbox.emplace_back(datagram.data(), datagram.size());
    }
    datagrams++;
    if (!a.wake_pending.exchange(true)) Schedule(agent, MonoMicros());
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
      Agent& a = *agents[id];
      // An agent is ticked by one worker at a time; a wake-up that finds it
      // busy is taken by the running tick (it looks at the inbox at its end).
      std::unique_lock<std::mutex> busy(a.tick_mu, std::try_to_lock);
      if (busy.owns_lock()) {
        tick_lag.Add(now - due);
        const int64_t next = Tick(a);
        busy.unlock();
        l.lock();
        if (next != kNever) queue.emplace(next, id);
      } else {
        l.lock();
      }
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
    a.wake_pending = false;
    std::vector<std::string> inbox;
    {
      absl::MutexLock l(&a.inbox_mu);
      inbox.swap(a.inbox);
    }
    for (const std::string& d : inbox) a.core->OnDatagram(d);
    if (now >= a.cloud_due) a.cloud_due = a.core->CloudStep();
    a.lan_due = a.core->LanStep();
    const bool leading = a.core->leading();
    if (leading && !a.believes_leading) StartedLeading(a);
    if (!leading && a.believes_leading) StoppedLeading(a);
    int64_t next = std::min({a.lan_due, a.cloud_due, a.death_at.load(), end});
    {
      absl::MutexLock l(&a.inbox_mu);
      if (!a.inbox.empty()) next = MonoMicros();
    }
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

  void RecordDelegatedWrite(const Agent& a, int member, int64_t sent, int64_t done, int64_t hb,
                            const std::string& body) {
    auto st = ParseStored(body);
    absl::MutexLock l(&term_mu);
    if (!st.ok()) {
      ++unparsed_responses;
      return;
    }
    dl_log.push_back({a.pool, a.id, member, sent, done, hb, st->observed_wall, st->leader_term});
  }

  // The kubelets, on a thread of their own (so an overloaded simulator delays
  // its agents, as a starved edge node would, but never the cloud's view of a
  // connected node): each alive node whose link is up renews its own Lease
  // every kubelet interval, on its own (skewed) clock.
  void Kubelets() {
    while (!stopping) {
      const int64_t now = MonoMicros();
      int64_t next = now + 100'000;
      for (auto& ap : agents) {
        Agent& a = *ap;
        if (!a.alive || a.killed || now >= a.death_at.load()) continue;
        if (now >= a.next_kubelet) {
          if (CloudOk(a, now)) cloud_model->KubeletRenew(a.node, a.clock->NowMicros());
          a.next_kubelet += S(o.kubelet_interval_s);
        }
        next = std::min(next, a.next_kubelet);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(std::max<int64_t>(1000, next - MonoMicros())));
    }
  }

  // ---------------------------------------------------------------- monitor --

  // Once a second: coverage per pool, and each alive node's cloud Lease as the
  // node lifecycle controller sees it (the time its renewTime last changed).
  void CheckLeases(int64_t now) {
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
      if (!a.alive) continue;
      const int64_t last = std::max(start, cloud_model->LastChange(a.node));
      const int64_t age = now - last;
      const Pool& p = *pools[a.pool];
      const bool apart = (p.cut_from != kNever && p.cut_from <= now && p.cut_until > last) ||
                         p.last_uncovered >= last;
      if (!apart) max_alive_age = std::max(max_alive_age, age);
      NodeView& v = views[a.id];
      for (size_t g = 0; g < o.graces_s.size(); ++g) {
        if (age < S(o.graces_s[g]) || v.counted_change[g] == last) continue;
        v.counted_change[g] = last;
        if (p.cut_from != kNever && p.cut_from <= now && p.cut_until > last) {
          wholepool_gaps[g]++;
        } else if (p.last_uncovered >= last) {
          uncovered_gaps[g]++;
        } else {
          false_evictions[g]++;
          Incident(absl::StrFormat(
              "t=%.1fs %s (pool %s, %s): cloud Lease %.1fs old, past the %.0fs grace period",
              Rel(now), a.node, p.name, CloudOk(a, now) ? "connected" : "cut off", age / 1e6,
              o.graces_s[g]));
        }
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

  // False liveness, twice: (1) an accepted DelegatedLease write that left more
  // than the freshness bound after its node's death (its evidence cannot be
  // fresh); (2) the modelled cloud's Lease of a dead node renewed later than
  // its death + the freshness bound + the DelegatedLease's own duration + the
  // forwarder's resync and a request's latency (what a forwarder acting on a
  // live DelegatedLease may still do).
  void FalseLiveness(int64_t request_timeout) {
    std::vector<std::string> found;
    int64_t bad = 0, cloud_bad = 0;
    {
      absl::MutexLock l(&term_mu);
      for (const DlWrite& w : dl_log) {
        const int64_t death = agents[w.node]->death_at.load();
        if (death != kNever && w.sent > death + Fresh()) {
          ++bad;
          found.push_back(absl::StrFormat("t=%.1fs %s's DelegatedLease written by %s %.1fs after its death",
                                          Rel(w.sent), agents[w.node]->node,
                                          agents[w.writer]->node, (w.sent - death) / 1e6));
        }
      }
    }
    const int64_t allowance = Fresh() + S(std::ceil(o.heartbeat_interval_s + 2)) + 5 * kSec +
                              request_timeout + kSec;
    for (auto& a : agents) {
      const int64_t death = a->death_at.load();
      if (death == kNever || death > end) continue;
      for (int64_t t : cloud_model->Changes(a->node)) {
        if (t > death + allowance) {
          ++cloud_bad;
          found.push_back(absl::StrFormat("t=%.1fs %s's cloud Lease renewed %.1fs after its death",
                                          Rel(t), a->node, (t - death) / 1e6));
          break;
        }
      }
    }
    absl::MutexLock l(&view_mu);
    false_liveness = bad;
    cloud_false_liveness = cloud_bad;
    for (auto& s : found) Incident(std::move(s));
  }
};

absl::StatusOr<base::HttpResponse> AgentLock::Send(const char* method, const std::string& path,
                                                    const std::string& body) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive || a.killed || !fleet_->CloudOk(a, MonoMicros())) {
    a.cloud->Report(false);
    return absl::UnavailableError("cut off from the cloud");
  }
  auto r = fleet_->Request(a, method, path, body);
  a.cloud->Report(r.ok());
  return r;
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

absl::Status SimLan::Send(const std::string& address, absl::string_view datagram) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive) return absl::UnavailableError("dead");
  auto it = fleet_->agent_by_node.find(address);
  if (it == fleet_->agent_by_node.end()) return absl::InvalidArgumentError("no such member");
  fleet_->Deliver(it->second, datagram);
  return absl::OkStatus();
}

absl::StatusOr<base::HttpResponse> SimCloud::Send(const char* method, const std::string& path,
                                                   const std::string& body) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive || a.killed || !fleet_->CloudOk(a, MonoMicros())) {
    Report(false);
    return absl::UnavailableError("cut off from the cloud");
  }
  auto r = fleet_->Request(a, method, path, body);
  Report(r.ok());
  return r;
}

absl::StatusOr<agent::NodeLeaseObservation> SimCloud::ReadNodeLease(const std::string& node) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive || !fleet_->CloudOk(a, MonoMicros())) {
    Report(false);
    return absl::UnavailableError("cut off from the cloud");
  }
  Report(true);
  auto lease = fleet_->cloud_model->GetLease(node);
  if (!lease.ok()) return lease.status();
  return agent::ObserveNodeLease(*lease);
}

absl::StatusOr<std::string> SimCloud::ReadDelegatedLease(const std::string& node) {
  auto r = Send("GET", absl::StrCat(agent::kDelegatedLeasesPath, "/", node), "");
  if (!r.ok()) return r.status();
  if (r->status != 200) return cloud::StatusFromResponse(r->status, r->body);
  return agent::ResourceVersionOf(r->body);
}

absl::StatusOr<std::string> SimCloud::WriteDelegatedLease(const agent::DelegatedLeaseWrite& w) {
  const Agent& a = *fleet_->agents[agent_];
  const int64_t sent = MonoMicros();
  const std::string body = agent::EncodeDelegatedLease(w);
  auto r = w.resource_version.empty()
               ? Send("POST", agent::kDelegatedLeasesPath, body)
               : Send("PUT", absl::StrCat(agent::kDelegatedLeasesPath, "/", w.node), body);
  if (!r.ok()) return r.status();
  if (r->status != 200 && r->status != 201) {
    absl::Status refused = cloud::StatusFromResponse(r->status, r->body);
    if (r->status == 403) {
      (cloud::HasCauseField(refused, "spec.proof") ? fleet_->dl_proof_refused : fleet_->dl_refused)++;
    }
    return refused;
  }
  fleet_->dl_writes++;
  auto member = fleet_->agent_by_node.find(w.node);
  if (member != fleet_->agent_by_node.end()) {
    fleet_->RecordDelegatedWrite(a, member->second, sent, MonoMicros(),
                                 w.evidence ? w.evidence->arrival_mono_us : 0, r->body);
  }
  return agent::ResourceVersionOf(r->body);
}

absl::Status SimCloud::DeleteDelegatedLease(const std::string& node, const std::string& rv) {
  std::string options = R"({"apiVersion":"v1","kind":"DeleteOptions")";
  if (!rv.empty()) absl::StrAppend(&options, R"(,"preconditions":{"resourceVersion":")", rv, R"("})");
  options += "}";
  auto r = Send("DELETE", absl::StrCat(agent::kDelegatedLeasesPath, "/", node), options);
  if (!r.ok()) return r.status();
  return r->status == 200 ? absl::OkStatus() : cloud::StatusFromResponse(r->status, r->body);
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

int RunFleet(const Options& o, cloud::RestClient* client, CloudModel* cloud_model) {
  Fleet f(o, client);
  f.cloud_model = cloud_model;
  std::mt19937_64 rng(o.seed);
  std::mt19937_64 lying_rng(o.seed ^ 0x6c79696e67ULL);
  std::uniform_real_distribution<double> unit(0, 1);
  if (o.extra_objects > 0) CreateExtraObjects(f);

  const int total = o.pools * o.nodes_per_pool;
  // Every node's kubelet client certificate (ECDSA P-256, as kubelets make
  // them) from one cluster CA (RSA 2048, as kubeadm makes it).
  const int64_t mint_start = MonoMicros();
  auto ca = ReadClusterCa(o);
  if (!ca.ok()) {
    std::cerr << "the cluster CA: " << ca.status() << "\n";
    return 2;
  }
  auto authority = agent::CertificateAuthority::FromPem(ca->cert_pem);
  if (!authority.ok()) return 2;
  std::vector<std::shared_ptr<const agent::NodeIdentity>> identities(total);
  {
    std::atomic<int> next{0}, failed{0};
    std::vector<std::thread> minters;
    for (int t = 0; t < 2; ++t) {
      minters.emplace_back([&] {
        for (int i; (i = next++) < total;) {
          auto pair = agent::MintNodeCertificate(*ca, NodeName(i / o.nodes_per_pool, i % o.nodes_per_pool));
          auto id = pair.ok() ? agent::NodeIdentity::FromPem(pair->cert_pem, pair->key_pem)
                              : absl::StatusOr<std::unique_ptr<agent::NodeIdentity>>(pair.status());
          if (!id.ok()) {
            failed++;
            continue;
          }
          identities[i] = std::move(*id);
        }
      });
    }
    for (auto& t : minters) t.join();
    if (failed > 0) {
      std::cerr << failed.load() << " node certificates could not be minted\n";
      return 2;
    }
  }
  std::cerr << absl::StrFormat("minted %d node certificates in %.1fs\n", total,
                               (MonoMicros() - mint_start) / 1e6);

  f.start = MonoMicros();
  f.wall_minus_mono = WallMicros() - f.start;
  f.end = f.start + S(o.duration_s);
  const double dur = o.duration_s;
  const double warmup = std::min(std::max(1.5 * o.lease_duration_s, 20.0), dur / 3);
  f.warmup = f.start + S(warmup);
  auto at = [&](double from, double to) {
    return f.start + S(from + unit(rng) * std::max(0.0, to - from));
  };
  const double max_grace = *std::max_element(o.graces_s.begin(), o.graces_s.end());

  f.pools.reserve(o.pools);
  for (int p = 0; p < o.pools; ++p) {
    auto pool = std::make_unique<Pool>();
    pool->name = PoolName(p);
    if (unit(rng) < o.pool_partition_ratio) {
      pool->cut_from = at(warmup, dur * 0.6);
      pool->cut_until = pool->cut_from + S(30 + unit(rng) * 60);
    }
    // Drawn from a stream of its own, so the other faults stay as they were.
    pool->lying = o.lying_pool_ratio > 0 &&
                  std::uniform_real_distribution<double>(0, 1)(lying_rng) < o.lying_pool_ratio;
    f.pool_by_name[pool->name] = p;
    f.pools.push_back(std::move(pool));
  }
  f.agents.reserve(total);
  {
    absl::MutexLock l(&f.view_mu);
    f.views.assign(total, NodeView{std::vector<int64_t>(o.graces_s.size(), -1), false});
    f.false_evictions.assign(o.graces_s.size(), 0);
    f.wholepool_gaps.assign(o.graces_s.size(), 0);
    f.uncovered_gaps.assign(o.graces_s.size(), 0);
  }
  const int64_t request_timeout = S(std::max(1.0, o.renew_deadline_s / 2));
  // Every receiver in the pool checks the same signatures: each distinct one
  // is checked once for the whole process (verification_memo.h).
  agent::VerificationMemo memo;
  agent::AgentOptions options;
  options.verification_memo = &memo;
  options.freshness.heartbeat_interval_us = S(o.heartbeat_interval_s);
  options.freshness.margin_us = 2 * kSec;
  options.reachability.probe_period_us = S(o.heartbeat_interval_s);
  options.reachability.request_timeout_us = request_timeout;
  options.lease_duration = absl::Seconds(o.lease_duration_s);
  options.renew_deadline = absl::Seconds(o.renew_deadline_s);
  options.retry_period = absl::Seconds(o.retry_period_s);
  for (int p = 0; p < o.pools; ++p) {
    auto view = std::make_shared<agent::PoolView>();
    view->pool = PoolName(p);
    for (int n = 0; n < o.nodes_per_pool; ++n) view->members[NodeName(p, n)] = NodeName(p, n);
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
        a->death_at = at(warmup, std::max(warmup, dur - 1.2 * max_grace));
      }
      if (unit(rng) < o.partition_ratio) {
        a->cut_from = at(warmup, std::max(warmup, dur * 0.7));
        a->cut_until = a->cut_from + S(30 + unit(rng) * 90);
      }
      a->lan = std::make_unique<SimLan>(&f, a->id);
      a->cloud = std::make_unique<SimCloud>(
          &f, a->id, std::make_unique<AgentLock>(&f, a->id, PoolName(p), a->node));
      agent::AgentOptions mine = options;
      mine.jitter_seed = o.seed * 1'000'003 + a->id + 1;
      if (f.pools[p]->lying) {
        a->forger = std::make_shared<agent::ForgingLeader>(*authority, S(o.heartbeat_interval_s));
        mine.forger = a->forger;
      }
      auto core = agent::AgentCore::New(identities[a->id], *authority, a->clock.get(), a->lan.get(),
                                        a->cloud.get(), mine);
      if (!core.ok()) {
        std::cerr << "agent " << a->node << ": " << core.status() << "\n";
        return 2;
      }
      a->core = *std::move(core);
      auto own = std::make_shared<agent::PoolView>(*view);
      own->self = a->node;
      a->core->SetPool(own);
      // Spread the kubelets' renewals and the agents' first steps.
      a->next_kubelet = f.start + S(unit(rng) * o.kubelet_interval_s);
      // Agents start over one heartbeat interval, not all at once.
      a->cloud_due = a->lan_due = f.start + S(unit(rng) * o.heartbeat_interval_s);
      f.agent_by_node[a->node] = a->id;
      f.pools[p]->agents.push_back(a->id);
      f.agents.push_back(std::move(a));
    }
  }
  // The kubelets were all running before the agents: every node's Lease exists.
  for (auto& a : f.agents) cloud_model->KubeletRenew(a->node, a->clock->NowMicros());
  std::cerr << absl::StrFormat(
      "fleet: %d pools x %d nodes = %d agents (the agent core), %.0fs (warm-up %.0fs), lease "
      "%.0f/%.0f/%.0fs, heartbeats every %.0fs, kubelets every %.0fs, %d workers\n",
      o.pools, o.nodes_per_pool, total, dur, warmup, o.lease_duration_s, o.renew_deadline_s,
      o.retry_period_s, o.heartbeat_interval_s, o.kubelet_interval_s, o.workers);

  for (auto& a : f.agents) f.Schedule(a->id, a->cloud_due);
  std::vector<std::thread> workers;
  for (int i = 0; i < o.workers; ++i) workers.emplace_back([&] { f.Worker(); });
  std::thread kubelets([&] { f.Kubelets(); });

  // Main loop: leader kills, the cloud Lease verdict, progress.
  int64_t next_kill = o.leader_kill_interval_s > 0 ? f.warmup : kNever;
  // Late kills could not complete their failover before the end.
  const int64_t kill_until = f.end - S(o.lease_duration_s + 2 * 2.2 * o.retry_period_s + 5);
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
    f.CheckLeases(now);
    int alive = 0, cut = 0, led = 0;
    for (auto& a : f.agents) {
      if (a->alive) {
        ++alive;
        if (!f.CloudOk(*a, now)) ++cut;
      }
    }
    for (auto& p : f.pools) led += p->believers.load() > 0 ? 1 : 0;
    const int64_t reqs = f.requests.load();
    int64_t fe = 0, age;
    {
      absl::MutexLock l(&f.view_mu);
      for (int64_t x : f.false_evictions) fe += x;
      age = f.max_alive_age;
    }
    size_t nfail;
    int64_t maxfail = 0;
    {
      absl::MutexLock l(&f.failover_mu);
      nfail = f.failovers.size();
      for (int64_t x : f.failovers) maxfail = std::max(maxfail, x);
    }
    std::fprintf(stderr,
                 "[%4.0fs] alive %d/%d cut %d | pools led %d/%d | %lld req/s p99 %.1fms err %lld | "
                 "lag p99 %.0fms | dl writes %lld | forwarder writes %lld | oldest cloud Lease %.1fs "
                 "false-evict %lld | belief overlap %lld (same term %lld) | failovers %zu max %.1fs\n",
                 f.Rel(now), alive, total, cut, led, o.pools,
                 static_cast<long long>(reqs - last_requests), f.latency.Percentile(99) / 1e3,
                 static_cast<long long>(f.request_errors.load()), f.tick_lag.Percentile(99) / 1e3,
                 static_cast<long long>(f.dl_writes.load()),
                 static_cast<long long>(cloud_model->server_lease_writes()), age / 1e6,
                 static_cast<long long>(fe), static_cast<long long>(f.belief_overlaps.load()),
                 static_cast<long long>(f.same_term_overlaps.load()), nfail, maxfail / 1e6);
    last_requests = reqs;
  }
  f.stopping = true;
  f.q_cv.notify_all();
  for (auto& w : workers) w.join();
  kubelets.join();
  for (auto& a : f.agents) {
    if (a->alive) a->core->Shutdown();
  }

  // ------------------------------------------------------------- summary --
  f.FalseLiveness(request_timeout);
  const Fleet::TermReport terms = f.CheckTerms();
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
  // What the agents' LANs carried, summed over every agent.
  int64_t hb_verified = 0, hb_heard = 0, hb_dropped = 0, delegated_written = 0, step_downs = 0;
  for (auto& a : f.agents) {
    hb_verified += a->core->verifier_stats().heartbeats_accepted.load();
    hb_heard += a->core->verifier_stats().heartbeats_heard.load();
    for (size_t r = 0; r < agent::kDropReasonCount; ++r) {
      if (static_cast<agent::DropReason>(r) == agent::DropReason::kUnknownCertificate) continue;
      hb_dropped += a->core->verifier_stats().dropped[r].load();
    }
    delegated_written += a->core->delegation_stats().written.load();
    step_downs += a->core->delegation_stats().step_downs.load();
  }
  absl::MutexLock l(&f.view_mu);
  const int64_t total_requests = f.requests.load();
  int dead = 0, partitioned = 0, pool_cut = 0;
  for (auto& a : f.agents) {
    dead += a->death_at.load() != kNever ? 1 : 0;
    partitioned += a->cut_from != kNever && a->cut_from < f.end ? 1 : 0;
  }
  for (auto& p : f.pools) pool_cut += p->cut_from != kNever ? 1 : 0;
  int lying_pools = 0;
  int64_t forged = 0, forged_accepted = 0, forged_refused_proof = 0;
  for (auto& p : f.pools) lying_pools += p->lying ? 1 : 0;
  // The honest planners' proofs the server refused, by rule (a forging
  // leader's own writes are counted apart), and the heartbeats they withheld
  // because the server would refuse them (after a failover, ...).
  std::map<std::string, int64_t> honest_refused;
  int64_t honest_refused_total = 0, withheld = 0, challenge_rounds = 0;
  for (auto& a : f.agents) {
    if (a->core == nullptr) continue;
    for (const auto& [rule, n] : a->core->proof_refusals()) {
      honest_refused[rule] += n;
      honest_refused_total += n;
    }
    withheld += a->core->delegation_stats().withheld.load();
    challenge_rounds += a->core->stats().challenge_rounds.load();
  }
  std::string honest_rules;
  for (const auto& [rule, n] : honest_refused) {
    absl::StrAppend(&honest_rules, honest_rules.empty() ? " (" : ", ", rule, " ", n);
  }
  if (!honest_rules.empty()) honest_rules += ")";
  for (auto& a : f.agents) {
    if (a->forger == nullptr) continue;
    forged += a->forger->stats().attempts.load();
    forged_accepted += a->forger->stats().accepted.load();
    forged_refused_proof += a->forger->stats().refused_proof.load();
  }

  int64_t false_evictions = 0;
  for (int64_t x : f.false_evictions) false_evictions += x;
  const bool ok_evict = false_evictions == 0;
  const bool ok_live = f.false_liveness == 0 && f.cloud_false_liveness == 0;
  const bool ok_terms = terms.violations() == 0;
  const bool ok_overlap = f.same_term_overlaps.load() == 0;
  const bool ok_led = never_led == 0;
  const bool ok_lan = hb_dropped == 0;
  const bool ok = ok_evict && ok_live && ok_terms && ok_overlap && ok_led && ok_lan;
  auto mark = [](bool good) { return good ? "ok" : "FAIL"; };
  const double p50 = f.latency.Percentile(50) / 1e3, p99 = f.latency.Percentile(99) / 1e3,
               p999 = f.latency.Percentile(99.9) / 1e3;
  auto ll = [](int64_t v) { return static_cast<long long>(v); };

  std::printf("\n== poolcoord-sim summary ==\n");
  std::printf("%-52s %s\n", "agents (pools x nodes)",
              absl::StrFormat("%d (%d x %d), the agent core", total, o.pools, o.nodes_per_pool).c_str());
  std::printf("%-52s %.0f s, seed %llu\n", "duration", o.duration_s,
              static_cast<unsigned long long>(o.seed));
  std::printf("%-52s %d dead, %d cut off, %d whole pools cut off\n", "faults injected", dead,
              partitioned, pool_cut);
  std::printf("%-52s %lld\n", "leader kills", ll(f.kills.load()));
  std::printf("%-52s %lld (%.0f/s)\n", "requests to the server", ll(total_requests),
              total_requests / o.duration_s);
  std::printf("%-52s p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n", "request latency", p50, p99, p999);
  std::printf("%-52s p99 %.1f ms, max %.1f ms\n", "scheduler lag (agent ticked late by)",
              f.tick_lag.Percentile(99) / 1e3, f.tick_lag.Percentile(100) / 1e3);
  std::printf("%-52s %lld errors, %lld conflicts (409), %lld forbidden (403)\n", "request outcomes",
              ll(f.request_errors.load()), ll(f.conflicts.load()), ll(f.forbidden.load()));
  std::printf("%-52s %lld datagrams, %lld verified, %lld heard, %lld dropped  %s\n",
              "LAN heartbeats (signed, every agent)", ll(f.datagrams.load()), ll(hb_verified),
              ll(hb_heard), ll(hb_dropped), mark(ok_lan));
  std::printf("%-52s %lld accepted, %lld refused (fenced), %lld proofs refused, %lld step-downs\n",
              "DelegatedLease writes", ll(f.dl_writes.load()), ll(f.dl_refused.load()),
              ll(f.dl_proof_refused.load()), ll(step_downs));
  std::printf("%-52s %lld refused%s, %lld withheld, %lld early rounds\n",
              "honest proofs (refused by rule / withheld by the leader)", ll(honest_refused_total),
              honest_rules.c_str(), ll(withheld), ll(challenge_rounds));
  std::printf("%-52s %d pools; forged writes %lld: %lld accepted, %lld refused on proof, %lld other\n",
              "lying leaders (forge liveness)", lying_pools, ll(forged), ll(forged_accepted),
              ll(forged_refused_proof), ll(forged - forged_accepted - forged_refused_proof));
  std::printf("%-52s %lld writes, %lld taint patches, %lld requests\n",
              "the server's forwarder in the modelled cloud", ll(cloud_model->server_lease_writes()),
              ll(cloud_model->taints_set()), ll(cloud_model->server_requests()));
  std::printf("%-52s %lld\n", "cloud Lease writes whose renewTime did not grow",
              ll(cloud_model->renewals_not_counted()));
  std::printf("%-52s %.1f s\n", "oldest cloud Lease of an alive node (in reach)",
              f.max_alive_age / 1e6);
  std::printf("%-52s %zu, p50 %.1f s, max %.1f s\n", "failovers after leader kills", fo.size(),
              pct(fo, 50), fo.empty() ? 0.0 : fo.back() / 1e6);
  int pending = 0;
  for (auto& p : f.pools) pending += p->kill_at.load() != 0 ? 1 : 0;
  std::printf("%-52s %d\n", "kills without failover (no candidate left)", pending);
  for (size_t g = 0; g < o.graces_s.size(); ++g) {
    std::printf("%-52s %lld whole-pool, %lld no member in reach (apart)\n",
                absl::StrFormat("cloud Leases >= %.0fs old, explained", o.graces_s[g]).c_str(),
                ll(f.wholepool_gaps[g]), ll(f.uncovered_gaps[g]));
    std::printf("%-52s %lld  %s\n",
                absl::StrFormat("false evictions at grace %.0fs (alive, Lease too old)", o.graces_s[g]).c_str(),
                ll(f.false_evictions[g]), mark(f.false_evictions[g] == 0));
  }
  std::printf("%-52s %lld  %s\n", "false liveness (written after death)", ll(f.false_liveness),
              mark(f.false_liveness == 0));
  std::printf("%-52s %lld  %s\n", "false liveness (cloud Lease renewed after death)",
              ll(f.cloud_false_liveness), mark(f.cloud_false_liveness == 0));
  std::printf("%-52s %lld terms acquired, %lld writes checked, %lld of unknown term\n",
              "term ledger (from responses)", ll(terms.terms), ll(terms.writes), ll(terms.unknown_term));
  std::printf("%-52s %lld  %s\n", "  writes in a term acquired by another node", ll(terms.other_term),
              mark(terms.other_term == 0));
  std::printf("%-52s %lld  %s\n", "  one term carried by two writers", ll(terms.shared_term),
              mark(terms.shared_term == 0));
  std::printf("%-52s %lld  %s\n", "  writes in a term older than one acquired", ll(terms.stale_term),
              mark(terms.stale_term == 0));
  std::printf("%-52s %lld  %s\n", "  accepted writes without status.leaderTerm", ll(terms.no_term),
              mark(terms.no_term == 0));
  std::printf("%-52s %lld  %s\n", "  one term returned to two holders", ll(terms.term_conflicts),
              mark(terms.term_conflicts == 0));
  std::printf("%-52s %lld  %s\n", "term violations (total)", ll(terms.violations()), mark(ok_terms));
  std::printf("%-52s %lld  %s\n", "overlapping beliefs in the same term",
              ll(f.same_term_overlaps.load()), mark(ok_overlap));
  std::printf("%-52s %lld, longest %.1f s  (reported)\n", "beliefs overlapping a deposed leader's",
              ll(f.belief_overlaps.load()), f.max_overlap.load() / 1e6);
  std::printf("%-52s %d  %s\n", "pools never led (not cut off)", never_led, mark(ok_led));
  if (terms.unparsed > 0) std::printf("%-52s %lld\n", "unparsable write responses", ll(terms.unparsed));
  for (const auto& s : terms.details) std::printf("term: %s\n", s.c_str());
  for (const auto& s : f.incidents) std::printf("incident: %s\n", s.c_str());
  std::printf("result: %s\n", ok ? "PASS" : "FAIL");
  std::fflush(stdout);

  if (!o.summary_json.empty()) {
    std::string graces;
    for (size_t g = 0; g < o.graces_s.size(); ++g) {
      absl::StrAppend(&graces, g ? "," : "",
                      absl::StrFormat("{\"grace_s\":%.0f,\"false_evictions\":%lld,\"wholepool_gaps\":%lld,"
                                      "\"uncovered_gaps\":%lld}",
                                      o.graces_s[g], ll(f.false_evictions[g]), ll(f.wholepool_gaps[g]),
                                      ll(f.uncovered_gaps[g])));
    }
    std::ofstream js(o.summary_json);
    js << absl::StrFormat(
        "{\"agents\":%d,\"pools\":%d,\"duration_s\":%.0f,\"requests\":%lld,"
        "\"request_errors\":%lld,\"latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f},"
        "\"dl_writes\":%lld,\"dl_refused\":%lld,\"forwarder_lease_writes\":%lld,"
        "\"renewals_not_counted\":%lld,\"max_alive_lease_age_s\":%.3f,\"false_evictions\":%lld,\"graces\":[%s],"
        "\"false_liveness\":%lld,\"cloud_false_liveness\":%lld,\"datagrams\":%lld,"
        "\"heartbeats_verified\":%lld,\"heartbeats_heard\":%lld,\"heartbeats_dropped\":%lld,"
        "\"terms_acquired\":%lld,\"term_writes_checked\":%lld,"
        "\"unknown_term_writes\":%lld,\"term_violations\":%lld,\"other_term_writes\":%lld,"
        "\"shared_term_writes\":%lld,\"stale_term_writes\":%lld,\"no_term_writes\":%lld,"
        "\"term_conflicts\":%lld,\"same_term_overlaps\":%lld,\"belief_overlaps\":%lld,"
        "\"max_overlap_s\":%.3f,\"never_led\":%d,\"kills\":%lld,\"failovers\":%zu,"
        "\"failover_p50_s\":%.3f,\"failover_max_s\":%.3f,\"dead\":%d,\"cut_off\":%d,\"pools_cut\":%d,"
        "\"scheduler_lag_p99_ms\":%.1f,\"dl_proof_refused\":%lld,\"lying_pools\":%d,"
        "\"forged_writes\":%lld,\"forged_accepted\":%lld,\"forged_refused_proof\":%lld,"
        "\"honest_proof_refused\":%lld,\"proofs_withheld\":%lld,\"ok\":%s}\n",
        total, o.pools, o.duration_s, ll(total_requests), ll(f.request_errors.load()), p50, p99, p999,
        ll(f.dl_writes.load()), ll(f.dl_refused.load()), ll(cloud_model->server_lease_writes()),
        ll(cloud_model->renewals_not_counted()), f.max_alive_age / 1e6, ll(false_evictions), graces, ll(f.false_liveness),
        ll(f.cloud_false_liveness), ll(f.datagrams.load()), ll(hb_verified), ll(hb_heard),
        ll(hb_dropped), ll(terms.terms), ll(terms.writes), ll(terms.unknown_term),
        ll(terms.violations()), ll(terms.other_term), ll(terms.shared_term), ll(terms.stale_term),
        ll(terms.no_term), ll(terms.term_conflicts), ll(f.same_term_overlaps.load()),
        ll(f.belief_overlaps.load()), f.max_overlap.load() / 1e6, never_led, ll(f.kills.load()),
        fo.size(), pct(fo, 50), fo.empty() ? 0.0 : fo.back() / 1e6, dead, partitioned, pool_cut,
        f.tick_lag.Percentile(99) / 1e3, ll(f.dl_proof_refused.load()), lying_pools, ll(forged),
        ll(forged_accepted), ll(forged_refused_proof), ll(honest_refused_total), ll(withheld),
        ok ? "true" : "false");
  }
  return ok ? 0 : 1;
}

}  // namespace poolcoord::sim
