// poolcoord-agent: the edge process (docs/agent.md). One per edge
// node: the agent core (agent/agent_core.h) driven by real sockets, clocks and
// the cloud cluster, with the node's kubelet client certificate as identity.
//
// Threads: the LAN loop (one UDP socket), the cloud loop (probes, election,
// delegation), the pool's Node watch, the status endpoints; the main thread
// waits for SIGTERM/SIGINT and follows the certificate file (the kubelet
// rotates it: a new one is pushed to the pool at once, and curl reads the
// files again for each new connection).
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/agent_core.h"
#include "agent/agent_metrics.h"
#include "agent/flags.h"
#include "agent/kube_agent_cloud.h"
#include "agent/lan_loop.h"
#include "agent/node_certificate.h"
#include "agent/peer_source.h"
#include "agent/status_server.h"
#include "agent/udp_transport.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/metrics.h"
#include "cloud/clientset.h"
#include "cloud/rest_client.h"
#ifdef POOLCOORD_FORGE_LIVENESS
#include "agent/testing/forging_leader.h"
#endif

namespace pa = poolcoord::agent;
namespace pb = poolcoord::base;
namespace pc = poolcoord::cloud;

namespace {

constexpr int64_t kLoopStallMicros = 30'000'000;  // /healthz fails when a loop stalls this long
constexpr auto kCertificateCheck = std::chrono::seconds(30);

int64_t Us(absl::Duration d) { return absl::ToInt64Microseconds(d); }

// The certificate file's identity (a rotation swaps the symlink's target).
std::string FileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":",
                      st.st_size);
}

absl::StatusOr<pc::RestConfig> CloudConfig(const pa::AgentFlags& f, const std::string& key_file) {
  pc::RestConfig config;
  if (!f.kubeconfig.empty()) {
    auto loaded = pc::LoadKubeconfig(f.kubeconfig);
    if (!loaded.ok()) return loaded.status();
    config = *loaded;
  } else {
    config.server = f.server;
    config.tls.ca_file = f.certificate_authority.empty() ? f.cluster_ca_file : f.certificate_authority;
  }
  // The node's own certificate, whatever the kubeconfig's user says.
  config.bearer_token.clear();
  config.tls.cert_data.clear();
  config.tls.key_data.clear();
  config.tls.cert_file = f.client_certificate;
  config.tls.key_file = key_file;
  config.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(f.request_timeout));
  config.user_agent = "poolcoord-agent";
  config.max_idle_connections = 4;
  return config;
}

pa::AgentOptions CoreOptions(const pa::AgentFlags& f) {
  pa::AgentOptions o;
  o.freshness.heartbeat_interval_us = Us(f.heartbeat_interval);
  o.freshness.margin_us = Us(f.heartbeat_margin);
  o.reachability.probe_period_us = Us(f.heartbeat_interval);
  o.reachability.request_timeout_us = Us(f.request_timeout);
  o.reachability.kubelet_return_timeout_us = Us(f.kubelet_return_timeout);
  o.lease_duration = f.leader_elect_lease_duration;
  o.renew_deadline = f.leader_elect_renew_deadline;
  o.retry_period = f.leader_elect_retry_period;
  o.proof_max_age_seconds =
      static_cast<int32_t>(std::max<int64_t>(1, absl::ToInt64Seconds(f.delegation_proof_max_age)));
  return o;
}

