// Which strings a YAML writer must double-quote so that a reader gets the same
// string back: shared by the server's YAML answers (handlers/yaml_output.cc)
// and `kubectl pool -o yaml` (kubectl-pool/print.cc), so both decide alike.
//
// Pure function; thread-safe.
#pragma once

#include <string_view>

namespace poolcoord::base {

// False only for a conservative plain scalar that no YAML reader can take for
// anything but this string: a letter first, then letters, digits and . _ / -,
// and not one of YAML 1.1's bool or null words in any case (y, n, yes, no, on,
// off, true, false, null). True for everything else: the empty string, digits
// first (numbers, dates, timestamps, also uids), a leading - + . ~, spaces,
// indicators such as : # [ {, non-ASCII. YAML 1.1 because go-yaml v2, which
// kube-apiserver's decoder and kubectl use, reads it; quoting more than Go's
// encoder does writes the same values.
bool YamlNeedsQuotes(std::string_view s);

}  // namespace poolcoord::base
