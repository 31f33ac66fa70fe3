// The agent core's test world (agent_core_test.cc, proof_relay_test.cc,
// forging_leader_test.cc): a modelled LAN (a queue of datagrams), a modelled
// cloud (a PoolLease with optimistic concurrency and DelegatedLeases, each write
// judged and refused by the server's own lease rules (server_refusal.h), each
// node's own Lease; optionally the server's
// delegation challenges and proof check, docs/verifiable-delegation.md), one
// fake clock for everyone.
#pragma once

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/escaping.h"
#include "agent/agent_core.h"
#include "base/clock.h"
#include "cloud/errors.h"
#include "election/delegation_proof.h"
#include "store/object.h"
#include "tests/agent/agent_testing.h"
#include "tests/agent/server_refusal.h"

namespace poolcoord::agent::testing::world {

namespace pa = poolcoord::agent;
namespace pb = poolcoord::base;
namespace pe = poolcoord::election;
using pa::testing::TestPki;

constexpr int64_t kS = 1'000'000;

inline int64_t RealNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Lan {
  struct Packet {
    std::string to;
    std::string bytes;
  };
  std::deque<Packet> queue;
  std::set<std::string> down;  // nodes off the LAN (dead)
};

class FakeLan : public pa::LanTransport {
 public:
  FakeLan(Lan* lan, std::string self) : lan_(lan), self_(std::move(self)) {}
  absl::Status Send(const std::string& address, absl::string_view datagram) override {
    if (lan_->down.count(self_) != 0) return absl::UnavailableError("down");
    lan_->queue.push_back({address, std::string(datagram)});
    return absl::OkStatus();
  }

 private:
  Lan* lan_;
  std::string self_;
};

struct DelegatedLease {
  std::string rv;
  int64_t renew_time_us = 0;
  std::string delegate;
  int32_t duration = 0;
};

struct Cloud {
  pe::LeaderElectionRecord pool_lease;
  std::string pool_lease_version;  // "" = does not exist
  int64_t pool_lease_written_mono_us = 0;  // the server's time of its last write
  int64_t next_version = 1;
  std::map<std::string, DelegatedLease> delegated;
  std::map<std::string, pa::NodeLeaseObservation> node_leases;
  std::set<std::string> cut;  // nodes that cannot reach the cloud
  std::vector<pa::DelegatedLeaseWrite> writes;
  std::map<std::string, std::vector<int64_t>> write_times;  // accepted writes, monotonic µs
  // The longest time between two accepted writes of `node`'s DelegatedLease
  // from `from` on (µs; `from` counts as a write).
  int64_t LongestGap(const std::string& node, int64_t from) const {
    int64_t last = from, gap = 0;
    auto it = write_times.find(node);
    if (it == write_times.end()) return INT64_MAX;
    for (int64_t t : it->second) {
      if (t < from) continue;
      gap = std::max(gap, t - last);
      last = t;
    }
    return gap;
  }
  int deletes = 0;
  bool forbid_writes = false;
  std::string NewVersion() { return std::to_string(next_version++); }

  // The server's side of verifiable delegation: the real challenges and proof check
  // (election::DelegationProofs, as the lease rules call it) over this
  // PoolLease's status.challenges: a challenge issued with the holder's
  // PoolLease writes once the current one is 5 s old, and --delegation-proof
  // "off", "optional" or "required".
  const pb::Clock* clock = nullptr;
  bool issue_challenges = false;
  std::string proof_mode = "off";
  int64_t max_age_us = 15'000'000;
  int issued = 0;  // challenges issued
  // The server is down (restarting): PoolLease and DelegatedLease requests
  // get 503 from kube-apiserver's aggregator (an answer: the link works).
  bool server_down = false;
  poolcoord::store::Object pool_lease_object;  // its status.challenges
  std::unique_ptr<pe::DelegationProofs> proofs;
  std::map<std::string, poolcoord::store::AcceptedProof> accepted;  // DelegatedLease status.proof
  std::map<std::string, int> proof_refusals;                       // rule -> count
  std::set<std::string> refuse_proofs_of;  // nodes whose every proof is refused ("test")

