#define BOOST_TEST_MODULE cacher
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "store/api_error.h"
#include "store/cacher.h"
#include "store/memory_store.h"
#include "tests/store/update_fns.h"

namespace poolcoord::store {
namespace {

using std::chrono::milliseconds;

constexpr auto kWait = std::chrono::seconds(10);

using test_util::Put;
using test_util::Remove;

// Events until one at `revision` (inclusive) or an error, or kWait.
std::vector<EventPtr> DrainUntil(Watcher& w, int64_t revision) {
  std::vector<EventPtr> out;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (std::chrono::steady_clock::now() < deadline) {
    EventPtr e = w.Next(milliseconds(100));
    if (!e) continue;
    out.push_back(e);
    if (e->type == EventType::kError || e->revision >= revision) break;
  }
  return out;
}

// Waits for a condition that another thread makes true; false after kWait.
template <typename F>
bool Eventually(F condition) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return condition();
}

std::vector<int64_t> Revisions(const std::vector<EventPtr>& events) {
  std::vector<int64_t> out;
  for (const auto& e : events) out.push_back(e->revision);
  return out;
}

// The store below the cacher in these tests: a memory store, with a count of
// the watches opened on it, a switch that hides its progress bookmarks (as the
// etcd3 store has none), a way to break its open watches (a dropped etcd
// stream) and an error to answer the next Watch with.
class Below final : public Store {
 public:
  explicit Below(const MemoryStoreOptions& options) : inner_(NewMemoryStore(options)) {}

  absl::StatusOr<ObjectPtr> Get(Kind kind, std::string_view name) override {
    return inner_->Get(kind, name);
  }
  absl::StatusOr<ListResult> List(Kind kind, const ListOptions& options) override {
    lists.fetch_add(1);
    return inner_->List(kind, options);
  }
  absl::StatusOr<WriteResult> Update(Kind kind, std::string_view name, const UpdateFn& fn,
                                     bool dry_run) override {
    return inner_->Update(kind, name, fn, dry_run);
  }
  absl::StatusOr<std::unique_ptr<Watcher>> Watch(Kind kind, int64_t from) override {
    std::optional<Hold> hold;
    {
      absl::MutexLock lock(&mu_);
      if (fail_next_watch_ && fail_kind_ == kind) {
        absl::Status s = *fail_next_watch_;
        fail_next_watch_.reset();
        return s;
      }
      if (hold_ && hold_->kind == kind) hold = std::exchange(hold_, std::nullopt);
    }
    if (hold) {
      hold->entered->Notify();
      hold->release->WaitForNotification();
    }
    auto inner = inner_->Watch(kind, from);
    if (!inner.ok()) return inner.status();
    watches.fetch_add(1);
    std::shared_ptr<Watcher> shared(*std::move(inner));
    absl::MutexLock lock(&mu_);
    open_.push_back(shared);
    return std::unique_ptr<Watcher>(std::make_unique<Wrapped>(shared, &progress));
  }
  int64_t CurrentRevision() override { return inner_->CurrentRevision(); }
  int64_t OldestWatchableRevision() override { return inner_->OldestWatchableRevision(); }
  void Shutdown() override { inner_->Shutdown(); }

  void FailNextWatch(Kind kind, absl::Status s) {
    absl::MutexLock lock(&mu_);
    fail_kind_ = kind;
    fail_next_watch_ = std::move(s);
  }
  // The next Watch of `kind` that is not failed notifies `entered`, then waits
  // for `release`: a relist held between its list and its watch.
  void HoldNextWatch(Kind kind, absl::Notification* entered, absl::Notification* release) {
    absl::MutexLock lock(&mu_);
    hold_ = Hold{kind, entered, release};
  }
  void BreakWatches() {
    absl::MutexLock lock(&mu_);
    for (auto& weak : open_) {
      if (auto w = weak.lock()) w->Stop();
    }
  }
  Store& inner() { return *inner_; }

  std::atomic<int> watches{0};
  std::atomic<int> lists{0};
  std::atomic<bool> progress{true};

 private:
  class Wrapped final : public Watcher {
   public:
    Wrapped(std::shared_ptr<Watcher> inner, const std::atomic<bool>* progress)
        : inner_(std::move(inner)), progress_(progress) {}
    EventPtr Next(milliseconds timeout) override { return inner_->Next(timeout); }
    EventPtr TryNext() override { return inner_->TryNext(); }
    bool NotifyWhenReady(std::function<void()> wake) override {
      return inner_->NotifyWhenReady(std::move(wake));
    }
    bool Closed() const override { return inner_->Closed(); }
    void Stop() override { inner_->Stop(); }
    bool RequestProgress() override { return progress_->load() && inner_->RequestProgress(); }

   private:
    std::shared_ptr<Watcher> inner_;
    const std::atomic<bool>* progress_;
  };

