#include "apiservice/authentication_config.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "cloud/codec.h"
#include "rapidjson/document.h"

namespace poolcoord::apiservice {
namespace {

absl::StatusOr<AuthenticationConfigMap> FromConfigMap(const cloud::ConfigMap& object) {
  AuthenticationConfigMap config;
  config.exists = true;
  config.resource_version = object.metadata.resource_version;
  auto text = [&](const char* key) -> std::string {
    auto it = object.data.find(key);
    return it == object.data.end() ? "" : it->second;
  };
  config.client_ca_pem = text("client-ca-file");
  config.requestheader_client_ca_pem = text("requestheader-client-ca-file");
  struct ListKey {
    const char* key;
    std::vector<std::string>* out;
  };
  for (const ListKey& k : {ListKey{"requestheader-allowed-names", &config.requestheader_allowed_names},
                           ListKey{"requestheader-username-headers",
                                   &config.requestheader_username_headers},
                           ListKey{"requestheader-group-headers", &config.requestheader_group_headers},
                           ListKey{"requestheader-extra-headers-prefix",
                                   &config.requestheader_extra_headers_prefix},
                           ListKey{"requestheader-uid-headers", &config.requestheader_uid_headers}}) {
    absl::StatusOr<std::vector<std::string>> list = ParseJsonStringList(text(k.key));
    if (!list.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "configmap ", kAuthenticationConfigMapNamespace, "/", kAuthenticationConfigMapName, " key ",
          k.key, ": ", list.status().message()));
    }
    *k.out = *std::move(list);
  }
  return config;
}

}  // namespace

bool AuthenticationConfigMap::SameContent(const AuthenticationConfigMap& o) const {
  return exists == o.exists && client_ca_pem == o.client_ca_pem &&
         requestheader_client_ca_pem == o.requestheader_client_ca_pem &&
         requestheader_allowed_names == o.requestheader_allowed_names &&
         requestheader_username_headers == o.requestheader_username_headers &&
         requestheader_group_headers == o.requestheader_group_headers &&
         requestheader_extra_headers_prefix == o.requestheader_extra_headers_prefix &&
         requestheader_uid_headers == o.requestheader_uid_headers;
}

absl::StatusOr<std::vector<std::string>> ParseJsonStringList(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  if (d.HasParseError() || !d.IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat("not a JSON array of strings: ", std::string(text)));
  }
  for (const auto& v : d.GetArray()) {
    if (!v.IsString()) {
      return absl::InvalidArgumentError(absl::StrCat("not a JSON array of strings: ", std::string(text)));
    }
    out.emplace_back(v.GetString(), v.GetStringLength());
  }
  return out;
}

absl::StatusOr<AuthenticationConfigMap> ParseAuthenticationConfigMap(std::string_view json) {
  absl::StatusOr<cloud::ConfigMap> object = cloud::DecodeConfigMap(json);
  if (!object.ok()) return absl::InvalidArgumentError("ConfigMap is not a JSON object");
  return FromConfigMap(*object);
}

namespace {

cloud::ReflectorOptions WatchOptions(const AuthenticationConfigMapWatcher::Options& o) {
  cloud::ReflectorOptions r;
  r.name = absl::StrCat("configmap ", kAuthenticationConfigMapNamespace, "/",
                        kAuthenticationConfigMapName);
  // The extension-apiserver-authentication-reader Role allows get, list and
  // watch of this one name.
  r.list.field_selector = absl::StrCat("metadata.name=", kAuthenticationConfigMapName);
  r.initial_backoff = o.initial_backoff;
  r.max_backoff = o.max_backoff;
  r.watch_timeout_seconds = o.watch_timeout_seconds;
  return r;
}

// The ConfigMap among `items` (a server that ignored the field selector must
// not make another ConfigMap count); exists=false when absent.
absl::StatusOr<AuthenticationConfigMap> Find(const std::vector<cloud::ConfigMap>& items) {
  for (const cloud::ConfigMap& item : items) {
    if (item.metadata.name == kAuthenticationConfigMapName) return FromConfigMap(item);
  }
  return AuthenticationConfigMap{};
}

}  // namespace

AuthenticationConfigMapWatcher::AuthenticationConfigMapWatcher(cloud::ConfigMapInterface* client,
                                                               Callback on_change, Options options)
    : client_(client),
      on_change_(std::move(on_change)),
      options_(options),
      reflector_(client, WatchOptions(options),
                 [this](const std::vector<cloud::ConfigMap>& items) { OnList(items); },
                 [this](const cloud::WatchEvent<cloud::ConfigMap>& ev) { OnEvent(ev); }) {}

AuthenticationConfigMapWatcher::~AuthenticationConfigMapWatcher() { Stop(); }

absl::StatusOr<AuthenticationConfigMap> AuthenticationConfigMapWatcher::List(
    std::string* list_resource_version) {
  cloud::ListOptions o = WatchOptions(options_).list;
  absl::StatusOr<cloud::ConfigMapList> list = client_->List(o);
  if (!list.ok()) return list.status();
  *list_resource_version = list->resource_version;
  return Find(list->items);
}

void AuthenticationConfigMapWatcher::Start(const AuthenticationConfigMap& initial,
                                           std::string list_resource_version) {
  last_ = initial;
  reflector_.Start(std::move(list_resource_version));
}

void AuthenticationConfigMapWatcher::Stop() { reflector_.Stop(); }

void AuthenticationConfigMapWatcher::Deliver(const AuthenticationConfigMap& config) {
  if (config.SameContent(last_)) return;
  last_ = config;
  on_change_(config);
}

void AuthenticationConfigMapWatcher::OnList(const std::vector<cloud::ConfigMap>& items) {
  absl::StatusOr<AuthenticationConfigMap> config = Find(items);
  if (!config.ok()) {
    // kube keeps the last good content when the new one does not parse.
    base::LogWarning(WatchOptions(options_).name, ": ", config.status().message());
    return;
  }
  Deliver(*config);
}

void AuthenticationConfigMapWatcher::OnEvent(const cloud::WatchEvent<cloud::ConfigMap>& ev) {
  if (ev.object.metadata.name != kAuthenticationConfigMapName) return;
  if (ev.type == "DELETED") {
    Deliver(AuthenticationConfigMap{});
    return;
  }
  OnList({ev.object});
}

}  // namespace poolcoord::apiservice
