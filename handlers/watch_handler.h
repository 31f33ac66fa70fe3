// Watch streams, as k8s.io/apiserver's watch handler serves them: one JSON
// `{"type":...,"object":...}` line per event over a chunked 200 response. The
// stream is a handlers::StreamSource driven by the transport's I/O threads; the
// store wakes it, and events that queued up meanwhile leave in one chunk.
//
// Start: resourceVersion unset or "0" sends synthetic ADDED events for the
// current state, then changes; "N" streams changes after N. A watch-list
// (sendInitialEvents=true, resourceVersionMatch=NotOlderThan, resourceVersion
// unset, "0" or N) sends the current state, then (with allowWatchBookmarks) a
// BOOKMARK annotated k8s.io/initial-events-end: "true"; sendInitialEvents=false
// sends no state (changes after N, or after the current revision). Bookmarks
// come in the stream's format: PartialObjectMetadata (meta.k8s.io/v1) for
// metadata informers, a Table without rows for Table watches. A
// resourceVersion older than the history window gets 200 and one ERROR event
// with 410 Expired; one in the future gets 504 (ResourceVersionTooLarge).
// Selectors apply to both the old and new state, so an object that stops
// matching arrives as DELETED and one that starts matching as ADDED (as the
// watch cache does). Bookmarks (allowWatchBookmarks) every minute; the stream
// ends cleanly at timeoutSeconds (default 30–60 min), when the client leaves,
// at server shutdown, or with an ERROR event (410) when the watcher fell behind.
// Table cells that depend on the time (AGE, RENEWED) read `clock` (nullptr: the
// real clock) as each event is sent; the clock must outlive the stream.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "handlers/http_types.h"
#include "handlers/list_options.h"
#include "store/store.h"

namespace poolcoord::handlers {

Response ServeWatch(store::Store* store, store::Kind kind, const ListOptions& options,
                    const Request& request, const base::Clock* clock);

}  // namespace poolcoord::handlers