  std::unique_ptr<Store> inner_;
  absl::Mutex mu_;
  std::optional<absl::Status> fail_next_watch_ ABSL_GUARDED_BY(mu_);
  Kind fail_kind_ ABSL_GUARDED_BY(mu_) = Kind::kPoolLease;
  std::vector<std::weak_ptr<Watcher>> open_ ABSL_GUARDED_BY(mu_);
  struct Hold {
    Kind kind;
    absl::Notification* entered;
    absl::Notification* release;
  };
  std::optional<Hold> hold_ ABSL_GUARDED_BY(mu_);
};

struct Fixture {
  explicit Fixture(CacherOptions cacher_options = {}, MemoryStoreOptions memory_options = {},
                   bool progress = true) {
    auto owned = std::make_unique<Below>(memory_options);
    below = owned.get();
    below->progress = progress;
    auto made = NewCacher(std::move(owned), cacher_options);
    BOOST_REQUIRE(made.ok());
    cache = *std::move(made);
  }
  int64_t Write(Kind kind, const std::string& name, int32_t duration) {
    auto r = cache->Update(kind, name, Put(kind, duration));
    BOOST_REQUIRE(r.ok());
    return r->object->metadata.resource_version;
  }
  int64_t Delete(Kind kind, const std::string& name) {
    auto r = cache->Update(kind, name, Remove());
    BOOST_REQUIRE(r.ok());
    return r->object->metadata.resource_version;
  }
  std::unique_ptr<Watcher> MustWatch(Kind kind, int64_t from) {
    auto w = cache->Watch(kind, from);
    BOOST_REQUIRE_MESSAGE(w.ok(), w.status().ToString());
    return *std::move(w);
  }
  // Returns once the cache itself has applied `kind`'s write at `revision`. A
  // list the store below answered does not count: it answers while the cache
  // (re)initializes, when watches still get 429 (ExpiredUpstreamRelists failed
  // now and then on that).
  void Settle(Kind kind, int64_t revision) {
    ListOptions any;
    any.freshness.rule = Freshness::Rule::kAny;
    BOOST_REQUIRE(Eventually([&] {
      const int lists_below = below->lists.load();
      auto list = cache->List(kind, any);
      return list.ok() && list->revision >= revision && below->lists.load() == lists_below;
    }));
  }
  Below* below = nullptr;
  std::unique_ptr<Store> cache;
};

CacherOptions Capacity(int64_t n, size_t queue_limit = 10000) {
  CacherOptions o;
  o.capacity = n;
  o.watcher_queue_limit = queue_limit;
  return o;
}

BOOST_AUTO_TEST_SUITE(Watches)

BOOST_FIXTURE_TEST_CASE(OneUpstreamWatchPerKindWhateverTheWatchers, Fixture) {
  BOOST_TEST(below->watches.load() == 2);
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < 1000; ++i) watchers.push_back(MustWatch(Kind::kPoolLease, 0));
  std::vector<int64_t> written;
  for (int i = 0; i < 20; ++i) written.push_back(Write(Kind::kPoolLease, "p" + std::to_string(i % 3), i + 1));
  for (auto& w : watchers) {
    auto events = DrainUntil(*w, written.back());
    BOOST_REQUIRE(Revisions(events) == written);
  }
  BOOST_TEST(below->watches.load() == 2);
}

BOOST_FIXTURE_TEST_CASE(ResumeReplaysExactlyTheLaterEvents, Fixture) {
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  const int64_t r2 = Write(Kind::kPoolLease, "b", 2);
  Write(Kind::kDelegatedLease, "x", 3);  // another kind: not in this stream
  const int64_t r4 = Write(Kind::kPoolLease, "a", 4);
  const int64_t r5 = Delete(Kind::kPoolLease, "b");
  Settle(Kind::kPoolLease, r5);

  auto w = MustWatch(Kind::kPoolLease, r1);
  auto events = DrainUntil(*w, r5);
  BOOST_TEST(Revisions(events) == (std::vector<int64_t>{r2, r4, r5}));
  BOOST_REQUIRE(events.size() == 3);
  BOOST_TEST((events[0]->type == EventType::kAdded));
  BOOST_TEST((events[1]->type == EventType::kModified));
  BOOST_TEST(*events[1]->previous->spec.lease_duration_seconds == 1);
  BOOST_TEST((events[2]->type == EventType::kDeleted));
  BOOST_TEST(events[2]->object->metadata.name == "b");
  BOOST_TEST(events[2]->object->metadata.resource_version == r5);
  BOOST_TEST(w->TryNext() == nullptr);
}

BOOST_FIXTURE_TEST_CASE(FromZeroIsFromNow, Fixture) {
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  Settle(Kind::kPoolLease, r1);
  auto w = MustWatch(Kind::kPoolLease, 0);
  const int64_t r2 = Write(Kind::kPoolLease, "a", 2);
  BOOST_TEST(Revisions(DrainUntil(*w, r2)) == std::vector<int64_t>{r2});
}

// The ring keeps the last `capacity` events of the kind; a watch from before
// them gets kube-apiserver's 410 with the oldest resumable revision.
BOOST_AUTO_TEST_CASE(RingWrapsAroundAndOlderStartsExpire) {
  Fixture f(Capacity(5));
  auto all = f.MustWatch(Kind::kPoolLease, 0);
  std::vector<int64_t> r;
  for (int i = 0; i < 12; ++i) r.push_back(f.Write(Kind::kPoolLease, "p" + std::to_string(i), i + 1));
  BOOST_REQUIRE(Revisions(DrainUntil(*all, r.back())) == r);

  // Kept: r[7..11]. From r[6] (oldest - 1) still works.
  auto w = f.MustWatch(Kind::kPoolLease, r[6]);
  BOOST_TEST(Revisions(DrainUntil(*w, r[11])) ==
             (std::vector<int64_t>{r[7], r[8], r[9], r[10], r[11]}));
  auto from_middle = f.MustWatch(Kind::kPoolLease, r[9]);
  BOOST_TEST(Revisions(DrainUntil(*from_middle, r[11])) == (std::vector<int64_t>{r[10], r[11]}));

  auto too_old = f.cache->Watch(Kind::kPoolLease, r[5]);
  BOOST_REQUIRE(!too_old.ok());
  BOOST_TEST(absl::IsOutOfRange(too_old.status()));
  const ApiErrorInfo info = ApiErrorFromStatus(too_old.status());
  BOOST_TEST(info.code == 410);
  BOOST_TEST(info.reason == "Expired");
  BOOST_TEST(info.message == "too old resource version: " + std::to_string(r[5]) + " (" +
                                 std::to_string(r[6]) + ")");

  // The wrap keeps going: 5 more, the window moves with them.
  for (int i = 12; i < 17; ++i) r.push_back(f.Write(Kind::kPoolLease, "p" + std::to_string(i), i + 1));
  BOOST_REQUIRE(Revisions(DrainUntil(*all, r.back())).size() == 5);
  BOOST_TEST(!f.cache->Watch(Kind::kPoolLease, r[10]).ok());
  auto last = f.MustWatch(Kind::kPoolLease, r[11]);
  BOOST_TEST(Revisions(DrainUntil(*last, r.back())) ==
             (std::vector<int64_t>{r[12], r[13], r[14], r[15], r[16]}));
}

