// Conversions between std::string_view and absl::string_view.
//
// Debian 12's Abseil (LTS 20220623) is built without ABSL_USES_STD_STRING_VIEW,
// so absl::string_view is its own type: absl functions (StrCat, StrSplit,
// SimpleAtoi, ...) take it, while our interfaces use std::string_view. These are
// the one place the two meet. Header-only, no allocation, thread-safe.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace poolcoord::base {

inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view Sv(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace poolcoord::base
