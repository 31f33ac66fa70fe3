#include "handlers/watch_handler.h"

#include <chrono>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "handlers/media_types.h"
#include "handlers/status_mapping.h"
#include "handlers/table.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {
namespace {

using store::EventType;
using store::Kind;
using store::Object;
using store::ObjectPtr;
using Clock = std::chrono::steady_clock;

constexpr auto kBookmarkInterval = std::chrono::seconds(60);

enum class Format { kJson, kTable, kPartial };

const char* TypeName(EventType t) {
  switch (t) {
    case EventType::kAdded: return "ADDED";
    case EventType::kModified: return "MODIFIED";
    case EventType::kDeleted: return "DELETED";
    case EventType::kBookmark: return "BOOKMARK";
    case EventType::kError: return "ERROR";
  }
  return "ERROR";
}

// Renders watch events in the format the client asked for; Table output carries
// column definitions only in its first event (k8s.io/apiserver handlers/response.go).
// Table cells (AGE, RENEWED) read the clock as each event is encoded, i.e. sent,
// as kube-apiserver converts each watch event to a Table when it writes it: a
// clock read once at the watch's start showed "<invalid>" ages for objects
// created later.
class EventEncoder {
 public:
  EventEncoder(Kind kind, Format format, std::string include_object, const base::Clock* clock)
      : kind_(kind),
        format_(format),
        include_object_(std::move(include_object)),
        clock_(clock ? clock : base::RealClock::Get()) {}

  // Appends one event line to *line. `shared` (optional) is the store event
  // carrying `object`: its cached JSON serves every watcher of the same event.
  void Encode(EventType type, const Object& object, std::string* line,
              const store::Event* shared = nullptr) {
    absl::StrAppend(line, "{\"type\":\"", TypeName(type), "\",\"object\":");
    switch (format_) {
      case Format::kJson:
        *line += shared ? shared->ObjectJson() : store::EncodeObject(object);
        break;
      case Format::kPartial:
        *line += RenderPartialObjectMetadata(object);
        break;
      case Format::kTable: {
        std::vector<ObjectPtr> one{std::make_shared<Object>(object)};
        *line += RenderTable(kind_, one, std::to_string(object.metadata.resource_version),
                             include_object_, first_table_, clock_->NowMicros());
        first_table_ = false;
        break;
      }
    }
    *line += "}\n";
  }

  // A BOOKMARK in the stream's own format, so that every decoder of the stream
  // can read it: the kind itself for plain JSON (as the cacher's empty object of
  // the kind), PartialObjectMetadata for metadata informers (k8s.io/apiserver
  // transforms bookmarks like any event object), a Table without rows for Table
  // watches. `initial_events_end` adds the k8s.io/initial-events-end annotation
  // that ends a watch-list's initial events.
  std::string Bookmark(int64_t revision, bool initial_events_end) {
    Object mark;
    mark.kind = kind_;
    mark.metadata.resource_version = revision;
    if (initial_events_end) mark.metadata.annotations = {{"k8s.io/initial-events-end", "true"}};
    std::string line = "{\"type\":\"BOOKMARK\",\"object\":";
    switch (format_) {
      case Format::kJson: {
        rapidjson::StringBuffer buf;
        store::JsonWriter w(buf);
        w.StartObject();
        w.Key("kind");
        w.String(store::InfoFor(kind_).kind_name);
        w.Key("apiVersion");
        w.String(store::kGroupVersion);
        w.Key("metadata");
        store::WriteObjectMeta(w, mark.metadata);
        w.EndObject();
        line.append(buf.GetString(), buf.GetSize());
        break;
      }
      case Format::kPartial:
        line += RenderPartialObjectMetadata(mark);
        break;
      case Format::kTable:
        line += RenderTable(kind_, {}, std::to_string(revision), include_object_, first_table_,
                            clock_->NowMicros());
        first_table_ = false;
        break;
    }
    line += "}\n";
    return line;
  }

