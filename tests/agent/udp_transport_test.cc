// The real LAN: one UDP socket per agent on 127.0.0.1, and two agents' LAN
// sides (RunLanLoop threads) hearing each other.
#define BOOST_TEST_MODULE udp_transport
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_core.h"
#include "agent/lan_loop.h"
#include "agent/udp_transport.h"
#include "base/clock.h"
#include "tests/agent/agent_testing.h"

namespace pa = poolcoord::agent;
namespace pb = poolcoord::base;
using pa::testing::TestPki;

namespace {

std::unique_ptr<pa::UdpTransport> Open(uint16_t peer_port = 0) {
  auto t = pa::UdpTransport::Open("127.0.0.1", 0, peer_port);
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  return std::move(*t);
}

// Reads until `want` datagrams came or 5 s passed.
std::vector<std::pair<std::string, int64_t>> ReadSome(pa::UdpTransport& t, size_t want) {
  std::vector<std::pair<std::string, int64_t>> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    auto n = t.Receive(100, [&](absl::string_view b, int64_t stamp) { got.emplace_back(std::string(b), stamp); });
    BOOST_REQUIRE(n.ok());
  }
  return got;
}

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace

BOOST_AUTO_TEST_CASE(SendAndReceiveWithArrivalStamps) {
  auto a = Open(), b = Open();
  BOOST_TEST(b->port() != 0);
  const std::string to_b = "127.0.0.1:" + std::to_string(b->port());
  const int64_t before = pb::RealClock::Get()->NowMicros();
  BOOST_REQUIRE(a->Send(to_b, "one").ok());
  BOOST_REQUIRE(a->Send(to_b, "two").ok());
  auto got = ReadSome(*b, 2);
  BOOST_REQUIRE_EQUAL(got.size(), 2u);
  BOOST_TEST(got[0].first == "one");
  BOOST_TEST(got[1].first == "two");
  BOOST_TEST(got[0].second >= before);
  BOOST_TEST(got[0].second <= pb::RealClock::Get()->NowMicros());
  // Nothing more: a read with no wait returns 0.
  auto n = b->Receive(0, [](absl::string_view, int64_t) {});
  BOOST_REQUIRE(n.ok());
  BOOST_TEST(*n == 0);
}

BOOST_AUTO_TEST_CASE(PeerPortFromTheTransport) {
  auto b = Open();
  auto a = Open(b->port());  // members' addresses are bare IPs: the configured port
  BOOST_REQUIRE(a->Send("127.0.0.1", "bare").ok());
  BOOST_REQUIRE(a->Send("[::ffff:127.0.0.1]:" + std::to_string(b->port()), "v6 form").code() ==
                absl::StatusCode::kInvalidArgument);  // an IPv4 socket takes IPv4 peers
  auto got = ReadSome(*b, 1);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0].first == "bare");
}

BOOST_AUTO_TEST_CASE(OversizedDatagramsAreCutForTheDecoder) {
  auto a = Open(), b = Open();
  const std::string to_b = "127.0.0.1:" + std::to_string(b->port());
  BOOST_REQUIRE(a->Send(to_b, std::string(9000, 'x')).ok());
  auto got = ReadSome(*b, 1);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0].first.size() == pa::kMaxCertificateDatagramBytes + 1);
  BOOST_TEST(pa::DecodeDatagram(got[0].first).status().code() == absl::StatusCode::kOutOfRange);
}

BOOST_AUTO_TEST_CASE(BadAddresses) {
  auto a = Open(7000);
  for (const char* bad : {"", "node-1", "10.0.0.1:0", "10.0.0.1:70000", "10.0.0.1:x", "[::1", "[::1]x",
                          "300.1.1.1"}) {
    BOOST_TEST(a->Send(bad, "x").code() == absl::StatusCode::kInvalidArgument, bad);
  }
  BOOST_TEST(pa::UdpTransport::Open("not-an-ip", 0, 0).status().code() ==
             absl::StatusCode::kInvalidArgument);
  // A port in use.
  auto taken = pa::UdpTransport::Open("127.0.0.1", a->port(), 0);
  BOOST_TEST(taken.status().code() == absl::StatusCode::kUnavailable);
}

BOOST_AUTO_TEST_CASE(TwoAgentsHearEachOther) {
  auto udp1 = Open(), udp2 = Open();
  auto pool = std::make_shared<pa::PoolView>();
  pool->pool = "hangzhou";
  pool->members = {{"hz-1", "127.0.0.1:" + std::to_string(udp1->port())},
                   {"hz-2", "127.0.0.1:" + std::to_string(udp2->port())}};
  pa::AgentOptions o;
  o.freshness.heartbeat_interval_us = 200'000;  // fast rounds for the test
  auto make = [&](const std::string& name, pa::UdpTransport* udp) {
    auto core = pa::AgentCore::New(TestPki::Get().SharedIdentity(name), TestPki::Get().ca(),
                                   pb::RealClock::Get(), udp, nullptr, o);
    BOOST_REQUIRE(core.ok());
    auto view = std::make_shared<pa::PoolView>(*pool);
    view->self = name;
    (*core)->SetPool(view);
    return std::move(*core);
  };
  auto core1 = make("hz-1", udp1.get());
  auto core2 = make("hz-2", udp2.get());
  std::atomic<bool> stop{false};
  absl::Status s1, s2;
  std::thread t1([&] { s1 = pa::RunLanLoop(core1.get(), udp1.get(), pb::RealClock::Get(), &stop); });
  std::thread t2([&] { s2 = pa::RunLanLoop(core2.get(), udp2.get(), pb::RealClock::Get(), &stop); });
  const bool heard = WaitFor(
      [&] { return core1->status().peers_heard == 1 && core2->status().peers_heard == 1; },
      std::chrono::seconds(5));
  stop = true;
  t1.join();
  t2.join();
  BOOST_TEST(heard);
  BOOST_TEST(s1.ok());
  BOOST_TEST(s2.ok());
  // Without a cloud, both say "cut off": every heartbeat is checked.
  auto latest = core1->LatestOf("hz-2");
  BOOST_REQUIRE(latest != nullptr);
  BOOST_TEST(!latest->heartbeat().cloud_reachable);
  BOOST_TEST(latest->arrival_wall_us <= pb::RealClock::Get()->NowMicros());
  for (size_t r = 0; r < pa::kDropReasonCount; ++r) {
    BOOST_TEST(core1->verifier_stats().dropped[r].load() == 0);
  }
}
