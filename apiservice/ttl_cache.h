// A small thread-safe cache whose entries expire after a per-entry TTL on a
// monotonic clock, for the TokenReview and SubjectAccessReview answers
// (k8s.io/apiserver caches both for 10 s by default, allow and deny alike).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"

namespace poolcoord::apiservice {

// Keyed by string. Bounded: at `max_entries` an insert first drops expired
// entries, then an arbitrary one, so memory stays bounded under a flood of
// distinct keys (kube bounds its caches as LRUs of a few thousand entries).
// Thread-safe. The clock is not owned and must outlive the cache.
template <typename V>
class TtlCache {
 public:
  TtlCache(const base::Clock* clock, size_t max_entries)
      : clock_(clock), max_entries_(max_entries) {}

  // The value stored for `key` when it has not expired yet.
  std::optional<V> Get(const std::string& key) {
    const int64_t now = clock_->MonotonicMicros();
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    if (now >= it->second.expires_us) {
      entries_.erase(it);
      return std::nullopt;
    }
    return it->second.value;
  }

  // Stores `value` for `ttl` from now; a TTL of zero or less stores nothing.
  void Put(const std::string& key, V value, std::chrono::microseconds ttl) {
    if (ttl.count() <= 0) return;
    const int64_t now = clock_->MonotonicMicros();
    absl::MutexLock lock(&mu_);
    if (entries_.size() >= max_entries_ && !entries_.contains(key)) {
      absl::erase_if(entries_, [now](const auto& e) { return now >= e.second.expires_us; });
      if (entries_.size() >= max_entries_) entries_.erase(entries_.begin());
    }
    entries_[key] = Entry{std::move(value), now + ttl.count()};
  }

  size_t size() {
    absl::MutexLock lock(&mu_);
    return entries_.size();
  }

 private:
  struct Entry {
    V value;
    int64_t expires_us;
  };
  const base::Clock* clock_;
  const size_t max_entries_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::apiservice
