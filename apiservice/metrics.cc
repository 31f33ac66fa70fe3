#include "apiservice/metrics.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace poolcoord::apiservice {
namespace {

constexpr char kSep = '\x1f';

std::string EscapeLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::string> SplitKey(const std::string& key) {
  return absl::StrSplit(key, kSep);
}

std::string FormatDouble(double v) {
  std::string s = absl::StrFormat("%.6g", v);
  return s;
}

}  // namespace

template <typename T>
T& Metrics::Family<T>::Get(const std::string& key) {
  Shard& shard = shards_[absl::Hash<std::string>{}(key) % kShards];
  {
    absl::ReaderMutexLock lock(&shard.mu);
    auto it = shard.series.find(key);
    if (it != shard.series.end()) return *it->second;
  }
  absl::MutexLock lock(&shard.mu);
  auto& slot = shard.series[key];
  if (!slot) slot = std::make_unique<T>();
  return *slot;
}

template <typename T>
template <typename Fn>
void Metrics::Family<T>::ForEach(Fn fn) const {
  for (const Shard& shard : shards_) {
    absl::ReaderMutexLock lock(&shard.mu);
    for (const auto& [key, value] : shard.series) fn(key, *value);
  }
}

const std::array<double, 23>& Metrics::DurationBuckets() {
  static const std::array<double, 23> kBuckets = {0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8,
                                                  1.0,   1.25,  1.5,  2,   3,   4,   5,   6,
                                                  8,     10,    15,   20,  30,  45,  60};
  return kBuckets;
}

Metrics::Metrics() = default;

void Metrics::ObserveRequest(std::string_view verb, std::string_view resource, int code,
                             double seconds, bool long_running) {
  std::string key = absl::StrCat(absl::string_view(verb.data(), verb.size()), std::string(1, kSep),
                                 absl::string_view(resource.data(), resource.size()));
  requests_.Get(absl::StrCat(key, std::string(1, kSep), code))
      .value.fetch_add(1, std::memory_order_relaxed);
  if (long_running) return;
  Histogram& h = durations_.Get(key);
  const auto& bounds = DurationBuckets();
  size_t i = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  h.buckets[i].fetch_add(1, std::memory_order_relaxed);
  h.count.fetch_add(1, std::memory_order_relaxed);
  h.sum_micros.fetch_add(static_cast<uint64_t>(std::max(0.0, seconds) * 1e6),
                         std::memory_order_relaxed);
}

void Metrics::WatcherStarted(std::string_view resource) {
  watchers_.Get(std::string(resource)).value.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::WatcherEnded(std::string_view resource) {
  watchers_.Get(std::string(resource)).value.fetch_sub(1, std::memory_order_relaxed);
}

void Metrics::InflightChanged(bool mutating, int delta) {
  (mutating ? inflight_mutating_ : inflight_read_only_).fetch_add(delta, std::memory_order_relaxed);
}

std::string Metrics::Render() const {
  std::string out;
  // Sorted for stable output.
  std::map<std::string, uint64_t> requests;
  requests_.ForEach([&](const std::string& k, const Counter& c) {
    requests[k] = c.value.load(std::memory_order_relaxed);
  });
  out +=
      "# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, "
      "resource, and HTTP response code.\n"
      "# TYPE apiserver_request_total counter\n";
  for (const auto& [key, value] : requests) {
    std::vector<std::string> l = SplitKey(key);
    absl::StrAppend(&out, "apiserver_request_total{code=\"", EscapeLabel(l[2]),
                    "\",resource=\"", EscapeLabel(l[1]), "\",verb=\"", EscapeLabel(l[0]),
                    "\"} ", value, "\n");
  }

  out +=
      "# HELP apiserver_request_duration_seconds Response latency distribution in seconds for "
      "each verb and resource.\n"
      "# TYPE apiserver_request_duration_seconds histogram\n";
  struct Snapshot {
    std::array<uint64_t, 24> buckets;
    uint64_t count;
    uint64_t sum_micros;
  };
  std::map<std::string, Snapshot> durations;
  durations_.ForEach([&](const std::string& k, const Histogram& h) {
    Snapshot s;
    for (size_t i = 0; i < s.buckets.size(); ++i) {
      s.buckets[i] = h.buckets[i].load(std::memory_order_relaxed);
    }
    s.count = h.count.load(std::memory_order_relaxed);
    s.sum_micros = h.sum_micros.load(std::memory_order_relaxed);
    durations[k] = s;
  });
  const auto& bounds = DurationBuckets();
  for (const auto& [key, s] : durations) {
    std::vector<std::string> l = SplitKey(key);
    std::string labels =
        absl::StrCat("resource=\"", EscapeLabel(l[1]), "\",verb=\"", EscapeLabel(l[0]), "\"");
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds.size(); ++i) {
      cumulative += s.buckets[i];
      absl::StrAppend(&out, "apiserver_request_duration_seconds_bucket{", labels, ",le=\"",
                      FormatDouble(bounds[i]), "\"} ", cumulative, "\n");
    }
    cumulative += s.buckets[bounds.size()];
    // The total is the sum of the buckets read, so +Inf and _count always agree.
    absl::StrAppend(&out, "apiserver_request_duration_seconds_bucket{", labels, ",le=\"+Inf\"} ",
                    cumulative, "\n");
    absl::StrAppend(&out, "apiserver_request_duration_seconds_sum{", labels, "} ",
                    FormatDouble(static_cast<double>(s.sum_micros) / 1e6), "\n");
    absl::StrAppend(&out, "apiserver_request_duration_seconds_count{", labels, "} ", cumulative,
                    "\n");
  }

  out +=
      "# HELP apiserver_registered_watchers Number of currently registered watchers for a given "
      "resource.\n"
      "# TYPE apiserver_registered_watchers gauge\n";
  std::map<std::string, int64_t> watchers;
  watchers_.ForEach([&](const std::string& k, const Gauge& g) {
    watchers[k] = g.value.load(std::memory_order_relaxed);
  });
  for (const auto& [resource, value] : watchers) {
    absl::StrAppend(&out, "apiserver_registered_watchers{resource=\"", EscapeLabel(resource),
                    "\"} ", value, "\n");
  }

  absl::StrAppend(
      &out,
      "# HELP apiserver_current_inflight_requests Requests being served now, per request kind.\n"
      "# TYPE apiserver_current_inflight_requests gauge\n"
      "apiserver_current_inflight_requests{request_kind=\"mutating\"} ",
      inflight_mutating_.load(std::memory_order_relaxed), "\n",
      "apiserver_current_inflight_requests{request_kind=\"readOnly\"} ",
      inflight_read_only_.load(std::memory_order_relaxed), "\n");
  return out;
}

bool InflightLimiter::TryAcquire() {
  int now = current_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (limit_ > 0 && now > limit_) {
    current_.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  return true;
}

void InflightLimiter::Release() { current_.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace poolcoord::apiservice
