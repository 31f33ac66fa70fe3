// The in-memory Store (docs/architecture.md "Stores").
//
// One process, one global revision starting at 1 (an empty store lists at
// resourceVersion "1", never 0: clients treat "0" as "any"). Each write bumps the
// revision and stamps it as the object's resourceVersion. The last
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
};

std::unique_ptr<Store> NewMemoryStore(const MemoryStoreOptions& options);

}  // namespace poolcoord::store
