// The deterministic simulation's scheduler and clocks (agent/sim/scheduler.h):
// events run in time order, ties in an order drawn from the seed (the same
// for one seed, another for another), the clock moves only to each event's
// time, and a node's wall clock steps while its monotonic clock does not.
#define BOOST_TEST_MODULE scheduler
#include "agent/sim/scheduler.h"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace ps = poolcoord::sim;

namespace {

constexpr int64_t kWall = 1'767'225'600'000'000;  // 2026-01-01T00:00:00Z, µs

// Ten events at one time and three later ones, scheduled in a fixed order;
// the order they ran in.
std::vector<int> RunOrder(uint64_t seed) {
  ps::Scheduler s(seed, kWall);
  std::vector<int> order;
  const int64_t t = s.now() + 1'000'000;
  for (int i = 0; i < 10; ++i) s.At(t, [&order, i] { order.push_back(i); });
  s.At(t + 2, [&order] { order.push_back(12); });
  s.At(t + 1, [&order, &s] {
    order.push_back(11);
    s.After(0, [&order] { order.push_back(13); });  // now: before t + 2
  });
  s.RunUntil(t + 10);
  return order;
}

}  // namespace

BOOST_AUTO_TEST_CASE(TiesRunInAnOrderDrawnFromTheSeed) {
  const std::vector<int> a = RunOrder(7), b = RunOrder(7), c = RunOrder(8);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
  for (const auto& order : {a, c}) {
    BOOST_REQUIRE(order.size() == 13u);
    // The later events after every tie, in time order; what an event
    // schedules for now runs before what is due later.
    BOOST_TEST(std::vector<int>(order.end() - 3, order.end()) == (std::vector<int>{11, 13, 12}));
  }
  // The ties themselves shuffled, not in the order scheduled.
  std::vector<int> scheduled{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  BOOST_TEST(std::vector<int>(a.begin(), a.begin() + 10) != scheduled);
}

BOOST_AUTO_TEST_CASE(TheClockMovesToEachEventAndThenToTheEnd) {
  ps::Scheduler s(1, kWall);
  const int64_t start = s.now();
  BOOST_TEST(s.clock()->NowMicros() == kWall);
  std::vector<int64_t> seen;
  s.At(start + 500, [&] { seen.push_back(s.now()); });
  s.At(start - 100, [&] { seen.push_back(s.now()); });  // the past: runs now
  s.At(start + 5'000, [&] { seen.push_back(s.now()); });  // after the end: waits
  s.RunUntil(start + 1'000);
  BOOST_TEST(seen == (std::vector<int64_t>{start, start + 500}));
  BOOST_TEST(s.now() == start + 1'000);
  BOOST_TEST(s.clock()->NowMicros() == kWall + 1'000);
  BOOST_TEST(s.events_run() == 2);
  s.RunUntil(start + 10'000);
  BOOST_TEST(seen.back() == start + 5'000);
}

BOOST_AUTO_TEST_CASE(ANodeClockStepsItsWallTimeOnly) {
  ps::Scheduler s(1, kWall);
  ps::NodeClock c(s.clock(), -3'000'000);
  BOOST_TEST(c.NowMicros() == kWall - 3'000'000);
  c.Step(10'000'000);
  BOOST_TEST(c.NowMicros() == kWall + 7'000'000);
  BOOST_TEST(c.MonotonicMicros() == s.now());
  s.RunUntil(s.now() + 2'000'000);
  BOOST_TEST(c.NowMicros() == kWall + 9'000'000);
}

BOOST_AUTO_TEST_CASE(RngStreamsRepeatAndSplitIndependently) {
  ps::Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) BOOST_TEST(a.Next() == b.Next());
  ps::Rng parent(42);
  ps::Rng s1 = parent.Split(1), s1again = parent.Split(1), s2 = parent.Split(2);
  const uint64_t x = s1.Next();
  BOOST_TEST(x == s1again.Next());
  BOOST_TEST(x != s2.Next());
  for (int i = 0; i < 1000; ++i) {
    const double u = a.Uniform();
    BOOST_TEST((u >= 0 && u < 1));
    const int64_t k = a.UniformInt(-2, 2);
    BOOST_TEST((k >= -2 && k <= 2));
  }
  BOOST_TEST(!a.Chance(0));
  unsigned char bytes[13] = {};
  a.Fill(bytes, sizeof bytes);
  int nonzero = 0;
  for (unsigned char c : bytes) nonzero += c != 0 ? 1 : 0;
  BOOST_TEST(nonzero > 6);
}
