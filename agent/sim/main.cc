// poolcoord-sim: flags and the choice of scenario. The scenarios live in
// fleet.cc and elector_checks.cc, what they share in sim.cc.
#include <cmath>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string_view>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "agent/sim/cloud_model.h"
#include "agent/sim/sim.h"
#include "agent/sim/world.h"
#include "base/flag_set.h"
#include "base/subprocess.h"


namespace {

using poolcoord::sim::Options;

// The command line: the simulator's Options, and what only parsing needs.
struct SimFlags : Options {
  std::vector<std::string> grace = {"40", "50"};  // Options::graces_s, as given
  int64_t seed_flag = 1;                          // Options::seed
  bool help = false;
};

// What a number flag may hold; CheckRanges refuses anything else.
enum class Range { kAny, kRatio, kPositive, kNotNegative };

// The number flags (pflag's float64), one row each: name, field, range and
// meaning, so that registering a flag (AddFlags) and checking its value
// (CheckRanges) are one piece of code for the fleet's flags and the
// deterministic mode's alike.
struct NumberFlag {
  const char* name;
  double Options::*field;
  Range range;
  const char* help;
};
constexpr NumberFlag kNumberFlags[] = {
    {"partition-ratio", &Options::partition_ratio, Range::kRatio,
     "Each node with this probability (0 to 1) is cut off from the cloud but still reaches its "
     "pool: its leader should delegate its heartbeat."},
    {"dead-ratio", &Options::dead_ratio, Range::kRatio,
     "Each node with this probability (0 to 1) dies: it stops heartbeating and must not be "
     "delegated."},
    {"pool-partition-ratio", &Options::pool_partition_ratio, Range::kRatio,
     "Each pool with this probability (0 to 1) is cut off from the cloud as a whole."},
    {"lying-pool-ratio", &Options::lying_pool_ratio, Range::kRatio,
     "Each pool with this probability (0 to 1) has lying agents: whoever leads forges liveness "
     "for members it has not heard from."},
    {"clock-skew", &Options::clock_skew_s, Range::kNotNegative,
     "Each agent's clock is off by up to this many seconds, ahead or behind."},
    {"leader-kill-interval", &Options::leader_kill_interval_s, Range::kNotNegative,
     "Kill a pool leader every this many seconds (0: never)."},
    {"duration", &Options::duration_s, Range::kPositive,
     "How long the fleet runs, in seconds."},
    {"lease-duration", &Options::lease_duration_s, Range::kPositive,
     "The agents' PoolLease leaseDurationSeconds (client-go's LeaseDuration)."},
    {"renew-deadline", &Options::renew_deadline_s, Range::kPositive,
     "Seconds a leader keeps trying to renew before it gives up leading (client-go's "
     "RenewDeadline)."},
    {"retry-period", &Options::retry_period_s, Range::kPositive,
     "Seconds between the agents' tries to acquire or renew (client-go's RetryPeriod)."},
    {"heartbeat-interval", &Options::heartbeat_interval_s, Range::kPositive,
     "Seconds between an agent's signed in-pool heartbeats."},
    {"kubelet-interval", &Options::kubelet_interval_s, Range::kPositive,
     "Seconds between the modelled kubelets' renewals of their own node Leases."},
    {"pl-watch-delay-ms", &Options::pl_watch_delay_ms, Range::kAny,
     "Accepted for old scripts; no effect (the watch timelines gave way to the modelled "
     "cloud's Leases)."},
    // The deterministic mode's.
    {"lan-delay-min-ms", &Options::lan_delay_min_ms, Range::kNotNegative,
     "With --deterministic: the least delay of a LAN datagram, in milliseconds."},
    {"lan-delay-max-ms", &Options::lan_delay_max_ms, Range::kNotNegative,
     "With --deterministic: the most delay of a LAN datagram, in milliseconds (datagrams drawn "
     "longer delays are overtaken)."},
    {"lan-loss", &Options::lan_loss, Range::kRatio,
     "With --deterministic: each LAN datagram is lost with this probability (0 to 1)."},
    {"lan-duplicate", &Options::lan_duplicate, Range::kRatio,
     "With --deterministic: each LAN datagram arrives twice with this probability (0 to 1)."},
    {"clock-jump-ratio", &Options::clock_jump_ratio, Range::kRatio,
     "With --deterministic: each node with this probability (0 to 1) steps its clock once, by "
     "up to max(--clock-skew, 10) seconds either way."},
    {"server-restart-interval", &Options::server_restart_interval_s, Range::kNotNegative,
     "With --deterministic: the server restarts every this many seconds (0: never), on its "
     "memory store (its objects are lost)."},
    {"server-down", &Options::server_down_s, Range::kPositive,
     "With --deterministic: seconds a restarting server is down (503 through the aggregator)."},
};

// The flags, in the order --help lists them.
void AddFlags(SimFlags* o, poolcoord::base::FlagSet& t) {
  constexpr int kMaxNodes = 1'000'000;
  t.String("scenario", &o->scenario,
           "What to run: fleet (agents in every pool against the server, with the faults "
           "below), elector (the LeaderElector checks against the real server) or term-selftest "
           "(the term checks on a hand-made history; no server).");
  t.String("server-binary", &o->server_binary,
           "Start this poolcoord-apiserver on a free 127.0.0.1 port (or give --server).");
  t.StringArray("server-arg", &o->server_args,
                "One more argument for the started server; repeat for more.");
  t.String("server", &o->server,
           "The URL of a server already running with the files of --write-config-only (same "
           "--seed, sizes and --cloud-port), instead of --server-binary; needs --ca-file.");
  t.String("ca-file", &o->ca_file, "The CA that signed --server's serving certificate (PEM).");
  t.String("work-dir", &o->work_dir,
           "Where tokens.csv, membership.yaml, the certificates and the logs go (empty: a new "
           "/tmp/poolcoord-sim-XXXXXX).");
  t.Bool("write-config-only", &o->write_config_only,
         "Write tokens.csv, membership.yaml, cloud.kubeconfig and the cluster CA into --work-dir "
         "for a server started by hand, then exit (needs --cloud-port).");
  t.Int("pools", &o->pools, 1, kMaxNodes, "Node pools in the fleet.");
  t.Int("nodes-per-pool", &o->nodes_per_pool, 1, kMaxNodes,
        "Nodes, each with its agent, in every pool (at most 1,000,000 nodes in all).");
  t.Int("extra-objects", &o->extra_objects, 0, std::numeric_limits<int>::max(),
        "Unheld PoolLeases (sim-extra-NNNNN) created before the run, to give the server more "
        "objects to list and watch.");
  for (const NumberFlag& f : kNumberFlags) t.Double(f.name, &(o->*f.field), f.help);
  t.Int64("seed", &o->seed_flag, 0,
          "Seeds the random choices (who is cut off, dies, lies; clock skews; names' tokens): "
          "the same seed and sizes repeat a run.");
  t.Int("workers", &o->workers, 1, 100'000, "Threads that tick the agents.");
  t.StringList("grace", &o->grace,
               "The node lifecycle controller's --node-monitor-grace-period values, in seconds, "
               "that the verdict checks.");
  t.Int("cloud-port", &o->cloud_port, 0, 65535, "The modelled cloud's port (0: a free one).");
  t.Bool("allow-belief-overlap", &o->allow_belief_overlap,
         "Accepted for old scripts: overlapping beliefs in different terms are only reported; "
         "in one term they always fail.");
  t.String("summary-json", &o->summary_json, "Also write the run's summary to this file, as JSON.");
  t.Bool("deterministic", &o->deterministic,
         "Run the whole system in this process on one simulated clock, driven by one seeded "
         "scheduler: the agents, the server's rules, store, watch cache and forwarder, and the "
         "modelled kube-apiserver (no --server or --server-binary). The same flags and seed "
         "replay the same history; each run prints its digest.");
  t.Int("seeds", &o->seeds, 1, 10'000'000,
        "With --deterministic: runs this many seeds, from --seed on, and prints the command "
        "that replays each failing one.");
  t.Bool("server-restart-keeps-objects", &o->server_restart_keeps_objects,
         "With --deterministic: the restarted server finds its objects again, as on etcd3 "
         "(default: an empty memory store).");
  t.Int("real-signature-every", &o->real_signature_every, 0, 1'000'000,
        "With --deterministic: one node in this many signs its heartbeats with its real key "
        "and is checked by the real verifier; the others sign by model (0: none real).");
  t.String("history-file", &o->history_file,
           "With --deterministic: also write the run's history here, one event a line (the "
           "digest is its SHA-256).");
  t.Bool("agent-logs", &o->agent_logs,
         "With --deterministic: keep the agents' and the server's log lines on stderr.");
  t.Bool("help", &o->help, "Print this help and exit.");
}

// Values that would make a run test nothing, or fail for a reason other than
// the server (a run of 0 pools passed; 0 workers "failed" as "pools never led").
// Returns the first problem, or "".
std::string CheckRanges(const Options& o);

absl::Status Validate(const SimFlags& o) {
  if (o.scenario != "fleet" && o.scenario != "elector" && o.scenario != "term-selftest") {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid argument \"", o.scenario,
        "\" for \"--scenario\" flag: must be fleet, elector or term-selftest"));
  }
  for (const std::string& g : o.grace) {
    double seconds;
    if (!absl::SimpleAtod(g, &seconds) || !std::isfinite(seconds) || seconds <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid argument \"", g, "\" for \"--grace\" flag: not a number of seconds above 0"));
    }
  }
  if (o.grace.empty()) return absl::InvalidArgumentError("--grace needs at least one value");
  if (std::string problem = CheckRanges(o); !problem.empty()) {
    return absl::InvalidArgumentError(problem);
  }
  return absl::OkStatus();
}

