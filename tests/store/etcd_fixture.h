// A real etcd for tests: Debian's etcd-server binary on 127.0.0.1, free client
// and peer ports, data on tmpfs (/dev/shm), killed and removed at the end.
//
// Usage (Boost.Test): BOOST_FIXTURE_TEST_SUITE(s,
// poolcoord::testing::EtcdFixture) or one shared instance; endpoint() is
// "http://127.0.0.1:<port>".
//
// Nothing is skipped: without an etcd binary (install etcd-server, see
// scripts/install-deps.sh --test) or when etcd does not become healthy within
// 15 s, the constructor throws with the reason and etcd's log tail, which
// Boost.Test reports as a failure. $POOLCOORD_ETCD names another binary.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>

#include "base/subprocess.h"
#include "store/etcd3_client.h"

namespace poolcoord::testing {

class EtcdFixture {
 public:
  EtcdFixture() { Start(); }
  ~EtcdFixture() { Stop(); }
  EtcdFixture(const EtcdFixture&) = delete;
  EtcdFixture& operator=(const EtcdFixture&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  pid_t pid() const { return pid_; }

 private:
  static std::string FindBinary() {
    if (const char* env = getenv("POOLCOORD_ETCD"); env != nullptr && *env != '\0') {
      return access(env, X_OK) == 0 ? std::string(env) : "";
    }
    const char* path = getenv("PATH");
    std::stringstream dirs(path ? path : "/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
      std::filesystem::path candidate = std::filesystem::path(dir) / "etcd";
      if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
    return "";
  }

  static int FreePort() {
    absl::StatusOr<int> port = base::FreeLoopbackPort();
    if (!port.ok()) throw std::runtime_error(std::string(port.status().message()));
    return *port;
  }

  std::string LogTail() const {
    std::ifstream in(dir_ + "/etcd.log");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
  }

  void Start() {
    const std::string binary = FindBinary();
    if (binary.empty()) {
      throw std::runtime_error(
          "etcd binary not found (PATH, or $POOLCOORD_ETCD when set): install Debian's "
          "etcd-server (scripts/install-deps.sh --test)");
    }
    char tmpl[] = "/dev/shm/poolcoord-etcd-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp under /dev/shm failed");
    dir_ = tmpl;
    const int client_port = FreePort();
    int peer_port = FreePort();
    while (peer_port == client_port) peer_port = FreePort();
    endpoint_ = "http://127.0.0.1:" + std::to_string(client_port);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
    std::vector<std::string> args = {binary,
                                     "--name=test",
                                     "--data-dir=" + dir_ + "/data",
                                     "--listen-client-urls=" + endpoint_,
                                     "--advertise-client-urls=" + endpoint_,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=test=" + peer,
                                     "--initial-cluster-state=new",
                                     "--log-level=warn"};
    const std::string log = dir_ + "/etcd.log";
    // etcd must not outlive a test that crashes.
    absl::StatusOr<pid_t> pid = base::SpawnWithLog(std::move(args), log, SIGKILL);
    if (!pid.ok()) throw std::runtime_error(std::string(pid.status().message()));
    pid_ = *pid;

    store::Etcd3ClientOptions config;
    config.endpoints = {endpoint_};
    config.timeout = std::chrono::milliseconds(1000);
    auto client = store::Etcd3Client::New(config);
    if (!client.ok()) throw std::runtime_error(std::string(client.status().message()));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      int wstatus = 0;
      if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("etcd exited at startup: " + LogTail());
      }
      // Healthy: the v3 API answers (etcd's /health wants GET; the gateway
      // POST).
      if ((*client)->Call("/v3/maintenance/status", "{}", true).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::string tail = LogTail();
    Stop();
    throw std::runtime_error("etcd did not become healthy within 15 s: " + tail);
  }

  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
      dir_.clear();
    }
  }

  std::string dir_;
  std::string endpoint_;
  pid_t pid_ = -1;
};

// etcd's /metrics at `endpoint` as text; empty when unreadable.
inline std::string EtcdMetricsText(const std::string& endpoint) {
  std::string body;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return "";
  const std::string url = endpoint + "/metrics";
  auto append = +[](char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
  };
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_cleanup(curl);
  return rc == CURLE_OK ? body : "";
}

// One etcd for a whole test module: started on first use, killed at exit.
inline EtcdFixture& SharedEtcd() {
  static EtcdFixture etcd;
  return etcd;
}

}  // namespace poolcoord::testing
