#define BOOST_TEST_MODULE forwarder_shards
#include "controllers/forwarder_shards.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "controllers/forwarder.h"
#include "tests/cloud_fakes.h"

namespace pcn = poolcoord::controllers;
namespace pb = poolcoord::base;
using std::chrono::milliseconds;

namespace {

constexpr int kShards = 8;
constexpr int64_t kSecond = 1'000'000;

std::set<int> AsSet(const std::vector<int>& v) { return std::set<int>(v.begin(), v.end()); }

// A replica: its ForwarderShards over the shared fake Leases, and what its
// forwarder was told to own.
struct Replica {
  Replica(const std::string& id, poolcoord::testing::FakeLeases* leases, pb::FakeClock* clock,
          std::map<int, std::set<std::string>>* owners, absl::Mutex* mu) {
    pcn::ForwarderShardsOptions o;
    o.shards = kShards;
    o.identity = id;
    pcn::ShardTarget target{[=](int s) {
                              absl::MutexLock l(mu);
                              (*owners)[s].insert(id);
                            },
                            [=](int s) {
                              absl::MutexLock l(mu);
                              (*owners)[s].erase(id);
                            }};
    auto made = pcn::ForwarderShards::New(leases, clock, &registry, o, target);
    BOOST_REQUIRE_MESSAGE(made.ok(), made.status().ToString());
    shards = *std::move(made);
  }
  pb::MetricsRegistry registry;
  std::unique_ptr<pcn::ForwarderShards> shards;
};

struct World {
  // Steps every live replica every 100 ms for `d`; after each step no shard
  // may be owned by two replicas, and each shard's longest time without an
  // owner is recorded.
  void Run(int64_t d_us) {
    const int64_t end = clock.MonotonicMicros() + d_us;
    while (clock.MonotonicMicros() < end) {
      for (auto& [id, r] : replicas) {
        if (!dead.count(id)) r->shards->Step();
      }
      absl::MutexLock l(&mu);
      for (int s = 0; s < kShards; ++s) {
        // A dead replica's forwarder stopped with it.
        std::set<std::string> live;
        for (const auto& id : owners[s]) {
          if (!dead.count(id)) live.insert(id);
        }
        BOOST_REQUIRE_MESSAGE(live.size() <= 1, "shard " << s << " owned twice");
        if (live.empty()) {
          unowned_since.try_emplace(s, clock.MonotonicMicros());
          longest_gap = std::max(longest_gap, clock.MonotonicMicros() - unowned_since[s]);
        } else {
          unowned_since.erase(s);
        }
      }
      clock.Advance(milliseconds(100));
    }
  }
  void Add(const std::string& id) {
    replicas[id] = std::make_unique<Replica>(id, &leases, &clock, &owners, &mu);
  }
  std::set<int> Owned(const std::string& id) {
    absl::MutexLock l(&mu);
    std::set<int> out;
    for (const auto& [s, ids] : owners) {
      if (ids.count(id)) out.insert(s);
    }
    return out;
  }

  pb::FakeClock clock;
  poolcoord::testing::FakeLeases leases;
  absl::Mutex mu;
  std::map<int, std::set<std::string>> owners;
  std::map<std::string, std::unique_ptr<Replica>> replicas;
  std::set<std::string> dead;
  std::map<int, int64_t> unowned_since;
  int64_t longest_gap = 0;
};

}  // namespace

