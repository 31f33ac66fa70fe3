#include "apiservice/flags.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/flag_set.h"
#include "election/leader_elector.h"

namespace poolcoord::apiservice {
namespace {

// The flags, in the order --help lists them.
void AddFlags(ServerOptions* o, base::FlagSet& t) {
  auto s = [&](const char* name, std::string* p, const char* help) { t.String(name, p, help); };
  auto b = [&](const char* name, bool* p, const char* help) { t.Bool(name, p, help); };
  auto i = [&](const char* name, int* p, int64_t min, int64_t max, const char* help) {
    t.Int(name, p, min, max, help);
  };
  auto i64 = [&](const char* name, int64_t* p, int64_t min, const char* help) {
    t.Int64(name, p, min, help);
  };
  auto d = [&](const char* name, absl::Duration* p, const char* help) { t.Duration(name, p, help); };
  auto l = [&](const char* name, std::vector<std::string>* p, const char* help) {
    t.StringList(name, p, help);
  };
  i("secure-port", &o->secure_port, 0, 65535,
    "The port on which to serve HTTPS (0: an ephemeral port).");
  s("bind-address", &o->bind_address, "The IP address on which to listen for --secure-port.");
  s("cert-dir", &o->cert_dir,
    "Where the generated CA, serving and admin certificates live when --tls-cert-file is not "
    "given.");
  s("tls-cert-file", &o->tls_cert_file,
    "PEM serving certificate (with intermediates); none: one is generated in --cert-dir.");
  s("tls-private-key-file", &o->tls_private_key_file, "PEM private key of --tls-cert-file.");
  s("client-ca-file", &o->client_ca_file,
    "PEM CA bundle for client certificates (CN is the user, each O a group); none: the "
    "generated CA, when certificates are generated.");
  s("token-auth-file", &o->token_auth_file,
    "Static bearer tokens, kube-apiserver's CSV: token,user,uid,\"group1,group2\".");
  b("anonymous-auth", &o->anonymous_auth,
    "Let requests without credentials through as system:anonymous (then authorized).");
  s("requestheader-client-ca-file", &o->requestheader_client_ca_file,
    "PEM CA bundle of the front proxy (kube-apiserver's aggregator) whose X-Remote-* headers "
    "are trusted.");
  l("requestheader-allowed-names", &o->requestheader_allowed_names,
    "Front-proxy certificate common names allowed; empty: any name the CA signed.");
  l("requestheader-username-headers", &o->requestheader_username_headers,
    "Headers carrying the user name, first non-empty wins.");
  l("requestheader-group-headers", &o->requestheader_group_headers,
    "Headers carrying groups, one line per group.");
  l("requestheader-extra-headers-prefix", &o->requestheader_extra_headers_prefix,
    "Header prefixes carrying user extra fields.");
  s("authentication-kubeconfig", &o->authentication_kubeconfig,
    "kubeconfig of the cluster whose kube-system/extension-apiserver-authentication ConfigMap "
    "(client and front-proxy CAs, requestheader settings) is followed and whose TokenReview "
    "checks bearer tokens the token file does not know; none: the in-cluster configuration in "
    "a pod, else neither.");
  s("authorization-kubeconfig", &o->authorization_kubeconfig,
    "kubeconfig of the cluster whose SubjectAccessReview decides what the built-in rules leave "
    "open; none: the in-cluster configuration in a pod, else only the built-in rules.");
  l("authorization-always-allow-paths", &o->authorization_always_allow_paths,
    "Paths every requester may reach; a trailing * matches a prefix.");
  s("kubeconfig", &o->kubeconfig,
    "kubeconfig of the cloud cluster (Nodes, node Leases); none: standalone.");
  s("pool-membership-file", &o->pool_membership_file,
    "YAML or JSON {pools: {<pool>: [<node>, ...]}}, reread when it changes.");
  s("pool-label", &o->pool_label, "Node label naming a node's pool.");
  l("lease-proxy-users", &o->lease_proxy_users,
    "Users that proxy node lease writes for pools poolcoord does not govern.");
  s("forwarder-user", &o->forwarder_user,
    "The user of poolcoord's forwarder in the cloud cluster (no default).");
  i("max-lease-duration", &o->max_lease_duration, 1, std::numeric_limits<int32_t>::max(),
    "Largest leaseDurationSeconds accepted, in seconds.");
  i64("watch-history-size", &o->watch_history_size, 1,
      "Events kept for resuming watches from a resourceVersion (per resource in the watch "
      "cache).");
  i64("watch-history-bytes", &o->watch_history_bytes, 0,
      "And at most this many bytes of objects in those events (0: no bound), so that large "
      "objects cannot make the history hold gigabytes; older events then go sooner (410 "
      "Expired for a watch resumed before them, as after --watch-history-size).");
  b("watch-cache", &o->watch_cache,
    "Serve watches, and lists that allow it, from an in-memory watch cache of each resource "
    "(kube-apiserver's --watch-cache): one storage watch per resource, whatever the number of "
    "watchers.");
  d("delegated-lease-gc-period", &o->delegated_lease_gc_period,
    "How often expired DelegatedLeases are swept.");
  i("max-requests-inflight", &o->max_requests_inflight, 0, std::numeric_limits<int32_t>::max(),
    "Requests served at once before 429 (watches and system:masters not counted; 0: no "
    "limit).");
  s("storage-backend", &o->storage_backend, "memory or etcd3.");
  l("etcd-servers", &o->etcd_servers, "etcd endpoints for --storage-backend=etcd3.");
  s("etcd-prefix", &o->etcd_prefix, "Key prefix in etcd (kube-apiserver's is /registry).");
  s("etcd-cafile", &o->etcd_cafile, "CA bundle that verifies etcd's serving certificate.");
  s("etcd-certfile", &o->etcd_certfile, "Client certificate for etcd.");
  s("etcd-keyfile", &o->etcd_keyfile, "Client key for etcd.");
  d("delegation-taint-after", &o->delegation_taint_after,
    "Delegation time after which a node gets node.openyurt.io/unschedulable=true:NoSchedule "
    "(OpenYurt: 4 delegated renewals, about 40 s).");
  d("forwarder-resync-period", &o->forwarder_resync_period,
    "How often the forwarder re-checks every delegated node and marked cloud Lease (from its "
    "caches: no request of its own).");
  t.Double("kube-api-qps", &o->kube_api_qps,
           "Requests per second the forwarder may send to the cloud's kube-apiserver, as "
           "kube-controller-manager's flag (0: no limit). The default carries 20,000 delegated "
           "nodes at one renewal each per --kubelet-renew-interval, with room for taints and "
           "Events.");
  i("kube-api-burst", &o->kube_api_burst, 1, 1'000'000,
    "Requests the forwarder may send at once above --kube-api-qps, as "
    "kube-controller-manager's flag.");
  i("concurrent-node-lease-syncs", &o->concurrent_node_lease_syncs, 1, 1024,
    "Nodes the forwarder syncs at once (its workers, each with one request in flight to the "
    "cloud's kube-apiserver, over connections of their own).");
  i("forwarder-shards", &o->forwarder_shards, 1, 4096,
    "With --leader-elect: the shards forwarding is split into, each owned by one replica "
    "through a Lease <leader-elect-resource-name>-shard-<i> (docs/forwarding.md). Every "
    "replica must use the same value.");
  d("kubelet-renew-interval", &o->kubelet_renew_interval,
    "The kubelets' Lease renew interval (theirs is 10s): forwarding starts once a delegated "
    "node's own renewal is this old, and renews its cloud Lease at least this often.");
  d("node-monitor-grace-period", &o->node_monitor_grace_period,
    "kube-controller-manager's --node-monitor-grace-period (40s before Kubernetes 1.32, 50s "
    "since): a delegation not forwarded for longer has lapsed, and forwarding again starts a "
    "new one.");
  s("delegation-proof", &o->delegation_proof,
    "What a pool leader's DelegatedLease write must carry (docs/verifiable-delegation.md): "
    "required (the member's own signed, fresh heartbeat in spec.proof, or 403; poolcoord-agent "
    "sends it), optional (a proof given is checked; writes without one pass and are counted: "
    "for an upgrade from agents that send no proofs), or off (the leader's word is taken). "
    "Default: required when the server has a cloud cluster (--kubeconfig or in-cluster), whose "
    "node Leases its forwarder renews from DelegatedLeases; optional standalone, where a "
    "DelegatedLease is only stored (the chart sets required).");
  d("delegation-challenge-period", &o->delegation_challenge_period,
    "The age at which a pool's challenge (its PoolLease's status.challenges, which members "
    "sign into their heartbeats) is replaced: by the next accepted write of the leader that "
    "leaves the lease held, its renewals.");
  d("delegation-proof-max-age", &o->delegation_proof_max_age,
    "The oldest challenge a delegation proof may carry, judged on the server's clock (default: "
    "2 x the agents' 5s heartbeat interval + the challenge period); also the longest "
    "leaseDurationSeconds of a proven write.");
  b("leader-elect", &o->leader_elect,
    "Share forwarding among the replicas (etcd3): each replica forwards the shards whose Lease "
    "(coordination.k8s.io) it holds (--forwarder-shards).");
  d("leader-elect-lease-duration", &o->leader_elect_lease_duration,
    "Lease duration of the forwarding shards and of each replica's presence Lease.");
  d("leader-elect-renew-deadline", &o->leader_elect_renew_deadline,
    "How long a replica retries renewing a shard's Lease before it stops forwarding the shard.");
  d("leader-elect-retry-period", &o->leader_elect_retry_period,
    "Wait between attempts to acquire or renew a shard's Lease.");
  s("leader-elect-resource-namespace", &o->leader_elect_resource_namespace,
    "Namespace of the shard and presence Leases.");
  s("leader-elect-resource-name", &o->leader_elect_resource_name,
    "Prefix of the shard and presence Leases' names (<name>-shard-<i>, <name>-replica-<id>).");
  s("write-kubeconfig", &o->write_kubeconfig,
    "Where to write an admin kubeconfig when certificates are generated; a file there that "
    "poolcoord did not write (or `kubectl config` rewrote) is kept as it is; empty: none.");
  b("cleanup", &o->cleanup,
    "Remove every mark poolcoord left in the cloud (--kubeconfig or in-cluster) and exit, as "
    "kube-proxy's --cleanup: the annotations and label of delegated node Leases and the "
    "node.openyurt.io/unschedulable taint of their Nodes. Passes repeat until one finds nothing, "
    "one --kubelet-renew-interval plus the forwarder's request timeout apart (a server still "
    "stopping may mark a node again). The chart's post-delete hook runs it. Exit status 0 when "
    "clean, 1 when --cleanup-timeout passed first.");
  d("cleanup-timeout", &o->cleanup_timeout, "How long --cleanup tries.");
  i("v", &o->verbosity, 0, 10, "Log verbosity; 2 and above logs every request.");
  b("help", &o->help, "Print this help and exit.");
}

absl::Status Validate(const ServerOptions& o) {
  if (o.storage_backend != "memory" && o.storage_backend != "etcd3") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "invalid argument \"%s\" for \"--storage-backend\" flag: must be memory or etcd3",
        o.storage_backend));
  }
  if (!o.delegation_proof.empty() && o.delegation_proof != "required" && o.delegation_proof != "optional" &&
      o.delegation_proof != "off") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "invalid argument \"%s\" for \"--delegation-proof\" flag: must be required, optional or "
        "off",
        o.delegation_proof));
  }
  if (o.delegation_challenge_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--delegation-challenge-period must be positive");
  }
  if (o.delegation_proof_max_age <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--delegation-proof-max-age must be positive");
  }
  if (o.tls_cert_file.empty() != o.tls_private_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert-file and --tls-private-key-file must be given together");
  }
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, o.bind_address.c_str(), &v4) != 1 &&
      inet_pton(AF_INET6, o.bind_address.c_str(), &v6) != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "invalid argument \"%s\" for \"--bind-address\" flag: not an IP address", o.bind_address));
  }
  // Files the server reads once at start and then follows: a path that cannot be
  // read is the flag's fault, said with the flag's name (it said "cannot read
  // /nonexistent" without naming --client-ca-file).
  for (const auto& [flag, path] : {std::pair<const char*, const std::string*>{"tls-cert-file", &o.tls_cert_file},
                                   {"tls-private-key-file", &o.tls_private_key_file},
                                   {"client-ca-file", &o.client_ca_file},
                                   {"requestheader-client-ca-file", &o.requestheader_client_ca_file},
                                   {"token-auth-file", &o.token_auth_file}}) {
    if (!path->empty() && access(path->c_str(), R_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "invalid argument \"%s\" for \"--%s\" flag: cannot read it: %s", *path, flag,
          std::strerror(errno)));
    }
  }
  if (o.leader_elect) {
    // As component-base validates kube-apiserver's --leader-elect-* flags.
    absl::Status timings = election::LeaderElector::ValidateTimings(
        o.leader_elect_lease_duration, o.leader_elect_renew_deadline, o.leader_elect_retry_period,
        {"--leader-elect-lease-duration", "--leader-elect-renew-deadline",
         "--leader-elect-retry-period"});
    if (!timings.ok()) return timings;
  }
  if (o.cleanup && o.cleanup_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--cleanup-timeout must be positive");
  }
  if (o.etcd_certfile.empty() != o.etcd_keyfile.empty()) {
    return absl::InvalidArgumentError(
        "--etcd-certfile and --etcd-keyfile must be given together (the client certificate "
        "for TLS to etcd and its key)");
  }
  return absl::OkStatus();
}

constexpr base::CommandLine<ServerOptions> kCommandLine{
    AddFlags, Validate,
    "poolcoord-apiserver serves coordination.pool/v1alpha1 (PoolLease, DelegatedLease) as a\n"
    "Kubernetes aggregated API server and the delegate-heartbeat admission webhook.",
    48};

}  // namespace

absl::StatusOr<ServerOptions> ParseFlags(const std::vector<std::string>& args) {
  return kCommandLine.Parse(args);
}

std::string FlagUsage(const std::string& program) { return kCommandLine.Usage(program); }

absl::Duration ForwarderRequestTimeout(const ServerOptions& o) {
  absl::Duration timeout = std::min(o.kubelet_renew_interval / 2, absl::Seconds(5));
  if (o.leader_elect) {
    timeout = std::min(timeout, o.leader_elect_lease_duration - o.leader_elect_renew_deadline);
  }
  return std::max(timeout, absl::Seconds(1));
}

}  // namespace poolcoord::apiservice
