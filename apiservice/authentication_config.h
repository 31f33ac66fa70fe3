// The ConfigMap kube-system/extension-apiserver-authentication, which
// kube-apiserver writes from its own flags so that aggregated API servers can
// trust the same client CA and front proxy (k8s.io/apiserver
// pkg/authentication/request/headerrequest/requestheader_controller.go and
// dynamiccertificates' ConfigMap CA controller read it the same way).
//
// Keys: client-ca-file and requestheader-client-ca-file hold PEM;
// requestheader-allowed-names, requestheader-username-headers,
// requestheader-group-headers, requestheader-extra-headers-prefix and
// requestheader-uid-headers each hold a JSON array of strings as a string
// (`["X-Remote-User"]`); a missing or empty key is an empty list.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cloud/clientset.h"
#include "cloud/reflector.h"

namespace poolcoord::apiservice {

inline constexpr char kAuthenticationConfigMapNamespace[] = "kube-system";
inline constexpr char kAuthenticationConfigMapName[] = "extension-apiserver-authentication";

struct AuthenticationConfigMap {
  bool exists = false;  // false: no such ConfigMap (everything below empty)
  std::string client_ca_pem;
  std::string requestheader_client_ca_pem;
  std::vector<std::string> requestheader_allowed_names;
  std::vector<std::string> requestheader_username_headers;
  std::vector<std::string> requestheader_group_headers;
  std::vector<std::string> requestheader_extra_headers_prefix;
  std::vector<std::string> requestheader_uid_headers;  // read, not used (1.32 alpha gate)
  std::string resource_version;                        // of the object; not compared

  // Same content (resource_version ignored).
  bool SameContent(const AuthenticationConfigMap& other) const;
};

// A JSON array of strings given as text; "" is an empty list. InvalidArgument
// when the text is not such an array.
absl::StatusOr<std::vector<std::string>> ParseJsonStringList(std::string_view text);

// Reads a ConfigMap object (JSON, as the API returns it). InvalidArgument naming
// the key when a list key is not a JSON array of strings, or when the object is
// not JSON.
absl::StatusOr<AuthenticationConfigMap> ParseAuthenticationConfigMap(std::string_view json);

// Follows the ConfigMap with a reflector (cloud/reflector.h): LIST with
// fieldSelector=metadata.name=extension-apiserver-authentication (the
// extension-apiserver-authentication-reader Role allows get, list and watch of
// that one name), then WATCH from the list's resourceVersion, resumed, retried
// with backoff and relisted on 410 Expired as client-go does. `on_change` runs on the watcher's thread each time the
// content differs from what it last delivered (a deleted ConfigMap delivers
// exists=false).
class AuthenticationConfigMapWatcher {
 public:
  struct Options {
    std::chrono::milliseconds initial_backoff{500};
    std::chrono::milliseconds max_backoff{30'000};
    int watch_timeout_seconds = 300;  // asked of the server per watch request
  };
  using Callback = std::function<void(const AuthenticationConfigMap&)>;

  // `client` (ConfigMaps of kube-system) is not owned and must outlive this object.
  AuthenticationConfigMapWatcher(cloud::ConfigMapInterface* client, Callback on_change,
                                 Options options);
  AuthenticationConfigMapWatcher(cloud::ConfigMapInterface* client, Callback on_change)
      : AuthenticationConfigMapWatcher(client, std::move(on_change), Options()) {}
  ~AuthenticationConfigMapWatcher();
  AuthenticationConfigMapWatcher(const AuthenticationConfigMapWatcher&) = delete;
  AuthenticationConfigMapWatcher& operator=(const AuthenticationConfigMapWatcher&) = delete;

  // One LIST: the ConfigMap (exists=false when absent) and the list's
  // resourceVersion in *list_resource_version. Errors: the transport's, or the
  // answer's code (PermissionDenied when RBAC lacks the reader Role, ...).
  absl::StatusOr<AuthenticationConfigMap> List(std::string* list_resource_version);

  // Starts following on a thread of its own, from `list_resource_version` (a
  // previous List's; "" lists first). `initial` is what the caller already
  // applied, so an unchanged ConfigMap does not call back.
  void Start(const AuthenticationConfigMap& initial, std::string list_resource_version);
  // Stops and joins; idempotent.
  void Stop();

 private:
  void Deliver(const AuthenticationConfigMap& config);
  void OnList(const std::vector<cloud::ConfigMap>& items);
  void OnEvent(const cloud::WatchEvent<cloud::ConfigMap>& event);

  cloud::ConfigMapInterface* client_;
  Callback on_change_;
  Options options_;
  AuthenticationConfigMap last_;  // owned by the reflector's thread once started
  cloud::Reflector<cloud::ConfigMapInterface, cloud::ConfigMapList> reflector_;
};

}  // namespace poolcoord::apiservice