// Large objects shorten the window: at most capacity_bytes of objects stay (a
// newcomer's 400 writes of 250 KB annotations held ~300 MB for good), while a
// watch from within it still gets every event.
BOOST_AUTO_TEST_CASE(RingIsBoundedInBytesToo) {
  CacherOptions options = Capacity(1000);
  MemoryStoreOptions below_options;
  below_options.watch_history_bytes = 0;  // the cache's bound alone
  const std::string big(100 * 1024, 'x');
  options.capacity_bytes = 3 * 100 * 1024 + 50 * 1024;  // three of them and a half
  Fixture f(options, below_options);
  auto put_big = [&](const std::string& name) {
    auto r = f.cache->Update(Kind::kPoolLease, name,
                             [&](const ObjectPtr&, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
                               auto o = test_util::NewLease(Kind::kPoolLease);
                               o->metadata.annotations["big"] = big;
                               return o;
                             });
    BOOST_REQUIRE(r.ok());
    return r->object->metadata.resource_version;
  };
  auto all = f.MustWatch(Kind::kPoolLease, 0);
  std::vector<int64_t> r;
  for (int i = 0; i < 6; ++i) r.push_back(put_big("b" + std::to_string(i)));
  BOOST_REQUIRE(Revisions(DrainUntil(*all, r.back())) == r);
  // Kept: the last three (r[3..5]); from r[2] every kept event arrives.
  auto w = f.MustWatch(Kind::kPoolLease, r[2]);
  BOOST_TEST(Revisions(DrainUntil(*w, r[5])) == (std::vector<int64_t>{r[3], r[4], r[5]}));
  auto too_old = f.cache->Watch(Kind::kPoolLease, r[1]);
  BOOST_REQUIRE(!too_old.ok());
  BOOST_TEST(ApiErrorFromStatus(too_old.status()).code == 410);
  // Small events fill the bytes a big one left: the count bound still holds too.
  for (int i = 0; i < 20; ++i) r.push_back(f.Write(Kind::kPoolLease, "s" + std::to_string(i), 1));
  auto small = f.MustWatch(Kind::kPoolLease, r[5]);
  BOOST_TEST(Revisions(DrainUntil(*small, r.back())).size() == 20u);
}

// Before anything left the ring, the window reaches back to the cache's list.
BOOST_AUTO_TEST_CASE(WindowStartsAtTheCachesList) {
  auto owned = std::make_unique<Below>(MemoryStoreOptions{});
  Below* below = owned.get();
  std::vector<int64_t> r;
  for (int i = 0; i < 3; ++i) {
    auto w = below->Update(Kind::kPoolLease, "a", Put(Kind::kPoolLease, i + 1), false);
    BOOST_REQUIRE(w.ok());
    r.push_back(w->object->metadata.resource_version);
  }
  auto cache = NewCacher(std::move(owned), Capacity(100));
  BOOST_REQUIRE(cache.ok());
  auto before = (*cache)->Watch(Kind::kPoolLease, r[1]);
  BOOST_REQUIRE(!before.ok());
  BOOST_TEST(ApiErrorFromStatus(before.status()).message ==
             "too old resource version: " + std::to_string(r[1]) + " (" + std::to_string(r[2]) + ")");
  BOOST_TEST((*cache)->Watch(Kind::kPoolLease, r[2]).ok());
}

BOOST_FIXTURE_TEST_CASE(FutureRevisionIsTooLargeButALaggingCacheIsNot, Fixture) {
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  Settle(Kind::kPoolLease, r1);
  // Another kind moves the revision past the PoolLease cache's: a watch from
  // there (a list of the store below said so) gets what comes after it.
  const int64_t r2 = Write(Kind::kDelegatedLease, "x", 1);
  auto w = MustWatch(Kind::kPoolLease, r2);
  const int64_t r3 = Write(Kind::kPoolLease, "a", 2);
  BOOST_TEST(Revisions(DrainUntil(*w, r3)) == std::vector<int64_t>{r3});

  auto future = cache->Watch(Kind::kPoolLease, r3 + 10);
  BOOST_REQUIRE(!future.ok());
  const ApiErrorInfo info = ApiErrorFromStatus(future.status());
  BOOST_TEST(info.code == 504);
  BOOST_TEST(info.message == "Timeout: Too large resource version: " + std::to_string(r3 + 10) +
                                 ", current: " + std::to_string(r3));
  BOOST_TEST(absl::IsInvalidArgument(cache->Watch(Kind::kPoolLease, -1).status()));
}

