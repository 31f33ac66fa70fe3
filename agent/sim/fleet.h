// The integration run's fleet (poolcoord-sim without --deterministic): every
// modelled node runs the real agent core (agent/agent_core.h) with its own
// minted kubelet certificate and skewed clock; the pools' LANs are modelled
// (datagrams handed between the agents' inboxes); the agents talk to a real
// poolcoord-apiserver over HTTPS with their nodes' tokens; the server's
// forwarder writes into the modelled cloud (cloud_model.h), where modelled
// kubelets renew their own Leases; the verdict is the invariant monitors'
// (monitors.h) over what the node lifecycle controller would see there.
//
// Its parts: the adapters from the agent core to the server and the LAN
// (fleet_adapters.cc), the fault schedule (faults.h), the monitors
// (monitors.h) and the scenario that ties them together (fleet.cc).
//
// Time: scheduling and measurement use this machine's steady clock (µs);
// server timestamps (status.observedTime, wall clock) are mapped onto it with
// the wall-minus-steady offset taken at start. Server and simulator share the
// machine, so the two views agree to well under a millisecond.
//
// Thread-safety: a Fleet is shared by the worker threads that tick the agents
// (one tick per agent at a time), the kubelets' thread and the main loop; its
// counters are atomic, its monitors thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_cloud.h"
#include "agent/agent_core.h"
#include "agent/lan_transport.h"
#include "agent/sim/cloud_model.h"
#include "agent/sim/faults.h"
#include "agent/sim/monitors.h"
#include "agent/sim/sim.h"
#include "agent/testing/forging_leader.h"
#include "base/http_transport.h"
#include "cloud/rest_client.h"
#include "election/lease_lock.h"

namespace poolcoord::sim {

struct Fleet;

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
  std::vector<std::string> Challenges() const;

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
  election::LeaseLock* PoolLeaseLock() override { return lock_.get(); }
  std::vector<std::string> PoolChallenges() override { return lock_->Challenges(); }
  void Report(bool answered) { ReportRequest(answered); }

 private:
  absl::StatusOr<base::HttpResponse> Send(const char* method, const std::string& path,
                                          const std::string& body);
  Fleet* fleet_;
  int agent_;
  std::unique_ptr<AgentLock> lock_;
};

struct Agent {
  int id = 0;
  int pool = 0;
  std::string node;
  std::string token;
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
  // When it dies (steady µs; kNever: it does not), moved earlier by a kill.
  std::atomic<int64_t> death_at{kNever};
  std::atomic<bool> alive{true};
  std::atomic<bool> killed{false};  // leader kill: dies at the next tick
  // The term of its last successful PoolLease write (its own tick only), and
  // when it last began to lead (its tick; read by the main loop's kills).
  Term term;
  std::atomic<int64_t> lead_since{0};
};

struct Fleet {
  Fleet(const Options& opts, cloud::RestClient* c, Roster r)
      : o(opts),
        client(c),
        roster(std::move(r)),
        ledger(&roster),
        beliefs(&roster),
        verdict(&roster, opts.graces_s) {}

  const Options& o;
  cloud::RestClient* client;
  CloudModel* cloud_model = nullptr;
  Roster roster;  // before the monitors, which hold it
  FaultPlan plan;
  std::vector<std::unique_ptr<Agent>> agents;
  std::unordered_map<std::string, int> agent_by_node;
  int64_t start = 0, end = 0;
  std::atomic<bool> stopping{false};
  Latencies latency;
  Latencies tick_lag;  // how late agents are ticked: the simulator's own overload
  std::atomic<int64_t> requests{0}, request_errors{0}, conflicts{0}, forbidden{0};
  std::atomic<int64_t> dl_writes{0}, dl_refused{0}, datagrams{0};
  std::atomic<int64_t> dl_proof_refused{0};  // 403 on spec.proof
  std::atomic<int64_t> kills{0};

  // The monitors.
  TermLedger ledger;
  LeaderBeliefs beliefs;
  EvictionVerdict verdict;

  // Scheduler.
  std::mutex q_mu;
  std::condition_variable q_cv;
  std::priority_queue<std::pair<int64_t, int>, std::vector<std::pair<int64_t, int>>,
                      std::greater<>>
      queue;

  // How long a heartbeat is evidence: the agents' freshness bound.
  int64_t Fresh() const { return static_cast<int64_t>((o.heartbeat_interval_s + 2) * 1e6); }
  bool CloudOk(const Agent& a, int64_t now) const { return plan.CloudOk(a.id, a.pool, now); }

  // A request to the server with `a`'s token, counted and timed.
  absl::StatusOr<base::HttpResponse> Request(const Agent& a, const char* method,
                                             const std::string& path, const std::string& body);
  // A datagram for `agent`: into its inbox, and its tick comes at once.
  void Deliver(int agent, absl::string_view datagram);
  // `agent`'s next tick at steady µs `due`.
  void Schedule(int agent, int64_t due);
};

// The summary of a finished run (stdout, and o.summary_json); the exit
// status: 0 when every invariant held, 1 otherwise. `request_timeout_us`: the
// agents' request timeout, part of what a forwarder acting on a live
// delegation may still do after a death.
int ReportFleet(Fleet& f, int64_t request_timeout_us);

}  // namespace poolcoord::sim
