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
#include <string_view>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "agent/sim/cloud_model.h"
#include "agent/sim/sim.h"
#include "base/subprocess.h"


namespace {

using poolcoord::sim::Options;

void Usage(std::ostream& out = std::cerr) {
  out <<
      R"(usage: poolcoord-sim [flags]
  --scenario=fleet|elector|term-selftest
                             fleet (default), the real-server elector checks, or
                             the term checks on a hand-made history (no server)
  --server-binary=PATH       start this poolcoord-apiserver on a free 127.0.0.1 port
  --server-arg=ARG           extra argument for the started server (repeatable)
  --server=URL --ca-file=F   use a running server started with the files of
                             --write-config-only (same --seed and sizes)
  --work-dir=DIR             where tokens.csv, membership.yaml, certs, logs go
  --write-config-only        write tokens.csv and membership.yaml, then exit
  --pools=N --nodes-per-pool=N --extra-objects=N
  --partition-ratio=R --dead-ratio=R --pool-partition-ratio=R
  --lying-pool-ratio=R       each pool with probability R has lying agents: whoever
                             leads forges liveness for members it has not heard from
  --clock-skew=SECONDS --leader-kill-interval=SECONDS --duration=SECONDS
  --lease-duration=S --renew-deadline=S --retry-period=S --seed=N --workers=N
  --heartbeat-interval=S     the agents' in-pool heartbeats (default 5)
  --kubelet-interval=S       the modelled kubelets' Lease renewals (default 10)
  --grace=S[,S...]           node lifecycle grace periods the verdict checks (default 40,50)
  --cloud-port=N             the modelled cloud's port (default: a free one)
  --allow-belief-overlap     accepted for old scripts: overlapping beliefs in different
                             terms are only reported; in one term they always fail
  --summary-json=FILE
  --pl-watch-delay-ms=MS     accepted for old scripts; no effect (the watch timelines
                             gave way to the modelled cloud's Leases)
)";
}

bool ParseFlags(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return false;
    if (arg.rfind("--", 0) != 0) {
      std::cerr << "unexpected argument " << arg << "\n";
      return false;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto take = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 < argc) return argv[++i];
      std::cerr << "--" << name << " needs a value\n";
      std::exit(2);
    };
    auto num = [&](double* out) {
      std::string v = take();
      if (!absl::SimpleAtod(v, out) || !std::isfinite(*out)) {
        std::cerr << "Error: invalid argument \"" << v << "\" for \"--" << name
                  << "\" flag: not a number\n";
        std::exit(2);
      }
    };
    auto integer = [&](int* out) {
      std::string v = take();
      if (!absl::SimpleAtoi(v, out)) {
        std::cerr << "Error: invalid argument \"" << v << "\" for \"--" << name
                  << "\" flag: not an integer\n";
        std::exit(2);
      }
    };
    if (name == "scenario") o->scenario = take();
    else if (name == "server") o->server = take();
    else if (name == "server-binary") o->server_binary = take();
    else if (name == "server-arg") o->server_args.push_back(take());
    else if (name == "ca-file") o->ca_file = take();
    else if (name == "work-dir") o->work_dir = take();
    else if (name == "write-config-only") o->write_config_only = true;
    else if (name == "pools") integer(&o->pools);
    else if (name == "nodes-per-pool") integer(&o->nodes_per_pool);
    else if (name == "extra-objects") integer(&o->extra_objects);
    else if (name == "workers") integer(&o->workers);
    else if (name == "partition-ratio") num(&o->partition_ratio);
    else if (name == "dead-ratio") num(&o->dead_ratio);
    else if (name == "pool-partition-ratio") num(&o->pool_partition_ratio);
    else if (name == "lying-pool-ratio") num(&o->lying_pool_ratio);
    else if (name == "clock-skew") num(&o->clock_skew_s);
    else if (name == "leader-kill-interval") num(&o->leader_kill_interval_s);
    else if (name == "duration") num(&o->duration_s);
    else if (name == "lease-duration") num(&o->lease_duration_s);
    else if (name == "renew-deadline") num(&o->renew_deadline_s);
    else if (name == "retry-period") num(&o->retry_period_s);
    else if (name == "heartbeat-interval") num(&o->heartbeat_interval_s);
    else if (name == "kubelet-interval") num(&o->kubelet_interval_s);
    else if (name == "cloud-port") integer(&o->cloud_port);
    else if (name == "grace") {
      o->graces_s.clear();
      for (absl::string_view part : absl::StrSplit(take(), ',')) {
        double g;
        if (!absl::SimpleAtod(part, &g) || g <= 0) {
          std::cerr << "--grace: not a list of seconds\n";
          std::exit(2);
        }
        o->graces_s.push_back(g);
      }
    }
    else if (name == "seed") {
      double d;
      num(&d);
      o->seed = static_cast<uint64_t>(d);
    } else if (name == "allow-belief-overlap") o->allow_belief_overlap = true;
    else if (name == "summary-json") o->summary_json = take();
    else if (name == "pl-watch-delay-ms") num(&o->pl_watch_delay_ms);
    else {
      std::cerr << "Error: unknown flag: --" << name << "\n";
      return false;
    }
  }
  return true;
}

