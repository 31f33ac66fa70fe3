#include "base/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_view.h"

namespace poolcoord::base {
namespace {

constexpr char kSep = '\x1f';

// Go's strconv.FormatFloat(v, 'g', -1, 64) as the Go client prints samples.
std::string FormatNumber(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return absl::StrCat(v);
  std::string s(buf, end);
  return s;
}

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
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

std::string EscapeHelp(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The order in which label pairs print: by label name, as the Go client sorts them.
std::vector<size_t> LabelOrder(const std::vector<std::string>& labels) {
  std::vector<size_t> order(labels.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return labels[a] < labels[b]; });
  return order;
}

// `name{a="x",b="y"` + extra pairs + `}`; no braces when there are no pairs.
std::string SeriesName(const std::string& name, const std::vector<std::string>& labels,
                       const std::vector<size_t>& order, const std::vector<std::string>& values,
                       std::string_view extra = {}) {
  std::string out = name;
  if (labels.empty() && extra.empty()) return out;
  out += '{';
  bool first = true;
  for (size_t i : order) {
    if (!first) out += ',';
    first = false;
    absl::StrAppend(&out, labels[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra.empty()) {
    if (!first) out += ',';
    out.append(extra.data(), extra.size());
  }
  out += '}';
  return out;
}

void AppendHeader(std::string* out, const std::string& name, const std::string& help,
                  const char* type) {
  absl::StrAppend(out, "# HELP ", name, " ", EscapeHelp(help), "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  const size_t i = std::lower_bound(bounds_->begin(), bounds_->end(), v) - bounds_->begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.buckets.resize(bounds_->size() + 1);
  for (size_t i = 0; i < s.buckets.size(); ++i) {
    s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    s.count += s.buckets[i];
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

template <typename M>
Family<M>::Family(std::string name, std::string help, std::vector<std::string> labels,
                  std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      labels_(std::move(labels)),
      bounds_(std::move(bounds)) {}

template <typename M>
template <typename It>
M& Family<M>::Find(It begin, It end) {
  std::string key;
  size_t n = 0;
  for (It it = begin; it != end && n < labels_.size(); ++it, ++n) {
    if (n > 0) key += kSep;
    key.append(it->data(), it->size());
  }
  for (; n < labels_.size(); ++n) {
    if (n > 0) key += kSep;
  }
  Shard& shard = shards_[absl::Hash<std::string>{}(key) % kShards];
  {
    absl::ReaderMutexLock lock(&shard.mu);
    auto it = shard.series.find(key);
    if (it != shard.series.end()) return *it->second.second;
  }
  absl::MutexLock lock(&shard.mu);
  auto& slot = shard.series[key];
  if (!slot.second) {
    slot.first.assign(labels_.size(), "");
    size_t i = 0;
    for (It it = begin; it != end && i < labels_.size(); ++it, ++i)
      slot.first[i] = std::string(*it);
    if constexpr (std::is_same_v<M, Histogram>) {
      slot.second = std::make_unique<Histogram>(&bounds_);
    } else {
      slot.second = std::make_unique<M>();
    }
  }
  return *slot.second;
}

template <typename M>
M& Family<M>::WithLabels(std::initializer_list<std::string_view> values) {
  return Find(values.begin(), values.end());
}

template <typename M>
M& Family<M>::WithLabels(const std::vector<std::string>& values) {
  return Find(values.begin(), values.end());
}

template <typename M>
std::map<std::vector<std::string>, const M*> Family<M>::Series() const {
  std::map<std::vector<std::string>, const M*> out;
  for (const Shard& shard : shards_) {
    absl::ReaderMutexLock lock(&shard.mu);
    for (const auto& [key, entry] : shard.series) out[entry.first] = entry.second.get();
  }
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

CounterFamily& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                           std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = counters_[name];
  if (!slot) slot.reset(new CounterFamily(name, help, std::move(labels)));
  return *slot;
}

GaugeFamily& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                       std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = gauges_[name];
  if (!slot) slot.reset(new GaugeFamily(name, help, std::move(labels)));
  return *slot;
}

HistogramFamily& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                               std::vector<std::string> labels,
                                               std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  auto& slot = histograms_[name];
  if (!slot) slot.reset(new HistogramFamily(name, help, std::move(labels), std::move(bounds)));
  return *slot;
}

std::string MetricsRegistry::Render() const {
  // Render each family into its slot, then concatenate in name order.
  std::map<std::string, std::string> texts;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, family] : counters_) {
    std::string& out = texts[name];
    AppendHeader(&out, name, family->help_, "counter");
    const auto order = LabelOrder(family->labels_);
    for (const auto& [values, series] : family->Series()) {
      absl::StrAppend(&out, SeriesName(name, family->labels_, order, values), " ", series->Value(),
                      "\n");
    }
  }
  for (const auto& [name, family] : gauges_) {
    std::string& out = texts[name];
    AppendHeader(&out, name, family->help_, "gauge");
    const auto order = LabelOrder(family->labels_);
    for (const auto& [values, series] : family->Series()) {
      absl::StrAppend(&out, SeriesName(name, family->labels_, order, values), " ", series->Value(),
                      "\n");
    }
  }
  for (const auto& [name, family] : histograms_) {
    std::string& out = texts[name];
    AppendHeader(&out, name, family->help_, "histogram");
    const auto order = LabelOrder(family->labels_);
    const std::vector<double>& bounds = family->bounds_;
    for (const auto& [values, series] : family->Series()) {
      const Histogram::Snapshot s = series->Read();
      uint64_t cumulative = 0;
      for (size_t i = 0; i < bounds.size(); ++i) {
        cumulative += s.buckets[i];
        absl::StrAppend(&out,
                        SeriesName(name + "_bucket", family->labels_, order, values,
                                   absl::StrCat("le=\"", FormatNumber(bounds[i]), "\"")),
                        " ", cumulative, "\n");
      }
      // +Inf and _count are the same read, so they always agree.
      absl::StrAppend(&out,
                      SeriesName(name + "_bucket", family->labels_, order, values, "le=\"+Inf\""),
                      " ", s.count, "\n");
      absl::StrAppend(&out, SeriesName(name + "_sum", family->labels_, order, values), " ",
                      FormatNumber(s.sum), "\n");
      absl::StrAppend(&out, SeriesName(name + "_count", family->labels_, order, values), " ",
                      s.count, "\n");
    }
  }
  std::string all;
  for (const auto& [name, text] : texts) all += text;
  return all;
}

}  // namespace poolcoord::base
