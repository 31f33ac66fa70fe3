#include "agent/flags.h"

#include "absl/strings/str_cat.h"
#include "base/flag_set.h"
#include "election/leader_elector.h"

namespace poolcoord::agent {
namespace {

// The flags, in the order --help lists them.
void AddFlags(AgentFlags* o, base::FlagSet& t) {
  auto s = [&](const char* name, std::string* p, const char* help) { t.String(name, p, help); };
  auto b = [&](const char* name, bool* p, const char* help) { t.Bool(name, p, help); };
  auto i = [&](const char* name, int* p, int64_t min, int64_t max, const char* help) {
    t.Int(name, p, min, max, help);
  };
  auto d = [&](const char* name, absl::Duration* p, const char* help) {
    t.Duration(name, p, help, /*positive=*/true);
  };
  s("client-certificate", &o->client_certificate,
    "PEM file of the node's kubelet client certificate (CN system:node:<node>, O system:nodes): "
    "the agent's identity to kube-apiserver and the key that signs its heartbeats.");
  s("client-key", &o->client_key,
    "PEM file of the certificate's private key; empty: --client-certificate (the kubelet keeps "
    "both in one file).");
  s("node-name", &o->node_name,
    "This node's name; empty: from the certificate. Must match the certificate.");
  s("cluster-ca-file", &o->cluster_ca_file,
    "PEM CA bundle that signs node client certificates; peers' heartbeats are checked against it.");
  s("kubeconfig", &o->kubeconfig,
    "kubeconfig naming kube-apiserver and its CA (e.g. the kubelet's); its user is replaced by "
    "the node certificate. Empty: --server.");
  s("server", &o->server, "kube-apiserver's URL (https://host:port), when no --kubeconfig is given.");
  s("certificate-authority", &o->certificate_authority,
    "PEM CA bundle of kube-apiserver's serving certificate with --server; empty: --cluster-ca-file.");
  s("pool-label", &o->pool_label,
    "Node label naming a node's pool (as the server's --pool-label); the pool's members are the "
    "Nodes carrying this node's value.");
  s("peer-cache-dir", &o->peer_cache_dir,
    "Directory (a hostPath) keeping the pool's members across restarts, so a node cut off at "
    "start-up still knows its peers; empty: no cache.");
  s("bind-address", &o->bind_address,
    "The IP address of the heartbeat socket (0.0.0.0 or :: for every address).");
  i("heartbeat-port", &o->heartbeat_port, 1, 65535,
    "The UDP port of the in-pool heartbeats, the same on every node of the pool.");
  d("heartbeat-interval", &o->heartbeat_interval, "How often each agent heartbeats its pool's members.");
  d("heartbeat-margin", &o->heartbeat_margin,
    "A member's latest heartbeat is fresh while younger than --heartbeat-interval plus this.");
  d("request-timeout", &o->request_timeout,
    "Timeout of each request to kube-apiserver; must be below --leader-elect-renew-deadline.");
  d("kubelet-return-timeout", &o->kubelet_return_timeout,
    "After the link comes back, how long the agent keeps asking for delegation while its node's "
    "Lease still carries only the forwarder's renewal (docs/agent.md).");
  d("leader-elect-lease-duration", &o->leader_elect_lease_duration,
    "PoolLease: how long a non-leader waits after the last observed renewal before taking over.");
  d("leader-elect-renew-deadline", &o->leader_elect_renew_deadline,
    "PoolLease: how long the leader retries a renewal before it steps down.");
  d("leader-elect-retry-period", &o->leader_elect_retry_period,
    "PoolLease: how long candidates wait between attempts.");
  d("delegation-proof-max-age", &o->delegation_proof_max_age,
    "The server's --delegation-proof-max-age: a DelegatedLease written with a proof asks for "
    "at most this leaseDurationSeconds (docs/verifiable-delegation.md).");
  s("health-bind-address", &o->health_bind_address,
    "The IP address serving /healthz, /readyz, /livez and /metrics (plain HTTP).");
  i("health-port", &o->health_port, 0, 65535,
    "The port of /healthz, /readyz, /livez and /metrics (0: an ephemeral port).");
  i("v", &o->verbosity, 0, 10, "Log verbosity (klog's -v).");
  b("help", &o->help, "Print this help and exit.");
}

absl::Status Validate(const AgentFlags& o) {
  if (o.client_certificate.empty()) return absl::InvalidArgumentError("--client-certificate is required");
  if (o.cluster_ca_file.empty()) return absl::InvalidArgumentError("--cluster-ca-file is required");
  if (o.kubeconfig.empty() && o.server.empty()) {
    return absl::InvalidArgumentError("either --kubeconfig or --server is required (kube-apiserver)");
  }
  if (o.request_timeout >= o.leader_elect_renew_deadline) {
    return absl::InvalidArgumentError(
        "--request-timeout must be below --leader-elect-renew-deadline, so one hung request cannot "
        "cost the leader its PoolLease");
  }
  return election::LeaderElector::ValidateTimings(
      o.leader_elect_lease_duration, o.leader_elect_renew_deadline, o.leader_elect_retry_period,
      {"--leader-elect-lease-duration", "--leader-elect-renew-deadline",
       "--leader-elect-retry-period"});
}

constexpr base::CommandLine<AgentFlags> kCommandLine{
    AddFlags, Validate,
    "poolcoord-agent runs on every edge node: it heartbeats its pool's members over the LAN\n"
    "with datagrams signed by the node's kubelet key, campaigns for the pool's PoolLease while\n"
    "the cloud sees the node, and as the pool leader writes the DelegatedLease of each member\n"
    "whose fresh heartbeat says it is cut off from the cloud (docs/agent.md).",
    44};

}  // namespace

absl::StatusOr<AgentFlags> ParseAgentFlags(const std::vector<std::string>& args) {
  return kCommandLine.Parse(args);
}

std::string AgentFlagUsage(const std::string& program) { return kCommandLine.Usage(program); }

}  // namespace poolcoord::agent
