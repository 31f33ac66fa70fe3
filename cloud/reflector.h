// List, then watch from the list's resourceVersion, as client-go's reflector
// does: the watch resumes from the last resourceVersion seen when the server
// ends it, is retried with backoff (initial_backoff doubling to max_backoff) on
// errors, and the whole thing is relisted when the resourceVersion expired
// (410, IsResourceExpired). A server that ends every watch at once does not
// make it spin (the backoff applies).
//
// `Client` is a typed client with List(ListOptions) -> StatusOr<XList> and
// Watch(ListOptions, WatchHandler<X>, StreamControl*) (NodeInterface,
// ConfigMapInterface).
//
//   Reflector<NodeInterface, NodeList> r(nodes, options,
//       [](const std::vector<Node>& all) { ... replace ... },
//       [](const WatchEvent<Node>& ev) { ... apply ... });
//   ASSIGN_OR_RETURN(std::string rv, r.ListOnce());   // optional first list
//   r.Start(rv);                                      // "" lists first
//   r.Stop();
//
// Thread-safety: on_list and on_event run on the reflector's thread once
// started (ListOnce runs them on the caller's). Start/Stop from one thread.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/http_transport.h"
#include "base/log.h"
#include "cloud/errors.h"
#include "cloud/types.h"

namespace poolcoord::cloud {

struct ReflectorOptions {
  std::string name;  // for the log: "pool membership from Nodes"
  ListOptions list;  // selectors; resource_version and watch fields are the reflector's
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
  int watch_timeout_seconds = 300;  // asked of the server per watch request
  // The reflector thread's name (at most 15 characters, as Linux keeps them):
  // top -H and /proc/PID/task/*/comm tell whose CPU it is.
  std::string thread_name = "reflector";
};

// The object type of a list type (NodeList -> Node).
template <typename List>
using ItemOf = typename std::remove_reference_t<decltype(std::declval<List&>().items)>::value_type;

template <typename Client, typename List, typename T = ItemOf<List>>
class Reflector {
 public:
  using OnList = std::function<void(const std::vector<T>& items)>;
  using OnEvent = std::function<void(const WatchEvent<T>& event)>;

  // `client` is not owned and must outlive this object.
  Reflector(Client* client, ReflectorOptions options, OnList on_list, OnEvent on_event)
      : client_(client),
        options_(std::move(options)),
        on_list_(std::move(on_list)),
        on_event_(std::move(on_event)) {}
  ~Reflector() { Stop(); }
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  // One list, handed to on_list; returns the list's resourceVersion.
  absl::StatusOr<std::string> ListOnce() {
    ListOptions o = options_.list;
    o.resource_version.clear();
    absl::StatusOr<List> list = client_->List(o);
    if (!list.ok()) return list.status();
    on_list_(list->items);
    return list->resource_version;
  }

  // Follows on a thread of its own from `resource_version` ("" lists first).
  void Start(std::string resource_version) {
    if (thread_.joinable()) return;
    stopping_ = false;
    thread_ = std::thread([this, rv = std::move(resource_version)] {
      pthread_setname_np(pthread_self(), options_.thread_name.substr(0, 15).c_str());
      Run(rv);
    });
  }
  // Stops and joins (a running watch ends at once); idempotent. A stopped
  // reflector does not start again.
  void Stop() {
    stopping_ = true;
    control_.Stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run(std::string rv) {
    std::chrono::milliseconds backoff = options_.initial_backoff;
    auto sleep_backoff = [&] {
      for (auto waited = std::chrono::milliseconds(0); waited < backoff && !stopping_;
           waited += std::chrono::milliseconds(50)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      backoff = std::min(backoff * 2, options_.max_backoff);
    };
    while (!stopping_) {
      if (rv.empty()) {
        absl::StatusOr<std::string> listed = ListOnce();
        if (!listed.ok()) {
          base::LogWarning(options_.name, ": list failed: ", listed.status().message(),
                           " (retry in ", backoff.count(), " ms)");
          sleep_backoff();
          continue;
        }
        rv = *listed;
      }
      ListOptions o = options_.list;
      o.resource_version = rv;
      o.allow_watch_bookmarks = true;
      o.timeout_seconds = options_.watch_timeout_seconds;
      const auto started = std::chrono::steady_clock::now();
      absl::Status s = client_->Watch(
          o,
          [&](const WatchEvent<T>& ev) {
            if (!ev.object.metadata.resource_version.empty()) {
              rv = ev.object.metadata.resource_version;
            }
            if (ev.type != "BOOKMARK") on_event_(ev);
            return !stopping_.load();
          },
          &control_);
      if (stopping_) break;
      if (IsResourceExpired(s)) {
        rv.clear();  // relist, as the reflector does on 410 Expired
        continue;
      }
      if (!s.ok()) {
        base::LogWarning(options_.name, ": watch failed: ", s.message());
        sleep_backoff();
      } else if (std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
        sleep_backoff();
      } else {
        backoff = options_.initial_backoff;
      }
    }
  }

  Client* const client_;
  const ReflectorOptions options_;
  const OnList on_list_;
  const OnEvent on_event_;
  std::atomic<bool> stopping_{false};
  base::StreamControl control_;
  std::thread thread_;
};

}  // namespace poolcoord::cloud
