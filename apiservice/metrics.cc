#include "apiservice/metrics.h"

#include <cstdio>
#include <string>
#include <vector>

#include "store/object.h"

namespace poolcoord::apiservice {
namespace {

// Label values come only from fixed sets, so a client cannot mint series: a
// verb kube-apiserver does not report becomes "other" (its metrics' CleanVerb),
// and a resource that is not ours "" (anyone, unauthenticated too, may ask for
// /apis/x/v1/<anything>).
constexpr std::string_view kVerbNames[Metrics::kVerbs] = {
    "APPLY", "CONNECT", "CREATE", "DELETE", "DELETECOLLECTION", "GET", "LIST", "PATCH",
    "POST", "PROXY", "PUT", "UPDATE", "WATCH", "WATCHLIST", "other"};

// The index of the verb's label value in kVerbNames ("other" last).
size_t VerbIndex(std::string_view verb) {
  for (size_t i = 0; i + 1 < Metrics::kVerbs; ++i) {
    if (verb == kVerbNames[i]) return i;
  }
  return Metrics::kVerbs - 1;
}

std::string_view BoundedResource(std::string_view resource) {
  return store::InfoForPlural(resource) != nullptr ? resource : std::string_view();
}

}  // namespace

const std::array<double, 23>& Metrics::DurationBuckets() {
  static const std::array<double, 23> kBuckets = {0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8,
                                                  1.0,   1.25,  1.5,  2,   3,   4,   5,   6,
                                                  8,     10,    15,   20,  30,  45,  60};
  return kBuckets;
}

Metrics::Metrics(base::MetricsRegistry* registry)
    : requests_(registry->AddCounter("apiserver_request_total",
                                     "Counter of apiserver requests broken out for each verb, "
                                     "resource, and HTTP response code.",
                                     {"verb", "resource", "code"})),
      durations_(registry->AddHistogram(
          "apiserver_request_duration_seconds",
          "Response latency distribution in seconds for each verb and resource.",
          {"verb", "resource"},
          std::vector<double>(DurationBuckets().begin(), DurationBuckets().end()))),
      watchers_(registry->AddGauge("apiserver_registered_watchers",
                                   "Number of currently registered watchers for a given resource.",
                                   {"resource"})),
      inflight_read_only_(registry
                              ->AddGauge("apiserver_current_inflight_requests",
                                         "Requests being served now, per request kind.",
                                         {"request_kind"})
                              .WithLabels({"readOnly"})),
      inflight_mutating_(registry
                             ->AddGauge("apiserver_current_inflight_requests",
                                        "Requests being served now, per request kind.",
                                        {"request_kind"})
                             .WithLabels({"mutating"})),
      resolved_(std::make_unique<Resolved[]>(kVerbs * kResources)) {}

void Metrics::ObserveRequest(std::string_view verb, std::string_view resource, int code,
                             double seconds, bool long_running) {
  const size_t v = VerbIndex(verb);
  verb = kVerbNames[v];
  const store::ResourceInfo* info = store::InfoForPlural(resource);
  const size_t r = info != nullptr ? static_cast<size_t>(info->kind) + 1 : 0;
  if (info == nullptr) resource = {};
  Resolved& series = resolved_[v * kResources + r];
  RequestCounter(series, verb, resource, code).Inc();
  if (long_running) return;
  base::Histogram* duration = series.duration.load(std::memory_order_acquire);
  if (duration == nullptr) {
    // Two threads may both look up the series here: the registry gives both the same one.
    duration = &durations_.WithLabels({verb, resource});
    series.duration.store(duration, std::memory_order_release);
  }
  duration->Observe(seconds < 0 ? 0 : seconds);
}

base::Counter& Metrics::RequestCounter(Resolved& series, std::string_view verb,
                                       std::string_view resource, int code) {
  if (code > 0) {
    for (CodeSlot& slot : series.codes) {
      int taken = slot.code.load(std::memory_order_acquire);
      if (taken == 0 && slot.code.compare_exchange_strong(taken, code, std::memory_order_acq_rel)) {
        base::Counter& counter = Lookup(verb, resource, code);
        slot.counter.store(&counter, std::memory_order_release);
        return counter;
      }
      if (taken == code) {
        // Null while the thread that took the slot still looks its counter up.
        if (base::Counter* counter = slot.counter.load(std::memory_order_acquire)) return *counter;
        break;
      }
    }
  }
  // More codes than slots for this verb and resource (or a code of 0): the registry.
  return Lookup(verb, resource, code);
}

base::Counter& Metrics::Lookup(std::string_view verb, std::string_view resource, int code) {
  char code_text[16];
  const int n = std::snprintf(code_text, sizeof(code_text), "%d", code);
  return requests_.WithLabels({verb, resource, std::string_view(code_text, n > 0 ? n : 0)});
}

void Metrics::WatcherStarted(std::string_view resource) {
  watchers_.WithLabels({BoundedResource(resource)}).Add(1);
}

void Metrics::WatcherEnded(std::string_view resource) {
  watchers_.WithLabels({BoundedResource(resource)}).Add(-1);
}

void Metrics::InflightChanged(bool mutating, int delta) {
  (mutating ? inflight_mutating_ : inflight_read_only_).Add(delta);
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
