// Server-side printing (meta.k8s.io/v1 Table) and PartialObjectMetadata, the two
// alternative representations kube-apiserver offers through the Accept header
// (k8s.io/apiserver pkg/endpoints/handlers/response.go).
//
// Wire shapes:
//   {"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},
//    "columnDefinitions":[{"name":"Name","type":"string","format":"name",
//                          "description":"...","priority":0},...],
//    "rows":[{"cells":["pool-a","hz-1",3,"4s","2d3h"],
//             "object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
//                       "metadata":{...}}}]}
//   {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{...}}
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "base/human_duration.h"
#include "handlers/http_types.h"
#include "store/object.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {

// True when the Accept header prefers a Table: a media range
// application/json;as=Table;g=meta.k8s.io;v=v1 (or v=v1beta1; parameters in any
// order) comes, in the client's order of preference, before any plain JSON
// range. kubectl get sends Table first with plain JSON as the fallback. The
// answer is always meta.k8s.io/v1, which every kubectl since 1.15 reads.
bool WantsTable(const Request& request);

// The TableOptions of a Table request: includeObject must be "", None,
// Metadata or Object, else BadRequest with kube-apiserver's message ("Unable
// to convert to Table as requested: includeObject: Invalid value: ...").
absl::Status ValidateTableOptions(const Request& request);

// True when the Accept header prefers PartialObjectMetadata (list == false: get
// and watch) or PartialObjectMetadataList (list == true) in meta.k8s.io/v1 over
// plain JSON, as client-go's metadata client asks (its protobuf range is skipped:
// we serve JSON only).
bool WantsPartialObjectMetadata(const Request& request, bool list);

// kubectl's age format, for the Age and Renewed cells (base/human_duration.h).
using base::HumanDuration;

// A printer column (metav1.TableColumnDefinition). priority 0 shows in kubectl
// get, 1 only with -o wide.
struct TableColumn {
  const char* name;
  const char* type;    // "string", "integer", "boolean"
  const char* format;  // "name" for the Name column, else ""
  const char* description;
  int priority;
};

// Cells of a kind's own columns (handlers/registry/<kind>.cc): an absent or empty
// string prints "<none>", an absent time "<unknown>", as kubectl prints them; a
// time as its age (HumanDuration of now_us - since_us).
void WriteStringCell(store::JsonWriter& w, const std::optional<std::string>& value);
void WriteAgeCell(store::JsonWriter& w, std::optional<int64_t> since_us, int64_t now_us);

// Renders a Table of `objects` (all of `kind`). Columns: Name, the kind's own
// (its strategy's Columns and WriteCells), Age.
// `include_object` is the includeObject query parameter: "" or "Metadata" (the
// default: a PartialObjectMetadata per row), "Object" (the full object), "None"
// (no object); any other value is treated as Metadata.
// `with_column_definitions` false leaves columnDefinitions empty (every Table of
// a watch after the first, as k8s.io/apiserver does). `now_us` is the server's
// wall time in microseconds since the epoch, for the ages. `continue_token` and
// `remaining` fill metadata.continue and metadata.remainingItemCount (> 0 only)
// when a list was cut by `limit`.
std::string RenderTable(store::Kind kind, const std::vector<store::ObjectPtr>& objects,
                        const std::string& resource_version, std::string_view include_object,
                        bool with_column_definitions, int64_t now_us,
                        std::string_view continue_token = "", int64_t remaining = 0);

// {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{...}}.
std::string RenderPartialObjectMetadata(const store::Object& object);

// {"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1",
//  "metadata":{"resourceVersion":..,"continue":..,"remainingItemCount":..},
//  "items":[PartialObjectMetadata...]}; continue and remainingItemCount only when
// set (non-empty, > 0); items is [] when empty, never null.
std::string RenderPartialObjectMetadataList(const std::vector<store::ObjectPtr>& objects,
                                            const std::string& resource_version,
                                            std::string_view continue_token, int64_t remaining);

}  // namespace poolcoord::handlers
