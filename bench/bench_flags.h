// The command lines of the benchmark programs (poolcoord-loadgen,
// poolcoord-hello-tls, poolcoord-agent-bench, poolcoord-proof-bench):
// `prog [MODE] --name=value ...`, parsed by the programs' one flag parser
// (base::FlagSet: pflag's syntax, checked values). Header-only; a usage error or
// a failed set-up step ends the program, as a benchmark cannot report a figure
// without its inputs. Not thread-safe: call from main().
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/flag_set.h"

namespace poolcoord::bench {

// Sets the targets of `flags` from argv[first..] (the other arguments into
// *positional, or a usage error without it), with -h/--help added: help prints
// "usage: <usage>" and the flags and exits 0; a bad command line prints the
// error, the usage and the flags to stderr and exits 2.
inline void ParseFlags(base::FlagSet& flags, int argc, char** argv, int first, const char* usage,
                       std::vector<std::string>* positional = nullptr) {
  bool help = false;
  flags.Bool("help", &help, "Print this help and exit.");
  const std::vector<std::string> args(argv + std::min(first, argc), argv + argc);
  const absl::Status parsed = flags.Parse(args, positional);
  if (parsed.ok() && !help) return;
  FILE* to = parsed.ok() ? stdout : stderr;
  if (!parsed.ok()) std::fprintf(stderr, "Error: %s\n", std::string(parsed.message()).c_str());
  std::fprintf(to, "usage: %s\n\nFlags:\n%s", usage, flags.Usage(2).c_str());
  std::exit(parsed.ok() ? 0 : 2);
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
