// The command line of kubectl-pool. kubectl hands a plugin every argument after
// its name unchanged, so the plugin reads kubectl's own global flags the way
// kubectl does (spf13/pflag): "--flag=value", "--flag value", "-f value",
// "-fvalue", "-f=value"; a bool flag alone means true ("--flag=false" turns it
// off); "--" ends the flags; flags and arguments mix in any order.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cloud/kubeconfig.h"

namespace poolcoord::kubectl_pool {

enum class Command { kList, kDescribe };
enum class Output { kTable, kJson, kYaml };

struct Options {
  bool help = false;
  Command command = Command::kList;
  std::string pool;  // describe's argument
  // -o/--output and --request-timeout as given; their values are judged by
  // ParseOutput / cloud::ParseRequestTimeout, whose errors kubectl prints as
  // "error: ..." rather than as a usage error.
  std::string output;
  std::string request_timeout;
  std::string pool_label = "apps.openyurt.io/nodepool";  // --pool-label
  std::string kubeconfig;  // --kubeconfig
  std::string namespace_;  // -n/--namespace: accepted, ignored (our kinds are cluster-scoped)
  cloud::KubeconfigOverrides overrides;
};

// A command-line mistake: printed as kubectl prints cobra's ("Error: <message>"
// then "See 'kubectl pool --help' for usage."), exit status 1. The status is
// InvalidArgument; its message is the part after "Error: ".
absl::StatusOr<Options> ParseArgs(const std::vector<std::string>& args);

// "" (the table), "json" or "yaml"; else InvalidArgument with kubectl's message.
absl::StatusOr<Output> ParseOutput(const std::string& output);

// A pool is named as PoolLeases and OpenYurt NodePools are: an RFC 1123
// subdomain (base::IsDNS1123Subdomain). InvalidArgument with apimachinery's
// messages otherwise.
absl::Status ValidatePoolName(const std::string& name);

// The --help text (stdout, exit status 0).
std::string Usage();

}  // namespace poolcoord::kubectl_pool
