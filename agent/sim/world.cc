// The deterministic mode: adapters from the agent core to the in-process
// server and LAN, the fault schedule, the run and its verdict (world.h).
#include "agent/sim/world.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_core.h"
#include "agent/kube_agent_cloud.h"
#include "agent/minted_pki.h"
#include "agent/sim/cloud_model.h"
#include "agent/sim/faults.h"
#include "agent/sim/monitors.h"
#include "agent/sim/scheduler.h"
#include "agent/sim/server_model.h"
#include "agent/testing/forging_leader.h"
#include "agent/verification_memo.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "election/lease_marks.h"
#include "election/pool_lease_lock.h"
#include "store/memory_store.h"

namespace poolcoord::sim {
namespace {

constexpr int64_t kSec = 1'000'000;
int64_t Us(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e6)); }
// The simulated wall clock starts at 2026-01-01T00:00:00Z on every run.
constexpr int64_t kStartWallUs = 1'767'225'600LL * kSec;

// The node identities for `total` nodes: one in `real_every` signs for real,
// the others by model. Minted once per process and size (the certificates'
// bytes differ between processes; nothing in the history depends on them).
struct Pki {
  std::shared_ptr<const agent::CertificateAuthority> authority;
  std::vector<std::shared_ptr<const agent::NodeIdentity>> identities;
};

absl::StatusOr<std::shared_ptr<const Pki>> PkiFor(const std::vector<std::string>& nodes,
                                                  int real_every) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* cache = new std::map<std::pair<std::vector<std::string>, int>, std::shared_ptr<const Pki>>();
  absl::MutexLock l(&mu);
  auto key = std::make_pair(nodes, real_every);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  agent::MintOptions validity;
  validity.not_before_us = kStartWallUs - 24 * 3600 * kSec;
  validity.not_after_us = kStartWallUs + 400LL * 24 * 3600 * kSec;
  validity.is_ca = true;
  validity.extended_key_usage = "";
  auto ca = agent::MintCertificateAuthority("poolcoord-sim cluster CA", validity);
  if (!ca.ok()) return ca.status();
  auto pki = std::make_shared<Pki>();
  election::CertificateAuthorityOptions ca_options;
  ca_options.modelled_signatures = true;
  auto authority = agent::CertificateAuthority::FromPem(ca->cert_pem, ca_options);
  if (!authority.ok()) return authority.status();
  pki->authority = *authority;
  for (size_t i = 0; i < nodes.size(); ++i) {
    agent::MintOptions leaf = validity;
    leaf.is_ca = false;
    leaf.extended_key_usage = "clientAuth";
    leaf.common_name = election::kNodeUserPrefix + nodes[i];
    leaf.organizations = {election::kNodesGroup};
    const bool real = real_every > 0 && i % static_cast<size_t>(real_every) == 0;
    if (!real) leaf.organizations.push_back(election::kModelledSignatureOrganization);
    auto pair = agent::MintCertificate(*ca, leaf);
    if (!pair.ok()) return pair.status();
    auto id = agent::NodeIdentity::FromPem(pair->cert_pem, pair->key_pem);
    if (!id.ok()) return id.status();
    pki->identities.push_back(std::move(*id));
  }
  cache->emplace(std::move(key), pki);
  return std::shared_ptr<const Pki>(pki);
}

// The run's history: every event that changes or observes shared state, one
// line each, hashed as it goes (and written out when asked).
class History {
 public:
  explicit History(const std::string& path) : ctx_(EVP_MD_CTX_new()) {
    EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
    if (!path.empty()) out_.open(path);
  }
  ~History() { EVP_MD_CTX_free(ctx_); }
  void Add(int64_t t, std::string_view line) {
    char head[24];
    const int n = std::snprintf(head, sizeof head, "%lld ", static_cast<long long>(t));
    EVP_DigestUpdate(ctx_, head, static_cast<size_t>(n));
    EVP_DigestUpdate(ctx_, line.data(), line.size());
    EVP_DigestUpdate(ctx_, "\n", 1);
    ++lines_;
    if (out_.is_open()) out_ << head << line << '\n';
  }
  std::string Digest() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    std::string hex;
    for (unsigned int i = 0; i < len; ++i) absl::StrAppendFormat(&hex, "%02x", md[i]);
    return hex;
  }
  int64_t lines() const { return lines_; }

 private:
  EVP_MD_CTX* ctx_;
  std::ofstream out_;
  int64_t lines_ = 0;
};

struct World;

// The cloud as one agent reaches it: its own node Lease from the modelled
// kube-apiserver, the PoolLease and DelegatedLeases from the server model
// (as the node's identity), nothing while it is cut off, 503 while the server
// restarts. The PoolLease lock speaks the requests election::PoolLeaseLock
// speaks; the term ledger gets every successful write's answer.
class AgentApi : public agent::AgentCloud, public election::LeaseLock {
 public:
  AgentApi(World* world, int node, std::string name, std::string pool)
      : world_(world), node_(node), name_(std::move(name)), pool_(std::move(pool)) {}
  absl::StatusOr<agent::NodeLeaseObservation> ReadNodeLease(const std::string& node) override;
  absl::StatusOr<std::string> ReadDelegatedLease(const std::string& node) override;
  absl::StatusOr<std::string> WriteDelegatedLease(const agent::DelegatedLeaseWrite& w) override;
  absl::Status DeleteDelegatedLease(const std::string& node, const std::string& rv) override;
  election::LeaseLock* PoolLeaseLock() override { return this; }
  std::vector<std::string> PoolChallenges() override;