BOOST_AUTO_TEST_CASE(SlowWatcherIsClosedOthersGoOn) {
  Fixture f(Capacity(100, /*queue_limit=*/3));
  auto slow = f.MustWatch(Kind::kPoolLease, 0);
  auto fast = f.MustWatch(Kind::kPoolLease, 0);
  std::vector<int64_t> r;
  for (int i = 0; i < 6; ++i) {
    r.push_back(f.Write(Kind::kPoolLease, "a", i + 1));
    BOOST_REQUIRE(Revisions(DrainUntil(*fast, r.back())) == std::vector<int64_t>{r.back()});
  }
  BOOST_TEST(slow->Closed());
  EventPtr e = slow->Next(milliseconds(0));
  BOOST_REQUIRE(e);
  BOOST_TEST((e->type == EventType::kError));
  BOOST_TEST(e->object == nullptr);
  BOOST_TEST(slow->Next(milliseconds(0)) == nullptr);
}

// The fan-out runs on the cache's dispatcher: a watcher whose wake-up blocks
// holds up no writer (the memory store calls it under its write lock).
BOOST_FIXTURE_TEST_CASE(FanOutRunsOutsideTheStoresLock, Fixture) {
  auto w = MustWatch(Kind::kPoolLease, 0);
  // Owned by the wake-up too: the cache's thread may still be returning from
  // release->WaitForNotification() when this test ends (ThreadSanitizer saw it
  // inside the Mutex of a Notification the test's stack had already destroyed).
  auto release = std::make_shared<absl::Notification>();
  auto woken = std::make_shared<absl::Notification>();
  BOOST_REQUIRE(w->NotifyWhenReady([release, woken] {
    woken->Notify();
    release->WaitForNotification();
  }));
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < 3; ++i) {
      if (cache->Update(Kind::kPoolLease, "a", Put(Kind::kPoolLease, i + 1)).ok()) written++;
    }
  });
  // The first write's fan-out is now stuck in the wake-up; the writes go on.
  const bool wake_ran = woken->WaitForNotificationWithTimeout(absl::Seconds(10));
  const bool writes_done = Eventually([&] { return written.load() == 3; });
  release->Notify();
  writer.join();
  BOOST_TEST(wake_ran);
  BOOST_TEST(writes_done);
}

BOOST_FIXTURE_TEST_CASE(EventsAreSharedNotCopied, Fixture) {
  auto a = MustWatch(Kind::kPoolLease, 0);
  auto b = MustWatch(Kind::kPoolLease, 0);
  const int64_t r = Write(Kind::kPoolLease, "a", 1);
  auto ea = DrainUntil(*a, r);
  auto eb = DrainUntil(*b, r);
  BOOST_REQUIRE(ea.size() == 1);
  BOOST_REQUIRE(eb.size() == 1);
  BOOST_TEST(ea[0].get() == eb[0].get());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Bookmarks)

// With a store that reports progress (the memory store), the bookmark moves
// past other kinds' writes, and resuming from it loses and repeats nothing.
BOOST_FIXTURE_TEST_CASE(BookmarkAtTheStoresRevisionResumesCleanly, Fixture) {
  auto w = MustWatch(Kind::kPoolLease, 0);
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  const int64_t r2 = Write(Kind::kDelegatedLease, "x", 1);
  BOOST_REQUIRE(w->RequestProgress());
  auto events = DrainUntil(*w, r2);
  BOOST_REQUIRE(events.size() == 2);
  BOOST_TEST(events[0]->revision == r1);
  BOOST_TEST((events[1]->type == EventType::kBookmark));
  BOOST_TEST(events[1]->revision == r2);
  BOOST_TEST(events[1]->object->metadata.resource_version == r2);
  BOOST_TEST((events[1]->object->kind == Kind::kPoolLease));

  auto resumed = MustWatch(Kind::kPoolLease, events[1]->revision);
  const int64_t r3 = Write(Kind::kPoolLease, "a", 2);
  BOOST_TEST(Revisions(DrainUntil(*resumed, r3)) == std::vector<int64_t>{r3});
}

// Without progress from the store (etcd3 through the gateway), the bookmark
// carries the cache's own revision: still after every event it covers.
BOOST_AUTO_TEST_CASE(BookmarkWithoutStoreProgressIsTheCachesRevision) {
  Fixture f({}, {}, /*progress=*/false);
  auto w = f.MustWatch(Kind::kPoolLease, 0);
  const int64_t r1 = f.Write(Kind::kPoolLease, "a", 1);
  f.Write(Kind::kDelegatedLease, "x", 1);
  BOOST_REQUIRE(w->RequestProgress());
  auto events = DrainUntil(*w, r1);
  BOOST_REQUIRE(!events.empty());
  EventPtr bookmark = events.back();
  if (bookmark->type != EventType::kBookmark) {
    bookmark = w->Next(std::chrono::duration_cast<milliseconds>(kWait));
  }
  BOOST_REQUIRE(bookmark);
  BOOST_TEST((bookmark->type == EventType::kBookmark));
  BOOST_TEST(bookmark->revision == r1);
}

