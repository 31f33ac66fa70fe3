// The in-memory Store (docs/architecture.md "Stores").
//
// One process, one global revision. It starts at the wall clock's microseconds
// since the Unix epoch (MemoryStoreOptions::clock), so a store started later --
// the server restarted, its pod replaced -- hands out resourceVersions above every
// one the store before it gave: a client resuming from an old one gets 410 Expired
// and relists at once, as from a compacted etcd, instead of 504 "Too large resource
// version" until the new store has caught up (client-go's reflector retries that
// every second). This holds while the old store wrote fewer than a million objects
// a second and the new store's clock is not behind the old one's by more than the
// old store's lifetime. An empty store lists at its first revision, never 0
// (clients treat "0" as "any"). Each write bumps the revision and stamps it as the
// object's resourceVersion. The last
// `watch_history_size` events (all kinds together, as etcd's compaction works on
// the one revision) let watches resume; older starting points get 410 Expired
// with kube-apiserver's "too old resource version: N (M)".
//
// Thread-safety: every method may be called from any thread. Update runs its fn
// under the store's lock: fn must not call back into the Store (it would
// deadlock) and should be quick, since it blocks every other read and write.
// Watchers are fed by the writer through a bounded per-watcher queue; a watcher
// that falls `watcher_queue_limit` events behind is closed (its Next returns one
// kError event with a null object), so a slow client never stalls writers or
// grows memory without bound (kube-apiserver's cacher does the same).
// Watcher::RequestProgress is supported: a bookmark at the newest revision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/clock.h"
#include "store/store.h"

namespace poolcoord::store {

struct MemoryStoreOptions {
  // Events kept for resuming watches (--watch-history-size). 0 keeps none.
  int64_t watch_history_size = 10000;
  // And at most this many bytes of objects (ApproximateBytes; --watch-history-bytes),
  // so large objects cannot make the window hold gigabytes; the newest event
  // always stays. 0: no bound in bytes.
  int64_t watch_history_bytes = 256 << 20;
  // Events a watcher may have pending before it is closed as too slow.
  size_t watcher_queue_limit = 10000;
  // The first revision is this clock's NowMicros() at construction (at least 1);
  // nullptr: base::RealClock. Read once, at construction.
  const base::Clock* clock = nullptr;
};

std::unique_ptr<Store> NewMemoryStore(const MemoryStoreOptions& options);

}  // namespace poolcoord::store
