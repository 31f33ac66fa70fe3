// The integration run's scenario (fleet.h): the fleet made from the options
// and the fault plan, its agents ticked by worker threads against the real
// server, the kubelets on a thread of their own, the leader kills and the
// monitors' look once a second from the main loop, then the summary.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/minted_pki.h"
#include "agent/sim/fleet.h"
#include "agent/verification_memo.h"
#include "election/pool_lease_lock.h"

namespace poolcoord::sim {
namespace {

constexpr int64_t kSec = 1'000'000;

int64_t S(double seconds) { return static_cast<int64_t>(seconds * 1e6); }

void Die(Fleet& f, Agent& a, int64_t now) {
  a.alive = false;
  if (a.death_at.load() > now) a.death_at = now;
  f.beliefs.Stopped(a.id, now);
}

// One tick of one agent: its inbox, its cloud side when due, its LAN side;
// its beliefs to the monitor. Returns when it wants the next (kNever: never).
int64_t Tick(Fleet& f, Agent& a) {
  const int64_t now = MonoMicros();
  if (!a.alive) return kNever;
  if (a.killed || now >= a.death_at) {
    Die(f, a, now);
    return kNever;
  }
  if (now >= f.end) return kNever;
  a.wake_pending = false;
  std::vector<std::string> inbox;
  {
    absl::MutexLock l(&a.inbox_mu);
    inbox.swap(a.inbox);
  }
  for (const std::string& d : inbox) a.core->OnDatagram(d);
  if (now >= a.cloud_due) a.cloud_due = a.core->CloudStep();
  a.lan_due = a.core->LanStep();
  // Beliefs are judged by term (monitors.h LeaderBeliefs): a deposed leader
  // ticked late may still believe while its successor leads a newer term.
  const bool leading = a.core->leading();
  if (leading && !f.beliefs.Believes(a.id)) {
    const int64_t t = MonoMicros();
    a.lead_since = t;
    f.beliefs.Started(a.id, a.term, t);
  } else if (!leading) {
    f.beliefs.Stopped(a.id, MonoMicros());
  }
  int64_t next = std::min({a.lan_due, a.cloud_due, a.death_at.load(), f.end});
  {
    absl::MutexLock l(&a.inbox_mu);
    if (!a.inbox.empty()) next = MonoMicros();
  }
  return next;
}

void Worker(Fleet& f) {
  std::unique_lock<std::mutex> l(f.q_mu);
  while (!f.stopping) {
    if (f.queue.empty()) {
      f.q_cv.wait_for(l, std::chrono::milliseconds(100));
      continue;
    }
    auto [due, id] = f.queue.top();
    const int64_t now = MonoMicros();
    if (due > now) {
      f.q_cv.wait_for(l, std::chrono::microseconds(std::min<int64_t>(due - now, 100'000)));
      continue;
    }
    f.queue.pop();
    l.unlock();
    Agent& a = *f.agents[id];
    // An agent is ticked by one worker at a time; a wake-up that finds it
    // busy is taken by the running tick (it looks at the inbox at its end).
    std::unique_lock<std::mutex> busy(a.tick_mu, std::try_to_lock);
    if (busy.owns_lock()) {
      f.tick_lag.Add(now - due);
      const int64_t next = Tick(f, a);
      busy.unlock();
      l.lock();
      if (next != kNever) f.queue.emplace(next, id);
    } else {
      l.lock();
    }
  }
}

// The kubelets, on a thread of their own (so an overloaded simulator delays
// its agents, as a starved edge node would, but never the cloud's view of a
// connected node): each alive node whose link is up renews its own Lease
// every kubelet interval, on its own (skewed) clock.
void Kubelets(Fleet& f) {
  while (!f.stopping) {
    const int64_t now = MonoMicros();
    int64_t next = now + 100'000;
    for (auto& ap : f.agents) {
      Agent& a = *ap;
      if (!a.alive || a.killed || now >= a.death_at.load()) continue;
      if (now >= a.next_kubelet) {
        if (f.CloudOk(a, now)) f.cloud_model->KubeletRenew(a.node, a.clock->NowMicros());
        a.next_kubelet += S(f.o.kubelet_interval_s);
      }
      next = std::min(next, a.next_kubelet);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(std::max<int64_t>(1000, next - MonoMicros())));
  }
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

// Every node's kubelet client certificate (ECDSA P-256, as kubelets make
// them) from one cluster CA (RSA 2048, as kubeadm makes it).
absl::StatusOr<std::vector<std::shared_ptr<const agent::NodeIdentity>>> MintIdentities(
    const Options& o, const Roster& roster, const agent::MintedKeyPair& ca) {
  const int total = static_cast<int>(roster.nodes.size());
  std::vector<std::shared_ptr<const agent::NodeIdentity>> identities(total);
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> minters;
  for (int t = 0; t < 2; ++t) {
    minters.emplace_back([&] {
      for (int i; (i = next++) < total;) {
        auto pair = agent::MintNodeCertificate(ca, roster.nodes[i]);
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
    return absl::InternalError(absl::StrCat(failed.load(), " node certificates could not be minted"));
  }
  return identities;
}

}  // namespace

void Fleet::Schedule(int agent, int64_t due) {
  {
    std::lock_guard<std::mutex> l(q_mu);
    queue.emplace(due, agent);
  }
  q_cv.notify_one();
}

void Fleet::Deliver(int agent, absl::string_view datagram) {
  Agent& a = *agents[agent];
  if (!a.alive) return;
  {
    absl::MutexLock l(&a.inbox_mu);
    a.inbox.emplace_back(datagram.data(), datagram.size());
  }
  datagrams++;
  if (!a.wake_pending.exchange(true)) Schedule(agent, MonoMicros());
}

namespace {
Roster FleetRoster(const Options& o) {
  Roster roster;
  for (int p = 0; p < o.pools; ++p) {
    roster.pools.push_back(PoolName(p));
    roster.members.emplace_back();
    for (int n = 0; n < o.nodes_per_pool; ++n) {
      roster.members.back().push_back(static_cast<int>(roster.nodes.size()));
      roster.nodes.push_back(NodeName(p, n));
      roster.pool_of.push_back(p);
    }
  }
  return roster;
}
}  // namespace

int RunFleet(const Options& o, cloud::RestClient* client, CloudModel* cloud_model) {
  Fleet f(o, client, FleetRoster(o));
  f.cloud_model = cloud_model;
  if (o.extra_objects > 0) CreateExtraObjects(f);
  const int total = static_cast<int>(f.roster.nodes.size());
  const int64_t mint_start = MonoMicros();
  auto ca = ReadClusterCa(o);
  if (!ca.ok()) {
    std::cerr << "the cluster CA: " << ca.status() << "\n";
    return 2;
  }
  auto authority = agent::CertificateAuthority::FromPem(ca->cert_pem);
  if (!authority.ok()) return 2;
  auto identities = MintIdentities(o, f.roster, *ca);
  if (!identities.ok()) {
    std::cerr << identities.status() << "\n";
    return 2;
  }
  std::cerr << absl::StrFormat("minted %d node certificates in %.1fs\n", total,
                               (MonoMicros() - mint_start) / 1e6);

  Rng rng(o.seed);
  f.start = f.roster.start = MonoMicros();
  f.end = f.start + S(o.duration_s);
  f.plan = DrawFaults(o, f.roster, f.start, rng.Split(2), rng.Split(5));
  Rng setup = rng.Split(1);
  Rng kills = rng.Split(6);
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
  f.agents.reserve(total);
  for (int p = 0; p < o.pools; ++p) {
    auto view = std::make_shared<agent::PoolView>();
    view->pool = f.roster.pools[p];
    for (int id : f.roster.members[p]) view->members[f.roster.nodes[id]] = f.roster.nodes[id];
    for (int id : f.roster.members[p]) {
      auto a = std::make_unique<Agent>();
      a->id = id;
      a->pool = p;
      a->node = f.roster.nodes[id];
      a->token = TokenFor(o, "system:node:" + a->node);
      a->clock = std::make_unique<SkewedClock>(f.plan.nodes[id].skew_us);
      a->death_at = f.plan.nodes[id].death;
      a->lan = std::make_unique<SimLan>(&f, a->id);
      a->cloud = std::make_unique<SimCloud>(&f, a->id,
                                            std::make_unique<AgentLock>(&f, a->id, view->pool, a->node));
      agent::AgentOptions mine = options;
      mine.jitter_seed = o.seed * 1'000'003 + a->id + 1;
      if (f.plan.pools[p].lying) {
        a->forger = std::make_shared<agent::ForgingLeader>(*authority, S(o.heartbeat_interval_s));
        mine.forger = a->forger;
      }
      auto core = agent::AgentCore::New((*identities)[id], *authority, a->clock.get(), a->lan.get(),
                                        a->cloud.get(), mine);
      if (!core.ok()) {
        std::cerr << "agent " << a->node << ": " << core.status() << "\n";
        return 2;
      }
      a->core = *std::move(core);
      auto own = std::make_shared<agent::PoolView>(*view);
      own->self = a->node;
      a->core->SetPool(own);
      // Spread the kubelets' renewals and the agents' first steps (over one
      // heartbeat interval, not all at once).
      a->next_kubelet = f.start + S(setup.Uniform() * o.kubelet_interval_s);
      a->cloud_due = a->lan_due = f.start + S(setup.Uniform() * o.heartbeat_interval_s);
      f.agent_by_node[a->node] = a->id;
      f.agents.push_back(std::move(a));
    }
  }
  // The kubelets were all running before the agents: every node's Lease exists.
  for (auto& a : f.agents) cloud_model->KubeletRenew(a->node, a->clock->NowMicros());
  std::cerr << absl::StrFormat(
      "fleet: %d pools x %d nodes = %d agents (the agent core), %.0fs (warm-up %.0fs), lease "
      "%.0f/%.0f/%.0fs, heartbeats every %.0fs, kubelets every %.0fs, %d workers\n",
      o.pools, o.nodes_per_pool, total, o.duration_s, (f.plan.warmup - f.start) / 1e6,
      o.lease_duration_s, o.renew_deadline_s, o.retry_period_s, o.heartbeat_interval_s,
      o.kubelet_interval_s, o.workers);

  for (auto& a : f.agents) f.Schedule(a->id, a->cloud_due);
  std::vector<std::thread> workers;
  for (int i = 0; i < o.workers; ++i) workers.emplace_back([&] { Worker(f); });
  std::thread kubelets([&] { Kubelets(f); });

  // Main loop: leader kills, the cloud Lease verdict, progress. The
  // integration run's kills take any sole leader (its runs are short: a kill
  // needs no tenure, unlike the deterministic mode's, KillTenure).
  const std::vector<int64_t> kill_times = f.plan.KillTimes(o);
  size_t next_kill = 0;
  int64_t last_requests = 0;
  for (int64_t tick = f.start + kSec; tick <= f.end; tick += kSec) {
    std::this_thread::sleep_for(std::chrono::microseconds(std::max<int64_t>(0, tick - MonoMicros())));
    const int64_t now = MonoMicros();
    if (next_kill < kill_times.size() && now >= kill_times[next_kill]) {
      ++next_kill;
      std::vector<int> leaders;
      for (auto& a : f.agents) {
        if (a->alive && f.beliefs.Believes(a->id) &&
            MayKill(now, a->lead_since.load(), f.plan.PoolCut(a->pool, now),
                    f.beliefs.Believers(a->pool), /*min_tenure_us=*/0)) {
          leaders.push_back(a->id);
        }
      }
      if (!leaders.empty()) {
        Agent& victim = *f.agents[leaders[kills.UniformInt(0, static_cast<int64_t>(leaders.size()) - 1)]];
        f.beliefs.NoteKill(victim.pool, now);
        victim.death_at = now;
        victim.killed = true;
        f.kills++;
      }
    }
    f.verdict.Look(
        now,
        [&](int id) {
          const Agent& a = *f.agents[id];
          return EvictionVerdict::NodeLook{a.alive.load(), f.CloudOk(a, now),
                                           cloud_model->LastChange(a.node)};
        },
        [&](int pool) { return std::make_pair(f.plan.pools[pool].cut_from, f.plan.pools[pool].cut_until); });
    int alive = 0, cut = 0, led = 0;
    for (auto& a : f.agents) {
      if (a->alive) {
        ++alive;
        if (!f.CloudOk(*a, now)) ++cut;
      }
    }
    for (int p = 0; p < o.pools; ++p) led += f.beliefs.Believers(p) > 0 ? 1 : 0;
    const int64_t reqs = f.requests.load();
    int64_t fe = 0;
    for (int64_t x : f.verdict.false_evictions()) fe += x;
    const std::vector<int64_t> failovers = f.beliefs.failovers();
    const int64_t maxfail = failovers.empty() ? 0 : *std::max_element(failovers.begin(), failovers.end());
    std::fprintf(stderr,
                 "[%4.0fs] alive %d/%d cut %d | pools led %d/%d | %lld req/s p99 %.1fms err %lld | "
                 "lag p99 %.0fms | dl writes %lld | forwarder writes %lld | oldest cloud Lease %.1fs "
                 "false-evict %lld | belief overlap %lld (same term %lld) | failovers %zu max %.1fs\n",
                 f.roster.Rel(now), alive, total, cut, led, o.pools,
                 static_cast<long long>(reqs - last_requests), f.latency.Percentile(99) / 1e3,
                 static_cast<long long>(f.request_errors.load()), f.tick_lag.Percentile(99) / 1e3,
                 static_cast<long long>(f.dl_writes.load()),
                 static_cast<long long>(cloud_model->server_lease_writes()),
                 f.verdict.max_alive_age_us() / 1e6, static_cast<long long>(fe),
                 static_cast<long long>(f.beliefs.overlaps()),
                 static_cast<long long>(f.beliefs.same_term_overlaps()), failovers.size(), maxfail / 1e6);
    last_requests = reqs;
  }
  f.stopping = true;
  f.q_cv.notify_all();
  for (auto& w : workers) w.join();
  kubelets.join();
  for (auto& a : f.agents) {
    if (a->alive) a->core->Shutdown();
  }
  return ReportFleet(f, request_timeout);
}

}  // namespace poolcoord::sim
