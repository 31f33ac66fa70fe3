// kubectl-pool's whole run, from arguments to exit status, with the two things
// that touch the outside world (finding the kubeconfig, connecting) replaceable
// so that tests drive it with fake clients.
//
// Exit status: 0 on success and for --help; 1 for every error, printed on
// stderr as kubectl prints it:
//   usage mistakes     "Error: unknown flag: --x" + "See 'kubectl pool --help' for usage."
//   a Status answer    "Error from server (Forbidden): <its message>"
//                      (401: "error: You must be logged in to the server (<message>)")
//   no connection      "The connection to the server HOST was refused - did you
//                      specify the right host or port?" / "Unable to connect to the
//                      server: <why>"
//   anything else      "error: <message>"
// Warnings (no Date header, Nodes not listable) go to stderr as "Warning: ...".
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cloud/kubeconfig.h"
#include "kubectl-pool/options.h"
#include "kubectl-pool/pools.h"

namespace poolcoord::kubectl_pool {

// Clients for one loaded config, and whatever must live as long as they do.
struct Connection {
  PoolClients clients;
  std::shared_ptr<void> keep_alive;
};

struct Environment {
  // The kubeconfig as kubectl would load it for these options. Default:
  // cloud::LoadClientConfig over $KUBECONFIG / ~/.kube/config (exec plugins
  // allowed), falling back to the in-cluster config when there is no file.
  std::function<absl::StatusOr<cloud::ClientConfig>(const Options&)> load_config;
  // Default: a RestClient and Clientset, the server's clock read from each
  // answer's Date header.
  std::function<absl::StatusOr<Connection>(const cloud::ClientConfig&)> connect;
};

// The defaults described above.
Environment RealEnvironment();

// The real load_config with explicit loading rules (for tests and the default).
absl::StatusOr<cloud::ClientConfig> LoadConfig(const Options& options,
                                               cloud::KubeconfigLoadingRules rules);

// How kubectl words `status` (a Kubernetes error from cloud/errors.h, a
// transport failure, or anything else) for a server at `server` (a URL).
std::string ErrorMessage(const absl::Status& status, const std::string& server);

// `args` excludes the program name. Unset members of `env` take the defaults.
int Run(const std::vector<std::string>& args, Environment env, std::ostream& out,
        std::ostream& err);

}  // namespace poolcoord::kubectl_pool