 private:
  Kind kind_;
  Format format_;
  std::string include_object_;
  const base::Clock* clock_;
  bool first_table_ = true;
};

std::string ErrorEvent(const absl::Status& status) {
  return absl::StrCat("{\"type\":\"ERROR\",\"object\":", StatusJson(status), "}\n");
}

int64_t DefaultTimeoutSeconds() {
  // kube-apiserver: --min-request-timeout (1800 s) times a random factor in [1, 2).
  thread_local std::mt19937 rng{std::random_device{}()};
  return 1800 + static_cast<int64_t>(rng() % 1800);
}

// One watch, polled by the transport on its I/O threads (handlers::StreamSource):
// initial state first (in bounded batches), then the watcher's events, several
// per chunk when they queued up, bookmarks while idle, the end at the deadline.
class WatchStream final : public StreamSource {
 public:
  WatchStream(std::shared_ptr<store::Watcher> watcher, EventEncoder encoder, ListOptions options,
              std::vector<ObjectPtr> initial, int64_t start_revision, int64_t timeout_s)
      : watcher_(std::move(watcher)),
        encoder_(std::move(encoder)),
        options_(std::move(options)),
        initial_(std::move(initial)),
        last_revision_(start_revision),
        deadline_(Clock::now() + std::chrono::seconds(timeout_s)),
        last_bookmark_(Clock::now()) {}

  ~WatchStream() override { watcher_->Stop(); }

  Step Poll(std::string* out, const std::function<void()>& wake,
            Clock::time_point* wake_at) override {
    if (next_initial_ < initial_.size() || !initial_sent_) {
      while (next_initial_ < initial_.size() && out->size() < kMaxChunkBytes) {
        encoder_.Encode(EventType::kAdded, *initial_[next_initial_++], out);
      }
      if (next_initial_ < initial_.size()) return Step::kData;
      initial_.clear();
      initial_.shrink_to_fit();
      initial_sent_ = true;
      // Only a watch-list that allows bookmarks gets the end mark, as the cacher
      // sends it (isListWatchRequest: sendInitialEvents=true and bookmarks).
      if (options_.send_initial_events.value_or(false) && options_.allow_watch_bookmarks) {
        out->append(encoder_.Bookmark(last_revision_, true));
      }
      if (!out->empty()) return Step::kData;
    }
    for (;;) {
      if (Clock::now() >= deadline_) return Step::kEnd;
      while (out->size() < kMaxChunkBytes) {
        store::EventPtr ev = watcher_->TryNext();
        if (!ev) break;
        if (ev->type == EventType::kError) {
          if (watcher_->Closed() && !ev->object) {
            // Fell behind the writers: a bounded queue overflowed. 410 makes clients relist.
            out->append(ErrorEvent(store::ExpiredError(
                "the watch fell behind and was closed; list again and watch from the list's "
                "resourceVersion")));
          }
          return Step::kEnd;
        }
        Append(*ev, out);
      }
      if (!out->empty()) return Step::kData;
      if (watcher_->Closed()) return Step::kEnd;  // store shut down
      if (options_.allow_watch_bookmarks && Clock::now() - last_bookmark_ >= kBookmarkInterval) {
        out->append(encoder_.Bookmark(last_revision_, false));
        last_bookmark_ = Clock::now();
        return Step::kData;
      }
      // Armed: a push from now on wakes us. Not armed: one arrived meanwhile.
      if (watcher_->NotifyWhenReady(wake)) break;
    }
    *wake_at = deadline_;
    if (options_.allow_watch_bookmarks) {
      *wake_at = std::min(*wake_at, last_bookmark_ + kBookmarkInterval);
    }
    return Step::kWait;
  }

  void Cancel() override { watcher_->Stop(); }

 private:
  // Several queued events share a chunk; past this size the rest wait for the
  // next Poll, so one stream cannot hold a large buffer.
  static constexpr size_t kMaxChunkBytes = 256 * 1024;

