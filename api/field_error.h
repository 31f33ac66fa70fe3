// One field's error in a request, as Kubernetes reports it: metav1.StatusCause
// of a 422 Invalid, worded as k8s.io/apimachinery's field.Error words each type
// ("Invalid value: 7: must be ...", "Required value: ..."). The codec of our
// kinds (api/lease_codec.h) reports with these; store/api_error.h makes them a
// Status. Plain values; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace poolcoord::api {

// One entry of Status.details.causes (metav1.StatusCause).
struct FieldCause {
  std::string type;     // CauseType: "FieldValueInvalid", "FieldValueRequired", ...
  std::string message;  // "Invalid value: ...: must be ..."
  std::string field;    // "spec.replicas"
};

// FieldValueInvalid (field.Invalid): "Invalid value: <value_repr>: <detail>".
FieldCause FieldInvalid(std::string_view field, std::string_view value_repr,
                        std::string_view detail);
// FieldValueTypeInvalid (field.TypeInvalid): "Invalid value: <value_repr>: <detail>".
FieldCause FieldTypeInvalid(std::string_view field, std::string_view value_repr,
                            std::string_view detail);
FieldCause FieldRequired(std::string_view field, std::string_view detail = "");
FieldCause FieldForbidden(std::string_view field, std::string_view detail);
FieldCause FieldTooLong(std::string_view field, std::string_view detail);
FieldCause FieldNotSupported(std::string_view field, std::string_view value_repr,
                             std::string_view detail);

}  // namespace poolcoord::api
