// Command-line flags of poolcoord-apiserver, with kube-apiserver's names and
// conventions (spf13/pflag as kube-apiserver uses it; the parser is base/flag_set.h):
// - `--name=value` and `--name value`; booleans as `--name` or `--name=true|false`
//   (a bare boolean never consumes the next argument, as pflag does);
// - string lists are comma-separated; the first occurrence replaces the default,
//   later occurrences append (pflag's StringSlice);
// - durations in Go's syntax ("5m", "30s", "1h30m");
// - `-v N` / `--v=N` sets the log verbosity, `-h` / `--help` asks for usage.
// An unknown flag, a missing value or a bad value is an InvalidArgument error with
// a message for the user; main prints it and exits with status 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace poolcoord::apiservice {

struct ServerOptions {
  // Serving. --secure-port 0 binds an ephemeral port (tests); kube-apiserver's
  // default is 6443/443, ours 8443 so that a standalone start needs no privilege.
  int secure_port = 8443;
  std::string bind_address = "0.0.0.0";
  std::string cert_dir = ".poolcoord/certs";
  std::string tls_cert_file;
  std::string tls_private_key_file;

  // Authentication.
  std::string client_ca_file;
  std::string token_auth_file;
  bool anonymous_auth = false;
  std::string requestheader_client_ca_file;
  std::vector<std::string> requestheader_allowed_names;
  std::vector<std::string> requestheader_username_headers = {"X-Remote-User"};
  std::vector<std::string> requestheader_group_headers = {"X-Remote-Group"};
  std::vector<std::string> requestheader_extra_headers_prefix = {"X-Remote-Extra-"};
  std::string authentication_kubeconfig;

  // Authorization.
  std::string authorization_kubeconfig;
  std::vector<std::string> authorization_always_allow_paths = {"/healthz", "/readyz", "/livez"};

  // The cloud cluster and pool membership.
  std::string kubeconfig;
  std::string pool_membership_file;
  std::string pool_label = "apps.openyurt.io/nodepool";
  std::vector<std::string> lease_proxy_users = {
      "openyurt:yurt-coordinator:node-lease-proxy-client"};
  std::string forwarder_user;

  // Leases and storage.
  int max_lease_duration = 300;  // seconds
  int64_t watch_history_size = 10000;
  int64_t watch_history_bytes = 256 << 20;  // 0: no bound in bytes
  bool watch_cache = true;  // store/cacher.h in front of either store
  absl::Duration delegated_lease_gc_period = absl::Minutes(5);
  int max_requests_inflight = 400;  // 0: no limit, as kube-apiserver
  std::string storage_backend = "memory";  // "memory" | "etcd3"
  std::vector<std::string> etcd_servers;
  std::string etcd_prefix = "/registry/coordination.pool";
  std::string etcd_cafile;
  std::string etcd_certfile;
  std::string etcd_keyfile;

  // Forwarding into the cloud (--kubeconfig or in-cluster config).
  absl::Duration delegation_taint_after = absl::Seconds(40);
  absl::Duration forwarder_resync_period = absl::Seconds(5);
  absl::Duration kubelet_renew_interval = absl::Seconds(10);
  double kube_api_qps = 2500;
  int kube_api_burst = 5000;
  int concurrent_node_lease_syncs = 64;
  int forwarder_shards = 8;
  absl::Duration node_monitor_grace_period = absl::Seconds(40);

  // Verifiable delegation (docs/verifiable-delegation.md).
  // required | optional | off; "" (the default) is required when the server has a
  // cloud cluster (--kubeconfig or in-cluster), optional standalone.
  std::string delegation_proof;
  absl::Duration delegation_challenge_period = absl::Seconds(5);
  absl::Duration delegation_proof_max_age = absl::Seconds(15);

  // Replica leader election (client-go defaults).
  bool leader_elect = false;
  absl::Duration leader_elect_lease_duration = absl::Seconds(15);
  absl::Duration leader_elect_renew_deadline = absl::Seconds(10);
  absl::Duration leader_elect_retry_period = absl::Seconds(2);
  std::string leader_elect_resource_namespace = "kube-system";
  std::string leader_elect_resource_name = "poolcoord";

  // Standalone convenience: the admin kubeconfig written next to the generated PKI.
  std::string write_kubeconfig = ".poolcoord/admin.kubeconfig";

  // One-shot: remove every mark of ours from the cloud and exit (as kube-proxy's
  // --cleanup removes its rules); the chart's post-delete hook runs it.
  bool cleanup = false;
  absl::Duration cleanup_timeout = absl::Minutes(2);

  int verbosity = 0;  // -v
  bool help = false;  // -h / --help was given; the rest may be partial
};

// Parses `args` (argv without the program name). Errors: InvalidArgument with a
// one-line message such as `unknown flag: --foo` or
// `invalid argument "x" for "--secure-port" flag: not an integer`.
absl::StatusOr<ServerOptions> ParseFlags(const std::vector<std::string>& args);

// The usage text: every flag with its type, a one-line description and its default.
std::string FlagUsage(const std::string& program);

// The timeout of each request of the forwarder's client: under half a renew
// interval and at most 5 s, at least 1 s; with --leader-elect also at most
// lease duration - renew deadline, so that a write in flight when a shard is
// lost ends before another replica may take the shard.
absl::Duration ForwarderRequestTimeout(const ServerOptions& options);

}  // namespace poolcoord::apiservice