  absl::StatusOr<election::VersionedRecord> Get() override;
  absl::StatusOr<std::string> Create(const election::LeaderElectionRecord& r) override;
  absl::StatusOr<std::string> Update(const election::LeaderElectionRecord& r,
                                     const std::string& v) override;
  std::string Identity() const override;
  std::string Describe() const override;

 private:
  // OK when the request reaches kube-apiserver (and, `server`, poolcoord).
  absl::Status Reach(bool server, const char* what);
  absl::StatusOr<std::string> Written(const char* op, absl::StatusOr<std::string> body);
  World* world_;
  int node_;
  const std::string name_, pool_;
  std::string last_json_;  // the PoolLease last read or written
};

// The pool LAN as one node sends on it (addresses are node names).
class Lan : public agent::LanTransport {
 public:
  Lan(World* world, int node) : world_(world), node_(node) {}
  absl::Status Send(const std::string& address, absl::string_view datagram) override;

 private:
  World* world_;
  int node_;
};

struct Node {
  int id = 0;
  int pool = 0;
  std::string name;
  std::unique_ptr<NodeClock> clock;
  std::unique_ptr<Lan> lan;
  std::unique_ptr<AgentApi> api;
  std::unique_ptr<agent::AgentCore> core;
  std::shared_ptr<agent::ForgingLeader> forger;
  bool alive = true;
  int64_t death = kNever;  // when it died (kNever: alive)
  int64_t lan_due = 0, cloud_due = 0;
  int64_t wake_at = kNever;
  uint64_t wake_gen = 0;
  Term term;  // of its last successful PoolLease write
  int64_t lead_since = 0;  // when it last began leading
};

struct World {
  const Options& o;
  Scheduler sched;
  FaultPlan plan;
  Rng lan_rng;
  Rng server_rng;
  History history;
  Roster roster;
  std::unordered_map<std::string, int> node_by_name;
  std::vector<std::unique_ptr<Node>> nodes;
  std::shared_ptr<const Pki> pki;
  agent::VerificationMemo memo;
  std::unique_ptr<CloudModel> cloud;
  // The store the server restarts on with --server-restart-keeps-objects.
  std::shared_ptr<store::Store> persistent;
  std::unique_ptr<ServerModel> server;  // null while it restarts
  uint64_t server_epoch = 0;
  int64_t server_wake_at = kNever;
  uint64_t server_wake_gen = 0;
  TermLedger ledger{&roster};
  std::unique_ptr<LeaderBeliefs> beliefs_;  // made once the roster is
  LeaderBeliefs& beliefs() { return *beliefs_; }
  std::unique_ptr<EvictionVerdict> verdict;
  int64_t start = 0, end = 0, warmup = 0;
  // Counts.
  int64_t requests = 0, refused = 0, unavailable = 0, conflicts = 0, proof_refused = 0;
  int64_t dl_writes = 0, real_proofs = 0, datagrams = 0, lost = 0, duplicated = 0, kills = 0, restarts = 0,
          jumps = 0;

  World(const Options& opts, uint64_t seed)
      : o(opts),
        sched(seed, kStartWallUs),
        lan_rng(sched.rng().Split(3)),
        server_rng(sched.rng().Split(4)),
        history(opts.history_file) {}

  int64_t now() const { return sched.now(); }
  void Log(std::string_view line) { history.Add(now() - start, line); }
  int64_t Fresh() const { return Us(o.heartbeat_interval_s + 2); }

  bool CloudOk(const Node& n, int64_t t) const { return plan.CloudOk(n.id, n.pool, t); }

  // --- the server
  absl::Status StartServer() {
    ServerModelOptions so;
    so.clock = sched.clock();
    for (size_t p = 0; p < roster.pools.size(); ++p) {
      auto& members = so.pools[roster.pools[p]];
      for (int id : roster.members[p]) members.push_back(roster.nodes[id]);
    }
    so.client_ca = pki->authority;
    so.proofs.mode = election::ProofMode::kRequired;
    Rng* rng = &server_rng;
    so.proofs.random_bytes = [rng](unsigned char* bytes, size_t n) { rng->Fill(bytes, n); };
    so.cloud = {cloud->NodeLeases(), cloud->Nodes(), cloud->Events()};
    if (o.server_restart_keeps_objects) {
      if (persistent == nullptr) {
        store::MemoryStoreOptions memory;
        memory.clock = sched.clock();
        persistent = store::NewMemoryStore(memory);
      }
      so.store = persistent;
    }
    auto m = ServerModel::Start(std::move(so));
    if (!m.ok()) return m.status();
    server = *std::move(m);
    ++server_epoch;
    server_wake_at = kNever;
    WakeServer(now());
    return absl::OkStatus();
  }

