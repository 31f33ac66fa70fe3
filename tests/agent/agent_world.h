// The agent core's test world (agent_core_test.cc, proof_relay_test.cc,
// forging_leader_test.cc): a modelled LAN (a queue of datagrams), a modelled
// cloud (a PoolLease with optimistic concurrency, DelegatedLeases that only the
// current holder may write, each node's own Lease; optionally the server's
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
#include "agent/agent_core.h"
#include "base/clock.h"
#include "cloud/errors.h"
#include "tests/agent/agent_testing.h"

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
  int64_t next_version = 1;
  std::map<std::string, DelegatedLease> delegated;
  std::map<std::string, pa::NodeLeaseObservation> node_leases;
  std::set<std::string> cut;  // nodes that cannot reach the cloud
  std::vector<pa::DelegatedLeaseWrite> writes;
  int deletes = 0;
  bool forbid_writes = false;
  std::string NewVersion() { return std::to_string(next_version++); }

  // The server's side of issue 15, modelled: a challenge issued with the
  // holder's PoolLease writes once the current one is 5 s old (the latest 4
  // kept), and --delegation-proof: "off", "optional" or "required".
  const pb::Clock* clock = nullptr;
  bool issue_challenges = false;
  std::string proof_mode = "off";
  int64_t max_age_us = 15'000'000;
  struct Challenge {
    std::string value;
    int64_t issued_mono_us = 0;
  };
  std::deque<Challenge> challenges;  // newest first
  int next_challenge = 1;
  std::map<std::string, std::pair<pa::BootId, uint64_t>> accepted;  // node -> last proof
  std::map<std::string, int> proof_refusals;                       // rule -> count
  std::set<std::string> refuse_proofs_of;  // nodes whose every proof is refused ("test")

  void MaybeIssue() {
    if (!issue_challenges || clock == nullptr) return;
    const int64_t now = clock->MonotonicMicros();
    if (!challenges.empty() && now - challenges.front().issued_mono_us < 5'000'000) return;
    challenges.push_front({absl::StrCat("challenge-", next_challenge++), now});
    while (challenges.size() > 4) challenges.pop_back();
  }
  std::string CurrentChallenge() const { return challenges.empty() ? "" : challenges.front().value; }

  // The proof check of a DelegatedLease write (the rules of
  // election/delegation_proof.h that the agent's side can get wrong).
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
    if (w.lease_duration_seconds * int64_t{1'000'000} > max_age_us) {
      return poolcoord::cloud::ApiError(422, "Invalid", "leaseDurationSeconds above max-age");
    }
    const auto& sh = w.evidence->signed_heartbeat;
    const pa::Heartbeat& hb = sh.heartbeat;
    const auto& cert = *w.evidence->certificate;
    if (cert.fingerprint() != hb.certificate_fingerprint) return refuse("certificate_mismatch");
    if (cert.node() != w.node) return refuse("wrong_identity");
    if (hb.node != w.node) return refuse("wrong_node");
    if (!cert.VerifySignature(sh.signed_bytes, sh.signature)) return refuse("bad_signature");
    if (hb.cloud_reachable) return refuse("reachable");
    if (refuse_proofs_of.count(w.node) != 0) return refuse("test");
    const Challenge* found = nullptr;
    for (const auto& c : challenges) {
      if (c.value == hb.challenge) found = &c;
    }
    if (found == nullptr) return refuse("unknown_challenge");
    if (clock->MonotonicMicros() - found->issued_mono_us > max_age_us) return refuse("stale_challenge");
    auto last = accepted.find(w.node);
    if (last != accepted.end() && last->second.first == hb.boot_id &&
        hb.sequence <= last->second.second) {
      return refuse("replay");
    }
    accepted[w.node] = {hb.boot_id, hb.sequence};
    return absl::OkStatus();
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
  absl::StatusOr<pa::NodeLeaseObservation> ReadNodeLease(const std::string& node) override {
    if (auto s = Reach(); !s.ok()) return s;
    auto it = cloud_->node_leases.find(node);
    if (it == cloud_->node_leases.end()) return absl::NotFoundError("no Lease");
    return it->second;
  }
  absl::StatusOr<std::string> ReadDelegatedLease(const std::string& node) override {
    if (auto s = Reach(); !s.ok()) return s;
    auto it = cloud_->delegated.find(node);
    if (it == cloud_->delegated.end()) return absl::NotFoundError("none");
    return it->second.rv;
  }
  absl::StatusOr<std::string> WriteDelegatedLease(const pa::DelegatedLeaseWrite& w) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (cloud_->forbid_writes || cloud_->pool_lease.holder_identity != node_ ||
        w.delegate != node_) {
      return absl::PermissionDeniedError("not the pool's leader");
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
    return dl.rv;
  }
  absl::Status DeleteDelegatedLease(const std::string& node, const std::string& rv) override {
    if (auto s = Reach(); !s.ok()) return s;
    auto it = cloud_->delegated.find(node);
    if (it == cloud_->delegated.end()) return absl::NotFoundError("gone");
    if (!rv.empty() && it->second.rv != rv) return absl::AbortedError("stale");
    cloud_->delegated.erase(it);
    ++cloud_->deletes;
    return absl::OkStatus();
  }
  pe::LeaseLock* PoolLeaseLock() override { return this; }
  std::string PoolChallenge() override { return cloud_->CurrentChallenge(); }

  // LeaseLock over the one PoolLease.
  absl::StatusOr<pe::VersionedRecord> Get() override {
    if (auto s = Reach(); !s.ok()) return s;
    if (cloud_->pool_lease_version.empty()) return absl::NotFoundError("no PoolLease");
    return pe::VersionedRecord{cloud_->pool_lease, cloud_->pool_lease_version};
  }
  absl::StatusOr<std::string> Create(const pe::LeaderElectionRecord& record) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (!cloud_->pool_lease_version.empty()) return absl::AlreadyExistsError("exists");
    cloud_->pool_lease = record;
    cloud_->pool_lease_version = cloud_->NewVersion();
    if (!record.holder_identity.empty()) cloud_->MaybeIssue();
    return cloud_->pool_lease_version;
  }
  absl::StatusOr<std::string> Update(const pe::LeaderElectionRecord& record,
                                     const std::string& version) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (version != cloud_->pool_lease_version) return absl::AbortedError("conflict");
    cloud_->pool_lease = record;
    cloud_->pool_lease_version = cloud_->NewVersion();
    if (!record.holder_identity.empty()) cloud_->MaybeIssue();
    return cloud_->pool_lease_version;
  }
  std::string Identity() const override { return node_; }
  std::string Describe() const override { return "poolleases/hangzhou"; }

 private:
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
    std::shared_ptr<const pa::NodeIdentity> id(&TestPki::Get().Identity(name),
                                                [](const pa::NodeIdentity*) {});
    auto core = pa::AgentCore::New(id, TestPki::Get().ca(), &clock, n.lan.get(), n.cloud.get(), o);
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

}  // namespace poolcoord::agent::testing::world
