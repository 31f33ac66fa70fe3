#include "controllers/event_recorder.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"

namespace poolcoord::controllers {

EventRecorder::EventRecorder(cloud::EventInterface* events, const base::Clock* clock,
                             base::MetricsRegistry* metrics, EventRecorderOptions options,
                             std::function<void(const std::string&, const absl::Status&)> on_error)
    : events_(events),
      clock_(clock),
      options_(std::move(options)),
      on_error_(std::move(on_error)),
      dropped_(metrics
                   ->AddCounter("poolcoord_events_dropped_total",
                                "Events not recorded because the queue of Events waiting to be "
                                "created in the cloud was full.")
                   .WithLabels({})),
      limit_(options_.qps, options_.burst, clock) {}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Record(const std::string& kind, const std::string& api_version,
                           const std::string& name, const std::string& reason,
                           const std::string& message) {
  cloud::Event e;
  const int64_t now = clock_->NowMicros();
  e.metadata.generate_name = absl::StrCat(name, ".");
  e.involved_object.kind = kind;
  e.involved_object.api_version = api_version;
  e.involved_object.name = name;
  e.reason = reason;
  e.message = message;
  e.type = "Normal";
  e.source_component = options_.component;
  e.first_timestamp_us = now;
  e.last_timestamp_us = now;
  e.event_time_us = now;
  e.count = 1;
  e.reporting_controller = options_.component;
  e.reporting_instance = options_.component;
  e.action = reason;
  absl::MutexLock l(&mu_);
  if (queue_.size() >= options_.queue_size) {
    dropped_.Inc();
    return;
  }
  queue_.push_back(std::move(e));
}

void EventRecorder::Flush() {
  absl::MutexLock send(&send_mu_);
  while (true) {
    cloud::Event e;
    {
      absl::MutexLock l(&mu_);
      if (queue_.empty()) return;
      e = std::move(queue_.front());
      queue_.pop_front();
    }
    // The queue absorbs a burst while the bucket is empty; Flush (a driver
    // stepping a fake clock) does not wait on it.
    if (threaded_) limit_.Wait();
    absl::StatusOr<cloud::Event> created = events_->Create(e);
    if (!created.ok() && on_error_) on_error_(e.involved_object.name, created.status());
  }
}

void EventRecorder::Start() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = false;
  }
  threaded_ = true;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), options_.thread_name.substr(0, 15).c_str());
    Run();
  });
}

void EventRecorder::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void EventRecorder::Run() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(this, &EventRecorder::ReadyLocked));
      if (stopping_ && queue_.empty()) return;
    }
    Flush();
  }
}

}  // namespace poolcoord::controllers
