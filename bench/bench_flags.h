// The command lines of the in-process benchmark programs (poolcoord-agent-bench,
// poolcoord-proof-bench): `prog MODE --name=value --flag ...`. Header-only; a
// usage error or a failed set-up step ends the program, as a benchmark cannot
// report a figure without its inputs. Not thread-safe: call from main().
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"

namespace poolcoord::bench {

// The --name=value arguments from argv[first] on, by name; a bare --name is
// "true". Other arguments go to `positional`, or, when it is null, are a usage
// error (exit 2).
inline std::map<std::string, std::string> ParseFlags(int argc, char** argv, int first,
                                                     std::vector<std::string>* positional = nullptr) {
  std::map<std::string, std::string> f;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      if (positional == nullptr) {
        std::fprintf(stderr, "unexpected argument %s\n", a.c_str());
        std::exit(2);
      }
      positional->push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    f[a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "true" : a.substr(eq + 1);
  }
  return f;
}

// --name as an int, `def` when absent; not a number is a usage error (exit 2).
inline int IntFlag(const std::map<std::string, std::string>& f, const std::string& name, int def) {
  auto it = f.find(name);
  int v = def;
  if (it != f.end() && !absl::SimpleAtoi(it->second, &v)) {
    std::fprintf(stderr, "--%s: not a number\n", name.c_str());
    std::exit(2);
  }
  return v;
}

inline std::string StrFlag(const std::map<std::string, std::string>& f, const std::string& name,
                           const std::string& def) {
  auto it = f.find(name);
  return it == f.end() ? def : it->second;
}

// The value of a set-up step that must succeed; else "<what>: <status>" and exit 1.
template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}

}  // namespace poolcoord::bench
