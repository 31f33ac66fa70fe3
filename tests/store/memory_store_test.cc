#define BOOST_TEST_MODULE memory_store
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "store/api_error.h"
#include "store/memory_store.h"
#include "tests/store/watch_testing.h"
#include "tests/store/update_fns.h"

namespace poolcoord::store {
namespace {

using std::chrono::milliseconds;

using test_util::NewLease;
using test_util::Put;
using test_util::Remove;

std::vector<EventPtr> Drain(Watcher& w, size_t n) {
  std::vector<EventPtr> out;
  while (out.size() < n) {
    EventPtr e = w.Next(milliseconds(1000));
    if (!e) break;
    out.push_back(e);
  }
  return out;
}

// The cases below count revisions from 1: a wall clock 1 µs after the epoch.
const base::FakeClock kFirstRevisionOne(1);

struct Fixture {
  Fixture() : store(NewMemoryStore(MemoryStoreOptions{.clock = &kFirstRevisionOne})) {}
  int64_t Write(Kind kind, const std::string& name, int32_t duration) {
    auto r = store->Update(kind, name, Put(kind, duration));
    BOOST_REQUIRE(r.ok());
    return r->object->metadata.resource_version;
  }
  std::unique_ptr<Store> store;
};

BOOST_AUTO_TEST_SUITE(Writes)

BOOST_FIXTURE_TEST_CASE(EmptyStoreIsAtRevisionOne, Fixture) {
  BOOST_TEST(store->CurrentRevision() == 1);
  auto list = store->List(Kind::kPoolLease, {});
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->revision == 1);
  BOOST_TEST(list->items.empty());
}

BOOST_FIXTURE_TEST_CASE(RevisionsAreGlobalAndStampedOnObjects, Fixture) {
  BOOST_TEST(Write(Kind::kPoolLease, "a", 10) == 2);
  BOOST_TEST(Write(Kind::kDelegatedLease, "a", 10) == 3);
  BOOST_TEST(Write(Kind::kPoolLease, "b", 10) == 4);
  BOOST_TEST(Write(Kind::kPoolLease, "a", 11) == 5);
  BOOST_TEST(store->CurrentRevision() == 5);
  auto a = store->Get(Kind::kPoolLease, "a");
  BOOST_REQUIRE(a.ok());
  BOOST_TEST((*a)->metadata.resource_version == 5);
  BOOST_TEST(*(*a)->spec.lease_duration_seconds == 11);
  BOOST_TEST((*a)->metadata.name == "a");
  auto b = store->Get(Kind::kPoolLease, "b");
  BOOST_TEST((*b)->metadata.resource_version == 4);
  auto d = store->Get(Kind::kDelegatedLease, "a");
  BOOST_TEST((*d)->metadata.resource_version == 3);
  BOOST_TEST(((*d)->kind == Kind::kDelegatedLease));
}

BOOST_FIXTURE_TEST_CASE(CreateUpdateDelete, Fixture) {
  auto created = store->Update(Kind::kPoolLease, "p", Put(Kind::kPoolLease, 5));
  BOOST_REQUIRE(created.ok());
  BOOST_TEST(created->created);
  BOOST_TEST(!created->deleted);

  ObjectPtr seen;
  auto updated = store->Update(
      Kind::kPoolLease, "p",
      [&](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
        seen = cur;
        auto next = std::make_shared<Object>(*cur);
        next->spec.holder_identity = "hz-1";
        return next;
      });
  BOOST_REQUIRE(updated.ok());
  BOOST_TEST(!updated->created);
  BOOST_TEST(seen == created->object);  // fn saw the stored object itself
  BOOST_TEST(*updated->object->spec.holder_identity == "hz-1");

  auto deleted = store->Update(Kind::kPoolLease, "p", Remove());
  BOOST_REQUIRE(deleted.ok());
  BOOST_TEST(deleted->deleted);
  BOOST_TEST(deleted->object->metadata.resource_version == 4);  // the deletion revision
  BOOST_TEST(*deleted->object->spec.holder_identity == "hz-1");  // the last state
  BOOST_TEST(store->CurrentRevision() == 4);

  auto gone = store->Get(Kind::kPoolLease, "p");
  BOOST_REQUIRE(!gone.ok());
  BOOST_TEST(gone.status().code() == absl::StatusCode::kNotFound);
  BOOST_TEST(std::string(gone.status().message()) ==
             "poolleases.coordination.pool \"p\" not found");
}

BOOST_FIXTURE_TEST_CASE(DeletingAbsentKeyIsNoOp, Fixture) {
  auto r = store->Update(Kind::kPoolLease, "nothing", Remove());
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(!r->deleted);
  BOOST_TEST(r->object == nullptr);
  BOOST_TEST(store->CurrentRevision() == 1);
}

BOOST_FIXTURE_TEST_CASE(FnErrorReturnedUnchanged, Fixture) {
  Write(Kind::kPoolLease, "p", 1);
  auto r = store->Update(Kind::kPoolLease, "p",
                         [](const ObjectPtr&, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
                           return ForbiddenError("no way");
                         });
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == absl::StatusCode::kPermissionDenied);
  BOOST_TEST(ApiErrorFromStatus(r.status()).message == "no way");
  BOOST_TEST(store->CurrentRevision() == 2);
}

