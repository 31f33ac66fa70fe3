#include "base/yaml_quoting.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "absl/strings/ascii.h"

namespace poolcoord::base {

bool YamlNeedsQuotes(std::string_view s) {
  if (s.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(s.front()))) return true;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '/' &&
        c != '-') {
      return true;
    }
  }
  static constexpr std::string_view kWords[] = {"y", "n", "yes", "no", "on", "off", "true", "false",
                                                "null"};
  std::string lower(s);
  absl::AsciiStrToLower(&lower);
  return std::find(std::begin(kWords), std::end(kWords), lower) != std::end(kWords);
}

}  // namespace poolcoord::base
