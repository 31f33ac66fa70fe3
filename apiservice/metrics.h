// Prometheus metrics of the API server, named and labelled as kube-apiserver's
// (k8s.io/apiserver/pkg/endpoints/metrics), rendered in the text exposition
// format 0.0.4 for GET /metrics:
//   apiserver_request_total{verb,resource,code}                counter
//   apiserver_request_duration_seconds{verb,resource}          histogram (not WATCH)
//   apiserver_registered_watchers{resource}                    gauge
//   apiserver_current_inflight_requests{request_kind}          gauge (readOnly|mutating)
// `verb` is kube's reported verb: GET, LIST, WATCH, POST, PUT, PATCH, APPLY,
// DELETE for resource requests, the HTTP method otherwise.
//
// Thread-safe. The hot path takes no global lock: series live in 16 shards by
// key hash, found under a shard reader lock and updated with atomics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::apiservice {

class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // One finished request (for a watch: when its response starts). The duration
  // is recorded unless `long_running`.
  void ObserveRequest(std::string_view verb, std::string_view resource, int code,
                      double seconds, bool long_running);
  void WatcherStarted(std::string_view resource);
  void WatcherEnded(std::string_view resource);
  void InflightChanged(bool mutating, int delta);

  // The exposition text.
  std::string Render() const;

  // Upper bounds of the duration histogram, in seconds (kube-apiserver's).
  static const std::array<double, 23>& DurationBuckets();

 private:
  struct Counter {
    std::atomic<uint64_t> value{0};
  };
  struct Gauge {
    std::atomic<int64_t> value{0};
  };
  struct Histogram {
    std::array<std::atomic<uint64_t>, 24> buckets{};  // per bucket, last is +Inf
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> sum_micros{0};
  };
  template <typename T>
  class Family {
   public:
    T& Get(const std::string& key);
    template <typename Fn>
    void ForEach(Fn fn) const;

   private:
    static constexpr int kShards = 16;
    struct Shard {
      mutable absl::Mutex mu;
      absl::flat_hash_map<std::string, std::unique_ptr<T>> series ABSL_GUARDED_BY(mu);
    };
    std::array<Shard, kShards> shards_;
  };

  Family<Counter> requests_;        // key: verb \x1f resource \x1f code
  Family<Histogram> durations_;     // key: verb \x1f resource
  Family<Gauge> watchers_;          // key: resource
  std::atomic<int64_t> inflight_read_only_{0};
  std::atomic<int64_t> inflight_mutating_{0};
};

// --max-requests-inflight: admits at most `limit` requests at once (0: no limit).
// Thread-safe, lock-free.
class InflightLimiter {
 public:
  explicit InflightLimiter(int limit) : limit_(limit) {}
  // True when admitted; the caller then calls Release once.
  bool TryAcquire();
  void Release();
  int current() const { return current_.load(std::memory_order_relaxed); }

 private:
  const int limit_;
  std::atomic<int> current_{0};
};

}  // namespace poolcoord::apiservice
