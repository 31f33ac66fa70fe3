// Command-line flags of poolcoord-agent, parsed as the server's (base/flag_set.h,
// spf13/pflag as Kubernetes components use it): `--name=value` and
// `--name value`; booleans as `--name` or `--name=true|false`; durations in Go's
// syntax ("5s", "1m30s"); `-v N` / `--v=N` sets the log verbosity, `-h` /
// `--help` asks for usage. An unknown flag, a missing value or a bad value is an
// InvalidArgument error with a message for the user; main prints it and exits 2.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace poolcoord::agent {

struct AgentFlags {
  // Identity: the node's kubelet client certificate and key (one file holds
  // both by default, as the kubelet writes it).
  std::string client_certificate = "/var/lib/kubelet/pki/kubelet-client-current.pem";
  std::string client_key;  // empty: --client-certificate
  std::string node_name;   // empty: the certificate's system:node:<name>
  // The CA that signs node client certificates (the peers' heartbeats are checked
  // against it).
  std::string cluster_ca_file = "/etc/kubernetes/pki/ca.crt";
  // kube-apiserver: either a kubeconfig (its cluster's server and CA; the user
  // part is replaced by the node certificate), or --server with
  // --certificate-authority (default: --cluster-ca-file).
  std::string kubeconfig;
  std::string server;
  std::string certificate_authority;

  std::string pool_label = "apps.openyurt.io/nodepool";
  std::string peer_cache_dir = "/var/lib/poolcoord-agent";

  // The pool LAN.
  std::string bind_address = "0.0.0.0";
  int heartbeat_port = 10270;
  absl::Duration heartbeat_interval = absl::Seconds(5);
  absl::Duration heartbeat_margin = absl::Seconds(2);

  // The cloud.
  absl::Duration request_timeout = absl::Seconds(3);
  absl::Duration kubelet_return_timeout = absl::Seconds(40);
  absl::Duration leader_elect_lease_duration = absl::Seconds(15);
  absl::Duration leader_elect_renew_deadline = absl::Seconds(10);
  absl::Duration leader_elect_retry_period = absl::Seconds(2);
  // The server's --delegation-proof-max-age: the longest leaseDurationSeconds a
  // proven DelegatedLease write may ask for.
  absl::Duration delegation_proof_max_age = absl::Seconds(15);

  // /healthz, /readyz, /livez, /metrics (plain HTTP).
  std::string health_bind_address = "0.0.0.0";
  int health_port = 10271;

  int verbosity = 0;
  bool help = false;
};

absl::StatusOr<AgentFlags> ParseAgentFlags(const std::vector<std::string>& args);
std::string AgentFlagUsage(const std::string& program);

}  // namespace poolcoord::agent
