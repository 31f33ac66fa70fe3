// Request authentication, as k8s.io/apiserver's delegating authenticator
// composes it (union of request-header, x509 and token authenticators, then the
// group system:authenticated; anonymous when no credentials were presented).
//
// Order and outcome, per request:
// 1. Front proxy (requestheader): only when a requestheader CA is configured and
//    the client certificate verifies against it with extendedKeyUsage clientAuth
//    (intermediates from the peer chain) and, when allowed names are set, its CN
//    is one of them. User: the first non-empty username header; groups: every
//    line of every group header (never split on commas); extra: each
//    <prefix><key> header, key lower-cased then percent-decoded. A front-proxy
//    certificate without a username header authenticates nobody here. Without a
//    valid front-proxy certificate these headers are ignored.
// 2. x509: the client certificate verified against the client CA (clientAuth):
//    user = subject CN, groups = each subject O. A certificate that verifies
//    against neither CA is an error (401), never anonymous.
// 3. Bearer token from the static token file; a token the file does not know
//    goes to TokenReview when a reviewer is configured (delegated
//    authentication), else it is an error (401). A review that says
//    "not authenticated" or that fails (cloud unreachable) is an error (401).
// The first authenticator that yields a user wins; if none does but one failed,
// the result is Unauthenticated (store::UnauthorizedError, 401 "Unauthorized").
// With no credentials at all the result is the anonymous user
// (system:anonymous, group system:unauthenticated); the caller decides where it
// may go (see AnonymousAllowed).
//
// Delegated configuration (ApplyConfigMap, from the ConfigMap
// kube-system/extension-apiserver-authentication, see authentication_config.h):
// - client-ca-file: its CAs are added to the client CA pool of
//   --client-ca-file (or of the generated CA);
// - requestheader-*: a second front-proxy source with its own CA, allowed names
//   and header names, tried after the one from the --requestheader-* flags (the
//   flags win: a certificate that verifies against the flag CA is judged by the
//   flag settings). Without --requestheader-client-ca-file the ConfigMap's is
//   the only one, as in any aggregated API server.
//
// The bundles of --client-ca-file and --requestheader-client-ca-file can be
// replaced while serving (SetFileCaBundles, fed by DynamicCertificates when the
// files change), as k8s.io/apiserver's DynamicFileCAContent does.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/x509.h>

#include "absl/status/statusor.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "apiservice/authentication_config.h"
#include "apiservice/delegating_authn.h"
#include "apiservice/peer_certificates.h"
#include "base/user_info.h"
#include "handlers/http_types.h"

namespace poolcoord::apiservice {

inline constexpr char kAnonymousUser[] = "system:anonymous";
inline constexpr char kUnauthenticatedGroup[] = "system:unauthenticated";
inline constexpr char kAuthenticatedGroup[] = "system:authenticated";

struct AuthenticatorOptions {
  std::string client_ca_file;   // "": no x509 authentication
  std::string token_auth_file;  // "": no token authentication
  std::string requestheader_client_ca_file;  // "": no front-proxy authentication
  std::vector<std::string> requestheader_allowed_names;
  std::vector<std::string> requestheader_username_headers = {"X-Remote-User"};
  std::vector<std::string> requestheader_group_headers = {"X-Remote-Group"};
  std::vector<std::string> requestheader_extra_headers_prefix = {"X-Remote-Extra-"};
  // Bearer tokens the token file does not know; nullptr: none. Not owned; must
  // outlive the Authenticator.
  TokenReviewer* token_reviewer = nullptr;
};

// One line of a token file.
struct TokenEntry {
  std::string token;
  base::UserInfo user;  // username, uid, groups as listed
};

// Parses kube-apiserver's --token-auth-file CSV: token,user,uid[,"group1,group2"];
// extra columns are ignored, blank lines skipped, quoted fields may hold commas
// and doubled quotes. InvalidArgument naming the line when a record has fewer
// than three columns or an empty user.
absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(const std::string& content);

class Authenticator {
 public:
  // Loads the CA bundles and the token file. InvalidArgument/NotFound naming the
  // file when one cannot be read or holds no certificate.
  static absl::StatusOr<std::unique_ptr<Authenticator>> Create(const AuthenticatorOptions& options);
  ~Authenticator();
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;