// A watcher that starts after the cache's revision never gets a bookmark from
// before its start.
BOOST_AUTO_TEST_CASE(BookmarkIsNeverBeforeTheWatchStart) {
  Fixture f({}, {}, /*progress=*/false);
  const int64_t r1 = f.Write(Kind::kPoolLease, "a", 1);
  f.Settle(Kind::kPoolLease, r1);
  const int64_t r2 = f.Write(Kind::kDelegatedLease, "x", 1);
  auto w = f.MustWatch(Kind::kPoolLease, r2);
  BOOST_REQUIRE(w->RequestProgress());
  EventPtr e = w->Next(std::chrono::duration_cast<milliseconds>(kWait));
  BOOST_REQUIRE(e);
  BOOST_TEST((e->type == EventType::kBookmark));
  BOOST_TEST(e->revision == r2);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Reads)

BOOST_FIXTURE_TEST_CASE(ListAtRevisionFromTheCache, Fixture) {
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  const int64_t r2 = Write(Kind::kPoolLease, "b", 2);
  const int64_t r3 = Write(Kind::kDelegatedLease, "x", 3);
  const int lists_before = below->lists.load();

  // NotOlderThan a revision another kind made: the cache learns through a
  // progress bookmark that it is current and answers itself.
  ListOptions o;
  o.freshness.rule = Freshness::Rule::kNotOlderThan;
  o.freshness.min_revision = r3;
  auto list = cache->List(Kind::kPoolLease, o);
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->revision >= r3);
  BOOST_REQUIRE(list->items.size() == 2);
  BOOST_TEST(list->items[0]->metadata.name == "a");
  BOOST_TEST(list->items[1]->metadata.resource_version == r2);
  BOOST_TEST(below->lists.load() == lists_before);

  // Limit and predicate as the stores apply them.
  o.limit = 1;
  o.predicate = [](const Object& obj) { return obj.metadata.name != "zzz"; };
  auto page = cache->List(Kind::kPoolLease, o);
  BOOST_REQUIRE(page.ok());
  BOOST_TEST(page->items.size() == 1);
  BOOST_TEST(page->next_name == "b");
  BOOST_TEST(page->remaining == 1);

  // "0": whatever the cache holds, no store read.
  ListOptions any;
  any.freshness.rule = Freshness::Rule::kAny;
  auto any_list = cache->List(Kind::kPoolLease, any);
  BOOST_REQUIRE(any_list.ok());
  BOOST_TEST(any_list->revision >= r1);
  BOOST_TEST(below->lists.load() == lists_before);

  auto got = cache->GetWithFreshness(Kind::kPoolLease, "b", o.freshness);
  BOOST_REQUIRE(got.ok());
  BOOST_TEST((*got)->metadata.resource_version == r2);
  auto missing = cache->GetWithFreshness(Kind::kPoolLease, "nope", o.freshness);
  BOOST_TEST(absl::IsNotFound(missing.status()));

  // A future revision: 504 ResourceVersionTooLarge, as kube-apiserver.
  o.freshness.min_revision = r3 + 5;
  auto future = cache->List(Kind::kPoolLease, o);
  BOOST_REQUIRE(!future.ok());
  BOOST_TEST(ApiErrorFromStatus(future.status()).code == 504);
}

// Consistent reads (resourceVersion unset), Exact and continue go to the store
// below, and see a write at once.
BOOST_FIXTURE_TEST_CASE(ConsistentExactAndContinueReadTheStore, Fixture) {
  const int lists_before = below->lists.load();
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  auto latest = cache->List(Kind::kPoolLease, {});
  BOOST_REQUIRE(latest.ok());
  BOOST_TEST(latest->revision == r1);
  BOOST_TEST(latest->items.size() == 1);
  ListOptions exact;
  exact.at_revision = r1;
  BOOST_TEST(cache->List(Kind::kPoolLease, exact).ok());
  ListOptions cont;
  cont.after_name = "a";
  cont.freshness.rule = Freshness::Rule::kAny;
  BOOST_TEST(cache->List(Kind::kPoolLease, cont).ok());
  BOOST_TEST(below->lists.load() == lists_before + 3);
  auto got = cache->Get(Kind::kPoolLease, "a");
  BOOST_REQUIRE(got.ok());
  BOOST_TEST((*got)->metadata.resource_version == r1);
}

// Without progress from the store, a NotOlderThan the cache has not reached is
// answered by the store (its newest state is not older).
BOOST_AUTO_TEST_CASE(NotOlderThanAheadOfTheCacheFallsBackToTheStore) {
  Fixture f({}, {}, /*progress=*/false);
  const int64_t r1 = f.Write(Kind::kDelegatedLease, "x", 1);
  const int lists_before = f.below->lists.load();
  ListOptions o;
  o.freshness.rule = Freshness::Rule::kNotOlderThan;
  o.freshness.min_revision = r1;
  auto list = f.cache->List(Kind::kPoolLease, o);
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->revision == r1);
  BOOST_TEST(f.below->lists.load() == lists_before + 1);
}