  // The server's next step at `at` (earlier wins).
  void WakeServer(int64_t at) {
    if (server == nullptr || at >= server_wake_at) return;
    server_wake_at = at;
    const uint64_t gen = ++server_wake_gen;
    sched.At(at, [this, gen] {
      if (gen != server_wake_gen || server == nullptr) return;
      server_wake_at = kNever;
      ServerStep();
    });
  }
  // What the watch cache and the forwarder have to do now.
  void ServerStep() {
    server->Dispatch();
    server->Forward();
    server->Dispatch();
    const int64_t next = server->NextForwardDue();
    if (next != kNever && next < end) WakeServer(std::max(next, now() + 1));
  }
  // After a write: the watch carries its event a moment later.
  void AfterWrite() { WakeServer(now() + sched.rng().UniformInt(0, 2000)); }

  // A Lease the modelled kube-apiserver stored: the forwarder's informer of
  // marked Leases hears of it after a watch delay (leaving the selection is a
  // DELETED event, as a label-selected watch gives).
  void OnCloudLease(const cloud::Lease& lease) {
    const auto label = lease.metadata.labels.find(election::kDelegatedLabel);
    const bool marked = label != lease.metadata.labels.end() && label->second == "true";
    Log(absl::StrCat("cloud lease ", lease.metadata.name, " ", lease.metadata.resource_version, " ",
                     lease.spec.renew_time_us ? *lease.spec.renew_time_us - kStartWallUs : 0,
                     marked ? " marked" : ""));
    const uint64_t epoch = server_epoch;
    sched.After(sched.rng().UniformInt(1000, 20000), [this, lease, marked, epoch] {
      if (server == nullptr || epoch != server_epoch) return;
      server->ObserveCloudLease({marked ? "MODIFIED" : "DELETED", lease});
      WakeServer(now());
    });
  }

  // --- the agents
  void Wake(Node& n, int64_t at) {
    if (!n.alive || at >= n.wake_at) return;
    n.wake_at = at;
    const uint64_t gen = ++n.wake_gen;
    Node* np = &n;
    sched.At(at, [this, np, gen] {
      if (gen != np->wake_gen) return;
      np->wake_at = kNever;
      Tick(*np);
    });
  }
  void Tick(Node& n) {
    if (!n.alive) return;
    const int64_t t = now();
    if (t >= n.cloud_due) n.cloud_due = n.core->CloudStep();
    n.lan_due = n.core->LanStep();
    const bool leading = n.core->leading();
    if (leading && !beliefs().Believes(n.id)) {
      beliefs().Started(n.id, n.term, t);
      n.lead_since = t;
      Log(absl::StrCat(n.name, " leads ", n.term.ToString()));
    } else if (!leading && beliefs().Believes(n.id)) {
      beliefs().Stopped(n.id, t);
      Log(absl::StrCat(n.name, " stops leading"));
    }
    const int64_t next = std::min(n.lan_due, n.cloud_due);
    if (next < end) Wake(n, std::max(next, t + 1));
  }
  void Die(Node& n, const char* why) {
    if (!n.alive) return;
    n.alive = false;
    n.death = std::min(n.death, now());
    ++n.wake_gen;
    if (beliefs().Believes(n.id)) beliefs().Stopped(n.id, now());
    Log(absl::StrCat(n.name, " dies (", why, ")"));
  }
  void Deliver(int from, int to, std::string datagram) {
    Node& n = *nodes[to];
    if (!n.alive) return;
    ++datagrams;
    Log(absl::StrCat("lan ", nodes[from]->name, ">", n.name));
    n.core->OnDatagram(datagram);
    Wake(n, now());
  }
  void Kubelet(Node& n) {
    if (!n.alive) return;
    if (CloudOk(n, now())) {
      cloud->KubeletRenew(n.name, n.clock->NowMicros());
      Log(absl::StrCat("kubelet ", n.name));
    }
    const int64_t next = now() + Us(o.kubelet_interval_s);
    if (next < end) sched.At(next, [this, &n] { Kubelet(n); });
  }

  // --- monitors
  // Once a second: what the node lifecycle controller would make of the cloud.
  void CheckLeases() {
    const int64_t t = now();
    auto unknown = verdict->Look(
        t,
        [&](int id) {
          const Node& n = *nodes[id];
          return EvictionVerdict::NodeLook{n.alive, CloudOk(n, t), cloud->LastChange(n.name)};
        },
        [&](int pool) { return std::make_pair(plan.pools[pool].cut_from, plan.pools[pool].cut_until); });
    for (const auto& [id, g] : unknown) {
      Log(absl::StrFormat("unknown %s grace %.0f", nodes[id]->name, o.graces_s[g]));
    }
  }

