// Kubeconfig loading as kubectl does it (client-go's clientcmd): which files,
// how they merge, and how kubectl's global flags override what they say. The
// one-file LoadKubeconfig of cloud/rest_client.h is the simplest case of it.
//
//   KubeconfigOverrides flags;
//   flags.context = "edge";                       // --context edge
//   ASSIGN_OR_RETURN(ClientConfig c,
//                    LoadClientConfig(KubeconfigLoadingRules::FromEnvironment(""), flags));
//   ASSIGN_OR_RETURN(auto client, RestClient::New(c.rest));
//
// Rules (client-go's, kept where they matter to a user):
// - Files: --kubeconfig alone (it must exist); else each file of $KUBECONFIG
//   (split at ':', empty entries and repeats dropped, missing files skipped);
//   else ~/.kube/config when it exists.
// - Merge: the first file that names a cluster, user or context wins that name
//   (later files never change it); the first non-empty current-context wins.
//   Relative paths in a file (certificate-authority, client-certificate,
//   client-key, tokenFile) resolve against that file's directory.
// - Selection: --context, else current-context; --cluster / --user replace the
//   context's. --server, --certificate-authority, --insecure-skip-tls-verify,
//   --token, --client-certificate and --client-key replace the chosen
//   cluster's and user's fields; --certificate-authority or
//   --insecure-skip-tls-verify replace the cluster's whole CA setting (CA file,
//   CA data and skip-verify), as clientcmd does. A server without a scheme gets
//   https:// when any TLS setting is present, else http://.
// - *-data fields are base64; token wins over tokenFile.
//
// Where we differ from kubectl, on purpose: a context, cluster or user that is
// named but missing is an error here (kubectl sometimes falls back to
// http://localhost:8080); exec credential plugins run only when the loading
// rules allow it (one-shot tools; a long-running server would outlive the
// credential), else they are an error, as are auth-provider and basic auth,
// which we do not support.
//
// Errors: NotFound (an explicit file missing), InvalidArgument (malformed YAML,
// bad base64, a named context/cluster/user missing, no server, unsupported
// authentication), and an exec plugin's failure as Unauthenticated. Pure apart
// from reading files (and running exec plugins when allowed); thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cloud/rest_client.h"

namespace poolcoord::cloud {

// Which files to read (clientcmd.ClientConfigLoadingRules).
struct KubeconfigLoadingRules {
  // --kubeconfig: only this file, which must exist.
  std::string explicit_path;
  // Otherwise these, merged in order; missing ones are skipped.
  std::vector<std::string> precedence;
  // Run users' exec credential plugins (client.authentication.k8s.io
  // ExecCredential) for a token or client certificate.
  bool allow_exec_plugins = false;

  // kubectl's rules: `explicit_path` (--kubeconfig) when not empty, else
  // $KUBECONFIG's files, else $HOME/.kube/config.
  static KubeconfigLoadingRules FromEnvironment(const std::string& explicit_path);
};

// kubectl's global flags that override the kubeconfig (clientcmd.ConfigOverrides);
// empty / unset fields override nothing.
struct KubeconfigOverrides {
  std::string context;                  // --context
  std::string cluster;                  // --cluster
  std::string user;                     // --user
  std::string server;                   // --server (-s)
  std::string certificate_authority;    // --certificate-authority (a path)
  std::optional<bool> insecure_skip_tls_verify;  // --insecure-skip-tls-verify
  std::string token;                    // --token
  std::string client_certificate;       // --client-certificate (a path)
  std::string client_key;               // --client-key (a path)
  // --request-timeout; 0 = no timeout. Unset keeps RestConfig's default.
  std::optional<std::chrono::milliseconds> timeout;
};

// The outcome: the connection, and what was chosen (for messages).
struct ClientConfig {
  RestConfig rest;
  std::string context;  // "" when none was chosen (--server alone)
  std::string cluster;
  std::string user;
  std::vector<std::string> files;  // the kubeconfig files that were read, in order
};

absl::StatusOr<ClientConfig> LoadClientConfig(const KubeconfigLoadingRules& rules,
                                              const KubeconfigOverrides& overrides);

// True when `rules` find no kubeconfig file at all (kubectl then tries the
// in-cluster config).
bool NoKubeconfigFiles(const KubeconfigLoadingRules& rules);

// kubectl's --request-timeout: a whole number of seconds ("5"), or a Go duration
// ("1s", "2m", "1h30m", "500ms"); "0" means none. InvalidArgument with kubectl's
// message otherwise (negative values too).
absl::StatusOr<std::chrono::milliseconds> ParseRequestTimeout(std::string_view text);

}  // namespace poolcoord::cloud
