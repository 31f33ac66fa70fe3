// Delegated authentication and authorization to the cloud's kube-apiserver, as
// k8s.io/apiserver's DelegatingAuthenticationOptions and
// DelegatingAuthorizationOptions set them up for an aggregated API server:
//
// - Authentication client: --authentication-kubeconfig, else the in-cluster
//   config when running in a pod, else none (every lookup skipped, as
//   --authentication-skip-lookup would). With it: the ConfigMap
//   kube-system/extension-apiserver-authentication is read at start and then
//   followed (authentication_config.h), and bearer tokens the token file does not
//   know go to TokenReview, answers cached 10 s (delegating_authn.h).
// - Authorization client: --authorization-kubeconfig, else in-cluster, else none
//   (then only the built-in rules decide). With it: what the built-in rules leave
//   open goes to SubjectAccessReview, allowed and denied answers cached 10 s each
//   (delegating_authz.h).
//
// Both clients time out after 10 s per request, k8s.io/apiserver's default for
// its webhook clients.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "apiservice/authentication_config.h"
#include "apiservice/authenticator.h"
#include "apiservice/delegating_authn.h"
#include "apiservice/delegating_authz.h"
#include "base/clock.h"
#include "cloud/clientset.h"
#include "cloud/rest_client.h"

namespace poolcoord::apiservice {

struct DelegationOptions {
  std::string authentication_kubeconfig;  // "": in-cluster, else none
  std::string authorization_kubeconfig;   // "": in-cluster, else none
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::microseconds token_cache_ttl = std::chrono::seconds(10);
  std::chrono::microseconds allow_cache_ttl = std::chrono::seconds(10);
  std::chrono::microseconds deny_cache_ttl = std::chrono::seconds(10);
  const base::Clock* clock = base::RealClock::Get();  // not owned
  AuthenticationConfigMapWatcher::Options watch;
};

class Delegation {
 public:
  // Builds the clients and reviewers; starts nothing. Errors name the flag whose
  // kubeconfig cannot be loaded.
  static absl::StatusOr<std::unique_ptr<Delegation>> Create(const DelegationOptions& options);
  ~Delegation();
  Delegation(const Delegation&) = delete;
  Delegation& operator=(const Delegation&) = delete;

  // nullptr when there is no authentication / authorization client. Owned here.
  TokenReviewer* token_reviewer() const { return token_reviewer_.get(); }
  AccessReviewer* access_reviewer() const { return access_reviewer_.get(); }
  // The server the clients talk to, for the log ("" when none).
  std::string authentication_server() const;
  std::string authorization_server() const;

  // With an authentication client: reads the ConfigMap once and applies it to
  // `authenticator` (not owned; must outlive Stop), then follows it on a thread.
  // An error reading or applying it fails the start, as kube's default
  // --authentication-tolerate-lookup-failure=false does; a missing ConfigMap is
  // not an error (nothing to add; it is picked up when created). Without a
  // client: OK, nothing happens.
  absl::Status Start(Authenticator* authenticator);
  // Stops following; idempotent. The reviewers keep working.
  void Stop();

 private:
  Delegation() = default;
  std::unique_ptr<cloud::RestClient> authn_client_;
  std::unique_ptr<cloud::RestClient> authz_client_;
  std::unique_ptr<cloud::Clientset> authn_;
  std::unique_ptr<cloud::Clientset> authz_;
  std::unique_ptr<TokenReviewer> token_reviewer_;
  std::unique_ptr<AccessReviewer> access_reviewer_;
  AuthenticationConfigMapWatcher::Options watch_options_;
  std::unique_ptr<AuthenticationConfigMapWatcher> watcher_;
};

}  // namespace poolcoord::apiservice