constexpr poolcoord::base::CommandLine<SimFlags> kCommandLine{
    AddFlags, Validate,
    "poolcoord-sim runs the agent core of every node of a modelled fleet (its LAN, clocks,\n"
    "kubelets and cloud) against a real poolcoord-apiserver, with the faults the flags ask for,\n"
    "and checks what the cloud saw: one leader per term, no dead node kept alive, no cut-off\n"
    "node marked Unknown (agent/sim/README.md). Exit status 0: every check held; 1: one did\n"
    "not; 2: a bad command line.",
    0};  // help one column past the longest flag, as pflag aligns

std::string CheckRanges(const Options& o) {
  for (const NumberFlag& f : kNumberFlags) {
    const double v = o.*f.field;
    const char* must = nullptr;
    switch (f.range) {
      case Range::kAny: break;
      case Range::kRatio: must = v >= 0 && v <= 1 ? nullptr : "be between 0 and 1"; break;
      case Range::kPositive: must = v > 0 ? nullptr : "be more than 0"; break;
      case Range::kNotNegative: must = v >= 0 ? nullptr : "be at least 0"; break;
    }
    if (must != nullptr) return absl::StrCat("--", f.name, " must ", must, " (got ", v, ")");
  }
  if (o.lan_delay_max_ms < o.lan_delay_min_ms) {
    return absl::StrCat("--lan-delay-max-ms must be at least ", o.lan_delay_min_ms, " (got ",
                        o.lan_delay_max_ms, ")");
  }
  if (o.server.empty() && !o.server_binary.empty() && access(o.server_binary.c_str(), X_OK) != 0) {
    return absl::StrCat("--server-binary ", o.server_binary, ": cannot run it: ", std::strerror(errno));
  }
  if (!o.server.empty() && !o.ca_file.empty() && access(o.ca_file.c_str(), R_OK) != 0) {
    return absl::StrCat("--ca-file ", o.ca_file, ": cannot read it: ", std::strerror(errno));
  }
  if (static_cast<int64_t>(o.pools) * o.nodes_per_pool > 1000000) {
    return absl::StrCat("--pools x --nodes-per-pool must be at most 1,000,000 nodes (got ",
                        static_cast<int64_t>(o.pools) * o.nodes_per_pool, ")");
  }
  return "";
}

