// The watch cache: a Store in front of another Store, as kube-apiserver's
// Cacher (k8s.io/apiserver pkg/storage/cacher) stands in front of etcd.
//
// Per kind, one upstream watch on the store below, one dispatcher thread that
// applies its events to an in-memory copy of the kind's objects and to a ring
// of the last `capacity` events, and every API watcher fed from there: with
// 1,000 watchers the store below still serves two watches (on etcd3: two etcd
// streams and their two threads, not 1,000), each event is decoded and encoded
// once, and the fan-out runs on the dispatcher, outside every store lock (the
// memory store used to wake each watcher while holding its write lock).
// While a kind has no API watcher and no progress request waits, the thread
// that pushed an event upstream (a memory-store writer once its lock is
// released, the etcd3 watch thread) applies it to the objects and the ring
// itself, without waking the dispatcher: a wake-up per write was a context
// switch per renewal. Events leave the upstream watch one drainer at a time and
// in order, so watchers see the same events in the same order either way.
//
// Reads follow kube-apiserver's rules (storage/cacher/delegator.go) for an
// etcd without RequestWatchProgress (ours: the JSON gateway takes no progress
// requests on an open watch):
// - Get, List with Freshness::kLatest (resourceVersion unset: a consistent
//   read), List with at_revision (Exact, continue) or after_name (continue):
//   the store below, unchanged;
// - kAny ("0"): the cache as it is; kNotOlderThan N: the cache when it has
//   seen N, else the store below (its newest state is not older than N);
//   N in the future: TimeoutError(rv_too_large);
// - Update, CurrentRevision, OldestWatchableRevision: the store below.
//
// Watch(kind, rv) is served from the ring, as watchCache.getAllEventsSince:
// - rv 0: from the cache's newest revision;
// - rv older than the ring reaches (the oldest kept event's revision - 1, or
//   the revision of the cache's list while nothing has left the ring): OutOfRange
//   ExpiredError "too old resource version: rv (oldest - 1)";
// - rv newer than the cache has seen (the cache lags the store; e.g. rv came
//   from a list of the store below): events after rv as they arrive, unless rv
//   is newer than the store below too: TimeoutError(rv_too_large);
// - a watcher that falls `watcher_queue_limit` events behind is closed (one
//   kError event with no object, then nothing), as the stores do;
// - Watcher::RequestProgress gives a kBookmark at the cache's revision, after
//   the events it covers; the cache asks the store below for progress first
//   when it can (the memory store), so the bookmark moves past other kinds'
//   writes.
//
// When the upstream watch ends (etcd restarted, a stream error) the cacher
// resumes it from its revision; when the store below no longer reaches back
// that far it lists again (the reflector's relist): the ring starts over, every
// API watcher is closed (clients re-list, as after kube-apiserver's relist) and
// until the list is back reads go to the store below and Watch answers 429
// ("storage is (re)initializing", as ResilientWatchCacheInitialization does).
//
// Driven (NewDrivenCacher, for tests and a simulator on a simulated clock):
// no dispatcher threads and nothing applied by the writers; the events the
// store below has delivered reach the cache's objects, its ring and its
// watchers only inside DrivenCacher::Dispatch(), on the caller's thread, so
// the cache lags its store for exactly as long as the caller leaves it, as a
// busy dispatcher would. A read that would wait for the cache (kNotOlderThan
// N past what it has seen) dispatches its kind first instead of waiting; a
// lost upstream watch is resumed (or the kind relisted) by the next Dispatch
// instead of after a sleep.
//
// Thread-safety: every method may be called from any thread. The cacher owns
// the store below; Shutdown (also run by the destructor) stops the
// dispatchers, closes every watcher and shuts the store below down.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace poolcoord::store {

struct CacherOptions {
  // Events kept per kind for resuming watches (kube-apiserver's watch cache
  // capacity; here --watch-history-size, as the memory store's window).
  int64_t capacity = 10000;
  // And at most this many bytes of objects per kind (ApproximateBytes;
  // --watch-history-bytes); the newest event always stays. 0: no bound in bytes.
  int64_t capacity_bytes = 256 << 20;
  // Events a watcher may have pending before it is closed as too slow.
  size_t watcher_queue_limit = 10000;
};

// Lists and watches every kind the store knows (store::KnownKinds) before it
// returns (errors: those of that first List or Watch; InvalidArgument for a
// capacity below 1). A kind registered later is served by `below` alone.
absl::StatusOr<std::unique_ptr<Store>> NewCacher(std::unique_ptr<Store> below,
                                                 const CacherOptions& options);

// The watch cache driven by its caller (see the file comment).
class DrivenCacher : public Store {
 public:
  // Applies every event the store below has delivered so far to the cache and
  // hands it to the cache's watchers; answers waiting progress requests.
  // Returns the number of events applied.
  virtual int Dispatch() = 0;
};

// As NewCacher, driven. Errors as NewCacher's.
absl::StatusOr<std::unique_ptr<DrivenCacher>> NewDrivenCacher(std::unique_ptr<Store> below,
                                                             const CacherOptions& options);

}  // namespace poolcoord::store