BOOST_AUTO_TEST_CASE(assignment_is_shared_evenly_and_moves_little) {
  std::set<int> all;
  for (int s = 0; s < kShards; ++s) all.insert(s);
  BOOST_TEST(AsSet(pcn::ForwarderShards::Assign({}, "a", kShards)) == all);
  // Every replica computes the same split from the same set, in any order.
  const auto a = AsSet(pcn::ForwarderShards::Assign({"b"}, "a", kShards));
  const auto b = AsSet(pcn::ForwarderShards::Assign({"a", "b"}, "b", kShards));
  BOOST_TEST(a.size() == 4u);
  BOOST_TEST(b.size() == 4u);
  std::set<int> both = a;
  both.insert(b.begin(), b.end());
  BOOST_TEST(both == all);
  // A third replica takes about a third; the two keep most of theirs.
  std::set<int> union3;
  int kept = 0;
  for (const std::string me : {"a", "b", "c"}) {
    const auto mine = AsSet(pcn::ForwarderShards::Assign({"a", "b", "c"}, me, kShards));
    BOOST_TEST(mine.size() <= 3u);
    union3.insert(mine.begin(), mine.end());
    for (int s : mine) kept += (me == "a" && a.count(s)) || (me == "b" && b.count(s));
  }
  BOOST_TEST(union3 == all);
  BOOST_TEST(kept >= 4);
}

BOOST_AUTO_TEST_CASE(a_lone_replica_forwards_every_shard) {
  World w;
  w.Add("a");
  w.Run(3 * kSecond);
  BOOST_TEST(w.Owned("a").size() == static_cast<size_t>(kShards));
  BOOST_TEST(AsSet(w.replicas["a"]->shards->Held()).size() == static_cast<size_t>(kShards));
}

// A second replica takes half the shards, each handed over (stopped, then
// released) with no moment of two owners; a killed replica's shards move to
// the survivor one lease duration after its last renewal, plus a poll, so no
// node's cloud Lease (renewed every 10 s) nears a 40 s grace period.
BOOST_AUTO_TEST_CASE(shards_move_on_join_and_on_death_never_doubly_owned) {
  World w;
  w.Add("a");
  w.Run(3 * kSecond);
  w.Add("b");
  w.Run(10 * kSecond);
  BOOST_TEST(w.Owned("a").size() == 4u);
  BOOST_TEST(w.Owned("b").size() == 4u);
  BOOST_TEST(w.longest_gap <= 4 * kSecond, "a handover left a shard unowned for " << w.longest_gap);
  const std::set<int> from_a = w.Owned("a");
  w.dead.insert("a");  // kill -9: nothing released
  w.longest_gap = 0;
  w.Run(25 * kSecond);
  BOOST_TEST(w.Owned("b").size() == static_cast<size_t>(kShards));
  // 15 s after its last renewal (up to 2 s before the kill), then a poll.
  BOOST_TEST(w.longest_gap <= 16 * kSecond, "the dead replica's shards waited " << w.longest_gap);
  BOOST_TEST(w.longest_gap >= 13 * kSecond);  // not before its Leases expired (15 s after a renewal up to 2 s before the kill)
}

// A replica that stops cleanly hands its shards over at once.
BOOST_AUTO_TEST_CASE(a_clean_stop_hands_over_at_once) {
  World w;
  w.Add("a");
  w.Add("b");
  w.Run(10 * kSecond);
  BOOST_REQUIRE(w.Owned("a").size() == 4u);
  w.replicas["a"]->shards->Stop();
  w.dead.insert("a");
  w.longest_gap = 0;
  w.Run(8 * kSecond);
  BOOST_TEST(w.Owned("b").size() == static_cast<size_t>(kShards));
  BOOST_TEST(w.Owned("a").empty());
  BOOST_TEST(w.longest_gap <= 4 * kSecond, "after a clean stop a shard waited " << w.longest_gap);
}

// Nodes fall into shards the same way on every replica, and spread over them.
BOOST_AUTO_TEST_CASE(nodes_spread_over_the_shards) {
  std::vector<int> count(kShards, 0);
  for (int i = 0; i < 8000; ++i) {
    ++count[pcn::Forwarder::ShardOf("edge-node-" + std::to_string(i), kShards)];
  }
  for (int c : count) {
    BOOST_TEST(c > 850);
    BOOST_TEST(c < 1150);
  }
  BOOST_TEST(pcn::Forwarder::ShardOf("x", 1) == 0);
}
