// Media-type helpers for Content-Type and Accept headers (RFC 9110 syntax: type,
// parameters, q-values; case-insensitive type and parameter names).
#pragma once

#include <string>
#include <string_view>

#include "rapidjson/error/error.h"

namespace poolcoord::handlers {

// True when `header` (a Content-Type value) names `type`, parameters ignored:
// MediaTypeIs("application/json; charset=utf-8", "application/json").
bool MediaTypeIs(std::string_view header, std::string_view type);

// True when an Accept header admits plain application/json: empty, */*,
// application/*, or application/json without an `as=` parameter.
bool AcceptsJson(std::string_view accept);

// English text of a RapidJSON parse error.
std::string ParseErrorText(rapidjson::ParseErrorCode code);

}  // namespace poolcoord::handlers
