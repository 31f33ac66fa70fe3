// The agent core end to end over fakes: a modelled LAN (a queue of datagrams),
// a modelled cloud (a PoolLease with optimistic concurrency, DelegatedLeases
// that only the current holder may write, each node's own Lease), one fake
// clock for everyone.
#define BOOST_TEST_MODULE agent_core
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/agent_core.h"
#include "base/clock.h"
#include "tests/agent/agent_testing.h"

namespace pa = poolcoord::agent;
namespace pb = poolcoord::base;
namespace pe = poolcoord::election;
using pa::testing::TestPki;

namespace {

constexpr int64_t kS = 1'000'000;

int64_t RealNowUs() {
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
    return cloud_->pool_lease_version;
  }
  absl::StatusOr<std::string> Update(const pe::LeaderElectionRecord& record,
                                     const std::string& version) override {
    if (auto s = Reach(); !s.ok()) return s;
    if (version != cloud_->pool_lease_version) return absl::AbortedError("conflict");
    cloud_->pool_lease = record;
    cloud_->pool_lease_version = cloud_->NewVersion();
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

  World() {
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

}  // namespace

BOOST_AUTO_TEST_CASE(APoolHearsItselfAndElectsOneLeader) {
  World w;
  w.Run(25);
  for (auto& [name, n] : w.nodes) {
    auto s = n.core->status();
    BOOST_TEST(s.seen, name);
    BOOST_TEST(s.peers_heard == 2u, name);
    BOOST_TEST(n.core->verifier_stats().heartbeats_accepted.load() > 0);
    for (size_t r = 0; r < pa::kDropReasonCount; ++r) {
      BOOST_TEST(n.core->verifier_stats().dropped[r].load() == 0,
                 name << " dropped " << pa::DropReasonName(static_cast<pa::DropReason>(r)));
    }
    // One heartbeat round per interval (5 s) after the first.
    BOOST_TEST(n.core->stats().rounds.load() >= 5);
    BOOST_TEST(n.core->stats().rounds.load() <= 7);
  }
  BOOST_TEST(w.Leaders().size() == 1u);
  BOOST_TEST(w.cloud.writes.empty());  // nobody is cut off
  // Every member's latest heartbeat says "reachable", and the leader's says "leader".
  const std::string leader = w.Leaders()[0];
  for (const auto& other : w.names) {
    if (other == leader) continue;
    auto hb = w.nodes[other].core->LatestOf(leader);
    BOOST_REQUIRE(hb != nullptr);
    BOOST_TEST(hb->heartbeat().leader);
    BOOST_TEST(hb->heartbeat().cloud_reachable);
  }
}

BOOST_AUTO_TEST_CASE(ACutOffMemberIsDelegatedAndReleased) {
  World w;
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string member = leader == "hz-3" ? "hz-2" : "hz-3";
  w.cloud.cut.insert(member);
  w.Run(2);
  BOOST_TEST(!w.nodes[member].core->status().seen);
  w.Run(20);
  // Written about once per heartbeat, renewTime = the leader's arrival time.
  const size_t writes = w.WritesFor(member);
  BOOST_TEST(writes >= 3u);
  BOOST_TEST(writes <= 6u);
  BOOST_REQUIRE(w.cloud.delegated.count(member) == 1);
  auto latest = w.nodes[leader].core->LatestOf(member);
  BOOST_TEST(w.cloud.delegated[member].renew_time_us == latest->arrival_wall_us);
  BOOST_TEST(w.cloud.delegated[member].delegate == leader);
  BOOST_TEST(w.cloud.delegated[member].duration == 7);
  BOOST_TEST(!latest->heartbeat().cloud_reachable);
  BOOST_TEST(w.nodes[leader].core->delegation_stats().delegated.load() == 1);

  // The link comes back but the cloud Lease is the forwarder's: still cut off,
  // delegation goes on until the kubelet renews on its own.
  w.cloud.node_leases[member] = {.exists = true, .forwarded = true};
  w.cloud.cut.erase(member);
  const size_t before = w.WritesFor(member);
  w.Run(15);
  BOOST_TEST(!w.nodes[member].core->status().seen);
  BOOST_TEST(w.nodes[member].core->status().reachable);
  BOOST_TEST(w.WritesFor(member) > before);
  w.cloud.node_leases[member] = {.exists = true, .forwarded = false};
  w.Run(12);
  BOOST_TEST(w.nodes[member].core->status().seen);
  BOOST_TEST(w.cloud.delegated.count(member) == 0);
  BOOST_TEST(w.cloud.deletes == 1);
}

BOOST_AUTO_TEST_CASE(ADeadMemberIsNotKeptAlive) {
  World w;
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string member = leader == "hz-3" ? "hz-2" : "hz-3";
  w.cloud.cut.insert(member);
  w.Run(15);
  BOOST_REQUIRE(w.WritesFor(member) >= 2u);
  w.Kill(member);
  const int64_t died = w.clock.MonotonicMicros();
  const size_t at_death = w.WritesFor(member);
  w.Run(30);
  // At most the heartbeat already on its way is written after the death.
  BOOST_TEST(w.WritesFor(member) <= at_death + 1);
  const auto& last = w.cloud.writes.back();
  BOOST_TEST(last.node == member);
  BOOST_TEST(last.evidence->arrival_mono_us <= died);
}

BOOST_AUTO_TEST_CASE(ALeaderThatLosesTheCloudStepsDownAtOnce) {
  World w;
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  w.cloud.cut.insert(leader);
  w.Run(0.3);
  BOOST_TEST(!w.nodes[leader].core->status().leading);
  // Its peers hear it say so within one interval.
  w.Run(5);
  for (const auto& other : w.names) {
    if (other == leader) continue;
    BOOST_TEST(!w.nodes[other].core->LatestOf(leader)->heartbeat().leader);
  }
  // Another member takes the PoolLease once it expires (15 s, and a poll).
  w.Run(20);
  auto leaders = w.Leaders();
  BOOST_REQUIRE_EQUAL(leaders.size(), 1u);
  BOOST_TEST(leaders[0] != leader);
  // ... and delegates the old leader, which is alive but cut off.
  w.Run(10);
  BOOST_TEST(w.cloud.delegated.count(leader) == 1);
  BOOST_TEST(w.cloud.delegated[leader].delegate == leaders[0]);
}

BOOST_AUTO_TEST_CASE(ForbiddenWritesStepDown) {
  World w;
  w.Run(25);
  const std::string leader = w.Leaders().at(0);
  const std::string member = leader == "hz-3" ? "hz-2" : "hz-3";
  w.cloud.forbid_writes = true;
  w.cloud.cut.insert(member);
  w.Run(8);
  auto& stats = w.nodes[leader].core->delegation_stats();
  BOOST_TEST(stats.step_downs.load() == 1);
  BOOST_TEST(stats.refused_forbidden.load() == 1);
  BOOST_TEST(!w.nodes[leader].core->status().leading);
  // It released the PoolLease; another member takes it (and is refused too).
  w.Run(10);
  BOOST_TEST(w.cloud.pool_lease.holder_identity != leader);
  BOOST_TEST(w.cloud.writes.empty());
}

BOOST_AUTO_TEST_CASE(ARestartedAgentRejoinsWithinOneInterval) {
  World w;
  w.Run(25);
  const auto old_boot = w.nodes["hz-2"].core->boot_id();
  w.Kill("hz-2");
  w.Run(10);
  BOOST_TEST(w.nodes["hz-1"].core->status().peers_heard == 1u);
  w.Start("hz-2", 7);
  BOOST_TEST((w.nodes["hz-2"].core->boot_id() != old_boot));
  w.Run(5);  // one interval
  // Its peers hear the new boot (their certificate of hz-2 is still cached)...
  for (const auto& other : {"hz-1", "hz-3"}) {
    BOOST_TEST(w.nodes[other].core->status().peers_heard == 2u, other);
  }
  // ... and it hears them: their certificates came with its requests, and the
  // heartbeats that waited for them counted at once.
  BOOST_TEST(w.nodes["hz-2"].core->status().peers_heard == 2u);
  BOOST_TEST(w.nodes["hz-2"].core->stats().certificate_requests_sent.load() >= 1);
  // Its first heartbeats were verified (no verified one of theirs to sample from).
  BOOST_TEST(w.nodes["hz-2"].core->status().peers_fresh == 2u);
}

BOOST_AUTO_TEST_CASE(OnlyWhatDecisionsRestOnIsVerified) {
  World w;
  w.Run(65);
  // Everyone reachable: after the first heartbeats, signatures are checked for
  // the leader's heartbeats and once per 30 s per member.
  const std::string leader = w.Leaders().at(0);
  for (auto& [name, n] : w.nodes) {
    const auto& v = n.core->verifier_stats();
    const int64_t accepted = v.heartbeats_accepted.load(), heard = v.heartbeats_heard.load();
    BOOST_TEST(accepted + heard >= 24);  // 2 peers x 12-13 rounds
    // Of a non-leader peer's 13 heartbeats, 3 are checked (at 0, 30, 60 s).
    if (name == leader) {
      BOOST_TEST(accepted <= 6, name << ": " << accepted << " verified");
      BOOST_TEST(heard >= 18, name << ": " << heard << " heard");
    } else {
      BOOST_TEST(heard >= 9, name << ": " << heard << " heard");
    }
    BOOST_TEST(n.core->status().peers_heard == 2u);
  }
  // A member that says "cut off" is verified at every heartbeat.
  const std::string member = leader == "hz-3" ? "hz-2" : "hz-3";
  w.cloud.cut.insert(member);
  w.Run(2);
  const int64_t before = w.nodes[leader].core->verifier_stats().heartbeats_accepted.load();
  w.Run(20);
  BOOST_TEST(w.nodes[leader].core->verifier_stats().heartbeats_accepted.load() - before >= 4);
  BOOST_TEST(w.nodes[leader].core->status().peers_fresh >= 1u);
}

BOOST_AUTO_TEST_CASE(AgentCoreValidatesOptions) {
  pb::FakeClock clock;
  Lan lan;
  FakeLan fake(&lan, "hz-1");
  std::shared_ptr<const pa::NodeIdentity> id(&TestPki::Get().Identity("hz-1"),
                                              [](const pa::NodeIdentity*) {});
  pa::AgentOptions o;
  o.reachability.request_timeout_us = 10 * kS;  // = renew deadline
  BOOST_TEST(pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, o).status().code() ==
             absl::StatusCode::kInvalidArgument);
  o = pa::AgentOptions{};
  o.freshness.heartbeat_interval_us = 0;
  BOOST_TEST(!pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, o).ok());
  BOOST_TEST(!pa::AgentCore::New(nullptr, TestPki::Get().ca(), &clock, &fake, nullptr, {}).ok());
  BOOST_TEST(pa::AgentCore::New(id, TestPki::Get().ca(), &clock, &fake, nullptr, {}).ok());
}