int Fail(const std::string& message) {
  pb::LogError(message);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = pa::ParseAgentFlags(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "Error: %s\nRun '%s --help' for usage.\n",
                 std::string(parsed.status().message()).c_str(), argv[0]);
    return 2;
  }
  const pa::AgentFlags& flags = *parsed;
  if (flags.help) {
    std::fputs(pa::AgentFlagUsage("poolcoord-agent").c_str(), stdout);
    return 0;
  }
  pb::SetLogVerbosity(flags.verbosity);
  const std::string key_file = flags.client_key.empty() ? flags.client_certificate : flags.client_key;

  // Signals are taken by the main thread only (sigwait), so block them before
  // any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto identity_or = pa::NodeIdentity::FromFiles(flags.client_certificate, key_file);
  if (!identity_or.ok()) return Fail(absl::StrCat("the node's identity: ", identity_or.status().message()));
  std::shared_ptr<const pa::NodeIdentity> identity = std::move(*identity_or);
  const std::string node = identity->node();
  if (!flags.node_name.empty() && flags.node_name != node) {
    return Fail(absl::StrCat("--node-name ", flags.node_name, " does not match the certificate, which names ",
                             node));
  }
  auto ca = pa::CertificateAuthority::FromFile(flags.cluster_ca_file);
  if (!ca.ok()) return Fail(absl::StrCat("--cluster-ca-file: ", ca.status().message()));
  if (auto self_check = identity->VerifyAgainst(**ca, pb::RealClock::Get()->NowMicros());
      self_check.error != pa::CertificateError::kNone) {
    // Peers would drop every heartbeat: say so now rather than run deaf.
    return Fail(absl::StrCat("the node's certificate would be refused by its peers (",
                             pa::CertificateErrorName(self_check.error), "): ", self_check.detail));
  }
  auto config = CloudConfig(flags, key_file);
  if (!config.ok()) return Fail(absl::StrCat("kube-apiserver: ", config.status().message()));
  auto rest = pc::RestClient::New(*config);
  if (!rest.ok()) return Fail(absl::StrCat("kube-apiserver: ", rest.status().message()));
  // Watches and lists of Nodes get a longer timeout than the agent's own probes.
  pc::RestConfig list_config = *config;
  list_config.timeout = std::chrono::seconds(30);
  auto list_rest = pc::RestClient::New(list_config);
  if (!list_rest.ok()) return Fail(std::string(list_rest.status().message()));
  pc::Clientset clientset(list_rest->get());

  auto udp = pa::UdpTransport::Open(flags.bind_address, static_cast<uint16_t>(flags.heartbeat_port),
                                    static_cast<uint16_t>(flags.heartbeat_port));
  if (!udp.ok()) return Fail(absl::StrCat("heartbeat socket: ", udp.status().message()));

  std::atomic<bool> stop{false};
  std::atomic<int> exit_code{0};
  std::atomic<bool> pool_known{false};

  // The pool: from the peer cache at once (a cut-off start), else from the
  // cloud, asked until it answers.
  std::shared_ptr<const pa::PoolView> initial;
  pa::AgentCore* core_ptr = nullptr;
  std::string pool;
  pa::PeerSource peers(
      clientset.Nodes(), {node, flags.pool_label, flags.peer_cache_dir},
      [&](std::shared_ptr<const pa::PoolView> view) {
        if (core_ptr == nullptr) {
          initial = view;
          return;
        }
        if (!view->IsMember(node)) {
          pb::LogError("node ", node, " no longer carries ", flags.pool_label, "=", view->pool,
                       ": exiting to start again in its new pool");
          exit_code = 1;
          stop = true;
          return;
        }
        core_ptr->SetPool(view);
        pool_known = true;
      });
  if (auto cached = peers.LoadCache(); cached.ok()) {
    pool = (*cached)->pool;
    pb::LogInfo("pool ", pool, " from the peer cache: ", (*cached)->members.size(), " members");
  } else {
    pb::LogInfo("no usable peer cache (", cached.status().message(), "); asking the cloud");
  }
  if (pool.empty()) {
    for (int attempt = 0; !stop; ++attempt) {
      auto discovered = peers.DiscoverPool();
      if (discovered.ok()) {
        pool = *discovered;
        break;
      }
      if (attempt % 12 == 0) pb::LogWarning("this node's pool: ", discovered.status().message());
      timespec wait{static_cast<time_t>(absl::ToInt64Seconds(flags.heartbeat_interval)), 0};
      if (sigtimedwait(&signals, nullptr, &wait) > 0) return 0;
    }
  }
  pb::LogInfo("node ", node, " in pool ", pool, "; heartbeats on UDP ", flags.bind_address, ":",
              (*udp)->port(), " every ", absl::FormatDuration(flags.heartbeat_interval));

  pa::KubeAgentCloud cloud(rest->get(), node, pool);
  pa::AgentOptions core_options = CoreOptions(flags);
#ifdef POOLCOORD_FORGE_LIVENESS
  // The test build poolcoord-agent-forging (tests/e2e/test_cluster_proof.py): as
  // leader it forges liveness for members it has not heard from.
  pb::LogWarning("TEST BUILD: this agent forges liveness for pool members it has not heard from "
                 "(POOLCOORD_FORGE_LIVENESS); never deploy it");
  core_options.forger =
      std::make_shared<pa::ForgingLeader>(*ca, Us(flags.heartbeat_interval));
