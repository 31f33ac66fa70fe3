// The JSON of the group's spec and status (api/types.h): one codec for the
// server, which adds the object's envelope and ObjectMeta (store/object_codec.h),
// the cloud client, which reads the server's answers and writes the agent's
// requests (cloud/codec.h), and anything else that speaks our kinds.
//
// Writing: absent optionals and empty collections are omitted (Go's
// omitempty); MicroTime fields are written by base::FormatMicroTime.
// Reading: what a CustomResourceDefinition's schema would refuse (a JSON type
// the field cannot take, a time that does not parse, an integer that does not
// fit the field) is a field cause and leaves the field unset, and decoding goes
// on, so that one 422 can list every bad field; JSON null is absent; an
// integral number ("3.0") fills an integer field. A client that is lenient, as
// client-go is, ignores the causes.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/field_error.h"
#include "api/types.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::api {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// Writes the member "spec": `spec`'s fields among `fields` (SpecField bits: a
// kind's spec_fields for what its clients see, every bit for storage), and the
// write-only proof, a request's, only when `proof` is given.
void WriteSpec(JsonWriter& w, const LeaseSpec& spec, uint32_t fields,
               const DelegationProof* proof = nullptr);
// Writes the member "status", unless it would be empty: `status` and the
// status parts of `delegation`.
void WriteStatus(JsonWriter& w, const LeaseStatus& status, const DelegationFields& delegation);

// The kind of a JSON value as each of kube-apiserver's two decoders names it:
// encoding/json's UnmarshalTypeError.Value ("bool", "number"), or the type a
// CustomResourceDefinition's schema validation sees (go-openapi's type
// validator over the unstructured object: "boolean", an integer literal
// "integer", any other number "number").
enum class JsonKindNames { kGoJson, kSchema };
const char* JsonKindName(const rapidjson::Value& v, JsonKindNames names);

// What decoding found besides the values.
struct DecodeFindings {
  std::vector<FieldCause> causes;  // the schema's refusals, as the header says
  // When not null, the dotted paths of fields we do not know ("spec.foo") are
  // appended: for fieldValidation=Strict/Warn. They are ignored either way.
  std::vector<std::string>* unknown = nullptr;
};

// The value of member "spec" into `spec` and, the proof, `delegation->proof`.
// Fields not among `fields` (SpecField bits) are unknown; null is no spec, any
// other non-object a cause.
void DecodeSpec(const rapidjson::Value& v, uint32_t fields, LeaseSpec* spec,
                DelegationFields* delegation, DecodeFindings* findings);
// The value of member "status" into `status` and the status parts of
// `delegation`. Every kind knows every status field, so that a client's
// read-modify-write of one kind never trips strict field validation.
void DecodeStatus(const rapidjson::Value& v, LeaseStatus* status, DelegationFields* delegation,
                  DecodeFindings* findings);

}  // namespace poolcoord::api