  // --- the faults, from the plan (the kills' victims from the run's stream)
  void ScheduleFaults() {
    for (size_t p = 0; p < plan.pools.size(); ++p) {
      const PoolFaults& f = plan.pools[p];
      if (f.cut_from != kNever) {
        Log(absl::StrFormat("fault pool-cut %s %d+%d", roster.pools[p], f.cut_from - start,
                            f.cut_until - f.cut_from));
      }
    }
    for (auto& np : nodes) {
      Node& n = *np;
      const NodeFaults& f = plan.nodes[n.id];
      if (f.death != kNever) {
        sched.At(f.death, [this, &n] { Die(n, "dead"); });
        Log(absl::StrFormat("fault death %s %d", n.name, f.death - start));
      }
      if (f.cut_from != kNever) {
        Log(absl::StrFormat("fault cut %s %d+%d", n.name, f.cut_from - start, f.cut_until - f.cut_from));
      }
      if (f.step_at != kNever) {
        sched.At(f.step_at, [this, &n, step = f.step_us] {
          n.clock->Step(step);
          ++jumps;
          Log(absl::StrFormat("clock %s steps %d", n.name, step));
        });
      }
    }
    for (int64_t t : plan.KillTimes(o)) sched.At(t, [this] { KillALeader(); });
    if (o.server_restart_interval_s > 0) {
      const double max_grace = *std::max_element(o.graces_s.begin(), o.graces_s.end());
      for (int64_t t = warmup; t + Us(o.server_down_s) < end - Us(max_grace);
           t += Us(o.server_restart_interval_s)) {
        sched.At(t, [this] { RestartServer(); });
      }
    }
  }
  void KillALeader() {
    const int64_t t = now();
    std::vector<int> leaders;
    for (auto& np : nodes) {
      const Node& n = *np;
      if (n.alive && beliefs().Believes(n.id) &&
          MayKill(t, n.lead_since, plan.PoolCut(n.pool, t), beliefs().Believers(n.pool),
                  KillTenure(o))) {
        leaders.push_back(n.id);
      }
    }
    if (leaders.empty()) return;
    Node& victim = *nodes[leaders[sched.rng().UniformInt(0, static_cast<int64_t>(leaders.size()) - 1)]];
    ++kills;
    Die(victim, "leader killed");
    beliefs().NoteKill(victim.pool, t);
  }
  void RestartServer() {
    if (server == nullptr) return;
    ++restarts;
    Log("server stops");
    server.reset();
    sched.After(Us(o.server_down_s), [this] {
      if (absl::Status s = StartServer(); !s.ok()) {
        Log(absl::StrCat("server start failed: ", s.ToString()));
        return;
      }
      Log("server starts");
    });
  }
};

// ------------------------------------------------------------- adapters --

absl::Status AgentApi::Reach(bool to_server, const char* what) {
  World& w = *world_;
  const Node& n = *w.nodes[node_];
  ++w.requests;
  if (!n.alive || !w.CloudOk(n, w.now())) {
    ReportRequest(false);
    ++w.unavailable;
    return absl::UnavailableError(absl::StrCat(what, ": cut off from the cloud"));
  }
  ReportRequest(true);
  if (to_server && w.server == nullptr) {
    ++w.unavailable;
    w.Log(absl::StrCat(n.name, " ", what, " 503"));
    return cloud::ApiError(503, "ServiceUnavailable",
                           "the server is currently unable to handle the request", {});
  }
  return absl::OkStatus();
}

std::string AgentApi::Identity() const { return name_; }
std::string AgentApi::Describe() const { return "poolleases/" + pool_; }

absl::StatusOr<agent::NodeLeaseObservation> AgentApi::ReadNodeLease(const std::string& node) {
  if (absl::Status s = Reach(false, "read node lease"); !s.ok()) return s;
  auto lease = world_->cloud->GetLease(node);
  if (!lease.ok()) return lease.status();
  return agent::ObserveNodeLease(*lease);
}

// One line of the history for an answer: its code, or the stored resourceVersion.
std::string Outcome(const absl::StatusOr<std::string>& r) {
  if (r.ok()) {
    auto rv = agent::ResourceVersionOf(*r);
    return absl::StrCat("ok ", rv.ok() ? *rv : "?");
  }
  return absl::StrCat(cloud::CodeOf(r.status()));
}

absl::StatusOr<std::string> AgentApi::ReadDelegatedLease(const std::string& node) {
  if (absl::Status s = Reach(true, "get dl"); !s.ok()) return s;
  World& w = *world_;
  auto r = w.server->Get(store::Kind::kDelegatedLease, node);
  w.Log(absl::StrCat(w.nodes[node_]->name, " get dl ", node, " ", Outcome(r)));
  if (!r.ok()) return r.status();
  return agent::ResourceVersionOf(*r);
}

absl::StatusOr<std::string> AgentApi::WriteDelegatedLease(const agent::DelegatedLeaseWrite& dw) {
  if (absl::Status s = Reach(true, "write dl"); !s.ok()) return s;
  World& w = *world_;
  const Node& n = *w.nodes[node_];
  const std::string body = agent::EncodeDelegatedLease(dw);
  const base::UserInfo user = NodeUser(n.name);
  auto r = dw.resource_version.empty()
               ? w.server->Create(user, store::Kind::kDelegatedLease, body)
               : w.server->Update(user, store::Kind::kDelegatedLease, dw.node, body);
  w.Log(absl::StrCat(n.name, " write dl ", dw.node, " ", Outcome(r)));
  w.AfterWrite();
  if (!r.ok()) {
    if (cloud::IsConflict(r.status())) ++w.conflicts;
    if (cloud::IsForbidden(r.status())) {
      ++(cloud::HasCauseField(r.status(), "spec.proof") ? w.proof_refused : w.refused);
    }
    return r.status();
  }
  ++w.dl_writes;
  // The sample that signs for real: its proof passed the server's real verifier.
  if (dw.evidence != nullptr && agent::SendsProof(*dw.evidence) && !dw.evidence->certificate->modelled()) {
    ++w.real_proofs;
  }
  if (auto member = w.node_by_name.find(dw.node); member != w.node_by_name.end()) {
    w.ledger.RecordDelegatedWrite(n.id, member->second, w.now(), w.now(),
                                  dw.evidence ? dw.evidence->arrival_mono_us : 0, *r);
  }
  return agent::ResourceVersionOf(*r);
}