  pe::DelegationProofs& Proofs() {
    if (proofs == nullptr) {
      pe::DelegationProofOptions o;
      o.mode = proof_mode == "required"   ? pe::ProofMode::kRequired
               : proof_mode == "optional" ? pe::ProofMode::kOptional
                                          : pe::ProofMode::kOff;
      o.max_age = absl::Microseconds(max_age_us);
      proofs = std::make_unique<pe::DelegationProofs>(clock, o, nullptr);
      BOOST_REQUIRE(proofs->SetClientCaPem(TestPki::Get().ca_pair().cert_pem).ok());
      pool_lease_object.metadata.name = "hangzhou";
    }
    return *proofs;
  }
  void MaybeIssue() {
    if (!issue_challenges || clock == nullptr) return;
    if (Proofs().MaybeIssueChallenge(pool_lease_object)) ++issued;
  }
  std::vector<std::string> Challenges() {
    std::vector<std::string> out;
    for (const auto& c : poolcoord::store::DelegationOf(pool_lease_object).challenges) {
      out.push_back(c.value);
    }
    return out;
  }
  std::string CurrentChallenge() {
    auto list = Challenges();
    return list.empty() ? "" : list.front();
  }
  // The server process restarts: what it kept in memory is gone (its first
  // sights of challenges, its certificate cache). With the memory store the
  // objects go too (keep_objects false): the PoolLease, its challenges, the
  // DelegatedLeases and their last accepted proofs; with etcd3 they stay.
  void RestartServer(bool keep_objects) {
    proofs.reset();
    if (!keep_objects) {
      pool_lease = {};
      pool_lease_version.clear();
      pool_lease_written_mono_us = 0;
      pool_lease_object = {};
      delegated.clear();
      accepted.clear();
    }
    Proofs();
  }

  // A DelegatedLease write's proof check, as the lease rules make it.
  absl::Status CheckProof(const pa::DelegatedLeaseWrite& w) {
    if (proof_mode == "off") return absl::OkStatus();
    auto refuse = [&](const std::string& rule) {
      ++proof_refusals[rule];
      return poolcoord::cloud::ApiError(
          403, "Forbidden", absl::StrCat("delegation proof refused (", rule, ")"),
          {{"FieldValueForbidden", absl::StrCat(rule, ": refused"), "spec.proof"}});
    };
    const bool has_proof = w.evidence != nullptr && pa::SendsProof(*w.evidence);
    if (!has_proof) return proof_mode == "required" ? refuse("missing") : absl::OkStatus();
    if (refuse_proofs_of.count(w.node) != 0) return refuse("test");
    const auto& sh = w.evidence->signed_heartbeat;
    auto datagram = pa::EncodeHeartbeatDatagram(sh.signed_bytes, sh.signature);
    BOOST_REQUIRE(datagram.ok());
    poolcoord::store::DelegationProof proof{absl::Base64Escape(*datagram),
                                            absl::Base64Escape(w.evidence->certificate->der())};
    std::optional<poolcoord::store::AcceptedProof> last;
    if (auto it = accepted.find(w.node); it != accepted.end()) last = it->second;
    auto verdict = Proofs().Verify(proof, w.node, "hangzhou", pool_lease_object, last,
                                   w.lease_duration_seconds);
    if (verdict.ok()) {
      accepted[w.node] = *verdict;
      return absl::OkStatus();
    }
    if (verdict.status().code() != absl::StatusCode::kPermissionDenied) {
      return poolcoord::cloud::ApiError(422, "Invalid", std::string(verdict.status().message()));
    }
    // "... delegation proof refused (<rule>): ...": the rule, as the cause names it.
    const std::string message(verdict.status().message());
    const size_t open = message.find("refused (");
    const size_t close = message.find(')', open);
    BOOST_REQUIRE(open != std::string::npos && close != std::string::npos);
    return refuse(message.substr(open + 9, close - open - 9));
  }
  // The PoolLease as the server's rules read it (nullptr: there is none).
  poolcoord::store::ObjectPtr ServerPoolLeaseObject() const {
    if (pool_lease_version.empty()) return nullptr;
    return ServerPoolLeaseOf("hangzhou", pool_lease, pool_lease_written_mono_us);
  }
  int Refusals() const {
    int n = 0;
    for (const auto& [rule, k] : proof_refusals) n += k;
    return n;
  }
};

class FakeCloud : public pa::AgentCloud, public pe::LeaseLock {
 public:
  FakeCloud(Cloud* cloud, std::string node) : cloud_(cloud), node_(std::move(node)) {}