// A list from the cache and a watch from its revision, while a writer runs:
// together they are exactly the store's history (what a watch-list serves).
BOOST_FIXTURE_TEST_CASE(ListThenWatchFromItsRevisionMissesNothing, Fixture) {
  std::atomic<int64_t> last{0};
  std::thread writer([&] {
    for (int i = 0; i < 300; ++i) {
      auto r = cache->Update(Kind::kPoolLease, "p" + std::to_string(i % 17),
                             i % 5 == 4 ? Remove() : Put(Kind::kPoolLease, i + 1));
      if (r.ok() && r->object) last = r->object->metadata.resource_version;
    }
  });
  // Some writes before the list, the rest after it (either way is correct).
  const bool some_written = Eventually([&] { return last.load() > 20; });
  ListOptions any;
  any.freshness.rule = Freshness::Rule::kAny;
  auto list = cache->List(Kind::kPoolLease, any);
  auto watched = list.ok() ? cache->Watch(Kind::kPoolLease, list->revision)
                           : absl::StatusOr<std::unique_ptr<Watcher>>(list.status());
  writer.join();
  BOOST_TEST(some_written);
  BOOST_REQUIRE(list.ok());
  BOOST_REQUIRE(watched.ok());
  auto& w = *watched;
  std::map<std::string, int64_t> state;
  for (const auto& o : list->items) state[o->metadata.name] = o->metadata.resource_version;
  int64_t previous = list->revision;
  if (last.load() > list->revision) {
    for (const auto& e : DrainUntil(*w, last.load())) {
      BOOST_REQUIRE(e->revision > previous);
      previous = e->revision;
      if (e->type == EventType::kDeleted) {
        state.erase(e->object->metadata.name);
      } else {
        state[e->object->metadata.name] = e->object->metadata.resource_version;
      }
    }
  }
  auto truth = below->inner().List(Kind::kPoolLease, {});
  BOOST_REQUIRE(truth.ok());
  std::map<std::string, int64_t> expected;
  for (const auto& o : truth->items) expected[o->metadata.name] = o->metadata.resource_version;
  BOOST_TEST((state == expected));
}

// Without API watchers the store's writers apply their events to the cache
// themselves (no dispatcher wake-up per write). Writes from several threads
// still enter the ring once each and in revision order: a watch from before
// them replays every one, and the cache's list is the store's.
BOOST_FIXTURE_TEST_CASE(WritesWithoutWatchersEnterTheRingInOrder, Fixture) {
  const int64_t start = cache->CurrentRevision();
  constexpr int kThreads = 4, kWrites = 250;
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([this, t, &failed] {
      for (int i = 0; i < kWrites; ++i) {
        const std::string name = "p" + std::to_string((t * kWrites + i) % 37);
        if (!cache->Update(Kind::kPoolLease, name, Put(Kind::kPoolLease, i + 1)).ok()) failed++;
      }
    });
  }
  for (auto& w : writers) w.join();
  BOOST_REQUIRE(failed.load() == 0);
  const int64_t last = cache->CurrentRevision();
  BOOST_REQUIRE(last == start + kThreads * kWrites);
  Settle(Kind::kPoolLease, last);

  auto w = MustWatch(Kind::kPoolLease, start);
  std::vector<int64_t> want;
  for (int64_t r = start + 1; r <= last; ++r) want.push_back(r);
  BOOST_TEST(Revisions(DrainUntil(*w, last)) == want);

  ListOptions any;
  any.freshness.rule = Freshness::Rule::kAny;
  auto cached = cache->List(Kind::kPoolLease, any);
  auto stored = below->inner().List(Kind::kPoolLease, {});
  BOOST_REQUIRE(cached.ok());
  BOOST_REQUIRE(stored.ok());
  BOOST_TEST(cached->revision == last);
  BOOST_REQUIRE(cached->items.size() == stored->items.size());
  for (size_t i = 0; i < stored->items.size(); ++i) {
    BOOST_TEST(cached->items[i]->metadata.name == stored->items[i]->metadata.name);
    BOOST_TEST(cached->items[i]->metadata.resource_version ==
               stored->items[i]->metadata.resource_version);
  }
}

