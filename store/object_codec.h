// JSON encoding of the stored objects (RapidJSON, no exceptions): the envelope
// and ObjectMeta here, spec and status by the kinds' codec (api/codec.h).
//
// Wire shape, as kube-apiserver serializes a typed object:
//   {"kind":"Widget","apiVersion":"coordination.pool/v1alpha1",
//    "metadata":{...},"spec":{...},"status":{...}}
// Absent optionals and empty collections are omitted (Go's omitempty);
// metadata.resourceVersion is a decimal string; MicroTime fields use
// FormatMicroTime, Time fields FormatTime (store/microtime.h). The server-internal
// Object::observed_monotonic_us never reaches a client: only the storage
// encoding carries it.
//
// All functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"
#include "store/object.h"

namespace poolcoord::store {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// Writes the whole object as one JSON value (for GET bodies, list items, watch
// event objects).
void WriteObject(JsonWriter& w, const Object& o);
std::string EncodeObject(const Object& o);

// Writes a metav1.ObjectMeta JSON object: for PartialObjectMetadata and Table
// rows.
void WriteObjectMeta(JsonWriter& w, const ObjectMeta& m);

// Decodes a client's object of `kind` from a parsed JSON value.
// Errors, as kube-apiserver's decoder and validation report them for a custom
// resource of our schema:
// - 400 BadRequest: `v` is not an object; kind or apiVersion not a string;
//   metadata as Go's encoding/json decodes an ObjectMeta (`json: cannot
//   unmarshal number into Go struct field ObjectMeta.labels of type string`;
//   callers add kube-apiserver's "<Kind> in version ... cannot be handled as"
//   prefix); a metadata.resourceVersion that is not a decimal number (`invalid
//   resourceVersion "x"`; kube-apiserver reports this one later as a 422/409
//   from the storage layer, we refuse it at decode time because our
//   resourceVersion is an integer).
// - 422 Invalid of the object's own group and kind, with only these causes:
//   kind or apiVersion set and not ours (`kind: Invalid value: "Pod": must be
//   Widget`), as the custom resource validator's ValidateTypeMeta. Empty or
//   absent ones pass here (create and update bodies are checked before).
// - 422 Invalid (InvalidError), one FieldCause per bad field, all at once: what
//   a CustomResourceDefinition's schema refuses in spec and status (a JSON type
//   the field cannot take: `spec.replicas: Invalid value: "string":
//   spec.replicas in body must be of type integer: "string"`, a
//   string that is no date-time: `... must be of type date-time: "yesterday"`),
//   and what our typed fields cannot hold (an RFC 3339 time without exactly 6
//   fractional digits for a MicroTime, an integer past int32); a metadata time
//   that does not parse.
// JSON null for an optional field means absent; an integral number ("3.0")
// fills an integer field. When `unknown_fields` is not null, the dotted paths of
// fields we do not know ("spec.foo", "metadata.bar") are appended to it (for
// fieldValidation=Strict/Warn); they are ignored either way.
absl::StatusOr<MutableObjectPtr> DecodeObject(const rapidjson::Value& v, Kind kind,
                                              std::vector<std::string>* unknown_fields);
// The same, but the field causes of the last kind above are appended to
// *field_causes (their fields left unset) and the object is returned: the
// caller reports them together with its own validation in one 422, as
// kube-apiserver validates a whole object at once.
absl::StatusOr<MutableObjectPtr> DecodeObject(const rapidjson::Value& v, Kind kind,
                                              std::vector<std::string>* unknown_fields,
                                              std::vector<FieldCause>* field_causes);

// Parses `body` and decodes it; malformed JSON is 400 BadRequest
// ("json parse error: ... at offset N").
absl::StatusOr<MutableObjectPtr> DecodeObjectJson(std::string_view body, Kind kind,
                                                  std::vector<std::string>* unknown_fields);

// The storage encoding: the wire JSON plus a "poolcoord.internal" member that
// carries the server-internal fields (observed_monotonic_us), so that a remote
// store (etcd) round-trips every field of Object. DecodeFromStorage returns
// InternalError for data it cannot read back.
std::string EncodeForStorage(const Object& o);
absl::StatusOr<MutableObjectPtr> DecodeFromStorage(std::string_view data, Kind kind);

// RapidJSON parses, copies and frees nested values recursively, so a request of
// 100,000 nested '[' would overflow a thread's stack. Every untrusted body is
// checked first: BadRequest when arrays/objects nest deeper than `max_depth`
// (real Kubernetes objects stay far below 64).
absl::Status CheckJsonNesting(std::string_view json, int max_depth = 512);

}  // namespace poolcoord::store