std::map<std::string, std::vector<std::string>> PoolsFor(const Options& o) {
  std::map<std::string, std::vector<std::string>> pools;
  if (o.scenario == "elector") {
    for (const char* p : {"ec-a", "ec-b", "ec-c", "ec-d", "ec-e", "ec-f"}) {
      for (int i = 0; i < 10; ++i) pools[p].push_back(absl::StrCat(p, "-", i));
    }
    return pools;
  }
  for (int p = 0; p < o.pools; ++p) {
    auto& nodes = pools[poolcoord::sim::PoolName(p)];
    for (int n = 0; n < o.nodes_per_pool; ++n) nodes.push_back(poolcoord::sim::NodeName(p, n));
  }
  return pools;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace poolcoord;
  signal(SIGPIPE, SIG_IGN);
  // Tens of thousands of agents' mutexes: absl's deadlock detection (on in this
  // build, which has no NDEBUG) would cost more than the agents themselves.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto parsed = kCommandLine.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::cerr << "Error: " << parsed.status().message() << "\nRun '" << argv[0]
              << " --help' for usage.\n";
    return 2;
  }
  if (parsed->help) {
    // --help is an answer, not an error: usage on stdout, exit 0 (as kube-apiserver).
    std::cout << kCommandLine.Usage("poolcoord-sim");
    return 0;
  }
  Options o = *parsed;
  o.seed = static_cast<uint64_t>(parsed->seed_flag);
  o.graces_s.clear();
  for (const std::string& g : parsed->grace) {
    double seconds = 0;
    (void)absl::SimpleAtod(g, &seconds);  // Validate checked it
    o.graces_s.push_back(seconds);
  }
  if (o.scenario == "term-selftest") return sim::RunTermSelfTest(o);
  if (o.deterministic) {
    // The command that replays a seed: these flags without the seeds'.
    o.replay_command = argv[0];
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "--seed" || a == "--seeds" || a == "--history-file") {
        ++i;
        continue;
      }
      if (a.rfind("--seed=", 0) == 0 || a.rfind("--seeds=", 0) == 0 ||
          a.rfind("--history-file=", 0) == 0) {
        continue;
      }
      absl::StrAppend(&o.replay_command, " ", std::string(a));
    }
    return sim::RunDeterministic(o);
  }
  if (o.work_dir.empty()) {
    char tmpl[] = "/tmp/poolcoord-sim-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 2;
    o.work_dir = tmpl;
  }
  // The modelled cloud: every node of every pool, labelled with its pool (the
  // server's Node membership source reads them too) and addressed by name.
  const auto pools = PoolsFor(o);
  std::vector<sim::CloudModel::NodeSpec> nodes;
  for (const auto& [pool, members] : pools) {
    for (const auto& n : members) nodes.push_back({n, {{"apps.openyurt.io/nodepool", pool}}, n});
  }
  sim::CloudModel cloud_model(std::move(nodes));
  if (!o.write_config_only) {
    if (absl::Status s = cloud_model.Serve(o.cloud_port); !s.ok()) {
      std::cerr << s << "\n";
      return 2;
    }
    o.cloud_port = cloud_model.port();
  } else if (o.cloud_port == 0) {
    std::cerr << "--write-config-only needs --cloud-port (the server's --kubeconfig names it)\n";
    return 2;
  }
  if (o.server.empty() || o.write_config_only) {
    if (absl::Status s = sim::WriteServerConfig(o, pools); !s.ok()) {
      std::cerr << s << "\n";
      return 2;
    }
  }
  if (o.write_config_only) {
    std::cout << "wrote " << o.work_dir << "/tokens.csv, " << o.work_dir << "/membership.yaml and "
              << o.work_dir << "/cloud.kubeconfig\n";
    return 0;
  }
  std::unique_ptr<sim::ServerProcess> server;
  if (o.server.empty()) {
    if (o.server_binary.empty()) {
      std::cerr << "Error: give --server-binary, or --server with --ca-file\nRun '" << argv[0]
                << " --help' for usage.\n";
      return 2;
    }
    auto s = sim::ServerProcess::Start(o);
    if (!s.ok()) {
      std::cerr << s.status() << "\n";
      return 2;
    }
    server = *std::move(s);
    o.server = server->url();
    o.ca_file = server->ca_file();
  }
  cloud::RestConfig cfg;
  cfg.server = o.server;
  cfg.tls.ca_file = o.ca_file;
  cfg.retry.max_attempts = 1;  // every request counts as sent once
  cfg.bearer_token = sim::TokenFor(o, sim::kAdminUser);
  // client-go's leader election: request timeout max(1 s, RenewDeadline / 2).
  cfg.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::max(1.0, o.renew_deadline_s / 2) * 1000));
  cfg.max_idle_connections = std::max(8, o.workers + 8);
  cfg.user_agent = "poolcoord-sim";
  auto client = cloud::RestClient::New(cfg);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 2;
  }
  if (absl::Status s = sim::WaitReady(client->get(), 30); !s.ok()) {
    std::cerr << "server not ready: " << s << " (log: " << o.work_dir << "/server.log)\n";
    return 2;
  }
  std::cerr << "server " << o.server << " ready; work dir " << o.work_dir << "\n";
  int rc = o.scenario == "elector" ? sim::RunElectorChecks(o, client->get())
                                   : sim::RunFleet(o, client->get(), &cloud_model);
  if (server && !server->Alive()) {
    std::cerr << "the server process died during the run (log: " << o.work_dir
              << "/server.log)\n";
    rc = 1;
  }
  return rc;
}
