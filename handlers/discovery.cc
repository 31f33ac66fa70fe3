#include "handlers/discovery.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/synchronization/mutex.h"
#include "base/json_write.h"
#include "base/string_view.h"
#include "handlers/registry/registry.h"
#include "handlers/status_mapping.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"
#include "store/object.h"

namespace poolcoord::handlers {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr const char* kVerbs[] = {"create", "delete", "deletecollection", "get",
                                  "list",   "patch",  "update",           "watch"};
constexpr const char* kStatusVerbs[] = {"get", "patch", "update"};
constexpr char kJson[] = "application/json";
constexpr char kAcceptedTypes[] = "application/json";
constexpr char kDiscoveryGroup[] = "apidiscovery.k8s.io";
constexpr char kDiscoveryKind[] = "APIGroupDiscoveryList";

using base::JsonString;

template <size_t N>
void StrArray(JsonWriter& w, const char* const (&items)[N]) {
  w.StartArray();
  for (const char* item : items) w.String(item);
  w.EndArray();
}

// absl's string helpers take absl::string_view, a distinct type in Debian's build
// (not std::string_view); these few work on std::string_view directly.
std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    size_t pos = s.find(sep);
    out.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return out;
    s.remove_prefix(pos + 1);
  }
}

std::string_view StripWeak(std::string_view tag) {
  if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
  return tag;
}

