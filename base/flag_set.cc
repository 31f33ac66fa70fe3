#include "base/flag_set.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/string_view.h"

namespace poolcoord::base {
namespace {

absl::Status BadValue(std::string_view name, std::string_view value, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "invalid argument \"%s\" for \"--%s\" flag: %s", Av(value), Av(name), Av(why)));
}

}  // namespace

std::string GoDuration(absl::Duration d) {
  int64_t total = absl::ToInt64Seconds(d);
  if (absl::Seconds(total) != d) return absl::FormatDuration(d);
  if (total == 0) return "0s";
  std::string out;
  if (total >= 3600) absl::StrAppend(&out, total / 3600, "h");
  if (total >= 60) absl::StrAppend(&out, (total % 3600) / 60, "m");
  absl::StrAppend(&out, total % 60, "s");
  return out;
}

void FlagSet::String(std::string name, std::string* value, std::string help) {
  flags_.push_back({std::move(name), Type::kString, std::move(help), value});
}
void FlagSet::Bool(std::string name, bool* value, std::string help) {
  flags_.push_back({std::move(name), Type::kBool, std::move(help), value});
}
void FlagSet::Int(std::string name, int* value, int64_t min, int64_t max, std::string help) {
  flags_.push_back({std::move(name), Type::kInt, std::move(help), value, min, max});
}
void FlagSet::Int64(std::string name, int64_t* value, int64_t min, std::string help) {
  flags_.push_back({std::move(name), Type::kInt64, std::move(help), value, min});
}
void FlagSet::Duration(std::string name, absl::Duration* value, std::string help, bool positive) {
  Flag f{std::move(name), Type::kDuration, std::move(help), value};
  f.positive = positive;
  flags_.push_back(std::move(f));
}
void FlagSet::StringList(std::string name, std::vector<std::string>* value, std::string help) {
  flags_.push_back({std::move(name), Type::kStringList, std::move(help), value});
}
void FlagSet::StringArray(std::string name, std::vector<std::string>* value, std::string help) {
  flags_.push_back({std::move(name), Type::kStringArray, std::move(help), value});
}
void FlagSet::Double(std::string name, double* value, std::string help) {
  flags_.push_back({std::move(name), Type::kDouble, std::move(help), value});
}