  // Selectors judge both states: an object that stops matching arrives as
  // DELETED, one that starts matching as ADDED (as the watch cache does).
  void Append(const store::Event& ev, std::string* out) {
    last_revision_ = ev.revision;
    const bool now_matches = ev.object && MatchesSelectors(options_, *ev.object);
    const bool was_matching = ev.previous && MatchesSelectors(options_, *ev.previous);
    EventType type = ev.type;
    if (type == EventType::kModified) {
      if (now_matches && !was_matching) {
        type = EventType::kAdded;
      } else if (!now_matches && was_matching) {
        type = EventType::kDeleted;
      } else if (!now_matches) {
        return;
      }
    } else if (type == EventType::kAdded && !now_matches) {
      return;
    } else if (type == EventType::kDeleted && !now_matches && !was_matching) {
      return;
    }
    encoder_.Encode(type, *ev.object, out, &ev);
  }

  std::shared_ptr<store::Watcher> watcher_;
  EventEncoder encoder_;
  const ListOptions options_;
  std::vector<ObjectPtr> initial_;
  size_t next_initial_ = 0;
  bool initial_sent_ = false;
  int64_t last_revision_;
  const Clock::time_point deadline_;
  Clock::time_point last_bookmark_;
};

}  // namespace

Response ServeWatch(store::Store* store, Kind kind, const ListOptions& options,
                    const Request& request, const base::Clock* clock) {
  Format format = Format::kJson;
  if (WantsTable(request)) {
    if (absl::Status s = ValidateTableOptions(request); !s.ok()) return ErrorResponse(s);
    format = Format::kTable;
  } else if (WantsPartialObjectMetadata(request, /*list=*/false)) {
    format = Format::kPartial;
  } else if (!AcceptsJson(request.Header("accept"))) {
    return ErrorResponse(store::NotAcceptableError(
        absl::StrCat("only application/json watch streams are served (got \"",
                     std::string(request.Header("accept")), "\")")));
  }
  const int64_t current = store->CurrentRevision();
  // Where the stream starts (k8s.io/apiserver's watch cache):
  //   sendInitialEvents=true: the current state as ADDED events, whatever the
  //     resourceVersion (unset: the most recent, as client-go's watch-list first asks);
  //   sendInitialEvents=false: changes after resourceVersion, or after the current
  //     revision when it is unset or "0", with no state;
  //   absent: the state first when resourceVersion is unset or "0" (legacy).
  const bool rv_unset_or_zero = !options.resource_version || *options.resource_version == 0;
  const bool from_state = options.send_initial_events.value_or(rv_unset_or_zero);
  if (options.resource_version && *options.resource_version > current) {
    return ErrorResponse(store::TimeoutError(
        absl::StrCat("Too large resource version: ", *options.resource_version,
                     ", current: ", current),
        true));
  }

  std::vector<ObjectPtr> initial;
  int64_t start_revision = rv_unset_or_zero ? current : *options.resource_version;
  if (from_state) {
    store::ListOptions lo;
    lo.predicate = [&options](const Object& o) { return MatchesSelectors(options, o); };
    auto listed = store->List(kind, lo);
    if (!listed.ok()) return ErrorResponse(listed.status());
    initial = std::move(listed->items);
    start_revision = listed->revision;
  }
  Response response;
  response.status = 200;
  response.SetHeader("Content-Type", "application/json");
  auto watcher_or = store->Watch(kind, start_revision);
  if (!watcher_or.ok()) {
    if (absl::IsOutOfRange(watcher_or.status())) {
      // kube-apiserver answers 200 and one ERROR event; reflectors then relist.
      response.body = ErrorEvent(watcher_or.status());
      return response;
    }
    return ErrorResponse(watcher_or.status());
  }
  std::shared_ptr<store::Watcher> watcher = *std::move(watcher_or);
  // Capped at a year: steady_clock::now() + seconds(INT64_MAX / 10^9) overflows
  // (a newcomer's timeoutSeconds=9223372036 ended the stream at once).
  constexpr int64_t kMaxTimeoutSeconds = 365LL * 24 * 3600;
  const int64_t timeout_s = std::min(options.timeout_seconds.value_or(0) > 0
                                         ? *options.timeout_seconds
                                         : DefaultTimeoutSeconds(),
                                     kMaxTimeoutSeconds);
  response.stream = std::make_shared<WatchStream>(
      std::move(watcher),
      EventEncoder(kind, format, std::string(request.Query("includeObject")), clock), options,
      std::move(initial), start_revision, timeout_s);
  return response;
}

}  // namespace poolcoord::handlers
