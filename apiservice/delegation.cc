#include "apiservice/delegation.h"

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace poolcoord::apiservice {
namespace {

// The explicit kubeconfig, else the in-cluster config, else none (nullptr).
absl::StatusOr<std::unique_ptr<cloud::RestClient>> ClientFor(const std::string& kubeconfig,
                                                             const char* flag,
                                                             const DelegationOptions& options) {
  absl::StatusOr<cloud::RestConfig> config =
      kubeconfig.empty() ? cloud::InClusterConfig(options.service_account_dir)
                         : cloud::LoadKubeconfig(kubeconfig);
  if (!config.ok()) {
    if (kubeconfig.empty()) return std::unique_ptr<cloud::RestClient>();  // not in a pod
    return absl::Status(config.status().code(),
                        absl::StrCat(flag, ": ", config.status().message()));
  }
  config->timeout = options.request_timeout;
  absl::StatusOr<std::unique_ptr<cloud::RestClient>> client = cloud::RestClient::New(*config);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat(flag, ": ", client.status().message()));
  }
  return client;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Delegation>> Delegation::Create(const DelegationOptions& options) {
  std::unique_ptr<Delegation> d(new Delegation());
  d->watch_options_ = options.watch;
  absl::StatusOr<std::unique_ptr<cloud::RestClient>> authn =
      ClientFor(options.authentication_kubeconfig, "--authentication-kubeconfig", options);
  if (!authn.ok()) return authn.status();
  d->authn_client_ = *std::move(authn);
  absl::StatusOr<std::unique_ptr<cloud::RestClient>> authz =
      ClientFor(options.authorization_kubeconfig, "--authorization-kubeconfig", options);
  if (!authz.ok()) return authz.status();
  d->authz_client_ = *std::move(authz);

  if (d->authn_client_) {
    d->authn_ = std::make_unique<cloud::Clientset>(d->authn_client_.get());
    WebhookTokenReviewerOptions o;
    o.cache_ttl = options.token_cache_ttl;
    o.clock = options.clock;
    d->token_reviewer_ =
        std::make_unique<WebhookTokenReviewer>(d->authn_->TokenReviews(), o);
  }
  if (d->authz_client_) {
    d->authz_ = std::make_unique<cloud::Clientset>(d->authz_client_.get());
    WebhookAccessReviewerOptions o;
    o.allow_cache_ttl = options.allow_cache_ttl;
    o.deny_cache_ttl = options.deny_cache_ttl;
    o.clock = options.clock;
    d->access_reviewer_ =
        std::make_unique<WebhookAccessReviewer>(d->authz_->SubjectAccessReviews(), o);
  }
  return d;
}

Delegation::~Delegation() { Stop(); }

std::string Delegation::authentication_server() const {
  return authn_client_ ? authn_client_->config().server : "";
}

std::string Delegation::authorization_server() const {
  return authz_client_ ? authz_client_->config().server : "";
}

absl::Status Delegation::Start(Authenticator* authenticator) {
  if (!authn_client_ || watcher_) return absl::OkStatus();
  const std::string where =
      absl::StrCat("configmap ", kAuthenticationConfigMapNamespace, "/", kAuthenticationConfigMapName);
  watcher_ = std::make_unique<AuthenticationConfigMapWatcher>(
      authn_->ConfigMaps(kAuthenticationConfigMapNamespace),
      [authenticator, where](const AuthenticationConfigMap& config) {
        absl::Status st = authenticator->ApplyConfigMap(config);
        if (!st.ok()) {
          base::LogWarning(where, " changed but is not usable, keeping the previous one: ", st.message());
        } else {
          base::LogInfo(where, config.exists ? " changed: authentication configuration reloaded"
                                       : " deleted: its CAs are no longer trusted");
        }
      },
      watch_options_);
  std::string list_rv;
  absl::StatusOr<AuthenticationConfigMap> initial = watcher_->List(&list_rv);
  if (!initial.ok()) {
    watcher_.reset();
    return absl::Status(initial.status().code(),
                        absl::StrCat("unable to load ", where, " (--authentication-kubeconfig): ",
                                     initial.status().message()));
  }
  if (absl::Status st = authenticator->ApplyConfigMap(*initial); !st.ok()) {
    watcher_.reset();
    return st;
  }
  if (!initial->exists) {
    base::LogWarning(where, " not found: no client or front-proxy CA from the cluster yet");
  } else {
    base::LogInfo("authentication configuration from ", where, " (client CA: ",
            initial->client_ca_pem.empty() ? "no" : "yes", ", front-proxy CA: ",
            initial->requestheader_client_ca_pem.empty() ? "no" : "yes", ")");
  }
  watcher_->Start(*initial, list_rv);
  return absl::OkStatus();
}

void Delegation::Stop() {
  if (watcher_) watcher_->Stop();
}

}  // namespace poolcoord::apiservice