  absl::Status Reach() {
    const bool ok = cloud_->cut.count(node_) == 0;
    ReportRequest(ok);
    return ok ? absl::OkStatus() : absl::UnavailableError("no route to the cloud");
  }
  // A request to poolcoord's API through the aggregator.
  absl::Status ReachServer() {
    if (auto s = Reach(); !s.ok()) return s;
    if (cloud_->server_down) return absl::UnavailableError("503: poolcoord is restarting");
    return absl::OkStatus();
  }
  absl::StatusOr<pa::NodeLeaseObservation> ReadNodeLease(const std::string& node) override {
    if (auto s = Reach(); !s.ok()) return s;
    auto it = cloud_->node_leases.find(node);
    if (it == cloud_->node_leases.end()) return absl::NotFoundError("no Lease");
    return it->second;
  }
  absl::StatusOr<std::string> ReadDelegatedLease(const std::string& node) override {
    if (auto s = ReachServer(); !s.ok()) return s;
    auto it = cloud_->delegated.find(node);
    if (it == cloud_->delegated.end()) return absl::NotFoundError("none");
    return it->second.rv;
  }
  absl::StatusOr<std::string> WriteDelegatedLease(const pa::DelegatedLeaseWrite& w) override {
    if (auto s = ReachServer(); !s.ok()) return s;
    if (cloud_->forbid_writes || w.delegate != node_) {
      return absl::PermissionDeniedError("not the pool's leader");
    }
    // Whether the writer leads, as the server judges it (and refuses it).
    if (auto s = ServerAnswerToDelegatedLeaseWrite(cloud_->clock, {{"hangzhou", {node_, w.node}}},
                                                   node_, w.node, "hangzhou",
                                                   cloud_->ServerPoolLeaseObject());
        !s.ok()) {
      return s;
    }
    auto it = cloud_->delegated.find(w.node);
    if (w.resource_version.empty()) {
      if (it != cloud_->delegated.end()) return absl::AlreadyExistsError("exists");
    } else if (it == cloud_->delegated.end()) {
      return absl::NotFoundError("gone");
    } else if (it->second.rv != w.resource_version) {
      return absl::AbortedError("stale resourceVersion");
    }
    if (auto s = cloud_->CheckProof(w); !s.ok()) return s;
    DelegatedLease& dl = cloud_->delegated[w.node];
    dl.rv = cloud_->NewVersion();
    dl.renew_time_us = w.renew_time_us;
    dl.delegate = w.delegate;
    dl.duration = w.lease_duration_seconds;
    cloud_->writes.push_back(w);
    cloud_->write_times[w.node].push_back(cloud_->clock->MonotonicMicros());
    return dl.rv;
  }
  absl::Status DeleteDelegatedLease(const std::string& node, const std::string& rv) override {
    if (auto s = ReachServer(); !s.ok()) return s;
    auto it = cloud_->delegated.find(node);
    if (it == cloud_->delegated.end()) return absl::NotFoundError("gone");
    if (!rv.empty() && it->second.rv != rv) return absl::AbortedError("stale");
    cloud_->delegated.erase(it);
    ++cloud_->deletes;
    return absl::OkStatus();
  }
  pe::LeaseLock* PoolLeaseLock() override { return this; }
  std::vector<std::string> PoolChallenges() override { return cloud_->Challenges(); }

  // LeaseLock over the one PoolLease.
  absl::StatusOr<pe::VersionedRecord> Get() override {
    if (auto s = ReachServer(); !s.ok()) return s;
    if (cloud_->pool_lease_version.empty()) return absl::NotFoundError("no PoolLease");
    return pe::VersionedRecord{cloud_->pool_lease, cloud_->pool_lease_version};
  }
  absl::StatusOr<std::string> Create(const pe::LeaderElectionRecord& record) override {
    if (auto s = ReachServer(); !s.ok()) return s;
    if (!cloud_->pool_lease_version.empty()) return absl::AlreadyExistsError("exists");
    return Write(record, nullptr);
  }
  absl::StatusOr<std::string> Update(const pe::LeaderElectionRecord& record,
                                     const std::string& version) override {
    if (auto s = ReachServer(); !s.ok()) return s;
    if (cloud_->pool_lease_version.empty()) return absl::NotFoundError("no PoolLease");
    if (version != cloud_->pool_lease_version) return absl::AbortedError("conflict");
    return Write(record, cloud_->ServerPoolLeaseObject());
  }
  std::string Identity() const override { return node_; }
  std::string Describe() const override { return "poolleases/hangzhou"; }

 private:
  // A PoolLease write as the server's lease rules admit it (or refuse it).
  absl::StatusOr<std::string> Write(const pe::LeaderElectionRecord& record,
                                    const poolcoord::store::ObjectPtr& current) {
    int64_t renewed = cloud_->pool_lease_written_mono_us;
    if (auto s = ServerAnswerToPoolLeaseWrite(cloud_->clock, node_, "hangzhou", current, record,
                                              &renewed);
        !s.ok()) {
      return s;
    }
    cloud_->pool_lease = record;
    cloud_->pool_lease_version = cloud_->NewVersion();
    cloud_->pool_lease_written_mono_us = renewed;
    if (!record.holder_identity.empty()) cloud_->MaybeIssue();
    return cloud_->pool_lease_version;
  }

