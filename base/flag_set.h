// Command-line flags as spf13/pflag parses them for Kubernetes components, the
// one parser of poolcoord-apiserver (apiservice/flags.h) and poolcoord-agent
// (agent/flags.h): `--name=value` and `--name value`; booleans as `--name` or
// `--name=true|false` (strconv.ParseBool's spellings); durations in Go's syntax
// ("30s", "1m30s"); string lists comma-separated, the first use replacing the
// default (pflag's StringSlice); `-v N`, `-vN`, `-v=N` and `--v=N` set the flag
// "v", `-h` is `--help`; `--` ends the flags and nothing may follow it.
//
// A FlagSet points into the caller's options struct: Parse writes the values
// there, Usage prints each flag with the value it holds as its default. An
// unknown flag, a missing value or a bad value is an InvalidArgument error with
// pflag's message ("unknown flag: --x", "invalid argument \"y\" for \"--x\"
// flag: ..."). Not thread-safe; one FlagSet per parse.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace poolcoord::base {

class FlagSet {
 public:
  // The flags in the order Usage lists them; each pointer must outlive the set.
  void String(std::string name, std::string* value, std::string help);
  void Bool(std::string name, bool* value, std::string help);
  // An int within [min, max].
  void Int(std::string name, int* value, int64_t min, int64_t max, std::string help);
  // An int64 of at least `min`.
  void Int64(std::string name, int64_t* value, int64_t min, std::string help);
  // A finite duration, >= 0, or > 0 when `positive`.
  void Duration(std::string name, absl::Duration* value, std::string help, bool positive = false);
  void StringList(std::string name, std::vector<std::string>* value, std::string help);
  // Every use appends one value as given, commas and all (pflag's
  // StringArray); the first use replaces the default.
  void StringArray(std::string name, std::vector<std::string>* value, std::string help);
  // A finite number (pflag's float64, "float" in Usage; default printed as Go's %g).
  void Double(std::string name, double* value, std::string help);

  // Sets the flags named in `args` (the program name not included); stops at the
  // first error. Arguments that are not flags, and all after "--", go to
  // *positional in order (pflag's Args()); without `positional` they are an
  // error ("this command takes flags only").
  absl::Status Parse(const std::vector<std::string>& args,
                     std::vector<std::string>* positional = nullptr);

  // One line per flag: "      --name type" padded to the longest such head (at
  // least `head_width`), the help, and "(default ...)" when the value is not
  // empty: every help starts in one column, as pflag's FlagUsages aligns them.
  std::string Usage(int head_width) const;

 private:
  enum class Type { kString, kBool, kInt, kInt64, kDuration, kStringList, kStringArray, kDouble };
  struct Flag {
    std::string name;  // without dashes
    Type type;
    std::string help;
    void* value;  // the options field, of `type`
    int64_t min = std::numeric_limits<int64_t>::min();
    int64_t max = std::numeric_limits<int64_t>::max();
    bool positive = false;   // durations: > 0
    bool list_seen = false;  // string lists and arrays: the first Set replaces the default
  };

  Flag* Find(std::string_view name);
  static absl::Status Set(Flag& f, std::string_view value);
  static std::string DefaultText(const Flag& f);

  std::vector<Flag> flags_;
};

// A program's command line: the flags `add_flags` puts into its options struct,
// the checks across flags (`validate`, run after a successful parse) and the
// --help text. `Options` needs a `bool help` set by a "help" flag: with it set,
// Parse returns the options unchecked, so that --help works beside bad flags'
// combinations (as cobra prints usage before a command's checks). Stateless;
// safe to use from any thread.
template <typename Options>
struct CommandLine {
  void (*add_flags)(Options*, FlagSet&);
  absl::Status (*validate)(const Options&);
  const char* description;  // the paragraphs between "Usage:" and "Flags:"
  int head_width;           // FlagSet::Usage's column for the help text

  absl::StatusOr<Options> Parse(const std::vector<std::string>& args) const {
    Options options;
    FlagSet flags;
    add_flags(&options, flags);
    if (absl::Status st = flags.Parse(args); !st.ok()) return st;
    if (options.help) return options;
    if (absl::Status st = validate(options); !st.ok()) return st;
    return options;
  }

  // "Usage: <program> [flags]", the description, and each flag with its default.
  std::string Usage(const std::string& program) const {
    Options defaults;
    FlagSet flags;
    add_flags(&defaults, flags);
    return absl::StrCat("Usage: ", program, " [flags]\n\n", description, "\n\nFlags:\n",
                        flags.Usage(head_width));
  }
};

// Go's time.Duration.String() for the whole seconds flags default to ("5m0s", "15s").
std::string GoDuration(absl::Duration d);

}  // namespace poolcoord::base
