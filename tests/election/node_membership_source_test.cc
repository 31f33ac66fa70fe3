#define BOOST_TEST_MODULE node_membership_source
#include "election/node_membership_source.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "cloud/errors.h"
#include "election/membership.h"
#include "tests/cloud_fakes.h"

namespace pe = poolcoord::election;
namespace pc = poolcoord::cloud;

namespace {

constexpr char kLabel[] = "apps.openyurt.io/nodepool";

pc::Node NodeIn(const std::string& name, const std::string& pool) {
  pc::Node n;
  n.metadata.name = name;
  if (!pool.empty()) n.metadata.labels[kLabel] = pool;
  return n;
}

// The pool of `node` as the index has it ("" when none).
std::string PoolOf(const pe::MembershipIndex& index, const std::string& node) {
  for (const auto& [pool, members] : index.Snapshot()) {
    for (const auto& m : members) {
      if (m == node) return pool;
    }
  }
  return "";
}

// Waits (on the real clock: the source runs its own thread) until `pred` holds.
template <typename Pred>
bool Eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// A started source whose first list has put hz-1 (of hangzhou) in the index.
// The test stops it.
struct Watching {
  Watching() {
    nodes.Put(NodeIn("hz-1", "hangzhou"));
    source.Start();
    BOOST_REQUIRE(Eventually([&] { return PoolOf(index, "hz-1") == "hangzhou"; }));
  }
  poolcoord::testing::FakeNodes nodes;
  pe::MembershipIndex index;
  pe::NodeMembershipSource source{&nodes, &index, kLabel};
};

}  // namespace

BOOST_AUTO_TEST_CASE(list_fills_the_index_with_labelled_nodes) {
  poolcoord::testing::FakeNodes nodes;
  nodes.Put(NodeIn("hz-1", "hangzhou"));
  nodes.Put(NodeIn("bj-1", "beijing"));
  nodes.Put(NodeIn("cloud-1", ""));
  pe::MembershipIndex index;
  pe::NodeMembershipSource source(&nodes, &index, kLabel);
  auto rv = source.ListOnce();
  BOOST_REQUIRE(rv.ok());
  BOOST_TEST(!rv->empty());
  BOOST_TEST(index.Loaded());
  BOOST_TEST(PoolOf(index, "hz-1") == "hangzhou");
  BOOST_TEST(PoolOf(index, "bj-1") == "beijing");
  BOOST_TEST(PoolOf(index, "cloud-1") == "");
  // Only labelled Nodes are asked for.
  BOOST_TEST(nodes.Calls().front() == std::string("list ") + kLabel);
}

BOOST_FIXTURE_TEST_CASE(watch_follows_relabels_and_deletes, Watching) {
  nodes.Put(NodeIn("hz-1", "beijing"), "MODIFIED");
  BOOST_TEST(Eventually([&] { return PoolOf(index, "hz-1") == "beijing"; }));
  nodes.Put(NodeIn("hz-2", "hangzhou"), "ADDED");
  BOOST_TEST(Eventually([&] { return PoolOf(index, "hz-2") == "hangzhou"; }));
  nodes.Put(NodeIn("hz-2", ""), "MODIFIED");  // label removed
  BOOST_TEST(Eventually([&] { return PoolOf(index, "hz-2").empty(); }));
  nodes.Remove("hz-1");
  BOOST_TEST(Eventually([&] { return PoolOf(index, "hz-1").empty(); }));
  source.Stop();
}

// A watch that ends with 410 Expired makes the source list again (the
// reflector's relist), picking up what changed meanwhile.
BOOST_FIXTURE_TEST_CASE(expired_watch_relists, Watching) {
  auto lists = [&] {
    const auto calls = nodes.Calls();
    return std::count_if(calls.begin(), calls.end(),
                         [](const std::string& c) { return c.rfind("list ", 0) == 0; });
  };
  BOOST_TEST(lists() == 1);
  nodes.EndWatch(pc::ApiError(410, "Expired", "too old resource version"));
  BOOST_TEST(Eventually([&] { return lists() == 2; }));
  source.Stop();
}

BOOST_AUTO_TEST_CASE(failed_list_is_retried) {
  poolcoord::testing::FakeNodes nodes;
  nodes.Put(NodeIn("hz-1", "hangzhou"));
  nodes.errors.Inject("list", pc::ApiError(403, "Forbidden", "nodes is forbidden"));
  pe::MembershipIndex index;
  pe::NodeMembershipSource source(&nodes, &index, kLabel);
  BOOST_TEST(pc::IsForbidden(source.ListOnce().status()));
  BOOST_TEST(!index.Loaded());
  nodes.errors.Inject("list", pc::ApiError(503, "ServiceUnavailable", "down"));
  source.Start();  // the first list fails, the retry (after 0.5 s) succeeds
  BOOST_TEST(Eventually([&] { return PoolOf(index, "hz-1") == "hangzhou"; }));
  source.Stop();
}

// A burst of new Nodes (a region's nodes created at once) reaches the index
// whole, in a few publications rather than one rebuild per Node: 12,000 Nodes
// created together once took the index minutes to learn, one O(nodes) rebuild
// per event, while their pool's DelegatedLeases were refused with 422.
BOOST_FIXTURE_TEST_CASE(a_burst_of_nodes_is_published_together, Watching) {
  const int64_t before = index.Generation();
  constexpr int kBurst = 5'000;
  for (int i = 0; i < kBurst; ++i) nodes.Put(NodeIn("e-" + std::to_string(i), "edge"), "ADDED");
  BOOST_TEST(Eventually([&] {
    const auto snapshot = index.Snapshot();
    auto it = snapshot.find("edge");
    return it != snapshot.end() && it->second.size() == static_cast<size_t>(kBurst);
  }));
  // Publications are at least 100 ms apart: far fewer than the events.
  BOOST_TEST(index.Generation() - before < kBurst / 10, "publications " << index.Generation() - before);
  BOOST_TEST(PoolOf(index, "hz-1") == "hangzhou");
  source.Stop();
}

// Stop publishes what the watch brought last, so nothing it saw is lost.
BOOST_AUTO_TEST_CASE(stop_publishes_the_last_changes) {
  poolcoord::testing::FakeNodes nodes;
  nodes.Put(NodeIn("hz-1", "hangzhou"));
  pe::MembershipIndex index;
  // An interval no test waits out: only Stop can publish the change below.
  pe::NodeMembershipSource source(&nodes, &index, kLabel, std::chrono::hours(1));
  source.Start();
  BOOST_REQUIRE(Eventually([&] { return PoolOf(index, "hz-1") == "hangzhou"; }));
  nodes.Put(NodeIn("hz-2", "hangzhou"), "ADDED");
  // The first change after the list is published at once; the next one waits.
  BOOST_REQUIRE(Eventually([&] { return PoolOf(index, "hz-2") == "hangzhou"; }));
  nodes.Put(NodeIn("hz-3", "hangzhou"), "ADDED");
  nodes.Put(NodeIn("hz-1", ""), "MODIFIED");
  // The watch has handed both events over; only Stop can publish them.
  BOOST_REQUIRE(Eventually([&] { return nodes.AllEventsHandled(); }));
  BOOST_TEST(PoolOf(index, "hz-3").empty());
  source.Stop();
  BOOST_TEST(PoolOf(index, "hz-3") == "hangzhou");
  BOOST_TEST(PoolOf(index, "hz-1").empty());
}
