// poolcoord-sim: a fleet of poolcoord agents (the real agent core, agent/) on
// modelled LANs, played against a running poolcoord-apiserver whose forwarder
// writes into a modelled cloud. See agent/sim/README.md for the model and
// scenarios.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/minted_pki.h"
#include "base/clock.h"
#include "cloud/errors.h"
#include "cloud/rest_client.h"

namespace poolcoord::sim {

struct Options {
  std::string scenario = "fleet";  // "fleet" | "elector" (real-server elector checks) | "term-selftest"
  // Server: either started by us (--server-binary) or already running (--server).
  std::string server;
  std::string server_binary;
  std::vector<std::string> server_args;  // extra --server-arg values
  std::string ca_file;
  std::string work_dir;    // tokens.csv, membership.yaml, certs, server.log
  bool write_config_only = false;

  int pools = 20;
  int nodes_per_pool = 5;
  double partition_ratio = 0.0;
  double dead_ratio = 0.0;
  double pool_partition_ratio = 0.0;
  double clock_skew_s = 0.0;
  double leader_kill_interval_s = 0.0;  // 0: no kills
  // Each pool with this probability runs lying agents (the forging
  // leader of agent/testing/forging_leader.h in every member: whoever leads
  // writes DelegatedLeases for members it has not heard from).
  double lying_pool_ratio = 0.0;
  double duration_s = 60.0;
  double lease_duration_s = 15.0;
  double renew_deadline_s = 10.0;
  double retry_period_s = 2.0;
  uint64_t seed = 1;
  int workers = 32;
  int extra_objects = 0;
  double heartbeat_interval_s = 5.0;   // the agents' in-pool heartbeats (--heartbeat-interval)
  double kubelet_interval_s = 10.0;    // the kubelets' own Lease renewals
  // The node lifecycle controller's --node-monitor-grace-period values the
  // verdict checks (40 s before Kubernetes 1.32, 50 s since).
  std::vector<double> graces_s = {40.0, 50.0};
  // The modelled cloud's port (0: a free one); with --server, the server must
  // have been started with --kubeconfig=<work-dir>/cloud.kubeconfig from
  // --write-config-only with the same port.
  int cloud_port = 0;
  bool allow_belief_overlap = false;  // no effect: see --allow-belief-overlap
  std::string summary_json;
  double pl_watch_delay_ms = 0;  // no effect any more (the watch timelines went)

  // --- the deterministic mode (world.h)
  bool deterministic = false;
  int seeds = 1;  // runs, from `seed` on
  // The LAN: each datagram arrives after a delay drawn from
  // [lan_delay_min_ms, lan_delay_max_ms] (so datagrams overtake each other),
  // is lost with probability lan_loss and arrives twice with probability
  // lan_duplicate.
  double lan_delay_min_ms = 0.2;
  double lan_delay_max_ms = 5.0;
  double lan_loss = 0.0;
  double lan_duplicate = 0.0;
  // Each node with this probability steps its clock once, by up to
  // ±max(clock_skew, 10) seconds, at a random time.
  double clock_jump_ratio = 0.0;
  // Every this many seconds the server restarts (0: never): down for
  // server_down_s (requests through the aggregator get 503), then back with
  // an empty memory store, as poolcoord-apiserver on its memory store.
  double server_restart_interval_s = 0.0;
  double server_down_s = 5.0;
  // The restarted server finds its objects again (etcd3), instead of an empty
  // memory store.
  bool server_restart_keeps_objects = false;
  // One node in this many signs and is checked for real (ECDSA P-256); the
  // others sign by model.
  int real_signature_every = 20;
  std::string history_file;    // also write the history, one event a line
  std::string replay_command;  // the command line without --seed/--seeds
  bool agent_logs = false;     // keep the agents' and the server's log lines
};

// Node and pool names, tokens: deterministic from the options.
std::string PoolName(int pool);
std::string NodeName(int pool, int slot);
std::string TokenFor(const Options& o, const std::string& user);
inline constexpr char kAdminUser[] = "poolcoord-sim-admin";

// The cluster CA that signs every node's kubelet certificate:
// o.work_dir/cluster-ca.crt and .key (PEM). WriteClusterCa mints it (RSA 2048,
// as kubeadm's) unless both files exist; the server gets the certificate as
// --client-ca-file, so it can check the agents' delegation proofs.
std::string ClusterCaPath(const Options& o);
absl::Status WriteClusterCa(const Options& o);
// The cluster CA's certificate and key, minted first when missing.
absl::StatusOr<agent::MintedKeyPair> ReadClusterCa(const Options& o);

// Writes tokens.csv, membership.yaml, cloud.kubeconfig (the modelled cloud
// at o.cloud_port) and the cluster CA for `pools` into o.work_dir.
absl::Status WriteServerConfig(const Options& o, const std::map<std::string, std::vector<std::string>>& pools);

// A server process we started: PKI by the openssl CLI, a free port, logs in
// work_dir/server.log. The destructor stops it (SIGTERM, then SIGKILL).
class ServerProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const Options& o);
  ~ServerProcess();
  const std::string& url() const { return url_; }
  const std::string& ca_file() const { return ca_file_; }
  bool Alive();

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  std::string url_;
  std::string ca_file_;
};

// Waits for /readyz to answer 200.
absl::Status WaitReady(cloud::RestClient* client, double timeout_s);

// Wall-clock µs and steady µs.
int64_t WallMicros();
int64_t MonoMicros();

// A node's clock: a constant offset on the wall clock (what ends up in
// renewTime); the monotonic clock is the machine's.
class SkewedClock : public base::Clock {
 public:
  explicit SkewedClock(int64_t offset_us) : offset_us_(offset_us) {}
  int64_t NowMicros() const override { return WallMicros() + offset_us_; }
  int64_t MonotonicMicros() const override { return MonoMicros(); }

 private:
  int64_t offset_us_;
};

// Latency samples (µs), thread-safe.
class Latencies {
 public:
  Latencies();
  void Add(int64_t us);
  // p in [0,100]; 0 when empty.
  int64_t Percentile(double p);
  int64_t Count();
  // Count and sum since the last call (for rates).
  int64_t TakeWindow();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

class CloudModel;
// `cloud` is the modelled cloud the server's forwarder writes into.
int RunFleet(const Options& o, cloud::RestClient* client, CloudModel* cloud);
int RunElectorChecks(const Options& o, cloud::RestClient* client);
// --scenario=term-selftest: the term checks on a hand-made history; no server.
int RunTermSelfTest(const Options& o);

}  // namespace poolcoord::sim