// Values that would make a run test nothing, or fail for a reason other than
// the server (a run of 0 pools passed; 0 workers "failed" as "pools never led").
// Returns the first problem, or "".
std::string CheckRanges(const Options& o) {
  auto at_least = [](const char* flag, double v, double min) -> std::string {
    return v >= min ? "" : absl::StrCat("--", flag, " must be at least ", min, " (got ", v, ")");
  };
  auto positive = [](const char* flag, double v) -> std::string {
    return v > 0 ? "" : absl::StrCat("--", flag, " must be more than 0 (got ", v, ")");
  };
  auto ratio = [](const char* flag, double v) -> std::string {
    return v >= 0 && v <= 1 ? "" : absl::StrCat("--", flag, " must be between 0 and 1 (got ", v, ")");
  };
  for (const std::string& problem : {
           at_least("pools", o.pools, 1), at_least("nodes-per-pool", o.nodes_per_pool, 1),
           at_least("workers", o.workers, 1), at_least("extra-objects", o.extra_objects, 0),
           ratio("partition-ratio", o.partition_ratio), ratio("dead-ratio", o.dead_ratio),
           ratio("pool-partition-ratio", o.pool_partition_ratio),
           ratio("lying-pool-ratio", o.lying_pool_ratio), positive("duration", o.duration_s),
           positive("lease-duration", o.lease_duration_s),
           positive("renew-deadline", o.renew_deadline_s),
           positive("retry-period", o.retry_period_s),
           positive("heartbeat-interval", o.heartbeat_interval_s),
           positive("kubelet-interval", o.kubelet_interval_s),
           at_least("clock-skew", o.clock_skew_s, 0),
           at_least("leader-kill-interval", o.leader_kill_interval_s, 0),
           at_least("cloud-port", o.cloud_port, 0)}) {
    if (!problem.empty()) return problem;
  }
  if (o.server.empty() && !o.server_binary.empty() && access(o.server_binary.c_str(), X_OK) != 0) {
    return absl::StrCat("--server-binary ", o.server_binary, ": cannot run it: ", std::strerror(errno));
  }
  if (!o.server.empty() && !o.ca_file.empty() && access(o.ca_file.c_str(), R_OK) != 0) {
    return absl::StrCat("--ca-file ", o.ca_file, ": cannot read it: ", std::strerror(errno));
  }
  if (o.cloud_port > 65535) return absl::StrCat("--cloud-port must be at most 65535 (got ", o.cloud_port, ")");
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
  Options o;
  for (int i = 1; i < argc; ++i) {
    // --help is an answer, not an error: usage on stdout, exit 0 (as kube-apiserver).
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      Usage(std::cout);
      return 0;
    }
  }
  if (!ParseFlags(argc, argv, &o)) {
    std::cerr << "Run '" << argv[0] << " --help' for usage.\n";
    return 2;
  }
  if (std::string problem = CheckRanges(o); !problem.empty()) {
    std::cerr << "Error: " << problem << "\n";
    return 2;
  }
  if (o.scenario == "term-selftest") return sim::RunTermSelfTest(o);
  if (o.scenario != "fleet" && o.scenario != "elector") {
    std::cerr << "--scenario must be fleet, elector or term-selftest\n";
    return 2;
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
      std::cerr << "give --server-binary, or --server with --ca-file\n";
      Usage();
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
