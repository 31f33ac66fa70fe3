// Records core/v1 Events about the objects a controller acts on, off the
// controller's own path, as client-go's EventBroadcaster does: Record queues the
// Event and returns at once; a thread of the recorder's own (or Flush, for a
// driver that steps time itself) creates them in the cloud. The queue is
// bounded: when the cloud is slower than the controller, Events are dropped and
// counted (poolcoord_events_dropped_total) rather than delay the work they
// describe (client-go drops them too, with a log line, once its channel of
// 1,000 is full), and they are created at most `qps` per second (client-go's
// EventCorrelator rate-limits each source and object the same way). A failed create is counted in the controller's error counter
// by `on_error` and not retried.
//
// Thread-safety: Record from any thread; Start/Stop from one.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "base/token_bucket.h"
#include "cloud/clientset.h"

namespace poolcoord::controllers {

struct EventRecorderOptions {
  std::string component;  // source.component, reportingController, reportingInstance
  size_t queue_size = 1000;
  // Events created per second at most (a token bucket with `burst`): a storm
  // of thousands of nodes makes thousands of Events, each a write to etcd
  // that competes with the renewals they describe. 0: no limit.
  double qps = 10;
  int burst = 100;
  std::string thread_name = "events";  // the sending thread's (at most 15 characters)
};

class EventRecorder {
 public:
  // `events` (Events of one namespace), `clock` and `metrics` are not owned.
  // `on_error(name, status)` is called for each failed create.
  EventRecorder(cloud::EventInterface* events, const base::Clock* clock,
                base::MetricsRegistry* metrics, EventRecorderOptions options,
                std::function<void(const std::string&, const absl::Status&)> on_error);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // A Normal Event about `kind`/`name` (cluster-scoped objects), queued.
  void Record(const std::string& kind, const std::string& api_version, const std::string& name,
              const std::string& reason, const std::string& message);
  // Creates every queued Event on the calling thread.
  void Flush();
  // Starts and stops the sending thread (Stop sends what is queued first).
  void Start();
  void Stop();

 private:
  void Run();
  bool ReadyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); }

  cloud::EventInterface* const events_;
  const base::Clock* const clock_;
  const EventRecorderOptions options_;
  const std::function<void(const std::string&, const absl::Status&)> on_error_;
  base::Counter& dropped_;
  base::TokenBucket limit_;
  absl::Mutex mu_;
  std::deque<cloud::Event> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex send_mu_;  // one sender at a time keeps the Events in order
  std::atomic<bool> threaded_{false};  // Start was called: Events wait for the bucket
  std::thread thread_;
};

}  // namespace poolcoord::controllers
