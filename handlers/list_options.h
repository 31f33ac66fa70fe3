// Query parameters of list and watch requests (metav1.ListOptions), parsed and
// validated as k8s.io/apimachinery's internalversion validation does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "handlers/http_types.h"
#include "handlers/selectors.h"
#include "store/object.h"

namespace poolcoord::handlers {

enum class ResourceVersionMatch { kUnset, kExact, kNotOlderThan };

struct ListOptions {
  LabelSelector label_selector;
  FieldSelector field_selector;
  bool watch = false;
  bool allow_watch_bookmarks = false;
  // Unset when the parameter is absent: presence matters for validation, and an
  // explicit false starts a watch at the current revision without the state.
  std::optional<bool> send_initial_events;
  std::optional<int64_t> timeout_seconds;
  int64_t limit = 0;                 // 0: no limit
  std::string continue_token;        // opaque, as received
  std::optional<int64_t> resource_version;  // absent when the parameter is unset or ""
  ResourceVersionMatch resource_version_match = ResourceVersionMatch::kUnset;
};

// Parses and validates. Errors: 400 BadRequest for unparseable numbers or
// selectors (unknown field selector: `"x" is not a known field selector`), 422
// Invalid (kind ListOptions) for forbidden combinations, as k8s.io/apimachinery's
// ValidateListOptions (1.30+) judges them. A list: resourceVersionMatch without
// resourceVersion or with continue, Exact with resourceVersion 0, any
// sendInitialEvents. A watch: sendInitialEvents (true or false) without
// resourceVersionMatch=NotOlderThan, resourceVersionMatch without
// sendInitialEvents or with continue; a watch-list (sendInitialEvents=true,
// resourceVersionMatch=NotOlderThan) may leave resourceVersion unset, as
// client-go's reflector first sends it.
absl::StatusOr<ListOptions> ParseListOptions(const Request& request, store::Kind kind);

// The field selectors a kind supports: metadata.name and metadata.namespace for
// every kind, then the kind's own (its strategy's SelectableFields).
std::vector<std::string> SupportedFieldSelectors(store::Kind kind);
// The value of a field its kind supports on an object (metadata.namespace is "");
// nullopt for any other field.
std::optional<std::string> FieldValue(const store::Object& object, std::string_view field);
// Label and field selectors together.
bool MatchesSelectors(const ListOptions& options, const store::Object& object);

// Continue tokens: base64url of {"rv":N,"start":"<name>"}: the list's revision
// and the first name not yet returned, as the etcd3 storage encodes its key.
std::string EncodeContinueToken(int64_t revision, const std::string& start_name);
// 400 BadRequest when the token is not one of ours.
absl::Status DecodeContinueToken(const std::string& token, int64_t* revision,
                                 std::string* start_name);

}  // namespace poolcoord::handlers