// Watchers that join while writers run (the writers apply inline until the
// first joins, the dispatcher after) each get an unbroken run of revisions
// from their start: nothing missed, nothing twice, nothing out of order.
BOOST_AUTO_TEST_CASE(WatchersJoiningWhileWritersRunMissNothing) {
  // Queues long enough for every write: the watchers are read only at the end.
  Fixture f(Capacity(100000, 200000));
  Store* cache = f.cache.get();
  const int64_t start = cache->CurrentRevision();
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  // Writes until the watchers below have joined (at most 100,000).
  std::thread writer([cache, &stop, &failed] {
    for (int i = 0; i < 100000 && !stop.load(); ++i) {
      if (!cache->Update(Kind::kPoolLease, "p" + std::to_string(i % 5), Put(Kind::kPoolLease, i + 1))
               .ok()) {
        failed++;
      }
    }
  });
  absl::Cleanup stop_writer = [&] {
    stop = true;
    if (writer.joinable()) writer.join();
  };
  // The first watcher joins after some writes were applied without one.
  BOOST_REQUIRE(Eventually([&] { return cache->CurrentRevision() >= start + 50; }));
  struct Joined {
    int64_t from;  // 0: from the cache's revision, whatever it was then
    std::unique_ptr<Watcher> watcher;
  };
  std::vector<Joined> joined;
  while (joined.size() < 20) {
    // From "now" (0), and from a revision the cache may not have applied yet.
    const int64_t seen = cache->CurrentRevision();
    const int64_t from = joined.size() % 2 == 0 ? 0 : seen;
    auto w = cache->Watch(Kind::kPoolLease, from);
    BOOST_REQUIRE_MESSAGE(w.ok(), w.status().ToString());
    joined.push_back(Joined{from, *std::move(w)});
    // Each joins between writes: the next once the writer went on.
    BOOST_REQUIRE(Eventually([&] { return cache->CurrentRevision() > seen; }));
  }
  stop = true;
  writer.join();
  BOOST_REQUIRE(failed.load() == 0);
  // One more write after the last join: every watcher has something to get.
  const int64_t last = f.Write(Kind::kPoolLease, "p0", 1);
  for (auto& j : joined) {
    std::vector<int64_t> got = Revisions(DrainUntil(*j.watcher, last));
    BOOST_REQUIRE(!got.empty());
    BOOST_TEST(got.back() == last);
    for (size_t i = 1; i < got.size(); ++i) {
      BOOST_TEST(got[i] == got[i - 1] + 1, "revision " << got[i] << " after " << got[i - 1]);
    }
    // A watch from a revision gets the one after it first (from the ring, or
    // from the writers when the cache had not reached it yet).
    if (j.from != 0) BOOST_TEST(got.front() == j.from + 1);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Upstream)

// A dropped upstream watch resumes from the cache's revision: API watchers
// stay open and miss nothing.
BOOST_FIXTURE_TEST_CASE(BrokenUpstreamResumes, Fixture) {
  auto w = MustWatch(Kind::kPoolLease, 0);
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  BOOST_REQUIRE(Revisions(DrainUntil(*w, r1)) == std::vector<int64_t>{r1});
  const int watches = below->watches.load();
  below->BreakWatches();
  const int64_t r2 = Write(Kind::kPoolLease, "a", 2);  // may land before the resume: replayed
  BOOST_REQUIRE(Eventually([&] { return below->watches.load() == watches + 2; }));
  const int64_t r3 = Write(Kind::kPoolLease, "b", 3);
  BOOST_TEST(Revisions(DrainUntil(*w, r3)) == (std::vector<int64_t>{r2, r3}));
  BOOST_TEST(!w->Closed());
}

// The same with no API watcher: the writer that finds the upstream broken
// leaves the recovery to the dispatcher (it may wait and retry), and the
// cache goes on applying later writes.
BOOST_FIXTURE_TEST_CASE(BrokenUpstreamResumesWithoutWatchers, Fixture) {
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  Settle(Kind::kPoolLease, r1);
  const int watches = below->watches.load();
  below->BreakWatches();
  BOOST_REQUIRE(Eventually([&] { return below->watches.load() == watches + 2; }));
  const int64_t r2 = Write(Kind::kPoolLease, "a", 2);
  Settle(Kind::kPoolLease, r2);
  auto w = MustWatch(Kind::kPoolLease, r1);
  BOOST_TEST(Revisions(DrainUntil(*w, r2)) == std::vector<int64_t>{r2});
}

// When the store no longer reaches back to the cache's revision, the cache
// lists again: API watchers are closed (their clients re-list) and the cache
// holds the store's state.
BOOST_FIXTURE_TEST_CASE(ExpiredUpstreamRelists, Fixture) {
  auto w = MustWatch(Kind::kPoolLease, 0);
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  BOOST_REQUIRE(Revisions(DrainUntil(*w, r1)) == std::vector<int64_t>{r1});
  const int lists = below->lists.load();
  below->FailNextWatch(Kind::kPoolLease, ExpiredError("too old resource version: 1 (2)"));
  below->BreakWatches();
  const int64_t r2 = Write(Kind::kPoolLease, "b", 2);
  BOOST_REQUIRE(Eventually([&] { return below->lists.load() > lists; }));
  // The PoolLease watcher ends with an error event; the other kind's upstream
  // resumed without a relist.
  auto events = DrainUntil(*w, r2);
  BOOST_REQUIRE(!events.empty());
  BOOST_TEST((events.back()->type == EventType::kError));
  BOOST_TEST(w->Closed());
  Settle(Kind::kPoolLease, r2);
  ListOptions any;
  any.freshness.rule = Freshness::Rule::kAny;
  auto list = cache->List(Kind::kPoolLease, any);
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->items.size() == 2);
  auto again = MustWatch(Kind::kPoolLease, list->revision);
  const int64_t r3 = Write(Kind::kPoolLease, "c", 3);
  BOOST_TEST(Revisions(DrainUntil(*again, r3)) == std::vector<int64_t>{r3});
}

// What made ExpiredUpstreamRelists flaky: between a relist's list and its watch
// the cache is not ready. A list then is the store below's, a watch gets
// kube-apiserver's 429 "storage is (re)initializing"; both are the cache's again
// once the relist is done.
BOOST_FIXTURE_TEST_CASE(DuringARelistListsGoBelowAndWatchesGet429, Fixture) {
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  Settle(Kind::kPoolLease, r1);
  absl::Notification entered, release;
  absl::Cleanup never_left_held = [&release] {
    if (!release.HasBeenNotified()) release.Notify();
  };
  below->FailNextWatch(Kind::kPoolLease, ExpiredError("too old resource version: 1 (2)"));
  below->HoldNextWatch(Kind::kPoolLease, &entered, &release);
  below->BreakWatches();
  BOOST_REQUIRE(entered.WaitForNotificationWithTimeout(absl::Seconds(10)));

  ListOptions any;
  any.freshness.rule = Freshness::Rule::kAny;
  const int lists_below = below->lists.load();
  auto list = cache->List(Kind::kPoolLease, any);
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->items.size() == 1);
  BOOST_TEST(below->lists.load() == lists_below + 1, "the store below answered");
  auto refused = cache->Watch(Kind::kPoolLease, list->revision);
  BOOST_REQUIRE(!refused.ok());
  const ApiErrorInfo error = ApiErrorFromStatus(refused.status());
  BOOST_TEST(error.code == 429);
  BOOST_TEST(error.message.find("storage is (re)initializing") != std::string::npos);

  release.Notify();
  Settle(Kind::kPoolLease, r1);
  auto again = MustWatch(Kind::kPoolLease, list->revision);
  const int64_t r2 = Write(Kind::kPoolLease, "b", 2);
  BOOST_TEST(Revisions(DrainUntil(*again, r2)) == std::vector<int64_t>{r2});
}