  Cloud* cloud_;
  std::string node_;
};

struct Node {
  std::string name;
  std::unique_ptr<FakeLan> lan;
  std::unique_ptr<FakeCloud> cloud;
  std::unique_ptr<pa::AgentCore> core;
  int64_t next_lan = 0, next_cloud = 0;
  bool alive = true;
};

// What one agent core needs to be made, without a world around it: for the
// tests of AgentCore::New's checks of its options.
struct LoneNode {
  pb::FakeClock clock;
  Lan lan;
  FakeLan fake{&lan, "hz-1"};
  std::shared_ptr<const pa::NodeIdentity> id = TestPki::Get().SharedIdentity("hz-1");
};

struct World {
  pb::FakeClock clock{RealNowUs()};
  Lan lan;
  Cloud cloud;
  std::vector<std::string> names{"hz-1", "hz-2", "hz-3"};
  std::map<std::string, Node> nodes;
  std::shared_ptr<pa::PoolView> pool_template;
  // Adjusts each node's options before its core starts (e.g. a forger).
  std::function<void(const std::string&, pa::AgentOptions&)> customize;

  explicit World(std::function<void(Cloud&)> setup = nullptr,
                 std::function<void(const std::string&, pa::AgentOptions&)> customize_nodes = nullptr)
      : customize(std::move(customize_nodes)) {
    cloud.clock = &clock;
    if (setup) setup(cloud);
    pool_template = std::make_shared<pa::PoolView>();
    pool_template->pool = "hangzhou";
    for (const auto& n : names) pool_template->members[n] = n;
    for (uint64_t i = 0; i < names.size(); ++i) Start(names[i], 100 + i);
  }
  void Start(const std::string& name, uint64_t seed) {
    Node& n = nodes[name];
    n.name = name;
    n.alive = true;
    lan.down.erase(name);
    n.lan = std::make_unique<FakeLan>(&lan, name);
    n.cloud = std::make_unique<FakeCloud>(&cloud, name);
    pa::AgentOptions o;
    o.jitter_seed = seed;
    if (customize) customize(name, o);
    auto core = pa::AgentCore::New(TestPki::Get().SharedIdentity(name), TestPki::Get().ca(), &clock,
                                   n.lan.get(), n.cloud.get(), o);
    BOOST_REQUIRE_MESSAGE(core.ok(), core.status().ToString());
    n.core = std::move(*core);
    auto pool = std::make_shared<pa::PoolView>(*pool_template);
    pool->self = name;
    n.core->SetPool(pool);
    n.next_lan = n.next_cloud = clock.MonotonicMicros();
  }
  void Kill(const std::string& name) {
    nodes[name].alive = false;
    lan.down.insert(name);
  }
  void Deliver() {
    while (!lan.queue.empty()) {
      Lan::Packet p = std::move(lan.queue.front());
      lan.queue.pop_front();
      auto it = nodes.find(p.to);
      if (it == nodes.end() || !it->second.alive) continue;
      it->second.core->OnDatagram(p.bytes);
    }
  }
  // Runs every node for `seconds`, 100 ms at a time.
  void Run(double seconds) {
    const int64_t end = clock.MonotonicMicros() + static_cast<int64_t>(seconds * kS);
    while (clock.MonotonicMicros() < end) {
      const int64_t now = clock.MonotonicMicros();
      for (auto& [name, n] : nodes) {
        if (!n.alive) continue;
        if (now >= n.next_cloud) n.next_cloud = n.core->CloudStep();
        n.next_lan = n.core->LanStep();  // also picks up changed flags at once
        Deliver();
      }
      clock.Advance(std::chrono::milliseconds(100));
    }
  }
  std::vector<std::string> Leaders() {
    std::vector<std::string> out;
    for (auto& [name, n] : nodes) {
      if (n.alive && n.core->status().leading) out.push_back(name);
    }
    return out;
  }
  size_t WritesFor(const std::string& node) {
    size_t k = 0;
    for (const auto& w : cloud.writes) k += w.node == node ? 1 : 0;
    return k;
  }
};

// A member of hangzhou other than `leader` (hz-2 or hz-3).
inline std::string OtherThan(const std::string& leader) { return leader == "hz-3" ? "hz-2" : "hz-3"; }

// The start of many cases: the pool runs 25 s (a leader elected), then a member
// that is not the leader is cut off from the cloud. Returns it; the leader is
// *leader.
inline std::string CutOffTheMember(World& w, std::string* leader) {
  w.Run(25);
  *leader = w.Leaders().at(0);
  const std::string member = OtherThan(*leader);
  w.cloud.cut.insert(member);
  return member;
}

}  // namespace poolcoord::agent::testing::world
