#define BOOST_TEST_MODULE peer_source
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "agent/peer_source.h"
#include "tests/cloud_fakes.h"

namespace pa = poolcoord::agent;
namespace pc = poolcoord::cloud;
using poolcoord::testing::FakeNodes;

namespace {

constexpr char kLabel[] = "apps.openyurt.io/nodepool";

pc::Node MakeNode(const std::string& name, const std::string& pool,
                  std::vector<pc::NodeAddress> addresses) {
  pc::Node n;
  n.metadata.name = name;
  if (!pool.empty()) n.metadata.labels[kLabel] = pool;
  n.addresses = std::move(addresses);
  return n;
}

std::string TempDir() {
  char tmpl[] = "/tmp/peer-source-test.XXXXXX";
  return mkdtemp(tmpl);
}

// Views handed to on_change, thread-safe.
struct Seen {
  absl::Mutex mu;
  std::vector<pa::PoolView> views;
  void Add(const pa::PoolView& v) {
    absl::MutexLock l(&mu);
    views.push_back(v);
  }
  bool WaitFor(const std::function<bool(const pa::PoolView&)>& pred) {
    for (int i = 0; i < 200; ++i) {
      {
        absl::MutexLock l(&mu);
        if (!views.empty() && pred(views.back())) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(InternalAddressesOnly) {
  auto view = pa::PeerSource::ViewOf(
      "hz", "hz-1",
      {MakeNode("hz-1", "hz", {{"Hostname", "hz-1"}, {"InternalIP", "10.0.0.1"}}),
       MakeNode("hz-2", "hz", {{"InternalIP", "fd00::2"}, {"InternalIP", "10.0.0.2"}}),
       MakeNode("hz-3", "hz", {{"InternalIP", "fd00::3"}}),
       MakeNode("hz-4", "hz", {{"ExternalIP", "1.2.3.4"}})});
  BOOST_TEST(view.pool == "hz");
  BOOST_TEST(view.self == "hz-1");
  BOOST_TEST(view.AddressOf("hz-1") == "10.0.0.1");
  BOOST_TEST(view.AddressOf("hz-2") == "10.0.0.2");  // IPv4 first
  BOOST_TEST(view.AddressOf("hz-3") == "fd00::3");
  BOOST_TEST(!view.IsMember("hz-4"));  // no InternalIP: not reachable on the LAN
}

BOOST_AUTO_TEST_CASE(CacheRoundTrip) {
  pa::PoolView v{"hz", "hz-1", {{"hz-1", "10.0.0.1"}, {"hz-2", "10.0.0.2"}}};
  auto back = pa::PeerSource::DecodeCache(pa::PeerSource::EncodeCache(v));
  BOOST_REQUIRE(back.ok());
  BOOST_TEST((*back == v));
  BOOST_TEST(pa::PeerSource::DecodeCache("{").status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::PeerSource::DecodeCache(R"({"pool":"hz","self":"a","members":{"b":1}})").status().code() ==
             absl::StatusCode::kInvalidArgument);
  BOOST_TEST(pa::PeerSource::DecodeCache(R"({"pool":"hz"})").status().code() ==
             absl::StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(DiscoverFollowAndCache) {
  FakeNodes nodes;
  nodes.Put(MakeNode("hz-1", "hz", {{"InternalIP", "10.0.0.1"}}));
  nodes.Put(MakeNode("hz-2", "hz", {{"InternalIP", "10.0.0.2"}}));
  nodes.Put(MakeNode("bj-1", "bj", {{"InternalIP", "10.1.0.1"}}));
  nodes.Put(MakeNode("lone", "", {{"InternalIP", "10.2.0.1"}}));
  const std::string dir = TempDir();
  Seen seen;
  pa::PeerSource source(&nodes, {"hz-1", kLabel, dir}, [&](auto v) { seen.Add(*v); });
  BOOST_TEST(source.LoadCache().status().code() == absl::StatusCode::kNotFound);
  auto pool = source.DiscoverPool();
  BOOST_REQUIRE(pool.ok());
  BOOST_TEST(*pool == "hz");
  source.Start(*pool);
  BOOST_TEST(seen.WaitFor([](const pa::PoolView& v) { return v.members.size() == 2; }));
  // Changes follow: a node joins, one of another pool changes, one leaves.
  nodes.Put(MakeNode("hz-3", "hz", {{"InternalIP", "10.0.0.3"}}));
  nodes.Put(MakeNode("bj-2", "bj", {{"InternalIP", "10.1.0.2"}}));  // the fake's watch does not filter
  BOOST_TEST(seen.WaitFor([](const pa::PoolView& v) { return v.IsMember("hz-3"); }));
  nodes.Put(MakeNode("hz-2", "bj", {{"InternalIP", "10.0.0.2"}}), "MODIFIED");  // relabelled away
  BOOST_TEST(seen.WaitFor([](const pa::PoolView& v) { return !v.IsMember("hz-2"); }));
  source.Stop();
  {
    absl::MutexLock l(&seen.mu);
    for (const auto& v : seen.views) {
      BOOST_TEST(!v.IsMember("bj-1"));
      BOOST_TEST(!v.IsMember("bj-2"));
      BOOST_TEST(!v.IsMember("lone"));
    }
  }
  // A restart reads the pool back from the cache, before any cloud answer.
  FakeNodes unreachable;
  unreachable.errors.Inject("get", absl::UnavailableError("cut off"));
  Seen again;
  pa::PeerSource restarted(&unreachable, {"hz-1", kLabel, dir}, [&](auto v) { again.Add(*v); });
  auto cached = restarted.LoadCache();
  BOOST_REQUIRE(cached.ok());
  BOOST_TEST((*cached)->pool == "hz");
  BOOST_TEST((*cached)->IsMember("hz-3"));
  BOOST_TEST(!(*cached)->IsMember("hz-2"));
  BOOST_TEST(again.views.size() == 1u);
  // Another node's cache is not ours.
  pa::PeerSource other(&unreachable, {"hz-9", kLabel, dir}, [](auto) {});
  BOOST_TEST(other.LoadCache().status().code() == absl::StatusCode::kNotFound);
  std::remove((dir + "/peers.json").c_str());
  rmdir(dir.c_str());
}

BOOST_AUTO_TEST_CASE(NodeWithoutPool) {
  FakeNodes nodes;
  nodes.Put(MakeNode("lone", "", {{"InternalIP", "10.2.0.1"}}));
  pa::PeerSource source(&nodes, {"lone", kLabel, ""}, [](auto) {});
  auto pool = source.DiscoverPool();
  BOOST_TEST(pool.status().code() == absl::StatusCode::kNotFound);
  BOOST_TEST(std::string(pool.status().message()).find(kLabel) != std::string::npos);
  BOOST_TEST(source.LoadCache().status().code() == absl::StatusCode::kNotFound);  // no cache dir
}