  // `headers`: lower-case names, in order (handlers::HeaderList). `peer`: the
  // client's chain, nullptr when it sent none. Thread-safe; blocks on TokenReview
  // for an uncached token the file does not know.
  absl::StatusOr<base::UserInfo> Authenticate(const handlers::HeaderList& headers,
                                                  const PeerCertificates* peer) const;

  // Replaces the delegated part of the configuration with `config` (exists=false
  // removes it). Requests in flight finish with the configuration they started
  // with. InvalidArgument when a CA in it holds no certificate; the previous
  // configuration then stays. Thread-safe.
  absl::Status ApplyConfigMap(const AuthenticationConfigMap& config);

  // Replaces the CA bundles (PEM) of --client-ca-file and
  // --requestheader-client-ca-file, which changed on disk ("" = none). Same
  // rules as ApplyConfigMap: in-flight requests keep the old trust, a bundle
  // without a certificate is InvalidArgument and changes nothing. Thread-safe.
  absl::Status SetFileCaBundles(const std::string& client_ca_pem,
                                const std::string& requestheader_ca_pem);

  // Every CA certificate a client certificate may chain to now (the files' and
  // the ConfigMap's, client and front-proxy), PEM: the subjects the TLS
  // CertificateRequest names, as kube's serving controller names the union of
  // its client CA providers. Thread-safe.
  std::string AcceptedCaPem() const;

  // The CA bundle client certificates of users are verified against (the
  // files' and the ConfigMap's client-ca-file; not the front proxy's), PEM: what
  // node identities chain to, for the delegation proof check. "" when none.
  // Thread-safe.
  std::string ClientCaPem() const;

  // Called after each change of the trusted CAs, under the lock that orders
  // changes: it must not call ApplyConfigMap or SetFileCaBundles. Set once,
  // before changes can happen concurrently.
  void SetTrustChangedListener(std::function<void()> listener);

 private:
  struct RequestHeaderSource;
  struct State;
  Authenticator() = default;
  bool Verify(X509_STORE* store, const PeerCertificates& peer) const;
  std::shared_ptr<const State> Snapshot() const;
  // Builds and publishes the State of these inputs.
  absl::Status Rebuild(const std::string& client_ca_pem, const std::string& requestheader_ca_pem,
                       const AuthenticationConfigMap& config)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(update_mu_);

  AuthenticatorOptions options_;
  std::map<std::string, base::UserInfo, std::less<>> tokens_;
  // What the State is built from; changes one at a time.
  absl::Mutex update_mu_;
  std::string client_ca_pem_ ABSL_GUARDED_BY(update_mu_);         // --client-ca-file's
  std::string requestheader_ca_pem_ ABSL_GUARDED_BY(update_mu_);  // --requestheader-client-ca-file's
  AuthenticationConfigMap config_ ABSL_GUARDED_BY(update_mu_);
  std::function<void()> trust_changed_ ABSL_GUARDED_BY(update_mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const State> state_ ABSL_GUARDED_BY(mu_);
  // Replaced states stay alive until destruction: PeerCertificates memoizes
  // verifications by trust-store address, which must never be reused for a
  // different pool. The CAs change rarely (rotation).
  std::vector<std::shared_ptr<const State>> retired_ ABSL_GUARDED_BY(mu_);
};

// The anonymous user.
base::UserInfo AnonymousUser();
bool IsAnonymous(const base::UserInfo& user);

// Where a request without credentials may go even with --anonymous-auth=false:
// /healthz, /livez, /readyz and their subpaths, /version, /metrics, and POST of
// the webhook path (kube-apiserver and kubelet probes call these without
// credentials).
bool AnonymousAllowed(std::string_view method, std::string_view path);

inline constexpr char kWebhookPath[] = "/validate-delegated-heartbeat";

}  // namespace poolcoord::apiservice