BOOST_FIXTURE_TEST_CASE(DryRunStoresNothing, Fixture) {
  auto watcher = store->Watch(Kind::kPoolLease, 0);
  BOOST_REQUIRE(watcher.ok());

  auto create = store->Update(Kind::kPoolLease, "p", Put(Kind::kPoolLease, 5), true);
  BOOST_REQUIRE(create.ok());
  BOOST_TEST(create->created);
  BOOST_TEST(*create->object->spec.lease_duration_seconds == 5);
  BOOST_TEST(create->object->metadata.resource_version == 0);
  BOOST_TEST(store->CurrentRevision() == 1);
  BOOST_TEST(!store->Get(Kind::kPoolLease, "p").ok());

  Write(Kind::kPoolLease, "p", 5);  // revision 2
  BOOST_TEST((*watcher)->Next(milliseconds(500))->revision == 2);
  auto update = store->Update(Kind::kPoolLease, "p", Put(Kind::kPoolLease, 9), true);
  BOOST_REQUIRE(update.ok());
  BOOST_TEST(*update->object->spec.lease_duration_seconds == 9);
  BOOST_TEST(update->object->metadata.resource_version == 2);
  auto del = store->Update(Kind::kPoolLease, "p", Remove(), true);
  BOOST_REQUIRE(del.ok());
  BOOST_TEST(del->deleted);

  BOOST_TEST(store->CurrentRevision() == 2);
  auto stored = store->Get(Kind::kPoolLease, "p");
  BOOST_REQUIRE(stored.ok());
  BOOST_TEST(*(*stored)->spec.lease_duration_seconds == 5);
  BOOST_TEST((*watcher)->Next(milliseconds(50)) == nullptr);  // no events for dry runs
}

BOOST_FIXTURE_TEST_CASE(TxnReaderSeesOtherKeys, Fixture) {
  Write(Kind::kPoolLease, "pool", 30);
  int32_t read_duration = 0;
  bool absent_is_null = false;
  auto r = store->Update(
      Kind::kDelegatedLease, "node",
      [&](const ObjectPtr& cur, TxnReader& reader) -> absl::StatusOr<MutableObjectPtr> {
        ObjectPtr pool = reader.Get(Kind::kPoolLease, "pool");
        if (!pool) return absl::FailedPreconditionError("no pool");
        read_duration = *pool->spec.lease_duration_seconds;
        absent_is_null = reader.Get(Kind::kPoolLease, "other") == nullptr;
        return NewLease(Kind::kDelegatedLease);
      });
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(read_duration == 30);
  BOOST_TEST(absent_is_null);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Lists)

