#include "handlers/media_types.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "base/string_view.h"
#include "rapidjson/error/en.h"

namespace poolcoord::handlers {
namespace {
// Debian's Abseil has its own string_view type, distinct from std::string_view.
}  // namespace

bool MediaTypeIs(std::string_view header, std::string_view type) {
  std::string_view t = header.substr(0, header.find(';'));
  return absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(base::Av(t)), base::Av(type));
}

bool AcceptsJson(std::string_view accept) {
  if (absl::StripAsciiWhitespace(base::Av(accept)).empty()) return true;
  for (absl::string_view entry : absl::StrSplit(base::Av(accept), ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ';');
    absl::string_view type = absl::StripAsciiWhitespace(parts[0]);
    bool has_as = false;
    bool q_zero = false;
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view p = absl::StripAsciiWhitespace(parts[i]);
      if (absl::StartsWithIgnoreCase(p, "as=")) has_as = true;
      if (absl::StartsWithIgnoreCase(p, "q=") && (p == "q=0" || p == "q=0.0" || p == "q=0.00" ||
                                                  p == "q=0.000")) {
        q_zero = true;
      }
    }
    if (q_zero) continue;
    if (type == "*/*" || absl::EqualsIgnoreCase(type, "application/*")) return true;
    if (absl::EqualsIgnoreCase(type, "application/json") && !has_as) return true;
  }
  return false;
}

std::string ParseErrorText(rapidjson::ParseErrorCode code) {
  return rapidjson::GetParseError_En(code);
}

}  // namespace poolcoord::handlers
