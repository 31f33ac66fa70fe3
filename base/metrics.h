// One metrics registry for the whole process: counters, gauges and histograms,
// each a family of series told apart by label values, rendered in the Prometheus
// text exposition format 0.0.4 (what GET /metrics serves and Prometheus
// scrapes). Every module registers its families here; no module writes the text
// format itself.
//
//   MetricsRegistry registry;
//   CounterFamily& requests = registry.AddCounter(
//       "apiserver_request_total", "Counter of apiserver requests ...", {"verb", "resource",
//       "code"});
//   requests.WithLabels({"GET", "poolleases", "200"}).Inc();
//   HistogramFamily& d = registry.AddHistogram("x_seconds", "...", {}, {0.1, 1, 10});
//   d.WithLabels({}).Observe(0.25);
//   std::string text = registry.Render();
//
// The rendering follows the Go client (prometheus/client_golang), so scrapes
// read as kube-apiserver's do: families sorted by name, series by label values;
// label pairs sorted by label name, `le` last in buckets; numbers in Go's
// shortest form ("0.005", "1", "+Inf"); label values escaped (\\, \", \n).
// Help text: \\ and \n escaped.
//
// Thread-safety: everything is thread-safe. The hot path (WithLabels on an
// existing series, Inc/Set/Observe) takes no global lock: series live in 16
// shards by label hash, found under a shard reader lock and updated with
// atomics. References returned by Add* and WithLabels stay valid for the
// registry's life (series are never removed).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::base {

// Monotonic count.
class Counter {
 public:
  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down (integral: counts of things, 0/1 flags).
class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t d) { value_.fetch_add(d, std::memory_order_relaxed); }
  int64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Observations counted into cumulative buckets with fixed upper bounds.
class Histogram {
 public:
  explicit Histogram(const std::vector<double>* bounds);
  void Observe(double v);
  // Reads: per-bucket (not cumulative) counts, the last one past every bound.
  struct Snapshot {
    std::vector<uint64_t> buckets;
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double>* bounds_;  // owned by the family
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
};

// The series of one metric name, one per distinct tuple of label values.
template <typename M>
class Family {
 public:
  // `values` in the order of the family's label names (a wrong count is a
  // programming error: missing values render as "", extra ones are dropped).
  M& WithLabels(std::initializer_list<std::string_view> values);
  M& WithLabels(const std::vector<std::string>& values);

  const std::string& name() const { return name_; }

 private:
  friend class MetricsRegistry;
  Family(std::string name, std::string help, std::vector<std::string> labels,
         std::vector<double> bounds = {});
  template <typename It>
  M& Find(It begin, It end);
  // Label values -> series, sorted, for rendering.
  std::map<std::vector<std::string>, const M*> Series() const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> labels_;
  const std::vector<double> bounds_;  // histograms only
  static constexpr int kShards = 16;
  struct Shard {
    mutable absl::Mutex mu;
    // key: the label values joined with '\x1f'
    absl::flat_hash_map<std::string, std::pair<std::vector<std::string>, std::unique_ptr<M>>> series
        ABSL_GUARDED_BY(mu);
  };
  std::array<Shard, kShards> shards_;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Registers a family, or returns the one already registered under `name` (two
  // modules sharing a metric get the same series; its help, labels and type are
  // the first registration's). `labels` may be empty: then WithLabels({}) is the
  // one series. Names and labels follow Prometheus' rules (not checked).
  CounterFamily& AddCounter(const std::string& name, const std::string& help,
                            std::vector<std::string> labels = {});
  GaugeFamily& AddGauge(const std::string& name, const std::string& help,
                        std::vector<std::string> labels = {});
  // `bounds`: strictly increasing upper bounds; +Inf is implied.
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                std::vector<std::string> labels, std::vector<double> bounds);

  // The exposition text of every family (a family with no series yet renders
  // its HELP and TYPE lines only).
  std::string Render() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<CounterFamily>> counters_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<GaugeFamily>> gauges_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<HistogramFamily>> histograms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::base