BOOST_FIXTURE_TEST_CASE(SortedPagedFiltered, Fixture) {
  for (const char* n : {"e", "a", "c", "b", "d"}) Write(Kind::kPoolLease, n, n[0] == 'c' ? 99 : 1);
  Write(Kind::kDelegatedLease, "zz", 1);

  auto all = store->List(Kind::kPoolLease, {});
  BOOST_REQUIRE(all.ok());
  BOOST_REQUIRE(all->items.size() == 5u);
  BOOST_TEST(all->items[0]->metadata.name == "a");
  BOOST_TEST(all->items[4]->metadata.name == "e");
  BOOST_TEST(all->revision == 7);
  BOOST_TEST(all->next_name.empty());

  ListOptions page;
  page.limit = 2;
  auto p1 = store->List(Kind::kPoolLease, page);
  BOOST_REQUIRE(p1->items.size() == 2u);
  BOOST_TEST(p1->items[1]->metadata.name == "b");
  BOOST_TEST(p1->next_name == "c");
  BOOST_TEST(p1->remaining == 3);

  page.after_name = "b";
  auto p2 = store->List(Kind::kPoolLease, page);
  BOOST_REQUIRE(p2->items.size() == 2u);
  BOOST_TEST(p2->items[0]->metadata.name == "c");
  BOOST_TEST(p2->remaining == 1);

  page.after_name = "d";
  auto p3 = store->List(Kind::kPoolLease, page);
  BOOST_REQUIRE(p3->items.size() == 1u);
  BOOST_TEST(p3->next_name.empty());
  BOOST_TEST(p3->remaining == 0);

  ListOptions filtered;
  filtered.limit = 1;
  filtered.predicate = [](const Object& o) { return o.metadata.name != "a"; };
  auto f = store->List(Kind::kPoolLease, filtered);
  BOOST_REQUIRE(f->items.size() == 1u);
  BOOST_TEST(f->items[0]->metadata.name == "b");
  BOOST_TEST(f->next_name == "c");
  BOOST_TEST(f->remaining == 3);

  filtered.limit = 1;
  filtered.predicate = [](const Object& o) { return *o.spec.lease_duration_seconds == 99; };
  auto only_c = store->List(Kind::kPoolLease, filtered);
  BOOST_REQUIRE(only_c->items.size() == 1u);
  BOOST_TEST(only_c->next_name.empty());  // nothing matching left: no cut
}