absl::Status AgentApi::DeleteDelegatedLease(const std::string& node, const std::string& rv) {
  if (absl::Status s = Reach(true, "delete dl"); !s.ok()) return s;
  World& w = *world_;
  absl::Status s = w.server->Delete(NodeUser(w.nodes[node_]->name), store::Kind::kDelegatedLease,
                                    node, rv);
  w.Log(absl::StrCat(w.nodes[node_]->name, " delete dl ", node, " ", cloud::CodeOf(s)));
  w.AfterWrite();
  return s;
}

std::vector<std::string> AgentApi::PoolChallenges() {
  std::vector<std::string> out;
  auto lease = cloud::DecodeLease(last_json_);
  if (lease.ok()) {
    for (const auto& c : lease->delegation.challenges) out.push_back(c.value);
  }
  return out;
}

absl::StatusOr<election::VersionedRecord> AgentApi::Get() {
  if (absl::Status s = Reach(true, "get pl"); !s.ok()) return s;
  World& w = *world_;
  auto r = w.server->Get(store::Kind::kPoolLease, w.roster.pools[w.nodes[node_]->pool]);
  w.Log(absl::StrCat(w.nodes[node_]->name, " get pl ", Outcome(r)));
  if (!r.ok()) return r.status();
  auto rec = election::ParseLeaseRecord(*r);
  if (!rec.ok()) return rec.status();
  last_json_ = *std::move(r);
  return rec;
}

absl::StatusOr<std::string> AgentApi::Written(const char* op, absl::StatusOr<std::string> r) {
  World& w = *world_;
  Node& n = *w.nodes[node_];
  w.Log(absl::StrCat(n.name, " ", op, " pl ", Outcome(r)));
  w.AfterWrite();
  if (!r.ok()) {
    if (cloud::IsConflict(r.status())) ++w.conflicts;
    return r.status();
  }
  if (std::optional<Term> t = w.ledger.RecordLeaseWrite(n.id, *r, w.now())) n.term = *t;
  auto rec = election::ParseLeaseRecord(*r);
  if (!rec.ok()) return rec.status();
  last_json_ = *std::move(r);
  return rec->version;
}

absl::StatusOr<std::string> AgentApi::Create(const election::LeaderElectionRecord& r) {
  if (absl::Status s = Reach(true, "create pl"); !s.ok()) return s;
  World& w = *world_;
  const Node& n = *w.nodes[node_];
  const std::string& pool = w.roster.pools[n.pool];
  return Written("create", w.server->Create(NodeUser(n.name), store::Kind::kPoolLease,
                                            election::EncodePoolLease("", pool, r, "")));
}

absl::StatusOr<std::string> AgentApi::Update(const election::LeaderElectionRecord& r,
                                             const std::string& v) {
  if (absl::Status s = Reach(true, "update pl"); !s.ok()) return s;
  World& w = *world_;
  const Node& n = *w.nodes[node_];
  const std::string& pool = w.roster.pools[n.pool];
  return Written("update", w.server->Update(NodeUser(n.name), store::Kind::kPoolLease, pool,
                                            election::EncodePoolLease(last_json_, pool, r, v)));
}

