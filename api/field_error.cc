#include "api/field_error.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/string_view.h"

namespace poolcoord::api {
namespace {

FieldCause Cause(const char* type, std::string message, std::string_view detail,
                 std::string_view field) {
  if (!detail.empty()) absl::StrAppend(&message, ": ", base::Av(detail));
  return {type, std::move(message), std::string(field)};
}

}  // namespace

FieldCause FieldInvalid(std::string_view field, std::string_view value_repr,
                        std::string_view detail) {
  return Cause("FieldValueInvalid", absl::StrCat("Invalid value: ", base::Av(value_repr)), detail,
               field);
}

FieldCause FieldTypeInvalid(std::string_view field, std::string_view value_repr,
                            std::string_view detail) {
  return Cause("FieldValueTypeInvalid", absl::StrCat("Invalid value: ", base::Av(value_repr)),
               detail, field);
}

FieldCause FieldRequired(std::string_view field, std::string_view detail) {
  return Cause("FieldValueRequired", "Required value", detail, field);
}

FieldCause FieldForbidden(std::string_view field, std::string_view detail) {
  return Cause("FieldValueForbidden", "Forbidden", detail, field);
}

FieldCause FieldTooLong(std::string_view field, std::string_view detail) {
  return Cause("FieldValueTooLong", "Too long", detail, field);
}

FieldCause FieldNotSupported(std::string_view field, std::string_view value_repr,
                             std::string_view detail) {
  return Cause("FieldValueNotSupported", absl::StrCat("Unsupported value: ", base::Av(value_repr)),
               detail, field);
}

}  // namespace poolcoord::api