// The objects sit in a B-tree keyed by the name inside each object: thousands of
// creates, replacements and deletes in scrambled order (node splits and merges)
// must list exactly what a std::map model holds, in name order, with each name's
// newest object.
BOOST_FIXTURE_TEST_CASE(ManyNamesMatchAModel, Fixture) {
  std::map<std::string, int32_t> model;
  constexpr int kNames = 5000;
  auto name_of = [](int i) { return "node-" + std::to_string((i * 7919) % kNames); };
  for (int i = 0; i < kNames; ++i) {
    Write(Kind::kDelegatedLease, name_of(i), 1);
    model[name_of(i)] = 1;
  }
  for (int i = 0; i < kNames; i += 2) {
    Write(Kind::kDelegatedLease, name_of(i), 2);
    model[name_of(i)] = 2;
  }
  for (int i = 0; i < kNames; i += 3) {
    BOOST_REQUIRE(store->Update(Kind::kDelegatedLease, name_of(i), Remove()).ok());
    model.erase(name_of(i));
  }
  auto list = store->List(Kind::kDelegatedLease, {});
  BOOST_REQUIRE(list.ok());
  BOOST_REQUIRE(list->items.size() == model.size());
  auto it = model.begin();
  for (const auto& o : list->items) {
    BOOST_REQUIRE(o->metadata.name == it->first);
    BOOST_REQUIRE(*o->spec.lease_duration_seconds == it->second);
    ++it;
  }
  for (int i = 0; i < kNames; ++i) {
    auto got = store->Get(Kind::kDelegatedLease, name_of(i));
    BOOST_REQUIRE(got.ok() == (model.count(name_of(i)) == 1));
  }
  // Pages resume after a name that is no longer stored.
  ListOptions page;
  page.limit = 10;
  page.after_name = name_of(0);  // deleted (0 % 3 == 0)
  auto p = store->List(Kind::kDelegatedLease, page);
  BOOST_REQUIRE(p.ok());
  BOOST_REQUIRE(p->items.size() == 10u);
  BOOST_TEST(p->items[0]->metadata.name == model.upper_bound(name_of(0))->first);
  BOOST_TEST(store->List(Kind::kPoolLease, {})->items.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Watches)

BOOST_FIXTURE_TEST_CASE(ResumeReplaysOnlyLaterEventsInOrder, Fixture) {
  const int64_t rv_a = Write(Kind::kPoolLease, "a", 1);  // 2
  Write(Kind::kDelegatedLease, "x", 1);                   // 3, other kind
  Write(Kind::kPoolLease, "b", 1);                        // 4
  Write(Kind::kPoolLease, "a", 2);                        // 5
  BOOST_REQUIRE(store->Update(Kind::kPoolLease, "b", Remove()).ok());  // 6

  auto w = store->Watch(Kind::kPoolLease, rv_a);
  BOOST_REQUIRE(w.ok());
  Write(Kind::kPoolLease, "c", 1);  // 7, live
  auto events = Drain(**w, 4);
  BOOST_REQUIRE(events.size() == 4u);
  BOOST_TEST(events[0]->revision == 4);
  BOOST_TEST((events[0]->type == EventType::kAdded));
  BOOST_TEST(events[0]->object->metadata.name == "b");
  BOOST_TEST(events[1]->revision == 5);
  BOOST_TEST((events[1]->type == EventType::kModified));
  BOOST_TEST(events[1]->previous->metadata.resource_version == 2);
  BOOST_TEST(events[2]->revision == 6);
  BOOST_TEST((events[2]->type == EventType::kDeleted));
  BOOST_TEST(events[2]->object->metadata.name == "b");
  BOOST_TEST(events[2]->object->metadata.resource_version == 6);
  BOOST_TEST(events[3]->revision == 7);
  BOOST_TEST(events[3]->object->metadata.resource_version == 7);
  BOOST_TEST((*w)->Next(milliseconds(20)) == nullptr);
  BOOST_TEST(!(*w)->Closed());
}

BOOST_FIXTURE_TEST_CASE(FromZeroMeansFromNow, Fixture) {
  Write(Kind::kPoolLease, "old", 1);
  auto w = store->Watch(Kind::kPoolLease, 0);
  BOOST_REQUIRE(w.ok());
  Write(Kind::kPoolLease, "new", 1);
  auto events = Drain(**w, 1);
  BOOST_REQUIRE(events.size() == 1u);
  BOOST_TEST(events[0]->object->metadata.name == "new");
}

BOOST_FIXTURE_TEST_CASE(FromCurrentRevisionGetsNothingOld, Fixture) {
  Write(Kind::kPoolLease, "a", 1);
  auto w = store->Watch(Kind::kPoolLease, store->CurrentRevision());
  BOOST_REQUIRE(w.ok());
  BOOST_TEST((*w)->Next(milliseconds(20)) == nullptr);
}

BOOST_AUTO_TEST_CASE(HistoryWindowExpires) {
  auto store =
      NewMemoryStore(MemoryStoreOptions{.watch_history_size = 3, .clock = &kFirstRevisionOne});
  for (int i = 0; i < 6; ++i) {
    const std::string name = "k" + std::to_string(i);
    BOOST_REQUIRE(store->Update(Kind::kPoolLease, name, Put(Kind::kPoolLease, 1)).ok());
  }
  // Revisions 2..7 written; the window holds 5, 6, 7.
  BOOST_TEST(store->CurrentRevision() == 7);
  BOOST_TEST(store->OldestWatchableRevision() == 4);
  auto too_old = store->Watch(Kind::kPoolLease, 3);
  BOOST_REQUIRE(!too_old.ok());
  BOOST_TEST(too_old.status().code() == absl::StatusCode::kOutOfRange);
  ApiErrorInfo info = ApiErrorFromStatus(too_old.status());
  BOOST_TEST(info.code == 410);
  BOOST_TEST(info.reason == "Expired");
  BOOST_TEST(info.message == "too old resource version: 3 (4)");

  auto oldest = store->Watch(Kind::kPoolLease, 4);
  BOOST_REQUIRE(oldest.ok());
  auto events = Drain(**oldest, 3);
  BOOST_REQUIRE(events.size() == 3u);
  BOOST_TEST(events[0]->revision == 5);
  BOOST_TEST(events[2]->revision == 7);
}

// A list continued at its first page's revision reads the objects as they were
// then, as etcd serves it (a newcomer found page 2 carrying a later state, and
// a forged continue token's revision taken as it came).
BOOST_AUTO_TEST_CASE(ListAtAnEarlierRevisionUndoesLaterChanges) {
  auto store =
      NewMemoryStore(MemoryStoreOptions{.watch_history_size = 8, .clock = &kFirstRevisionOne});
  for (const char* name : {"a", "b", "c", "d"}) {
    BOOST_REQUIRE(store->Update(Kind::kPoolLease, name, Put(Kind::kPoolLease, 1)).ok());
  }
  BOOST_REQUIRE(store->Update(Kind::kDelegatedLease, "b", Put(Kind::kDelegatedLease, 1)).ok());
  const int64_t first_page = store->CurrentRevision();  // 6: a b c d at 2..5
  BOOST_REQUIRE(store->Update(Kind::kPoolLease, "b", Put(Kind::kPoolLease, 7)).ok());
  BOOST_REQUIRE(store->Update(Kind::kPoolLease, "b", Put(Kind::kPoolLease, 8)).ok());
  BOOST_REQUIRE(store->Update(Kind::kPoolLease, "c", Remove()).ok());
  BOOST_REQUIRE(store->Update(Kind::kPoolLease, "bb", Put(Kind::kPoolLease, 9)).ok());
  BOOST_REQUIRE(store->Update(Kind::kDelegatedLease, "b", Remove()).ok());

  ListOptions page2;
  page2.after_name = "a";
  page2.at_revision = first_page;
  auto then = store->List(Kind::kPoolLease, page2);
  BOOST_REQUIRE(then.ok());
  BOOST_TEST(then->revision == first_page);
  std::vector<std::string> names;
  for (const auto& o : then->items) names.push_back(o->metadata.name);
  BOOST_TEST(names == (std::vector<std::string>{"b", "c", "d"}));
  BOOST_REQUIRE(then->items.size() == 3u);
  BOOST_TEST(then->items[0]->metadata.resource_version == 3);  // b before its two updates
  BOOST_TEST(*then->items[0]->spec.lease_duration_seconds == 1);
  BOOST_TEST(then->items[1]->metadata.resource_version == 4);  // c before its delete

  // The limit counts the list as it was.
  page2.limit = 1;
  auto cut = store->List(Kind::kPoolLease, page2);
  BOOST_REQUIRE(cut.ok());
  BOOST_TEST(cut->items.size() == 1u);
  BOOST_TEST(cut->next_name == "c");
  BOOST_TEST(cut->remaining == 2);

  // Today's list is untouched.
  auto now = store->List(Kind::kPoolLease, {});
  BOOST_REQUIRE(now.ok());
  BOOST_TEST(now->items.size() == 4u);  // a b bb d

  // A revision in the future: 504 too large, as etcd3; before the history: 410.
  page2.at_revision = store->CurrentRevision() + 1;
  ApiErrorInfo future = ApiErrorFromStatus(store->List(Kind::kPoolLease, page2).status());
  BOOST_TEST(future.code == 504);
  page2.at_revision = 2;  // the history of 8 now starts after revision 3
  ApiErrorInfo gone = ApiErrorFromStatus(store->List(Kind::kPoolLease, page2).status());
  BOOST_TEST(gone.code == 410);
  BOOST_TEST(gone.message.find("continue parameter is too old") != std::string::npos);
}

// The history is bounded in bytes as well as in events: 400 writes of 250 KB
// annotations held ~300 MB of history for good (newcomer finding).
BOOST_AUTO_TEST_CASE(HistoryWindowIsBoundedInBytes) {
  const std::string big(100 * 1024, 'x');
  auto store = NewMemoryStore(MemoryStoreOptions{
      .watch_history_size = 1000, .watch_history_bytes = 350 * 1024, .clock = &kFirstRevisionOne});
  for (int i = 0; i < 6; ++i) {
    auto r = store->Update(Kind::kPoolLease, "k" + std::to_string(i),
                           [&](const ObjectPtr&, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
                             auto o = NewLease(Kind::kPoolLease);
                             o->metadata.annotations["big"] = big;
                             return o;
                           });
    BOOST_REQUIRE(r.ok());
  }
  // Revisions 2..7 written, about 100 KB each: the last three stay.
  BOOST_TEST(store->CurrentRevision() == 7);
  BOOST_TEST(store->OldestWatchableRevision() == 4);
  BOOST_TEST(store->Watch(Kind::kPoolLease, 4).ok());
  BOOST_TEST(ApiErrorFromStatus(store->Watch(Kind::kPoolLease, 3).status()).code == 410);
  // The newest event stays whatever its size.
  auto one =
      NewMemoryStore(MemoryStoreOptions{.watch_history_bytes = 1, .clock = &kFirstRevisionOne});
  BOOST_REQUIRE(one->Update(Kind::kPoolLease, "a", Put(Kind::kPoolLease, 1)).ok());
  BOOST_REQUIRE(one->Update(Kind::kPoolLease, "b", Put(Kind::kPoolLease, 1)).ok());
  BOOST_TEST(one->OldestWatchableRevision() == 2);
}

BOOST_FIXTURE_TEST_CASE(FutureRevisionTimesOut, Fixture) {
  Write(Kind::kPoolLease, "a", 1);
  auto w = store->Watch(Kind::kPoolLease, 100);
  BOOST_REQUIRE(!w.ok());
  BOOST_TEST(w.status().code() == absl::StatusCode::kDeadlineExceeded);
  ApiErrorInfo info = ApiErrorFromStatus(w.status());
  BOOST_TEST(info.code == 504);
  BOOST_TEST(info.message == "Timeout: Too large resource version: 100, current: 2");
  BOOST_REQUIRE(info.causes.size() == 1u);
  BOOST_TEST(info.causes[0].type == "ResourceVersionTooLarge");
}

BOOST_AUTO_TEST_CASE(SlowWatcherIsClosedWithErrorEvent) {
  auto store = NewMemoryStore(MemoryStoreOptions{.watcher_queue_limit = 4});
  auto slow = store->Watch(Kind::kPoolLease, 0);
  auto fast = store->Watch(Kind::kPoolLease, 0);
  BOOST_REQUIRE(slow.ok());
  BOOST_REQUIRE(fast.ok());
  for (int i = 0; i < 10; ++i) {
    BOOST_REQUIRE(store->Update(Kind::kPoolLease, "k", Put(Kind::kPoolLease, i + 1)).ok());
    BOOST_REQUIRE((*fast)->Next(milliseconds(500)) != nullptr);
  }
  BOOST_TEST((*slow)->Closed());
  EventPtr err = (*slow)->Next(milliseconds(500));
  BOOST_REQUIRE(err != nullptr);
  BOOST_TEST((err->type == EventType::kError));
  BOOST_TEST(err->object == nullptr);
  BOOST_TEST((*slow)->Next(milliseconds(10)) == nullptr);
  BOOST_TEST(!(*fast)->Closed());
}

// RequestProgress: a bookmark at the store's revision (moved by another kind
// here), behind every event it covers.
BOOST_FIXTURE_TEST_CASE(ProgressBookmarkFollowsItsEvents, Fixture) {
  auto w = store->Watch(Kind::kPoolLease, 0);
  BOOST_REQUIRE(w.ok());
  const int64_t r1 = Write(Kind::kPoolLease, "a", 1);
  const int64_t r2 = Write(Kind::kDelegatedLease, "x", 1);
  BOOST_REQUIRE((*w)->RequestProgress());
  auto events = Drain(**w, 2);
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0]->revision == r1);
  BOOST_TEST((events[1]->type == EventType::kBookmark));
  BOOST_TEST(events[1]->revision == r2);
  BOOST_TEST(events[1]->object->metadata.resource_version == r2);
  BOOST_TEST((events[1]->object->kind == Kind::kPoolLease));
  BOOST_TEST((*w)->Next(milliseconds(20)) == nullptr);
  store->Shutdown();
  BOOST_TEST(!(*w)->RequestProgress());
}