#endif
  auto core_or = pa::AgentCore::New(identity, *ca, pb::RealClock::Get(), udp->get(), &cloud,
                                    std::move(core_options));
  if (!core_or.ok()) return Fail(absl::StrCat("agent: ", core_or.status().message()));
  std::unique_ptr<pa::AgentCore> core = std::move(*core_or);
  if (initial != nullptr) {
    core->SetPool(initial);
    pool_known = true;
  }
  core_ptr = core.get();
  peers.Start(pool);

  pb::MetricsRegistry registry;
  pa::AgentMetrics metrics(core.get(), &registry);
  std::atomic<int64_t> lan_alive{pb::RealClock::Get()->MonotonicMicros()};
  std::atomic<int64_t> cloud_alive{pb::RealClock::Get()->MonotonicMicros()};
  auto stalled = [&]() -> std::string {
    const int64_t now = pb::RealClock::Get()->MonotonicMicros();
    if (now - lan_alive.load() > kLoopStallMicros) return "the LAN loop is stalled";
    if (now - cloud_alive.load() > kLoopStallMicros) return "the cloud loop is stalled";
    return "";
  };
  auto server = pa::StatusServer::Open(
      flags.health_bind_address, flags.health_port,
      {{"/healthz", [&] { auto s = stalled(); return s.empty() ? pa::StatusResponse{200, "ok\n"} : pa::StatusResponse{500, s + "\n"}; }},
       {"/livez", [&] { auto s = stalled(); return s.empty() ? pa::StatusResponse{200, "ok\n"} : pa::StatusResponse{500, s + "\n"}; }},
       {"/readyz",
        [&] {
          if (!pool_known) return pa::StatusResponse{503, "the pool's members are not known yet\n"};
          auto s = stalled();
          return s.empty() ? pa::StatusResponse{200, "ok\n"} : pa::StatusResponse{503, s + "\n"};
        }},
       {"/metrics", [&] {
          return pa::StatusResponse{200, metrics.Render(), "text/plain; version=0.0.4; charset=utf-8"};
        }}});
  if (!server.ok()) return Fail(absl::StrCat("status endpoints: ", server.status().message()));
  (*server)->Start();
  pb::LogInfo("/healthz, /readyz, /metrics on ", flags.health_bind_address, ":", (*server)->port());

  std::thread lan([&] {
    while (!stop) {
      absl::Status s = pa::RunLanLoop(core.get(), udp->get(), pb::RealClock::Get(), &stop, &lan_alive);
      if (!s.ok()) {
        pb::LogError("LAN loop: ", s.message());
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
  });
  std::thread cloud_loop([&] {
    while (!stop) {
      cloud_alive = pb::RealClock::Get()->MonotonicMicros();
      const int64_t next = core->CloudStep();
      const int64_t now = pb::RealClock::Get()->MonotonicMicros();
      const int64_t wait = std::clamp<int64_t>(next - now, 0, 100'000);
      if (wait > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait));
    }
    core->Shutdown();  // releases a held PoolLease: the next leader need not wait it out
  });

  std::string stamp = FileStamp(flags.client_certificate);
  auto next_check = std::chrono::steady_clock::now() + kCertificateCheck;
  while (!stop) {
    timespec wait{1, 0};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGTERM || sig == SIGINT) {
      pb::LogInfo("signal ", sig, ": stopping");
      break;
    }
    if (std::chrono::steady_clock::now() < next_check) continue;
    next_check = std::chrono::steady_clock::now() + kCertificateCheck;
    const std::string now_stamp = FileStamp(flags.client_certificate);
    if (now_stamp.empty() || now_stamp == stamp) continue;
    auto rotated = pa::NodeIdentity::FromFiles(flags.client_certificate, key_file);
    if (!rotated.ok() || (*rotated)->node() != node) {
      pb::LogWarning("the node's certificate changed but cannot be used: ",
                     rotated.ok() ? absl::StrCat("it names ", (*rotated)->node())
                                  : std::string(rotated.status().message()));
      continue;
    }
    stamp = now_stamp;
    core->SetIdentity(std::move(*rotated));
    pb::LogInfo("the node's certificate was rotated: the pool gets the new one");
  }
  stop = true;
  cloud_loop.join();
  lan.join();
  peers.Stop();
  (*server)->Stop();
  pb::LogInfo("stopped");
  return exit_code;
}
