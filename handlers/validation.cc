#include "handlers/validation.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/quote.h"
#include "base/string_view.h"

namespace poolcoord::handlers {
namespace {


// The regular expressions as apimachinery prints them in its messages.
constexpr char kQualifiedNameFmt[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr char kQualifiedNameErrMsg[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character";
constexpr char kLabelValueFmt[] = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr char kLabelValueErrMsg[] =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character";
constexpr char kDNS1123SubdomainFmt[] =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr char kDNS1123SubdomainErrMsg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character";

constexpr char kFinalizerOrphanDependents[] = "orphan";
constexpr char kFinalizerDeleteDependents[] = "foregroundDeletion";

std::string MaxLenError(size_t length) {
  return absl::StrCat("must be no more than ", length, " characters");
}

// validation.RegexError: "<msg> (e.g. 'a', or 'b', regex used for validation is '<fmt>')".
std::string RegexError(std::string_view msg, std::string_view fmt,
                       std::initializer_list<std::string_view> examples) {
  std::string out(msg);
  if (examples.size() == 0) {
    absl::StrAppend(&out, " (regex used for validation is '", base::Av(fmt), "')");
    return out;
  }
  out += " (e.g. ";
  bool first = true;
  for (std::string_view example : examples) {
    if (!first) out += " or ";
    first = false;
    absl::StrAppend(&out, "'", base::Av(example), "', ");
  }
  absl::StrAppend(&out, "regex used for validation is '", base::Av(fmt), "')");
  return out;
}

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$
bool MatchesQualifiedName(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
bool MatchesDNS1123Label(std::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool MatchesDNS1123Subdomain(std::string_view s) {
  while (true) {
    size_t dot = s.find('.');
    if (!MatchesDNS1123Label(s.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    s.remove_prefix(dot + 1);
  }
}

// GoQuote of a list, as %#v prints a []string: []string{"a", "b"}.
std::string GoStringSlice(const std::vector<std::string>& values) {
  std::string out = "[]string{";
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", base::GoQuote(values[i]));
  }
  out += "}";
  return out;
}

// Both read the object's StringMap in place: a copy into a std::map cost a
// renewal ~1,800 instructions of allocations.
void ValidateLabels(const store::StringMap& labels, std::vector<store::FieldCause>& causes) {
  constexpr char kField[] = "metadata.labels";
  for (const auto& [key, value] : labels) {
    for (const auto& msg : IsQualifiedName(key)) {
      causes.push_back(store::FieldInvalid(kField, base::GoQuote(key), msg));
    }
    for (const auto& msg : IsValidLabelValue(value)) {
      causes.push_back(store::FieldInvalid(kField, base::GoQuote(value), msg));
    }
  }
}

void ValidateAnnotations(const store::StringMap& annotations,
                         std::vector<store::FieldCause>& causes) {
  constexpr char kField[] = "metadata.annotations";
  size_t total = 0;
  std::string lowered;
  for (const auto& [key, value] : annotations) {
    // Annotation keys are qualified names regardless of case.
    std::string_view name = key;
    if (std::any_of(name.begin(), name.end(), absl::ascii_isupper)) {
      lowered.assign(name);
      absl::AsciiStrToLower(&lowered);
      name = lowered;
    }
    for (const auto& msg : IsQualifiedName(name)) {
      causes.push_back(store::FieldInvalid(kField, base::GoQuote(key), msg));
    }
    total += key.size() + value.size();
  }
  if (total > kTotalAnnotationSizeLimitBytes) {
    causes.push_back(store::FieldTooLong(
        kField, absl::StrCat("must have at most ", kTotalAnnotationSizeLimitBytes, " bytes")));
  }
}

void ValidateFinalizers(const std::vector<std::string>& finalizers,
                        std::vector<store::FieldCause>& causes) {
  constexpr char kField[] = "metadata.finalizers";
  bool orphan = false;
  bool foreground = false;
  for (const auto& finalizer : finalizers) {
    for (const auto& msg : IsQualifiedName(finalizer)) {
      causes.push_back(store::FieldInvalid(kField, base::GoQuote(finalizer), msg));
    }
    orphan |= finalizer == kFinalizerOrphanDependents;
    foreground |= finalizer == kFinalizerDeleteDependents;
  }
  if (orphan && foreground) {
    causes.push_back(store::FieldInvalid(
        kField, GoStringSlice(finalizers),
        absl::StrCat("finalizer ", kFinalizerOrphanDependents, " and ",
                     kFinalizerDeleteDependents, " cannot be both set")));
  }
}

}  // namespace

std::vector<std::string> IsDNS1123Subdomain(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDNS1123SubdomainMaxLength) {
    errs.push_back(MaxLenError(kDNS1123SubdomainMaxLength));
  }
  if (!MatchesDNS1123Subdomain(value)) {
    errs.push_back(RegexError(kDNS1123SubdomainErrMsg, kDNS1123SubdomainFmt, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> IsQualifiedName(std::string_view value) {
  std::vector<std::string> errs;
  std::string_view name = value;
  size_t slash = value.find('/');
  if (slash != std::string_view::npos) {
    if (value.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back(absl::StrCat(
          "a qualified name ",
          RegexError(kQualifiedNameErrMsg, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"}),
          " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
      return errs;
    }
    std::string_view prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (const auto& msg : IsDNS1123Subdomain(prefix)) {
        errs.push_back(absl::StrCat("prefix part ", msg));
      }
    }
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > kQualifiedNameMaxLength) {
    errs.push_back(absl::StrCat("name part ", MaxLenError(kQualifiedNameMaxLength)));
  }
  if (!MatchesQualifiedName(name)) {
    errs.push_back(absl::StrCat(
        "name part ",
        RegexError(kQualifiedNameErrMsg, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"})));
  }
  return errs;
}

std::vector<std::string> IsValidLabelValue(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kLabelValueMaxLength) errs.push_back(MaxLenError(kLabelValueMaxLength));
  if (!value.empty() && !MatchesQualifiedName(value)) {
    errs.push_back(RegexError(kLabelValueErrMsg, kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

std::vector<store::FieldCause> ValidateObjectMeta(const store::ObjectMeta& meta, bool is_create) {
  std::vector<store::FieldCause> causes;
  if (!meta.generate_name.empty()) {
    // apimachinery's maskTrailingDash: a prefix may end in '-', a name may not.
    std::string masked = meta.generate_name;
    if (masked.size() > 1 && masked.back() == '-') masked = masked.substr(0, masked.size() - 2) + "a";
    for (const auto& msg : IsDNS1123Subdomain(masked)) {
      causes.push_back(
          store::FieldInvalid("metadata.generateName", base::GoQuote(meta.generate_name), msg));
    }
  }
  if (meta.name.empty()) {
    if (!(is_create && !meta.generate_name.empty())) {
      causes.push_back(store::FieldRequired("metadata.name", "name or generateName is required"));
    }
  } else {
    for (const auto& msg : IsDNS1123Subdomain(meta.name)) {
      causes.push_back(store::FieldInvalid("metadata.name", base::GoQuote(meta.name), msg));
    }
  }
  if (meta.generation < 0) {
    causes.push_back(store::FieldInvalid("metadata.generation", std::to_string(meta.generation),
                                         "must be greater than or equal to 0"));
  }
  ValidateLabels(meta.labels, causes);
  ValidateAnnotations(meta.annotations, causes);
  ValidateFinalizers(meta.finalizers, causes);
  return causes;
}

std::vector<store::FieldCause> ValidateObjectMetaUpdate(const store::ObjectMeta& old_meta,
                                                        const store::ObjectMeta& new_meta) {
  std::vector<store::FieldCause> causes;
  if (old_meta.deletion_timestamp.has_value()) {
    std::set<std::string> old_set(old_meta.finalizers.begin(), old_meta.finalizers.end());
    std::set<std::string> added;
    for (const auto& f : new_meta.finalizers) {
      if (!old_set.count(f)) added.insert(f);
    }
    if (!added.empty()) {
      causes.push_back(store::FieldForbidden(
          "metadata.finalizers",
          absl::StrCat("no new finalizers can be added if the object is being deleted, found "
                       "new finalizers ",
                       GoStringSlice(std::vector<std::string>(added.begin(), added.end())))));
    }
  }
  if (new_meta.name != old_meta.name) {
    causes.push_back(
        store::FieldInvalid("metadata.name", base::GoQuote(new_meta.name), "field is immutable"));
  }
  if (!new_meta.uid.empty() && new_meta.uid != old_meta.uid) {
    causes.push_back(
        store::FieldInvalid("metadata.uid", base::GoQuote(new_meta.uid), "field is immutable"));
  }
  return causes;
}

}  // namespace poolcoord::handlers