BOOST_AUTO_TEST_CASE(ProgressAfterTheStoreIsGoneIsRefused) {
  auto store = NewMemoryStore({});
  auto w = store->Watch(Kind::kPoolLease, 0);
  BOOST_REQUIRE(w.ok());
  store.reset();
  BOOST_TEST(!(*w)->RequestProgress());
}

BOOST_FIXTURE_TEST_CASE(EventsAreSharedAcrossWatchers, Fixture) {
  auto w1 = store->Watch(Kind::kPoolLease, 0);
  auto w2 = store->Watch(Kind::kPoolLease, 0);
  Write(Kind::kPoolLease, "a", 1);
  EventPtr e1 = (*w1)->Next(milliseconds(500));
  EventPtr e2 = (*w2)->Next(milliseconds(500));
  BOOST_REQUIRE(e1 != nullptr);
  BOOST_TEST(e1.get() == e2.get());
}

BOOST_FIXTURE_TEST_CASE(NextTimesOut, Fixture) {
  auto w = store->Watch(Kind::kPoolLease, 0);
  auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST((*w)->Next(milliseconds(100)) == nullptr);
  auto waited = std::chrono::steady_clock::now() - t0;
  BOOST_TEST((waited >= milliseconds(90)));
  BOOST_TEST((waited < milliseconds(2000)));
  BOOST_TEST(!(*w)->Closed());
}

