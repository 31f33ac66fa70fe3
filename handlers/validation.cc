#include "handlers/validation.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "rapidjson/document.h"

namespace poolcoord::handlers {
namespace {

constexpr char kFinalizerOrphanDependents[] = "orphan";
constexpr char kFinalizerDeleteDependents[] = "foregroundDeletion";
constexpr char kFinalizerKubernetes[] = "kubernetes";

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
        kField, absl::StrCat("may not be more than ", kTotalAnnotationSizeLimitBytes, " bytes")));
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

// apimachinery's validateOwnerReference and ValidateOwnerReferences: each
// reference names its owner whole (a version in apiVersion, kind, name, uid),
// and at most one is the controller. The garbage collector and every
// controller's GetControllerOf read these. The list is stored as its JSON;
// an object without owners costs nothing here.
void ValidateOwnerReferences(const std::string& json, std::vector<store::FieldCause>& causes) {
  constexpr char kField[] = "metadata.ownerReferences";
  if (json.empty() || json == "[]") return;
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsArray()) return;  // the codec decoded it as an array
  auto str = [](const rapidjson::Value& ref, const char* key) -> std::string {
    auto it = ref.FindMember(key);
    return it != ref.MemberEnd() && it->value.IsString()
               ? std::string(it->value.GetString(), it->value.GetStringLength())
               : std::string();
  };
  std::string controller;  // "<kind>/<name>" of the first reference with controller: true
  for (const auto& ref : d.GetArray()) {
    if (!ref.IsObject()) continue;
    const std::string api_version = str(ref, "apiVersion");
    // schema.ParseGroupVersion: "v1" or "<group>/<version>"; anything else has no version.
    std::string_view version = api_version;
    if (const size_t slash = api_version.find('/'); slash != std::string::npos) {
      version = api_version.find('/', slash + 1) == std::string::npos
                    ? std::string_view(api_version).substr(slash + 1)
                    : std::string_view();
    }
    if (version.empty()) {
      causes.push_back(store::FieldInvalid(absl::StrCat(kField, ".apiVersion"),
                                           base::GoQuote(api_version), "version must not be empty"));
    }
    const std::string kind = str(ref, "kind");
    const std::string name = str(ref, "name");
    const std::string uid = str(ref, "uid");
    if (kind.empty()) {
      causes.push_back(store::FieldInvalid(absl::StrCat(kField, ".kind"), base::GoQuote(kind),
                                           "must not be empty"));
    }
    if (name.empty()) {
      causes.push_back(store::FieldInvalid(absl::StrCat(kField, ".name"), base::GoQuote(name),
                                           "must not be empty"));
    }
    if (uid.empty()) {
      causes.push_back(store::FieldInvalid(absl::StrCat(kField, ".uid"), base::GoQuote(uid),
                                           "must not be empty"));
    }
    auto c = ref.FindMember("controller");
    if (c != ref.MemberEnd() && c->value.IsBool() && c->value.GetBool()) {
      const std::string current = absl::StrCat(kind, "/", name);
      if (controller.empty()) {
        controller = current;
      } else {
        causes.push_back(store::FieldInvalid(
            kField, json,
            absl::StrCat("Only one reference can have Controller set to true. Found \"true\" in "
                         "references for ",
                         controller, " and ", current)));
      }
    }
  }
}

}  // namespace

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
  ValidateOwnerReferences(meta.owner_references_json, causes);
  return causes;
}

std::vector<std::string> FinalizerWarnings(const std::vector<std::string>& finalizers,
                                           const std::vector<std::string>* old_finalizers) {
  std::vector<std::string> warnings;
  if (finalizers.empty() || (old_finalizers != nullptr && *old_finalizers == finalizers)) {
    return warnings;  // every write of an object without finalizers, every renewal
  }
  std::set<std::string_view> added;
  for (const auto& f : finalizers) {
    if (f.find('/') != std::string::npos || f == kFinalizerKubernetes ||
        f == kFinalizerOrphanDependents || f == kFinalizerDeleteDependents) {
      continue;
    }
    if (old_finalizers != nullptr &&
        std::find(old_finalizers->begin(), old_finalizers->end(), f) != old_finalizers->end()) {
      continue;
    }
    added.insert(f);
  }
  for (std::string_view f : added) {
    warnings.push_back(absl::StrCat(
        "metadata.finalizers: ", base::GoQuote(f), ": prefer a domain-qualified finalizer name ",
        f.find('.') != std::string_view::npos ? "including a path (/) " : "",
        "to avoid accidental conflicts with other finalizer writers"));
  }
  return warnings;
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
