#include "apiservice/request_info.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace poolcoord::apiservice {
namespace {

// Go's runtime.Convert_Slice_string_To_bool: present and not "0"/"false".
bool QueryBool(const handlers::Request& request, std::string_view key) {
  for (const auto& [k, v] : request.query) {
    if (k == key) return !(v == "0" || absl::AsciiStrToLower(v) == "false");
  }
  return false;
}

// The name a field selector pins with metadata.name=<n> or metadata.name==<n>
// (fields.Selector.RequiresExactMatch), or "".
std::string NameFromFieldSelector(const handlers::Request& request) {
  for (const auto& [k, v] : request.query) {
    if (k != "fieldSelector") continue;
    for (absl::string_view term : absl::StrSplit(v, ',')) {
      absl::string_view t = absl::StripAsciiWhitespace(term);
      for (absl::string_view op : {"==", "="}) {
        std::string prefix = "metadata.name" + std::string(op);
        if (t.substr(0, prefix.size()) == prefix) {
          std::string name(t.substr(prefix.size()));
          // path.IsValidPathSegmentName
          if (name.empty() || name == "." || name == ".." ||
              name.find_first_of("/%") != std::string::npos) {
            return "";
          }
          return name;
        }
      }
    }
    return "";
  }
  return "";
}

}  // namespace

RequestInfo ResolveRequestInfo(const handlers::Request& request) {
  RequestInfo info;
  info.path = request.path;
  info.verb = absl::AsciiStrToLower(request.method);

  std::vector<std::string> parts;
  for (absl::string_view p : absl::StrSplit(request.path, '/', absl::SkipEmpty())) {
    parts.emplace_back(p);
  }
  if (parts.size() < 3) return info;
  if (parts[0] != "apis" && parts[0] != "api") return info;
  info.api_prefix = parts[0];
  size_t i = 1;
  if (info.api_prefix == "apis") {
    if (parts.size() < 4) return info;
    info.api_group = parts[i++];
  }
  info.is_resource_request = true;
  info.api_version = parts[i++];

  if (parts[i] == "watch" || parts[i] == "proxy") {
    if (parts.size() - i < 2) {
      // kube-apiserver fails to resolve this ("unable to determine kind and
      // namespace"); it is not a request on any resource.
      info.is_resource_request = false;
      info.verb = absl::AsciiStrToLower(request.method);
      return info;
    }
    info.verb = parts[i++];
  } else {
    const std::string& m = request.method;
    if (m == "POST") {
      info.verb = "create";
    } else if (m == "GET" || m == "HEAD") {
      info.verb = "get";
    } else if (m == "PUT") {
      info.verb = "update";
    } else if (m == "PATCH") {
      info.verb = "patch";
    } else if (m == "DELETE") {
      info.verb = "delete";
    } else {
      info.verb = "";
    }
  }

  std::vector<std::string> rest(parts.begin() + static_cast<long>(i), parts.end());
  if (!rest.empty() && rest[0] == "namespaces") {
    if (rest.size() > 1) {
      info.namespace_ = rest[1];
      if (rest.size() > 2 && rest[2] != "status" && rest[2] != "finalize") {
        rest.erase(rest.begin(), rest.begin() + 2);
      }
    }
  }
  info.parts = rest;
  if (rest.size() >= 3 && info.verb != "proxy") info.subresource = rest[2];
  if (rest.size() >= 2) info.name = rest[1];
  if (!rest.empty()) info.resource = rest[0];

  if (info.name.empty() && info.verb == "get") {
    info.verb = QueryBool(request, "watch") ? "watch" : "list";
    info.name = NameFromFieldSelector(request);
  }
  if (info.name.empty() && info.verb == "delete") info.verb = "deletecollection";
  return info;
}

}  // namespace poolcoord::apiservice