// The write comes once Next waits (testing::UntilWaitingInNext); Next returns
// it long before its timeout, which only a missed wake-up would wait out.
BOOST_FIXTURE_TEST_CASE(BlockedNextWakesOnLiveEvent, Fixture) {
  auto w = store->Watch(Kind::kPoolLease, 0);
  std::atomic<bool> written{false}, waited{false};
  std::thread writer([&] {  // no Boost.Test assertions off the test's thread
    waited = testing::UntilWaitingInNext(1);
    written = store->Update(Kind::kPoolLease, "a", Put(Kind::kPoolLease, 1)).ok();
  });
  auto t0 = std::chrono::steady_clock::now();
  EventPtr e = (*w)->Next(milliseconds(60'000));
  writer.join();
  BOOST_TEST(waited.load());
  BOOST_TEST(written.load());
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST(e->object->metadata.name == "a");
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < milliseconds(30'000)));
}

BOOST_FIXTURE_TEST_CASE(StopAndShutdownWakeBlockedNext, Fixture) {
  auto w1 = store->Watch(Kind::kPoolLease, 0);
  auto w2 = store->Watch(Kind::kDelegatedLease, 0);
  EventPtr r1, r2;
  auto t0 = std::chrono::steady_clock::now();
  std::thread t1([&] { r1 = (*w1)->Next(milliseconds(60'000)); });
  std::thread t2([&] { r2 = (*w2)->Next(milliseconds(60'000)); });
  BOOST_TEST(testing::UntilWaitingInNext(2));  // both wait before Stop and Shutdown come
  (*w1)->Stop();
  store->Shutdown();
  t1.join();
  t2.join();
  // Woken, not timed out.
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < milliseconds(30'000)));
  BOOST_REQUIRE(r1 != nullptr);
  BOOST_REQUIRE(r2 != nullptr);
  BOOST_TEST((r1->type == EventType::kError));
  BOOST_TEST((r2->type == EventType::kError));
  BOOST_TEST((*w1)->Closed());
  BOOST_TEST((*w2)->Closed());
  BOOST_TEST(!store->Watch(Kind::kPoolLease, 0).ok());
  store->Shutdown();  // idempotent
}

BOOST_FIXTURE_TEST_CASE(DroppedWatcherDoesNotBreakWriters, Fixture) {
  {
    auto w = store->Watch(Kind::kPoolLease, 0);
    BOOST_REQUIRE(w.ok());
  }
  Write(Kind::kPoolLease, "a", 1);
  Write(Kind::kPoolLease, "a", 2);
  BOOST_TEST(store->CurrentRevision() == 3);
}

// A store that follows another (the server restarted, its pod replaced) starts
// above every revision the one before handed out, so a client resuming from one of
// them gets 410 Expired and relists at once. Both stores counted from 1 before:
// kube-controller-manager's informers then got 504 "Too large resource version"
// once a second for about 10 s after `kubectl delete pod` of the server.
BOOST_AUTO_TEST_CASE(ANewStoreStartsAboveTheOneBefore) {
  base::FakeClock clock;  // 2026-01-01, in microseconds since the epoch
  auto before = NewMemoryStore(MemoryStoreOptions{.clock = &clock});
  BOOST_TEST(before->CurrentRevision() == clock.NowMicros());
  for (int i = 0; i < 1000; ++i) {
    BOOST_REQUIRE(before->Update(Kind::kPoolLease, "a", Put(Kind::kPoolLease, i + 1)).ok());
  }
  const int64_t last = before->CurrentRevision();
  before.reset();

  clock.Advance(std::chrono::seconds(1));  // the replacement starts a second later
  auto after = NewMemoryStore(MemoryStoreOptions{.clock = &clock});
  const int64_t first = after->CurrentRevision();
  BOOST_TEST(first > last);
  auto list = after->List(Kind::kPoolLease, {});
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->revision == first);

  auto watch = after->Watch(Kind::kPoolLease, last);
  BOOST_REQUIRE(!watch.ok());
  ApiErrorInfo info = ApiErrorFromStatus(watch.status());
  BOOST_TEST(info.code == 410);
  BOOST_TEST(info.reason == "Expired");
  BOOST_TEST(info.message ==
             "too old resource version: " + std::to_string(last) + " (" + std::to_string(first) + ")");
  ListOptions at_last;
  at_last.at_revision = last;
  BOOST_TEST(ApiErrorFromStatus(after->List(Kind::kPoolLease, at_last).status()).code == 410);

  BOOST_REQUIRE(after->Update(Kind::kPoolLease, "a", Put(Kind::kPoolLease, 1)).ok());
  BOOST_TEST(after->CurrentRevision() == first + 1);
  BOOST_TEST(after->Watch(Kind::kPoolLease, first).ok());  // from the new store's own start
}

// Without a clock given: the real wall clock's microseconds.
BOOST_AUTO_TEST_CASE(TheFirstRevisionIsTheWallClocksMicroseconds) {
  const int64_t before = base::RealClock::Get()->NowMicros();
  auto store = NewMemoryStore({});
  BOOST_TEST(store->CurrentRevision() >= before);
  BOOST_TEST(store->CurrentRevision() <= base::RealClock::Get()->NowMicros());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Concurrency)

BOOST_FIXTURE_TEST_CASE(ConditionalUpdatesLoseNothing, Fixture) {
  // The counter lives in leaseTransitions; each update adds one, only when the
  // resourceVersion the thread read is still current (optimistic concurrency).
  Write(Kind::kPoolLease, "k", 1);
  const int64_t start = store->CurrentRevision();
  auto watcher = store->Watch(Kind::kPoolLease, start);
  BOOST_REQUIRE(watcher.ok());
  constexpr int kThreads = 8, kAttempts = 200;
  std::atomic<int> successes{0}, conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAttempts; ++i) {
        auto read = store->Get(Kind::kPoolLease, "k");
        if (!read.ok()) continue;
        const int64_t expected_rv = (*read)->metadata.resource_version;
        auto r = store->Update(
            Kind::kPoolLease, "k",
            [&](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
              if (cur->metadata.resource_version != expected_rv) {
                return StaleResourceVersionError("poolleases", "k");
              }
              auto next = std::make_shared<Object>(*cur);
              next->spec.lease_transitions = cur->spec.lease_transitions.value_or(0) + 1;
              return next;
            });
        if (r.ok()) {
          ++successes;
        } else if (r.status().code() == absl::StatusCode::kAborted) {
          ++conflicts;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(successes + conflicts == kThreads * kAttempts);
  BOOST_TEST(successes > 0);
  BOOST_TEST(store->CurrentRevision() == start + successes);
  auto final_obj = store->Get(Kind::kPoolLease, "k");
  BOOST_REQUIRE(final_obj.ok());
  BOOST_TEST(*(*final_obj)->spec.lease_transitions == successes.load());
  BOOST_TEST((*final_obj)->metadata.resource_version == store->CurrentRevision());

  // The watch saw every successful write, in revision order, each counter once.
  auto events = Drain(**watcher, successes.load());
  BOOST_REQUIRE(static_cast<int>(events.size()) == successes.load());
  for (size_t i = 0; i < events.size(); ++i) {
    BOOST_TEST(events[i]->revision == start + 1 + static_cast<int64_t>(i));
    BOOST_TEST(*events[i]->object->spec.lease_transitions == static_cast<int32_t>(i + 1));
  }
}

BOOST_FIXTURE_TEST_CASE(FanOutToManyWatchers, Fixture) {
  constexpr int kWatchers = 1000, kWrites = 50;
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    auto w = store->Watch(Kind::kPoolLease, 0);
    BOOST_REQUIRE(w.ok());
    watchers.push_back(*std::move(w));
  }
  for (int i = 0; i < kWrites; ++i) Write(Kind::kPoolLease, "k", i + 1);
  const Event* last = nullptr;
  for (auto& w : watchers) {
    auto events = Drain(*w, kWrites);
    BOOST_REQUIRE(events.size() == static_cast<size_t>(kWrites));
    BOOST_TEST(events.back()->revision == 1 + kWrites);
    // One allocation per write, shared by every watcher.
    if (last == nullptr) last = events.back().get();
    BOOST_TEST(events.back().get() == last);
  }
}

BOOST_FIXTURE_TEST_CASE(ParallelCreatesOfDistinctKeys, Fixture) {
  constexpr int kThreads = 8, kPerThread = 100;
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {  // no Boost.Test assertions off the test's thread
      for (int i = 0; i < kPerThread; ++i) {
        const std::string name = "n-" + std::to_string(t) + "-" + std::to_string(i);
        if (!store->Update(Kind::kDelegatedLease, name, Put(Kind::kDelegatedLease, 1)).ok()) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(failed.load() == 0);
  auto list = store->List(Kind::kDelegatedLease, {});
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->items.size() == static_cast<size_t>(kThreads * kPerThread));
  BOOST_TEST(list->revision == 1 + kThreads * kPerThread);
  std::vector<bool> seen(kThreads * kPerThread + 2, false);
  for (const auto& o : list->items) {
    const int64_t rv = o->metadata.resource_version;
    BOOST_REQUIRE(rv >= 2);
    BOOST_REQUIRE(rv <= 1 + kThreads * kPerThread);
    BOOST_TEST(!seen[rv]);  // every write got its own revision
    seen[rv] = true;
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::store
