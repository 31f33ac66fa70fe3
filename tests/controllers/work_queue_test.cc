#define BOOST_TEST_MODULE work_queue
#include "controllers/work_queue.h"

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"

namespace pcn = poolcoord::controllers;
namespace pb = poolcoord::base;
using std::chrono::milliseconds;

namespace {

std::vector<std::string> Drain(pcn::WorkQueue& q) {
  std::vector<std::string> out;
  while (auto item = q.TryGet()) {
    out.push_back(item->key);
    q.Done(item->key);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_key_is_queued_once_at_its_earliest_due_time) {
  pb::FakeClock clock;
  pcn::WorkQueue q(&clock);
  q.AddAt("a", 5'000'000);
  q.AddAt("a", 2'000'000);  // earlier: kept
  q.AddAt("a", 9'000'000);  // later: ignored
  BOOST_TEST(q.Len() == 1u);
  BOOST_TEST(q.NextDue() == 2'000'000);
  BOOST_TEST(!q.TryGet().has_value());
  clock.Advance(milliseconds(2'000));
  auto item = q.TryGet();
  BOOST_REQUIRE(item.has_value());
  BOOST_TEST(item->key == "a");
  BOOST_TEST(item->due_us == 2'000'000);
  q.Done("a");
  BOOST_TEST(q.Len() == 0u);
  BOOST_TEST(!q.Contains("a"));
}

BOOST_AUTO_TEST_CASE(ready_keys_come_by_priority_then_most_overdue_first) {
  pb::FakeClock clock;
  pcn::WorkQueue q(&clock);
  clock.Advance(milliseconds(10'000));
  q.AddAt("late-low", 1'000'000, 1);
  q.AddAt("b", 7'000'000);
  q.AddAt("a", 3'000'000);
  q.AddAt("future", 11'000'000);
  q.AddAt("c", 9'000'000);
  BOOST_TEST(q.Lag(0) == 7'000'000);  // "a" has waited 7 s
  BOOST_TEST(q.Lag(1) == 9'000'000);
  BOOST_TEST((Drain(q) == std::vector<std::string>{"a", "b", "c", "late-low"}));
  clock.Advance(milliseconds(1'000));
  BOOST_TEST((Drain(q) == std::vector<std::string>{"future"}));
  BOOST_TEST(q.Lag(0) == 0);
}

BOOST_AUTO_TEST_CASE(a_key_added_while_held_comes_back_after_done) {
  pb::FakeClock clock;
  pcn::WorkQueue q(&clock);
  q.Add("n");
  auto held = q.TryGet();
  BOOST_REQUIRE(held.has_value());
  q.Add("n");                 // due again while a worker holds it
  q.AddAt("n", 5'000'000);    // later: the earlier re-add stands
  BOOST_TEST(!q.TryGet().has_value());  // never to a second worker
  BOOST_TEST(q.Processing() == 1u);
  q.Done("n");
  auto again = q.TryGet();
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(again->due_us == 0);
  q.Done("n");
  BOOST_TEST(!q.Contains("n"));
}

BOOST_AUTO_TEST_CASE(add_if_absent_leaves_a_queued_or_held_key_alone) {
  pb::FakeClock clock;
  pcn::WorkQueue q(&clock);
  q.AddAt("n", 5'000'000);
  BOOST_TEST(!q.AddIfAbsent("n", 0));
  BOOST_TEST(q.NextDue() == 5'000'000);
  clock.Advance(milliseconds(5'000));
  auto held = q.TryGet();
  BOOST_REQUIRE(held.has_value());
  BOOST_TEST(!q.AddIfAbsent("n", 0));
  q.Done("n");
  BOOST_TEST(!q.Contains("n"));
  BOOST_TEST(q.AddIfAbsent("n", 0));
}

BOOST_AUTO_TEST_CASE(failures_back_off_exponentially_until_forgotten) {
  pb::FakeClock clock;
  pcn::WorkQueue q(&clock, pcn::WorkQueueOptions{100'000, 1'000'000});
  std::vector<int64_t> waits;
  for (int i = 0; i < 6; ++i) {
    const int64_t before = clock.MonotonicMicros();
    q.AddRateLimited("n");
    waits.push_back(q.NextDue() - before);
    clock.Advance(std::chrono::microseconds(q.NextDue() - before));
    auto item = q.TryGet();
    BOOST_REQUIRE(item.has_value());
    q.Done("n");
  }
  BOOST_TEST((waits == std::vector<int64_t>{100'000, 200'000, 400'000, 800'000, 1'000'000,
                                            1'000'000}));
  BOOST_TEST(q.NumRequeues("n") == 6);
  q.Forget("n");
  BOOST_TEST(q.NumRequeues("n") == 0);
  q.AddRateLimited("n");
  BOOST_TEST(q.NextDue() - clock.MonotonicMicros() == 100'000);
}

// Many workers on real threads: no key is ever held by two at once, and every
// add is served.
BOOST_AUTO_TEST_CASE(workers_never_share_a_key) {
  pcn::WorkQueue q(pb::RealClock::Get());
  absl::Mutex mu;
  std::map<std::string, int> holding;  // key -> workers holding it now
  int overlaps = 0, served = 0;
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&] {
      while (auto item = q.Get()) {
        {
          absl::MutexLock l(&mu);
          if (++holding[item->key] > 1) ++overlaps;
          ++served;
        }
        std::this_thread::yield();
        {
          absl::MutexLock l(&mu);
          --holding[item->key];
        }
        q.Done(item->key);
      }
    });
  }
  for (int round = 0; round < 2'000; ++round) q.Add("k" + std::to_string(round % 5));
  // Every key is served at least once after its last add.
  for (int i = 0; i < 5; ++i) {
    while (q.Contains("k" + std::to_string(i))) std::this_thread::yield();
  }
  q.ShutDown();
  for (auto& t : workers) t.join();
  BOOST_TEST(overlaps == 0);
  BOOST_TEST(served >= 5);
  BOOST_TEST(q.Len() == 0u);
}

BOOST_AUTO_TEST_CASE(shutdown_wakes_every_waiting_worker) {
  pcn::WorkQueue q(pb::RealClock::Get());
  // Boost.Test's assertions are not thread-safe: the workers count, the main thread asserts.
  std::atomic<int> ended{0};
  std::atomic<int> got_an_item{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      if (q.Get().has_value()) ++got_an_item;
      ++ended;
    });
  }
  q.ShutDown();
  for (auto& t : workers) t.join();
  BOOST_TEST(ended.load() == 4);
  BOOST_TEST(got_an_item.load() == 0);
}