FlagSet::Flag* FlagSet::Find(std::string_view name) {
  for (Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Set(Flag& f, std::string_view value) {
  switch (f.type) {
    case Type::kString:
      *static_cast<std::string*>(f.value) = std::string(value);
      return absl::OkStatus();
    case Type::kBool: {
      // strconv.ParseBool's spellings.
      bool b;
      if (value == "1" || value == "t" || value == "T" || value == "true" || value == "TRUE" ||
          value == "True") {
        b = true;
      } else if (value == "0" || value == "f" || value == "F" || value == "false" ||
                 value == "FALSE" || value == "False") {
        b = false;
      } else {
        return BadValue(f.name, value, "not a boolean (true or false)");
      }
      *static_cast<bool*>(f.value) = b;
      return absl::OkStatus();
    }
    case Type::kInt:
    case Type::kInt64: {
      int64_t n = 0;
      if (!absl::SimpleAtoi(Av(value), &n)) return BadValue(f.name, value, "not an integer");
      if (n < f.min || n > f.max) {
        return BadValue(f.name, value,
                        f.max == std::numeric_limits<int64_t>::max()
                            ? absl::StrCat("must be at least ", f.min)
                            : absl::StrCat("must be between ", f.min, " and ", f.max));
      }
      if (f.type == Type::kInt) {
        *static_cast<int*>(f.value) = static_cast<int>(n);
      } else {
        *static_cast<int64_t*>(f.value) = n;
      }
      return absl::OkStatus();
    }
    case Type::kDuration: {
      absl::Duration d;
      if (!absl::ParseDuration(Av(value), &d) || d == absl::InfiniteDuration() ||
          d == -absl::InfiniteDuration()) {
        return BadValue(f.name, value, "not a duration (e.g. 30s, 5m, 1h30m)");
      }
      if (f.positive && d <= absl::ZeroDuration()) return BadValue(f.name, value, "must be positive");
      if (d < absl::ZeroDuration()) return BadValue(f.name, value, "must not be negative");
      *static_cast<absl::Duration*>(f.value) = d;
      return absl::OkStatus();
    }
    case Type::kStringList: {
      auto* list = static_cast<std::vector<std::string>*>(f.value);
      if (!f.list_seen) list->clear();
      f.list_seen = true;
      if (value.empty()) return absl::OkStatus();
      for (absl::string_view part : absl::StrSplit(Av(value), ',')) {
        list->emplace_back(absl::StripAsciiWhitespace(part));
      }
      return absl::OkStatus();
    }
    case Type::kStringArray: {
      auto* list = static_cast<std::vector<std::string>*>(f.value);
      if (!f.list_seen) list->clear();
      f.list_seen = true;
      list->emplace_back(value);
      return absl::OkStatus();
    }
    case Type::kDouble: {
      double d = 0;
      if (!absl::SimpleAtod(Av(value), &d) || !std::isfinite(d)) {
        return BadValue(f.name, value, "not a number");
      }
      *static_cast<double*>(f.value) = d;
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled flag type");
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args,
                            std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string_view body;
    if (positional != nullptr && (arg == "--" || arg.empty() || arg[0] != '-' || arg == "-")) {
      if (arg == "--") {
        positional->insert(positional->end(), args.begin() + i + 1, args.end());
        break;
      }
      positional->push_back(arg);
      continue;
    }
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      body = std::string_view(arg).substr(2);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      // Shorthands only: -v and -h.
      body = std::string_view(arg).substr(1);
      std::string_view short_name = body.substr(0, body.find('='));
      if (short_name.size() > 1 && short_name[0] == 'v' &&
          short_name.find_first_not_of("0123456789", 1) == std::string_view::npos) {
        // pflag's "-v2": the value of -v, checked as --v's.
        Flag* v = Find("v");
        if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown shorthand flag: 'v' in ", arg));
        if (absl::Status st = Set(*v, short_name.substr(1)); !st.ok()) return st;
        continue;
      }
      if (short_name != "v" && short_name != "h") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown shorthand flag: '", Av(short_name.substr(0, 1)), "' in ", arg));
      }
      if (short_name == "h") body = "help";
    } else if (arg == "--") {
      if (i + 1 < args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unexpected argument \"", args[i + 1], "\": this command takes flags only"));
      }
      break;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\": this command takes flags only"));
    }
    const size_t eq = body.find('=');
    std::string_view name = body.substr(0, eq);
    Flag* f = Find(name);
    if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag: --", Av(name)));
    if (eq != std::string_view::npos) {
      if (absl::Status st = Set(*f, body.substr(eq + 1)); !st.ok()) return st;
    } else if (f->type == Type::kBool) {
      *static_cast<bool*>(f->value) = true;
    } else {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag needs an argument: --", Av(name)));
      }
      if (absl::Status st = Set(*f, args[++i]); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

std::string FlagSet::DefaultText(const Flag& f) {
  switch (f.type) {
    case Type::kString: {
      const auto& s = *static_cast<const std::string*>(f.value);
      return s.empty() ? "" : absl::StrCat("\"", s, "\"");
    }
    case Type::kBool: return *static_cast<const bool*>(f.value) ? "true" : "false";
    case Type::kInt: return absl::StrCat(*static_cast<const int*>(f.value));
    case Type::kInt64: return absl::StrCat(*static_cast<const int64_t*>(f.value));
    case Type::kDuration: return GoDuration(*static_cast<const absl::Duration*>(f.value));
    case Type::kStringList:
    case Type::kStringArray: {
      const auto& list = *static_cast<const std::vector<std::string>*>(f.value);
      return list.empty() ? "" : absl::StrCat("[", absl::StrJoin(list, ","), "]");
    }
    case Type::kDouble: return absl::StrFormat("%g", *static_cast<const double*>(f.value));
  }
  return "";
}

std::string FlagSet::Usage(int head_width) const {
  std::vector<std::string> heads;
  for (const Flag& f : flags_) {
    std::string head = f.name == "v"      ? "  -v, --v"
                       : f.name == "help" ? "  -h, --help"
                                          : absl::StrCat("      --", f.name);
    const char* type = "";
    switch (f.type) {
      case Type::kString: type = "string"; break;
      case Type::kBool: break;
      case Type::kInt:
      case Type::kInt64: type = "int"; break;
      case Type::kDuration: type = "duration"; break;
      case Type::kStringList: type = "strings"; break;
      case Type::kStringArray: type = "stringArray"; break;
      case Type::kDouble: type = "float"; break;
    }
    if (*type) absl::StrAppend(&head, " ", type);
    head_width = std::max(head_width, static_cast<int>(head.size()) + 1);
    heads.push_back(std::move(head));
  }
  std::string out;
  for (size_t i = 0; i < flags_.size(); ++i) {
    const Flag& f = flags_[i];
    std::string line = absl::StrFormat("%-*s %s", head_width, heads[i], f.help);
    std::string def = DefaultText(f);
    if (!def.empty() && f.name != "help") absl::StrAppend(&line, " (default ", def, ")");
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace poolcoord::base