BOOST_FIXTURE_TEST_CASE(ShutdownClosesWatchersAndRefusesNewOnes, Fixture) {
  auto w = MustWatch(Kind::kPoolLease, 0);
  cache->Shutdown();
  EventPtr e = w->Next(milliseconds(1000));
  BOOST_REQUIRE(e);
  BOOST_TEST((e->type == EventType::kError));
  BOOST_TEST(w->Closed());
  auto after = cache->Watch(Kind::kPoolLease, 0);
  BOOST_TEST(ApiErrorFromStatus(after.status()).code == 503);
  cache->Shutdown();  // idempotent
}

BOOST_AUTO_TEST_CASE(ZeroCapacityIsRefused) {
  auto made = NewCacher(NewMemoryStore({}), Capacity(0));
  BOOST_TEST(absl::IsInvalidArgument(made.status()));
}

BOOST_AUTO_TEST_SUITE_END()

// The driven cacher: nothing moves between the caller's Dispatch calls, so a
// simulator on one simulated clock decides when the cache catches up.
BOOST_AUTO_TEST_SUITE(Driven)

struct DrivenFixture {
  DrivenFixture() {
    auto owned = std::make_unique<Below>(MemoryStoreOptions{});
    below = owned.get();
    auto made = NewDrivenCacher(std::move(owned), {});
    BOOST_REQUIRE(made.ok());
    cache = *std::move(made);
  }
  int64_t Write(Kind kind, const std::string& name, int32_t duration) {
    auto r = cache->Update(kind, name, Put(kind, duration));
    BOOST_REQUIRE(r.ok());
    return r->object->metadata.resource_version;
  }
  std::unique_ptr<Watcher> MustWatch(Kind kind, int64_t from) {
    auto w = cache->Watch(kind, from);
    BOOST_REQUIRE_MESSAGE(w.ok(), w.status().ToString());
    return *std::move(w);
  }
  std::optional<int32_t> CachedDuration(Kind kind, const std::string& name) {
    Freshness any;
    any.rule = Freshness::Rule::kAny;
    auto got = cache->GetWithFreshness(kind, name, any);
    if (!got.ok()) return std::nullopt;
    return (*got)->spec.lease_duration_seconds;
  }
  std::vector<EventPtr> Ready(Watcher& w) {
    std::vector<EventPtr> out;
    while (EventPtr e = w.TryNext()) out.push_back(e);
    return out;
  }
  Below* below = nullptr;
  std::unique_ptr<DrivenCacher> cache;
};

BOOST_FIXTURE_TEST_CASE(EventsArriveOnlyInDispatchInOrder, DrivenFixture) {
  auto w = MustWatch(Kind::kPoolLease, 0);
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  const int64_t r2 = Write(Kind::kPoolLease, "a", 2);
  Write(Kind::kDelegatedLease, "x", 3);
  // Written, not dispatched: the cache still answers with what it had, its
  // watcher has nothing, and a quorum read goes to the store below.
  BOOST_TEST(!CachedDuration(Kind::kPoolLease, "a").has_value());
  BOOST_TEST(Ready(*w).empty());
  BOOST_TEST(*(*cache->Get(Kind::kPoolLease, "a"))->spec.lease_duration_seconds == 2);

  BOOST_TEST(cache->Dispatch() == 3);
  BOOST_TEST(Revisions(Ready(*w)) == (std::vector<int64_t>{r1, r2}));
  BOOST_TEST(*CachedDuration(Kind::kPoolLease, "a") == 2);
  BOOST_TEST(cache->Dispatch() == 0);
  BOOST_TEST(Ready(*w).empty());
}

// A read that needs a revision the cache has not applied yet dispatches
// rather than waiting for a dispatcher that does not exist: the answer comes
// from the cache.
BOOST_FIXTURE_TEST_CASE(NotOlderThanDispatchesInsteadOfWaiting, DrivenFixture) {
  const int64_t r1 = Write(Kind::kPoolLease, "a", 7);
  ListOptions o;
  o.freshness.rule = Freshness::Rule::kNotOlderThan;
  o.freshness.min_revision = r1;
  const int lists_below = below->lists.load();
  auto list = cache->List(Kind::kPoolLease, o);
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->revision >= r1);
  BOOST_REQUIRE(list->items.size() == 1);
  BOOST_TEST(*list->items[0]->spec.lease_duration_seconds == 7);
  BOOST_TEST(below->lists.load() == lists_below);  // the cache answered
}

// A lost upstream watch is resumed by the next Dispatch; the watchers miss
// nothing.
BOOST_FIXTURE_TEST_CASE(LostUpstreamIsResumedByTheNextDispatch, DrivenFixture) {
  auto w = MustWatch(Kind::kPoolLease, 0);
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  BOOST_TEST(cache->Dispatch() == 1);
  const int watches = below->watches.load();
  below->BreakWatches();
  const int64_t r2 = Write(Kind::kPoolLease, "a", 2);
  below->FailNextWatch(Kind::kPoolLease, absl::UnavailableError("etcd away"));
  cache->Dispatch();  // the failed resume is kept for the next one
  const int64_t r3 = Write(Kind::kPoolLease, "b", 3);
  cache->Dispatch();
  BOOST_TEST(below->watches.load() > watches);
  cache->Dispatch();
  BOOST_TEST(Revisions(Ready(*w)) == (std::vector<int64_t>{r1, r2, r3}));
  BOOST_TEST(*CachedDuration(Kind::kPoolLease, "b") == 3);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::store
