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
// 3. Bearer token from the static token file: an unknown token is an error (401).
// The first authenticator that yields a user wins; if none does but one failed,
// the result is Unauthenticated (store::UnauthorizedError, 401 "Unauthorized").
// With no credentials at all the result is the anonymous user
// (system:anonymous, group system:unauthenticated); the caller decides where it
// may go (see AnonymousAllowed).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/x509.h>

#include "absl/status/statusor.h"
#include "apiservice/peer_certificates.h"
#include "election/user_info.h"
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
};

// One line of a token file.
struct TokenEntry {
  std::string token;
  election::UserInfo user;  // username, uid, groups as listed
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
  // client's chain, nullptr when it sent none. Thread-safe.
  absl::StatusOr<election::UserInfo> Authenticate(const handlers::HeaderList& headers,
                                                  const PeerCertificates* peer) const;

 private:
  Authenticator() = default;
  bool Verify(X509_STORE* store, const PeerCertificates& peer) const;

  AuthenticatorOptions options_;
  X509_STORE* client_ca_ = nullptr;
  X509_STORE* requestheader_ca_ = nullptr;
  std::vector<std::string> username_headers_;  // lower-cased
  std::vector<std::string> group_headers_;     // lower-cased
  std::vector<std::string> extra_prefixes_;    // lower-cased
  std::map<std::string, election::UserInfo, std::less<>> tokens_;
};

// The anonymous user.
election::UserInfo AnonymousUser();
bool IsAnonymous(const election::UserInfo& user);

// Where a request without credentials may go even with --anonymous-auth=false:
// /healthz, /livez, /readyz and their subpaths, /version, /metrics, and POST of
// the webhook path (kube-apiserver and kubelet probes call these without
// credentials; DESIGN.md).
bool AnonymousAllowed(std::string_view method, std::string_view path);

inline constexpr char kWebhookPath[] = "/validate-delegated-heartbeat";

}  // namespace poolcoord::apiservice
