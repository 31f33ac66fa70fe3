// poolcoord-sim's shared support (sim.h): names, clocks, the server process
// and its configuration, the cluster CA, latency samples. Used by the
// scenarios (fleet.cc, elector_checks.cc) and by main.cc, which parses flags
// and picks a scenario.
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

namespace poolcoord::sim {

namespace fs = std::filesystem;

int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
int64_t MonoMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string PoolName(int pool) {
  char buf[32];
  snprintf(buf, sizeof buf, "pool-%04d", pool);
  return buf;
}
std::string NodeName(int pool, int slot) {
  char buf[48];
  snprintf(buf, sizeof buf, "pool-%04d-n%03d", pool, slot);
  return buf;
}

std::string TokenFor(const Options& o, const std::string& user) {
  // FNV-1a over seed and name, twice with different bases: stable across runs
  // of the same options, so --write-config-only and a later run agree.
  auto fnv = [&](uint64_t h) {
    for (unsigned char c : absl::StrCat(o.seed, "/", user)) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    return h;
  };
  char buf[40];
  snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(fnv(1469598103934665603ULL)),
           static_cast<unsigned long long>(fnv(0x9e3779b97f4a7c15ULL)));
  return buf;
}

absl::Status WriteServerConfig(const Options& o,
                               const std::map<std::string, std::vector<std::string>>& pools) {
  std::error_code ec;
  fs::create_directories(o.work_dir, ec);
  std::ofstream tokens(fs::path(o.work_dir) / "tokens.csv");
  // kube-apiserver's --token-auth-file format: token,user,uid,"group1,group2"
  tokens << TokenFor(o, kAdminUser) << "," << kAdminUser << ",uid-admin,\"system:masters\"\n";
  std::ofstream membership(fs::path(o.work_dir) / "membership.yaml");
  membership << "pools:\n";
  for (const auto& [pool, nodes] : pools) {
    membership << "  " << pool << ":\n";
    for (const auto& n : nodes) {
      membership << "  - " << n << "\n";
      tokens << TokenFor(o, "system:node:" + n) << ",system:node:" << n << ",uid-" << n
             << ",\"system:nodes\"\n";
    }
  }
  // The cluster CA that signs every node's kubelet certificate (minted here so
  // the server checks delegation proofs against it: --client-ca-file).
  if (absl::Status s = WriteClusterCa(o); !s.ok()) return s;
  std::ofstream kubeconfig(fs::path(o.work_dir) / "cloud.kubeconfig");
  kubeconfig << "apiVersion: v1\nkind: Config\ncurrent-context: sim\nclusters:\n- name: sim\n  cluster:\n"
             << "    server: http://127.0.0.1:" << o.cloud_port << "\nusers:\n- name: sim\n  user:\n"
             << "    token: modelled-cloud\ncontexts:\n- name: sim\n  context:\n    cluster: sim\n"
             << "    user: sim\n";
  if (!tokens || !membership || !kubeconfig) return absl::InternalError("cannot write " + o.work_dir);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(const Options& o) {
  const std::string crt = (fs::path(o.work_dir) / "serving.crt").string();
  const std::string key = (fs::path(o.work_dir) / "serving.key").string();
  // A self-signed serving certificate for 127.0.0.1 doubles as the CA clients
  // trust. Agents authenticate with bearer tokens, so no client CA is needed.
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " + key + " -out " + crt +
      " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return absl::InternalError("openssl req failed: " + cmd);
  const absl::StatusOr<int> port = base::FreeLoopbackPort();
  if (!port.ok()) return port.status();
  std::vector<std::string> args = {
      o.server_binary,
      absl::StrCat("--secure-port=", *port),
      "--bind-address=127.0.0.1",
      "--tls-cert-file=" + crt,
      "--tls-private-key-file=" + key,
      "--token-auth-file=" + (fs::path(o.work_dir) / "tokens.csv").string(),
      "--pool-membership-file=" + (fs::path(o.work_dir) / "membership.yaml").string(),
      // The modelled cloud: the forwarder writes the node Leases there.
      "--kubeconfig=" + (fs::path(o.work_dir) / "cloud.kubeconfig").string(),
      // The nodes' certificates chain to it: delegation proofs are checked
      // against it (agents still authenticate with tokens).
      "--client-ca-file=" + ClusterCaPath(o),
  };
  for (const auto& a : o.server_args) args.push_back(a);
  const std::string log = (fs::path(o.work_dir) / "server.log").string();
  absl::StatusOr<pid_t> pid = base::SpawnWithLog(std::move(args), log, SIGTERM);
  if (!pid.ok()) return pid.status();
  auto p = std::unique_ptr<ServerProcess>(new ServerProcess());
  p->pid_ = *pid;
  p->url_ = absl::StrCat("https://127.0.0.1:", *port);
  p->ca_file_ = crt;
  return p;
}

bool ServerProcess::Alive() {
  if (pid_ <= 0) return false;
  int status;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

ServerProcess::~ServerProcess() {
  if (!Alive()) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid_, SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
}

absl::Status WaitReady(cloud::RestClient* client, double timeout_s) {
  const int64_t deadline = MonoMicros() + static_cast<int64_t>(timeout_s * 1e6);
  absl::Status last = absl::DeadlineExceededError("not ready");
  while (MonoMicros() < deadline) {
    cloud::RequestOptions ro;
    ro.timeout = std::chrono::milliseconds(2000);
    auto r = client->Send("GET", "/readyz", "", ro);
    if (r.ok() && r->status == 200) return absl::OkStatus();
    last = r.ok() ? absl::UnavailableError(absl::StrCat("/readyz: HTTP ", r->status)) : r.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return last;
}

// ------------------------------------------------------------------ latencies --

struct Latencies::Impl {
  absl::Mutex mu;
  std::vector<int64_t> samples ABSL_GUARDED_BY(mu);
  int64_t window ABSL_GUARDED_BY(mu) = 0;
};

Latencies::Latencies() : impl_(std::make_shared<Impl>()) {}

void Latencies::Add(int64_t us) {
  absl::MutexLock l(&impl_->mu);
  impl_->samples.push_back(us);
  ++impl_->window;
}

int64_t Latencies::Percentile(double p) {
  std::vector<int64_t> copy;
  {
    absl::MutexLock l(&impl_->mu);
    copy = impl_->samples;
  }
  if (copy.empty()) return 0;
  size_t idx = std::min(copy.size() - 1, static_cast<size_t>(p / 100.0 * copy.size()));
  std::nth_element(copy.begin(), copy.begin() + idx, copy.end());
  return copy[idx];
}

int64_t Latencies::Count() {
  absl::MutexLock l(&impl_->mu);
  return static_cast<int64_t>(impl_->samples.size());
}

int64_t Latencies::TakeWindow() {
  absl::MutexLock l(&impl_->mu);
  int64_t w = impl_->window;
  impl_->window = 0;
  return w;
}

std::string ClusterCaPath(const Options& o) {
  return (std::filesystem::path(o.work_dir) / "cluster-ca.crt").string();
}

namespace {
std::string ClusterCaKeyPath(const Options& o) {
  return (std::filesystem::path(o.work_dir) / "cluster-ca.key").string();
}
absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

absl::Status WriteClusterCa(const Options& o) {
  if (std::filesystem::exists(ClusterCaPath(o)) && std::filesystem::exists(ClusterCaKeyPath(o))) {
    return absl::OkStatus();
  }
  agent::MintOptions ca_options;
  ca_options.key_type = agent::KeyType::kRsa;
  auto ca = agent::MintCertificateAuthority("poolcoord-sim-cluster-ca", ca_options);
  if (!ca.ok()) return ca.status();
  std::ofstream crt(ClusterCaPath(o)), key(ClusterCaKeyPath(o));
  crt << ca->cert_pem;
  key << ca->key_pem;
  if (!crt || !key) return absl::InternalError("cannot write the cluster CA into " + o.work_dir);
  return absl::OkStatus();
}

absl::StatusOr<agent::MintedKeyPair> ReadClusterCa(const Options& o) {
  if (absl::Status s = WriteClusterCa(o); !s.ok()) return s;
  auto crt = ReadAll(ClusterCaPath(o));
  if (!crt.ok()) return crt.status();
  auto key = ReadAll(ClusterCaKeyPath(o));
  if (!key.ok()) return key.status();
  agent::MintedKeyPair pair;
  pair.cert_pem = *crt;
  pair.key_pem = *key;
  return pair;
}

}  // namespace poolcoord::sim
