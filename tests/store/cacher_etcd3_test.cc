// The watch cache over the real etcd3 store (a real etcd, tests/store/etcd_fixture.h):
// many API watchers share one etcd watch per kind.
#define BOOST_TEST_MODULE cacher_etcd3
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "store/cacher.h"
#include "store/etcd3_store.h"
#include "tests/store/etcd_fixture.h"
#include "tests/store/update_fns.h"

namespace poolcoord::store {
namespace {

using std::chrono::milliseconds;

// A gauge from etcd's /metrics ("etcd_debugging_mvcc_watcher_total"), -1 when unread.
int64_t EtcdGauge(const std::string& name) {
  const std::string body = testing::EtcdMetricsText(testing::SharedEtcd().endpoint());
  const std::string prefix = "\n" + name + " ";
  const size_t at = body.find(prefix);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(std::stod(body.substr(at + prefix.size())));
}

template <typename F>
bool Eventually(F condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return condition();
}

using test_util::Put;

std::unique_ptr<Store> NewCachedEtcd3(const std::string& prefix) {
  Etcd3StoreOptions options;
  options.endpoints = {testing::SharedEtcd().endpoint()};
  options.prefix = prefix;
  auto etcd = NewEtcd3Store(options);
  BOOST_REQUIRE_MESSAGE(etcd.ok(), etcd.status().ToString());
  auto cached = NewCacher(*std::move(etcd), {});
  BOOST_REQUIRE_MESSAGE(cached.ok(), cached.status().ToString());
  return *std::move(cached);
}

BOOST_AUTO_TEST_CASE(ManyWatchersOneEtcdWatchPerKind) {
  BOOST_REQUIRE(Eventually([] { return EtcdGauge("etcd_debugging_mvcc_watcher_total") == 0; }));
  auto store = NewCachedEtcd3("/test/cacher-many");
  BOOST_REQUIRE(Eventually([] { return EtcdGauge("etcd_debugging_mvcc_watcher_total") == 2; }));

  // Start from a revision only the other kind moved: the PoolLease cache lags
  // it, and a watch from there still gets exactly what follows.
  auto other = store->Update(Kind::kDelegatedLease, "x", Put(Kind::kDelegatedLease, 1));
  BOOST_REQUIRE(other.ok());
  const int64_t start = other->object->metadata.resource_version;
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < 200; ++i) {
    auto w = store->Watch(Kind::kPoolLease, start);
    BOOST_REQUIRE_MESSAGE(w.ok(), w.status().ToString());
    watchers.push_back(*std::move(w));
  }
  BOOST_TEST(EtcdGauge("etcd_debugging_mvcc_watcher_total") == 2);

  std::vector<int64_t> written;
  for (int i = 0; i < 10; ++i) {
    auto r = store->Update(Kind::kPoolLease, "p" + std::to_string(i % 3), Put(Kind::kPoolLease, i + 1));
    BOOST_REQUIRE(r.ok());
    written.push_back(r->object->metadata.resource_version);
  }
  for (auto& w : watchers) {
    std::vector<int64_t> got;
    while (got.size() < written.size()) {
      EventPtr e = w->Next(milliseconds(10000));
      if (!e || e->type == EventType::kError) break;
      got.push_back(e->revision);
    }
    BOOST_REQUIRE(got == written);
  }

  // "0" lists from the cache: the same objects as etcd itself.
  ListOptions any;
  any.freshness.rule = Freshness::Rule::kAny;
  auto cached = store->List(Kind::kPoolLease, any);
  auto fresh = store->List(Kind::kPoolLease, {});
  BOOST_REQUIRE(cached.ok());
  BOOST_REQUIRE(fresh.ok());
  BOOST_REQUIRE(cached->items.size() == fresh->items.size());
  for (size_t i = 0; i < fresh->items.size(); ++i) {
    BOOST_TEST(cached->items[i]->metadata.name == fresh->items[i]->metadata.name);
    BOOST_TEST(cached->items[i]->metadata.resource_version ==
               fresh->items[i]->metadata.resource_version);
  }

  // No progress requests through the gateway: bookmarks carry the cache's revision.
  BOOST_REQUIRE(watchers[0]->RequestProgress());
  EventPtr bookmark = watchers[0]->Next(milliseconds(10000));
  BOOST_REQUIRE(bookmark);
  BOOST_TEST((bookmark->type == EventType::kBookmark));
  BOOST_TEST(bookmark->revision == written.back());

  store->Shutdown();
  BOOST_TEST(Eventually([] { return EtcdGauge("etcd_debugging_mvcc_watcher_total") == 0; }));
}

// GetAll is a consistent read even through the watch cache: another replica's
// delete and replacement, acknowledged by etcd, are what it answers while the
// cache (driven here, so it stays behind until told) still holds the old state.
BOOST_AUTO_TEST_CASE(GetAllIsConsistentWhileTheCacheLags) {
  const std::string prefix = "/test/cacher-getall";
  Etcd3StoreOptions options;
  options.endpoints = {testing::SharedEtcd().endpoint()};
  options.prefix = prefix;
  auto other = NewEtcd3Store(options);
  BOOST_REQUIRE_MESSAGE(other.ok(), other.status().ToString());
  BOOST_REQUIRE((*other)->Update(Kind::kPoolLease, "p", Put(Kind::kPoolLease, 10)).ok());
  BOOST_REQUIRE((*other)->Update(Kind::kDelegatedLease, "n", Put(Kind::kDelegatedLease, 10)).ok());
  auto etcd = NewEtcd3Store(options);
  BOOST_REQUIRE(etcd.ok());
  auto cached = NewDrivenCacher(*std::move(etcd), {});
  BOOST_REQUIRE_MESSAGE(cached.ok(), cached.status().ToString());
  DrivenCacher& cache = **cached;

  BOOST_REQUIRE((*other)->Update(Kind::kDelegatedLease, "n", test_util::Remove()).ok());
  BOOST_REQUIRE((*other)->Update(Kind::kPoolLease, "p", test_util::Remove()).ok());
  auto replaced = (*other)->Update(Kind::kPoolLease, "p", Put(Kind::kPoolLease, 20));
  BOOST_REQUIRE(replaced.ok());

  // The cache has not applied those writes: a read from it would be stale.
  auto stale = cache.GetWithFreshness(Kind::kDelegatedLease, "n", {Freshness::Rule::kAny, 0});
  BOOST_REQUIRE(stale.ok());

  const ObjectKey keys[] = {{Kind::kPoolLease, "p"}, {Kind::kDelegatedLease, "n"}};
  auto read = cache.GetAll(keys);
  BOOST_REQUIRE_MESSAGE(read.ok(), read.status().ToString());
  BOOST_REQUIRE((*read)[0] != nullptr);
  BOOST_TEST((*read)[0]->metadata.resource_version ==
             replaced->object->metadata.resource_version);
  BOOST_TEST(*(*read)[0]->spec.lease_duration_seconds == 20);
  BOOST_TEST((*read)[1] == nullptr);
  cache.Shutdown();
  (*other)->Update(Kind::kPoolLease, "p", test_util::Remove()).IgnoreError();
}

}  // namespace
}  // namespace poolcoord::store