std::string Sha256Raw(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

Response JsonResponse(int status, std::string body) {
  Response r;
  r.status = status;
  r.SetHeader("Content-Type", kJson);
  r.body = std::move(body);
  return r;
}

// verbs, shortNames and categories of a resource: the same fields in the legacy
// APIResource and in aggregated discovery's APIResourceDiscovery.
void WriteVerbsAndNames(JsonWriter& w, const store::ResourceInfo& info) {
  w.Key("verbs");
  StrArray(w, kVerbs);
  w.Key("shortNames");
  w.StartArray();
  w.String(info.short_name);
  w.EndArray();
  w.Key("categories");
  w.StartArray();
  w.EndArray();
}

// A GroupVersionForDiscovery: {"groupVersion", "version"}.
void WriteGroupVersion(JsonWriter& w) {
  w.StartObject();
  w.Key("groupVersion");
  w.String(store::kGroupVersion);
  w.Key("version");
  w.String(store::kVersion);
  w.EndObject();
}

// The group object shared by APIGroupList.groups[] and APIGroup.
void WriteGroupFields(JsonWriter& w) {
  w.Key("name");
  w.String(store::kGroup);
  w.Key("versions");
  w.StartArray();
  WriteGroupVersion(w);
  w.EndArray();
  w.Key("preferredVersion");
  WriteGroupVersion(w);
}

std::string RenderApiGroupList() {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("APIGroupList");
  w.Key("apiVersion");
  w.String("v1");
  w.Key("groups");
  w.StartArray();
  w.StartObject();
  WriteGroupFields(w);
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

std::string RenderApiGroup() {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("APIGroup");
  w.Key("apiVersion");
  w.String("v1");
  WriteGroupFields(w);
  w.EndObject();
  return buf.GetString();
}

// One APIResource of the legacy list: a kind, or its status subresource, which
// has an empty singularName and no storage of its own, as kube-apiserver lists
// subresources.
void WriteApiResource(JsonWriter& w, const registry::Strategy& kind, bool status) {
  const store::ResourceInfo& info = kind.Info();
  w.StartObject();
  w.Key("name");
  JsonString(w, status ? std::string(info.plural) + "/status" : std::string(info.plural));
  w.Key("singularName");
  w.String(status ? "" : info.singular);
  w.Key("namespaced");
  w.Bool(kind.NamespaceScoped());
  w.Key("kind");
  w.String(info.kind_name);
  if (status) {
    w.Key("verbs");
    StrArray(w, kStatusVerbs);
  } else {
    WriteVerbsAndNames(w, info);
    w.Key("storageVersionHash");
    JsonString(w, StorageVersionHash(info.kind_name));
  }
  w.EndObject();
}

std::string RenderApiResourceList() {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("APIResourceList");
  w.Key("apiVersion");
  w.String("v1");
  w.Key("groupVersion");
  w.String(store::kGroupVersion);
  w.Key("resources");
  w.StartArray();
  for (const registry::Strategy* kind : registry::AllKinds()) {
    WriteApiResource(w, *kind, /*status=*/false);
    WriteApiResource(w, *kind, /*status=*/true);
  }
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

void WriteResponseKind(JsonWriter& w, const char* kind_name) {
  w.StartObject();
  w.Key("group");
  w.String(store::kGroup);
  w.Key("version");
  w.String(store::kVersion);
  w.Key("kind");
  w.String(kind_name);
  w.EndObject();
}

// apidiscovery.k8s.io/v2 APIGroupDiscoveryList; v2beta1 has the same fields.
std::string RenderAggregated(std::string_view version) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("kind");
  w.String(kDiscoveryKind);
  w.Key("apiVersion");
  JsonString(w, std::string(kDiscoveryGroup) + "/" + std::string(version));
  w.Key("metadata");
  w.StartObject();
  w.EndObject();
  w.Key("items");
  w.StartArray();
  w.StartObject();
  w.Key("metadata");
  w.StartObject();
  w.Key("name");
  w.String(store::kGroup);
  w.EndObject();
  w.Key("versions");
  w.StartArray();
  w.StartObject();
  w.Key("version");
  w.String(store::kVersion);
  w.Key("resources");
  w.StartArray();
  for (const registry::Strategy* kind : registry::AllKinds()) {
    const store::ResourceInfo& info = kind->Info();
    w.StartObject();
    w.Key("resource");
    w.String(info.plural);
    w.Key("responseKind");
    WriteResponseKind(w, info.kind_name);
    w.Key("scope");
    w.String(kind->NamespaceScoped() ? "Namespaced" : "Cluster");
    w.Key("singularResource");
    w.String(info.singular);
    WriteVerbsAndNames(w, info);
    w.Key("subresources");
    w.StartArray();
    w.StartObject();
    w.Key("subresource");
    w.String("status");
    w.Key("responseKind");
    WriteResponseKind(w, info.kind_name);
    w.Key("verbs");
    StrArray(w, kStatusVerbs);
    w.EndObject();
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("freshness");
  w.String("Current");
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

struct CachedDocument {
  std::string body;
  std::string etag;  // quoted
  std::string content_type;
};

CachedDocument MakeAggregated(std::string_view version) {
  CachedDocument doc;
  doc.body = RenderAggregated(version);
  doc.etag = "\"" + absl::BytesToHexString(Sha256Raw(doc.body)) + "\"";
  doc.content_type = std::string(kJson) + ";g=" + kDiscoveryGroup + ";v=" + std::string(version) +
                     ";as=" + kDiscoveryKind;
  return doc;
}

bool AcceptsAggregated(const std::vector<MediaRange>& ranges, std::string_view version) {
  for (const MediaRange& r : ranges) {
    if (r.type == "application" && r.subtype == "json" && r.Param("g") == kDiscoveryGroup &&
        r.Param("v") == version && r.Param("as") == kDiscoveryKind) {
      return true;
    }
  }
  return false;
}

bool AcceptsPlainJson(const std::vector<MediaRange>& ranges) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [](const MediaRange& r) { return r.IsPlainJson(); });
}

bool AcceptsPlainJson(const Request& request) {
  return AcceptsPlainJson(ParseAccept(request.Header("accept")));
}

std::string RenderVersion(std::string_view poolcoord_version) {
  std::string_view ours = poolcoord_version;
  if (!ours.empty() && ours.front() == 'v') ours.remove_prefix(1);
#if defined(__x86_64__)
  constexpr char kPlatform[] = "linux/amd64";
#elif defined(__aarch64__)
  constexpr char kPlatform[] = "linux/arm64";
#else
  constexpr char kPlatform[] = "linux/unknown";
#endif
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  // Major and minor name the Kubernetes API level we serve, not our own release:
  // /usr/bin/kubectl on these machines is a dispatcher that runs
  // kubectl.<major>.<minor> according to the server's /version, and clients
  // compare it against their skew policy. We follow kube-apiserver 1.32's
  // behaviour (kubectl 1.32 is what our users run), so report 1.32; our own
  // version rides in gitVersion's pre-release part, as distributions do.
  w.Key("major");
  w.String("1");
  w.Key("minor");
  w.String("32");
  w.Key("gitVersion");
  JsonString(w, "v1.32.0-poolcoord." + std::string(ours));
  w.Key("gitCommit");
  w.String("");
  w.Key("gitTreeState");
  w.String("");
  w.Key("buildDate");
  w.String("1970-01-01T00:00:00Z");  // k8s.io/component-base's value when unset
  w.Key("goVersion");
  w.String("");
  w.Key("compiler");
  w.String("gcc");
  w.Key("platform");
  w.String(kPlatform);
  w.EndObject();
  return buf.GetString();
}

}  // namespace

std::string_view MediaRange::Param(std::string_view name) const {
  for (const auto& [key, value] : params) {
    if (key == name) return value;
  }
  return "";
}

bool MediaRange::IsPlainJson() const {
  bool json_type = (type == "application" && (subtype == "json" || subtype == "*")) ||
                   (type == "*" && subtype == "*");
  return json_type && Param("as").empty() && Param("g").empty() && Param("v").empty();
}

std::vector<MediaRange> ParseAccept(std::string_view accept) {
  std::vector<MediaRange> ranges;
  if (Trim(accept).empty()) {
    ranges.push_back(MediaRange{"*", "*", {}, 1.0});
    return ranges;
  }
  for (std::string_view part : Split(accept, ',')) {
    std::vector<std::string_view> pieces = Split(part, ';');
    std::string_view full = Trim(pieces[0]);
    size_t slash = full.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == full.size()) continue;
    MediaRange range;
    range.type = absl::AsciiStrToLower(base::Av(Trim(full.substr(0, slash))));
    range.subtype = absl::AsciiStrToLower(base::Av(Trim(full.substr(slash + 1))));
    for (size_t i = 1; i < pieces.size(); ++i) {
      std::string_view param = Trim(pieces[i]);
      if (param.empty()) continue;
      size_t eq = param.find('=');
      std::string key = absl::AsciiStrToLower(base::Av(Trim(param.substr(0, eq))));
      std::string_view value = eq == std::string_view::npos ? "" : Trim(param.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      if (key == "q") {
        std::string q(value);
        char* end = nullptr;
        double parsed = std::strtod(q.c_str(), &end);
        if (end != q.c_str() && parsed >= 0 && parsed <= 1) range.q = parsed;
      } else {
        range.params.emplace_back(std::move(key), std::string(value));
      }
    }
    if (range.q > 0) ranges.push_back(std::move(range));
  }
  std::stable_sort(ranges.begin(), ranges.end(),
                   [](const MediaRange& a, const MediaRange& b) { return a.q > b.q; });
  return ranges;
}

Response NotAcceptableResponse(std::string_view accepted) {
  return ErrorResponse(store::NotAcceptableError(
      "only the following media types are accepted: " + std::string(accepted)));
}

bool IfNoneMatchMatches(std::string_view if_none_match, std::string_view etag) {
  if (Trim(if_none_match).empty() || etag.empty()) return false;
  std::string_view ours = StripWeak(etag);
  for (std::string_view tag : Split(if_none_match, ',')) {
    tag = Trim(tag);
    if (tag == "*") return true;
    if (StripWeak(tag) == ours) return true;
  }
  return false;
}

std::string StorageVersionHash(std::string_view kind_name) {
  std::string digest =
      Sha256Raw(std::string(store::kGroupVersion) + "/" + std::string(kind_name));
  std::string out;
  absl::Base64Escape(absl::string_view(digest.data(), 8), &out);
  return out;
}

Response ServeApiGroupList(const Request& request) {
  static const CachedDocument* const kV2 = new CachedDocument(MakeAggregated("v2"));
  static const CachedDocument* const kV2Beta1 = new CachedDocument(MakeAggregated("v2beta1"));
  static const std::string* const kLegacy = new std::string(RenderApiGroupList());

  std::vector<MediaRange> ranges = ParseAccept(request.Header("accept"));
  const CachedDocument* doc = nullptr;
  if (AcceptsAggregated(ranges, "v2")) {
    doc = kV2;
  } else if (AcceptsAggregated(ranges, "v2beta1")) {
    doc = kV2Beta1;
  }
  if (doc != nullptr) {
    Response r;
    r.SetHeader("Content-Type", doc->content_type);
    r.SetHeader("ETag", doc->etag);
    r.SetHeader("Vary", "Accept");
    if (IfNoneMatchMatches(request.Header("if-none-match"), doc->etag)) {
      r.status = 304;
      return r;
    }
    r.body = doc->body;
    return r;
  }
  if (!AcceptsPlainJson(ranges)) {
    return NotAcceptableResponse(
        "application/json, "
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, "
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList");
  }
  Response r = JsonResponse(200, *kLegacy);
  r.SetHeader("Vary", "Accept");
  return r;
}

Response ServeApiGroup(const Request& request) {
  static const std::string* const kBody = new std::string(RenderApiGroup());
  if (!AcceptsPlainJson(request)) return NotAcceptableResponse(kAcceptedTypes);
  return JsonResponse(200, *kBody);
}

Response ServeApiResourceList(const Request& request) {
  static const std::string* const kBody = new std::string(RenderApiResourceList());
  if (!AcceptsPlainJson(request)) return NotAcceptableResponse(kAcceptedTypes);
  return JsonResponse(200, *kBody);
}

Response ServeVersion(const Request& request, std::string_view poolcoord_version) {
  // One process serves one version; keep the last rendering.
  static absl::Mutex mu(absl::kConstInit);
  static std::string* const cached_version = new std::string;  // guarded by mu
  static std::string* const cached_body = new std::string;     // guarded by mu
  absl::MutexLock lock(&mu);
  if (cached_body->empty() || *cached_version != poolcoord_version) {
    *cached_version = std::string(poolcoord_version);
    *cached_body = RenderVersion(poolcoord_version);
  }
  return JsonResponse(200, *cached_body);
}

Response ServeApiVersions(const Request& request) {
  store::ApiErrorInfo info;
  info.code = 404;
  info.reason = "NotFound";
  info.message = "the server could not find the requested resource";
  return ErrorResponse(store::MakeApiError(absl::StatusCode::kNotFound, info));
}

}  // namespace poolcoord::handlers
