// Kubernetes' name rules (k8s.io/apimachinery/pkg/util/validation), with its own
// messages, so that every layer can judge a name as kube-apiserver would: object
// and node names (DNS-1123 subdomains), label and annotation keys (qualified
// names), label values.
//
// Each function returns one message per failed rule (empty: valid), worded as
// apimachinery words it. Pure and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace poolcoord::base {

inline constexpr size_t kDNS1123SubdomainMaxLength = 253;
inline constexpr size_t kQualifiedNameMaxLength = 63;
inline constexpr size_t kLabelValueMaxLength = 63;

// A lowercase RFC 1123 subdomain: at most 253 characters of [a-z0-9-.], each
// dot-separated label starting and ending with an alphanumeric. Object names,
// and node names (ValidateNodeName is NameIsDNSSubdomain).
std::vector<std::string> IsDNS1123Subdomain(std::string_view value);

// Label and annotation keys and finalizers: an optional DNS-1123 subdomain prefix
// and '/', then a name of at most 63 characters matching
// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]. Messages carry the "prefix part " /
// "name part " prefixes as apimachinery's do.
std::vector<std::string> IsQualifiedName(std::string_view value);

// Label values: empty, or at most 63 characters matching the qualified-name regex.
std::vector<std::string> IsValidLabelValue(std::string_view value);

}  // namespace poolcoord::base
