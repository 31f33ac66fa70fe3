#include "apiservice/authentication_config.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "rapidjson/document.h"

namespace poolcoord::apiservice {
namespace {

std::string ListPath(bool watch, const std::string& resource_version, int timeout_seconds) {
  std::string path = absl::StrCat("/api/v1/namespaces/", kAuthenticationConfigMapNamespace,
                                  "/configmaps?fieldSelector=metadata.name%3D",
                                  kAuthenticationConfigMapName);
  if (watch) {
    absl::StrAppend(&path, "&watch=true&allowWatchBookmarks=true&timeoutSeconds=",
                    timeout_seconds, "&resourceVersion=", resource_version);
  }
  return path;
}

std::string ResourceVersionOf(const rapidjson::Value& object) {
  if (!object.IsObject()) return "";
  auto md = object.FindMember("metadata");
  if (md == object.MemberEnd() || !md->value.IsObject()) return "";
  auto rv = md->value.FindMember("resourceVersion");
  if (rv == md->value.MemberEnd() || !rv->value.IsString()) return "";
  return rv->value.GetString();
}

absl::StatusOr<AuthenticationConfigMap> FromObject(const rapidjson::Value& object) {
  AuthenticationConfigMap config;
  if (!object.IsObject()) return absl::InvalidArgumentError("ConfigMap is not a JSON object");
  config.exists = true;
  config.resource_version = ResourceVersionOf(object);
  auto data = object.FindMember("data");
  if (data == object.MemberEnd() || data->value.IsNull()) return config;
  if (!data->value.IsObject()) return absl::InvalidArgumentError("ConfigMap data is not an object");
  auto text = [&](const char* key) -> std::string {
    auto it = data->value.FindMember(key);
    if (it == data->value.MemberEnd() || !it->value.IsString()) return "";
    return std::string(it->value.GetString(), it->value.GetStringLength());
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
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError()) return absl::InvalidArgumentError("ConfigMap is not JSON");
  return FromObject(d);
}

AuthenticationConfigMapWatcher::AuthenticationConfigMapWatcher(store::KubeClient* client,
                                                               Callback on_change, Options options)
    : client_(client), on_change_(std::move(on_change)), options_(options) {}

AuthenticationConfigMapWatcher::~AuthenticationConfigMapWatcher() { Stop(); }

absl::StatusOr<AuthenticationConfigMap> AuthenticationConfigMapWatcher::List(
    std::string* list_resource_version) {
  absl::StatusOr<store::KubeResponse> r = client_->Get(ListPath(false, "", 0));
  if (!r.ok()) return r.status();
  if (r->status != 200) return store::StatusFromKubeResponse(*r);
  rapidjson::Document d;
  d.Parse(r->body.c_str(), r->body.size());
  if (d.HasParseError() || !d.IsObject()) {
    return absl::InvalidArgumentError("ConfigMap list is not a JSON object");
  }
  *list_resource_version = ResourceVersionOf(d);
  auto items = d.FindMember("items");
  if (items != d.MemberEnd() && items->value.IsArray()) {
    for (const auto& item : items->value.GetArray()) {
      auto md = item.FindMember("metadata");
      if (md == item.MemberEnd() || !md->value.IsObject()) continue;
      auto name = md->value.FindMember("name");
      // The field selector already narrowed it; a server that ignored it must not
      // make another ConfigMap count.
      if (name != md->value.MemberEnd() && name->value.IsString() &&
          std::string_view(name->value.GetString()) == kAuthenticationConfigMapName) {
        return FromObject(item);
      }
    }
  }
  return AuthenticationConfigMap{};
}

void AuthenticationConfigMapWatcher::Start(const AuthenticationConfigMap& initial,
                                           std::string list_resource_version) {
  if (thread_.joinable()) return;
  last_ = initial;
  stopping_ = false;
  thread_ = std::thread([this, rv = std::move(list_resource_version)] { Run(rv); });
}

void AuthenticationConfigMapWatcher::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void AuthenticationConfigMapWatcher::Deliver(const AuthenticationConfigMap& config) {
  if (config.SameContent(last_)) return;
  last_ = config;
  on_change_(config);
}

void AuthenticationConfigMapWatcher::Run(std::string rv) {
  std::chrono::milliseconds backoff = options_.initial_backoff;
  auto sleep_backoff = [&] {
    for (auto waited = std::chrono::milliseconds(0); waited < backoff && !stopping_;
         waited += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  };
  const std::string where =
      absl::StrCat("configmap ", kAuthenticationConfigMapNamespace, "/", kAuthenticationConfigMapName);
  while (!stopping_) {
    if (rv.empty()) {
      std::string list_rv;
      absl::StatusOr<AuthenticationConfigMap> listed = List(&list_rv);
      if (!listed.ok()) {
        base::LogWarning(where, ": list failed: ", listed.status().message());
        sleep_backoff();
        continue;
      }
      Deliver(*listed);
      rv = list_rv;
    }
    bool expired = false;
    const auto watch_started = std::chrono::steady_clock::now();
    store::KubeRequestOptions opts;
    opts.cancel = &stopping_;
    absl::Status s = client_->Watch(
        ListPath(true, rv, options_.watch_timeout_seconds),
        [&](std::string_view line) {
          rapidjson::Document event;
          event.Parse(line.data(), line.size());
          if (event.HasParseError() || !event.IsObject()) return true;
          auto type = event.FindMember("type");
          auto object = event.FindMember("object");
          if (type == event.MemberEnd() || !type->value.IsString() || object == event.MemberEnd()) {
            return true;
          }
          std::string_view t = type->value.GetString();
          if (t == "ERROR") {
            expired = true;  // 410 Expired (the only error a watch sends here): relist
            return false;
          }
          std::string object_rv = ResourceVersionOf(object->value);
          if (!object_rv.empty()) rv = object_rv;
          if (t == "BOOKMARK") return true;
          if (t == "DELETED") {
            Deliver(AuthenticationConfigMap{});
            return true;
          }
          absl::StatusOr<AuthenticationConfigMap> config = FromObject(object->value);
          if (!config.ok()) {
            // kube keeps the last good content when the new one does not parse.
            base::LogWarning(where, ": ", config.status().message());
            return true;
          }
          Deliver(*config);
          return true;
        },
        opts);
    if (stopping_) break;
    if (expired || absl::IsOutOfRange(s) ||
        (absl::IsFailedPrecondition(s) && absl::StrContains(s.message(), "410"))) {
      rv.clear();
      continue;
    }
    if (!s.ok()) {
      base::LogWarning(where, ": watch failed: ", s.message());
      sleep_backoff();
    } else if (std::chrono::steady_clock::now() - watch_started < std::chrono::seconds(1)) {
      sleep_backoff();  // a server that ends every watch at once must not make us spin
    } else {
      backoff = options_.initial_backoff;
    }
  }
}

}  // namespace poolcoord::apiservice