absl::Status Lan::Send(const std::string& address, absl::string_view datagram) {
  World& w = *world_;
  if (!w.nodes[node_]->alive) return absl::UnavailableError("dead");
  auto it = w.node_by_name.find(address);
  if (it == w.node_by_name.end()) return absl::InvalidArgumentError("no such member");
  const int to = it->second;
  if (w.lan_rng.Chance(w.o.lan_loss)) {
    ++w.lost;
    return absl::OkStatus();
  }
  const int copies = w.lan_rng.Chance(w.o.lan_duplicate) ? 2 : 1;
  w.duplicated += copies - 1;
  for (int c = 0; c < copies; ++c) {
    const int64_t delay = Us(w.lan_rng.Uniform(w.o.lan_delay_min_ms, w.o.lan_delay_max_ms) / 1e3);
    w.sched.After(delay, [&w, from = node_, to, bytes = std::string(datagram)]() mutable {
      w.Deliver(from, to, std::move(bytes));
    });
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ run --

std::string Percentiles(std::vector<int64_t> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  return absl::StrFormat("%.1f / %.1f s", v[v.size() / 2] / 1e6, v.back() / 1e6);
}

// The world of `w.o`: the roster, the certificates, the fault plan, the
// modelled cloud, every node's agent core and kubelet, and the server.
absl::Status Build(World& w) {
  const Options& o = w.o;
  Roster& roster = w.roster;
  for (int p = 0; p < o.pools; ++p) {
    roster.pools.push_back(PoolName(p));
    roster.members.emplace_back();
    for (int s = 0; s < o.nodes_per_pool; ++s) {
      const int id = static_cast<int>(roster.nodes.size());
      roster.nodes.push_back(NodeName(p, s));
      roster.pool_of.push_back(p);
      roster.members.back().push_back(id);
      w.node_by_name[roster.nodes.back()] = id;
    }
  }
  auto pki = PkiFor(roster.nodes, o.real_signature_every);
  if (!pki.ok()) return absl::InternalError(absl::StrCat("node certificates: ", pki.status().ToString()));
  w.pki = *pki;
  w.start = roster.start = w.sched.now();
  w.end = w.start + Us(o.duration_s);
  w.verdict = std::make_unique<EvictionVerdict>(&roster, o.graces_s);
  w.beliefs_ = std::make_unique<LeaderBeliefs>(&roster);
  Rng setup = w.sched.rng().Split(1);
  w.plan = DrawFaults(o, roster, w.start, w.sched.rng().Split(2), w.sched.rng().Split(5));
  w.warmup = w.plan.warmup;

  std::vector<CloudModel::NodeSpec> specs;
  for (size_t i = 0; i < roster.nodes.size(); ++i) {
    specs.push_back({roster.nodes[i], {{"apps.openyurt.io/nodepool", roster.pools[roster.pool_of[i]]}},
                     roster.nodes[i]});
  }
  w.cloud = std::make_unique<CloudModel>(std::move(specs), w.sched.clock());
  w.cloud->set_lease_observer([&w](const cloud::Lease& lease) { w.OnCloudLease(lease); });

  agent::AgentOptions options;
  options.verification_memo = &w.memo;
  options.freshness.heartbeat_interval_us = Us(o.heartbeat_interval_s);
  options.freshness.margin_us = 2 * kSec;
  options.reachability.probe_period_us = Us(o.heartbeat_interval_s);
  options.reachability.request_timeout_us = Us(std::max(1.0, o.renew_deadline_s / 2));
  options.lease_duration = absl::Seconds(o.lease_duration_s);
  options.renew_deadline = absl::Seconds(o.renew_deadline_s);
  options.retry_period = absl::Seconds(o.retry_period_s);
  for (int p = 0; p < o.pools; ++p) {
    auto view = std::make_shared<agent::PoolView>();
    view->pool = roster.pools[p];
    for (int id : roster.members[p]) view->members[roster.nodes[id]] = roster.nodes[id];
    for (int id : roster.members[p]) {
      auto n = std::make_unique<Node>();
      n->id = id;
      n->pool = p;
      n->name = roster.nodes[id];
      n->clock = std::make_unique<NodeClock>(w.sched.clock(), w.plan.nodes[id].skew_us);
      n->lan = std::make_unique<Lan>(&w, id);
      n->api = std::make_unique<AgentApi>(&w, id, n->name, roster.pools[p]);
      agent::AgentOptions mine = options;
      mine.jitter_seed = setup.Next() | 1;
      setup.Fill(mine.boot_id.data(), mine.boot_id.size());
      if (w.plan.pools[p].lying) {
        n->forger = std::make_shared<agent::ForgingLeader>(w.pki->authority, Us(o.heartbeat_interval_s));
        mine.forger = n->forger;
      }
      auto core = agent::AgentCore::New(w.pki->identities[id], w.pki->authority, n->clock.get(),
                                        n->lan.get(), n->api.get(), mine);
      if (!core.ok()) return absl::InternalError(absl::StrCat("agent ", n->name, ": ", core.status().ToString()));
      n->core = *std::move(core);
      auto own = std::make_shared<agent::PoolView>(*view);
      own->self = n->name;
      n->core->SetPool(own);
      n->cloud_due = n->lan_due = w.start + Us(setup.Uniform() * o.heartbeat_interval_s);
      w.nodes.push_back(std::move(n));
    }
  }
  // The kubelets ran before the agents: every node's Lease exists.
  for (auto& n : w.nodes) w.cloud->KubeletRenew(n->name, n->clock->NowMicros());
  if (absl::Status s = w.StartServer(); !s.ok()) return absl::InternalError(absl::StrCat("server: ", s.ToString()));
  for (auto& np : w.nodes) {
    Node& n = *np;
    w.Wake(n, n.cloud_due);
    w.sched.At(w.start + Us(setup.Uniform() * o.kubelet_interval_s), [&w, &n] { w.Kubelet(n); });
  }
  return absl::OkStatus();
}

// The faults, and what runs every second or so: the monitors' look, the
// forwarder's resync (5 s) and the DelegatedLease GC (1 s).
void ScheduleRoutine(World& w) {
  w.ScheduleFaults();
  for (int64_t t = w.start + kSec; t <= w.end; t += kSec) {
    w.sched.At(t, [&w] { w.CheckLeases(); });
  }
  for (int64_t t = w.start + 5 * kSec; t < w.end; t += 5 * kSec) {
    w.sched.At(t, [&w] {
      if (w.server == nullptr) return;
      w.server->Resync();
      w.WakeServer(w.now());
    });
  }
  for (int64_t t = w.start + kSec; t < w.end; t += kSec) {
    w.sched.At(t, [&w] {
      if (w.server != nullptr) w.server->SweepGc();
    });
  }
}

// What the monitors found once the run ended.
struct Judgement {
  TermLedger::Report terms;
  FalseLivenessReport liveness;
  std::vector<int64_t> false_evictions, wholepool, uncovered;  // by grace
  int never_led = 0;
  std::vector<std::string> failures;
};

Judgement Judge(World& w) {
  const Options& o = w.o;
  Judgement j;
  j.terms = w.ledger.Check();
  std::vector<int64_t> death(w.nodes.size(), kNever);
  std::vector<std::vector<int64_t>> changes(w.nodes.size());
  for (auto& n : w.nodes) {
    death[n->id] = n->alive ? kNever : n->death;
    changes[n->id] = w.cloud->Changes(n->name);
  }
  const int64_t allowance = w.Fresh() + Us(std::ceil(o.heartbeat_interval_s + 2)) + 5 * kSec +
                            Us(std::max(1.0, o.renew_deadline_s / 2)) + kSec;
  j.liveness =
      FalseLiveness(w.roster, w.ledger.Writes(), death, changes, w.Fresh(), allowance, w.end);
  j.false_evictions = w.verdict->false_evictions();
  j.wholepool = w.verdict->wholepool_gaps();
  j.uncovered = w.verdict->uncovered_gaps();
  for (int p = 0; p < o.pools; ++p) {
    if (!w.beliefs().EverLed(p) && w.plan.pools[p].cut_from == kNever) ++j.never_led;
  }
  for (size_t g = 0; g < j.false_evictions.size(); ++g) {
    if (j.false_evictions[g] > 0) {
      j.failures.push_back(
          absl::StrFormat("%d false evictions at grace %.0fs", j.false_evictions[g], o.graces_s[g]));
    }
  }
  if (j.liveness.writes + j.liveness.cloud > 0) {
    j.failures.push_back(absl::StrFormat("false liveness: %d writes, %d cloud Leases",
                                              j.liveness.writes, j.liveness.cloud));
  }
  if (j.terms.violations() > 0) {
    j.failures.push_back(absl::StrFormat("%d term violations", j.terms.violations()));
  }
  if (w.beliefs().same_term_overlaps() > 0) {
    j.failures.push_back(
        absl::StrFormat("%d overlapping beliefs in one term", w.beliefs().same_term_overlaps()));
  }
  if (j.never_led > 0) {
    j.failures.push_back(absl::StrFormat("%d pools never led although never cut off", j.never_led));
  }
  for (const auto& s : w.verdict->incidents()) j.failures.push_back("  " + s);
  for (const auto& s : j.liveness.details) j.failures.push_back("  " + s);
  if (j.terms.violations() > 0) {
    for (const auto& s : j.terms.details) j.failures.push_back("  " + s);
  }
  for (const auto& s : w.beliefs().incidents()) {
    if (s.find("SAME TERM") != std::string::npos) j.failures.push_back("  " + s);
  }
  return j;
}

// The run's figures (result->counts) and its few lines of summary.
void Summarize(World& w, const Judgement& j, WorldResult* result) {
  const Options& o = w.o;
  int dead = 0, cut = 0, pools_cut = 0, lying = 0;
  for (auto& n : w.nodes) {
    dead += n->death != kNever ? 1 : 0;
    cut += w.plan.nodes[n->id].cut_from != kNever ? 1 : 0;
  }
  for (const PoolFaults& p : w.plan.pools) {
    pools_cut += p.cut_from != kNever ? 1 : 0;
    lying += p.lying ? 1 : 0;
  }
  int64_t forged = 0, forged_accepted = 0;
  for (auto& n : w.nodes) {
    if (n->forger == nullptr) continue;
    forged += n->forger->stats().attempts.load();
    forged_accepted += n->forger->stats().accepted.load();
  }
  const std::vector<int64_t> failovers = w.beliefs().failovers();
  int64_t failover_max = 0;
  for (int64_t f : failovers) failover_max = std::max(failover_max, f);
  result->counts = {
      {"pools", o.pools}, {"nodes_per_pool", o.nodes_per_pool}, {"simulated_s", o.duration_s},
      {"real_s", result->real_s}, {"events", static_cast<double>(result->events)},
      {"history_lines", static_cast<double>(w.history.lines())},
      {"dead", dead}, {"cut_off", cut}, {"pools_cut", pools_cut}, {"kills", static_cast<double>(w.kills)},
      {"clock_steps", static_cast<double>(w.jumps)}, {"server_restarts", static_cast<double>(w.restarts)},
      {"lying_pools", lying}, {"datagrams", static_cast<double>(w.datagrams)},
      {"datagrams_lost", static_cast<double>(w.lost)},
      {"datagrams_duplicated", static_cast<double>(w.duplicated)},
      {"requests", static_cast<double>(w.requests)}, {"unavailable", static_cast<double>(w.unavailable)},
      {"conflicts", static_cast<double>(w.conflicts)}, {"refused", static_cast<double>(w.refused)},
      {"proofs_refused", static_cast<double>(w.proof_refused)},
      {"dl_writes", static_cast<double>(w.dl_writes)},
      {"real_signature_proofs", static_cast<double>(w.real_proofs)},
      {"forwarder_lease_writes", static_cast<double>(w.cloud->server_lease_writes())},
      {"forged_writes", static_cast<double>(forged)},
      {"forged_accepted", static_cast<double>(forged_accepted)},
      {"failovers", static_cast<double>(failovers.size())}, {"failover_max_s", failover_max / 1e6},
      {"oldest_alive_lease_s", w.verdict->max_alive_age_us() / 1e6},
      {"false_evictions", static_cast<double>(std::accumulate(j.false_evictions.begin(), j.false_evictions.end(), int64_t{0}))},
      {"wholepool_gaps", static_cast<double>(std::accumulate(j.wholepool.begin(), j.wholepool.end(), int64_t{0}))},
      {"false_liveness", static_cast<double>(j.liveness.writes)},
      {"cloud_false_liveness", static_cast<double>(j.liveness.cloud)},
      {"term_violations", static_cast<double>(j.terms.violations())},
      {"terms_acquired", static_cast<double>(j.terms.terms)},
      {"term_writes_checked", static_cast<double>(j.terms.writes)},
      {"deposed_overlaps", static_cast<double>(w.beliefs().overlaps())},
      {"same_term_overlaps", static_cast<double>(w.beliefs().same_term_overlaps())},
      {"never_led", j.never_led},
  };
  result->summary = absl::StrFormat(
      "  %d pools x %d nodes, %.0fs simulated in %.2fs real (%.0fx real time), %d events, history %d lines\n"
      "  faults: %d dead (%d of them killed leaders), %d cut off, %d pools cut, %d clock steps, "
      "%d server restarts, %d lying pools; LAN %d datagrams, %d lost, %d duplicated\n"
      "  requests %d (%d unavailable, %d conflicts, %d refused, %d proofs refused); DelegatedLease "
      "writes %d (%d with a real signature's proof); forwarder Lease writes %d; forged writes %d (%d "
      "accepted)\n"
      "  failovers %d (median / max %s); oldest cloud Lease of an alive node in reach %.1fs\n"
      "  false evictions %s (whole pool %s, uncovered %s); false liveness %d / %d; term "
      "violations %d (%d terms); deposed-leader overlaps %d (same term %d)",
      o.pools, o.nodes_per_pool, o.duration_s, result->real_s, o.duration_s / std::max(result->real_s, 1e-9),
      result->events, w.history.lines(), dead, w.kills, cut, pools_cut, w.jumps, w.restarts, lying,
      w.datagrams, w.lost, w.duplicated, w.requests, w.unavailable, w.conflicts, w.refused,
      w.proof_refused, w.dl_writes, w.real_proofs, w.cloud->server_lease_writes(), forged, forged_accepted,
      static_cast<int>(failovers.size()), Percentiles(failovers),
      w.verdict->max_alive_age_us() / 1e6,
      absl::StrJoin(j.false_evictions, " / "), absl::StrJoin(j.wholepool, " / "), absl::StrJoin(j.uncovered, " / "),
      j.liveness.writes, j.liveness.cloud, j.terms.violations(), j.terms.terms, w.beliefs().overlaps(),
      w.beliefs().same_term_overlaps());
}

}  // namespace

WorldResult RunWorld(const Options& o, uint64_t seed) {
  const auto real_start = std::chrono::steady_clock::now();
  WorldResult result;
  World w(o, seed);
  if (absl::Status s = Build(w); !s.ok()) {
    result.failures.push_back(std::string(s.message()));
    return result;
  }
  ScheduleRoutine(w);
  w.sched.RunUntil(w.end + 1);
  Judgement j = Judge(w);
  result.failures = std::move(j.failures);
  result.passed = result.failures.empty();
  result.digest = w.history.Digest();
  result.simulated_s = o.duration_s;
  result.events = w.sched.events_run();
  result.real_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  Summarize(w, j, &result);
  return result;
}

int RunDeterministic(const Options& o) {
  // The agents' and the server's own log lines are not the history (some
  // are rate-limited on the machine's clock): off unless asked for.
  int saved_stderr = -1;
  if (!o.agent_logs) {
    std::fflush(stderr);
    saved_stderr = dup(2);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 2);
      close(null);
    }
  }
  int failed = 0;
  double simulated = 0, real = 0;
  std::string json = "[";
  for (int i = 0; i < o.seeds; ++i) {
    const uint64_t seed = o.seed + static_cast<uint64_t>(i);
    WorldResult r = RunWorld(o, seed);
    simulated += r.simulated_s;
    real += r.real_s;
    absl::StrAppend(&json, i == 0 ? "" : ",", "\n{\"seed\":", seed, ",\"ok\":", r.passed ? "true" : "false",
                    ",\"digest\":\"", r.digest, "\"");
    for (const auto& [k, v] : r.counts) absl::StrAppend(&json, ",\"", k, "\":", v);
    json += "}";
    std::printf("seed %llu: %s digest %s\n", static_cast<unsigned long long>(seed),
                r.passed ? "PASS" : "FAIL", r.digest.c_str());
    if (o.seeds == 1 || !r.passed) std::printf("%s\n", r.summary.c_str());
    if (!r.passed) {
      ++failed;
      for (const auto& f : r.failures) std::printf("  %s\n", f.c_str());
      std::printf("  replay: %s --seed=%llu\n", o.replay_command.c_str(),
                  static_cast<unsigned long long>(seed));
    }
    std::fflush(stdout);
  }
  if (saved_stderr >= 0) {
    dup2(saved_stderr, 2);
    close(saved_stderr);
  }
  std::printf("%d seeds, %d failed; %.0f simulated seconds in %.1f real seconds (%.0fx real time, "
              "%.3f simulated hours per real second)\n",
              o.seeds, failed, simulated, real, simulated / std::max(real, 1e-9),
              simulated / 3600 / std::max(real, 1e-9));
  if (!o.summary_json.empty()) {
    std::ofstream out(o.summary_json);
    out << absl::StrFormat("{\"seeds\":%d,\"failed\":%d,\"simulated_s\":%.3f,\"real_s\":%.3f,\"runs\":",
                           o.seeds, failed, simulated, real)
        << json << "\n]}\n";
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace poolcoord::sim
