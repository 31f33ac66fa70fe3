// Prometheus metrics of the API server, named and labelled as kube-apiserver's
// (k8s.io/apiserver/pkg/endpoints/metrics), registered in the process's metrics
// registry (base/metrics.h), which renders GET /metrics:
//   apiserver_request_total{verb,resource,code}                counter
//   apiserver_request_duration_seconds{verb,resource}          histogram (not WATCH)
//   apiserver_registered_watchers{resource}                    gauge
//   apiserver_current_inflight_requests{request_kind}          gauge (readOnly|mutating)
// `verb` is kube's reported verb: GET, LIST, WATCH, POST, PUT, PATCH, APPLY,
// DELETE for resource requests, the HTTP method otherwise, and "other" for a
// method kube-apiserver does not report; `resource` is one of ours or "" (the
// number of series stays bounded whatever clients send).
//
// Thread-safe; the hot path takes no global lock (the registry's series are
// sharded and atomic).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <string_view>

#include "base/metrics.h"
#include "store/object.h"

namespace poolcoord::apiservice {

class Metrics {
 public:
  // `registry` is not owned and must outlive this object.
  explicit Metrics(base::MetricsRegistry* registry);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // One finished request (for a watch: when its response starts). The duration
  // is recorded unless `long_running`.
  void ObserveRequest(std::string_view verb, std::string_view resource, int code,
                      double seconds, bool long_running);
  void WatcherStarted(std::string_view resource);
  void WatcherEnded(std::string_view resource);
  void InflightChanged(bool mutating, int delta);

  // Upper bounds of the duration histogram, in seconds (kube-apiserver's).
  static const std::array<double, 23>& DurationBuckets();

  // The verb label's values: kube's 14 reported verbs and "other".
  static constexpr size_t kVerbs = 15;
  // The resource label's values: "" and each kind's plural.
  static constexpr size_t kResources = store::kMaxKinds + 1;

 private:
  // The series one (verb, resource) updates, resolved on first use: the label
  // values come from fixed sets, so a request finds its series by index rather
  // than by the registry's joined-key lookup (~2,300 instructions per request
  // for the two; callgrind, renewals). Codes take the first free of kCodeSlots
  // slots; a (verb, resource) that saw more codes looks the rest up in the
  // registry. Lock-free: a slot's code is claimed by compare-and-swap, its
  // counter published after the lookup (null until then: the registry answers).
  static constexpr size_t kCodeSlots = 8;
  struct CodeSlot {
    std::atomic<int> code{0};  // 0: free
    std::atomic<base::Counter*> counter{nullptr};
  };
  struct Resolved {
    std::atomic<base::Histogram*> duration{nullptr};
    std::array<CodeSlot, kCodeSlots> codes;
  };
  base::Counter& RequestCounter(Resolved& series, std::string_view verb,
                                std::string_view resource, int code);
  base::Counter& Lookup(std::string_view verb, std::string_view resource, int code);

  base::CounterFamily& requests_;
  base::HistogramFamily& durations_;
  base::GaugeFamily& watchers_;
  base::Gauge& inflight_read_only_;
  base::Gauge& inflight_mutating_;
  // [verb index * kResources + resource index] (metrics.cc: VerbIndex; "" is 0,
  // a kind is its index + 1).
  const std::unique_ptr<Resolved[]> resolved_;
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
