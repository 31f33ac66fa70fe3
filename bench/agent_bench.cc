// poolcoord-agent-bench: the edge agent's LAN side under load.
//
//   poolcoord-agent-bench verify [--peers=500] [--rounds=20] [--ca-key=rsa|ecdsa] [--json=F]
//     Heartbeats verified per second of one core's CPU time, by the agent's own
//     HeartbeatVerifier, for ECDSA P-256 and RSA 2048 node keys, with the
//     certificate cache and without it (every heartbeat's certificate chain
//     verified again); signing per second; datagram sizes.
//   poolcoord-agent-bench lan [--peers=500] [--interval=5] [--warmup=10] [--duration=60]
//                             [--key=ecdsa|rsa] [--json=F]
//     One agent (this program re-run as `receiver`: AgentCore + UdpTransport +
//     RunLanLoop, the LAN side of poolcoord-agent) on 127.0.0.1 receives the
//     heartbeats of `peers` members every `interval` seconds, each member at its
//     own phase, and sends its own rounds to all of them; this process plays the
//     members; --cut-off=R makes that share of them say "cut off" (their
//     heartbeats are then verified every time), --verify-all turns the lazy
//     signature checks off. Reported: the receiver's CPU (user + system, over `duration` after
//     `warmup`) as a share of one core, its VmRSS and VmHWM, what it accepted
//     and dropped.
// Certificates are minted in memory; the CA has an RSA 2048 key, as kubeadm's.
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/agent_core.h"
#include "agent/heartbeat.h"
#include "agent/heartbeat_verifier.h"
#include "agent/lan_loop.h"
#include "agent/minted_pki.h"
#include "agent/node_certificate.h"
#include "agent/udp_transport.h"
#include "base/clock.h"
#include "base/flag_set.h"
#include "bench/bench_flags.h"

namespace pa = poolcoord::agent;
namespace pb = poolcoord::base;

namespace {

using poolcoord::bench::Must;
using poolcoord::bench::ParseFlags;

constexpr char kUsage[] =
    "poolcoord-agent-bench verify [--peers=500] [--rounds=20] [--ca-key=rsa|ecdsa] [--json=FILE]\n"
    "                                    [--keys=ecdsa,rsa] [--cache=on,off]\n"
    "       poolcoord-agent-bench lan [--peers=500] [--interval=5] [--warmup=10] [--duration=60]\n"
    "                                 [--key=ecdsa|rsa] [--ca-key=rsa|ecdsa] [--cut-off=RATIO]\n"
    "                                 [--verify-all] [--json=FILE]";

int64_t ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

int64_t ProcessCpuUs() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (static_cast<int64_t>(ru.ru_utime.tv_sec) + ru.ru_stime.tv_sec) * 1'000'000 +
         ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

int64_t StatusKib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + std::strlen(key));
  }
  return -1;
}

std::string NodeName(int i) { return absl::StrCat("edge-", i); }

// The cluster CA and `n` member identities (nodes edge-1 .. edge-n); RSA
// members share `rsa_keys` keys (RSA key generation is slow; verification cost
// does not depend on which key).
struct Fleet {
  pa::MintedKeyPair ca;
  std::shared_ptr<const pa::CertificateAuthority> authority;
  std::vector<pa::MintedKeyPair> pairs;  // index 0: the receiver (edge-0)
  std::vector<std::shared_ptr<const pa::NodeIdentity>> ids;
};

Fleet MakeFleet(int n, pa::KeyType type, const std::string& ca_key) {
  Fleet f;
  pa::MintOptions ca_options;
  ca_options.key_type = ca_key == "ecdsa" ? pa::KeyType::kEcdsaP256 : pa::KeyType::kRsa;
  f.ca = Must(pa::MintCertificateAuthority("bench-cluster-ca", ca_options), "CA");
  f.authority = Must(pa::CertificateAuthority::FromPem(f.ca.cert_pem), "CA bundle");
  std::vector<std::string> rsa_keys;
  if (type == pa::KeyType::kRsa) {
    for (int k = 0; k < 8; ++k) {
      pa::MintOptions o;
      o.key_type = pa::KeyType::kRsa;
      o.common_name = "key";
      rsa_keys.push_back(Must(pa::MintCertificateAuthority("key", o), "RSA key").key_pem);
    }
  }
  for (int i = 0; i <= n; ++i) {
    pa::MintOptions o;
    o.key_type = type;
    o.common_name = absl::StrCat(pa::kNodeUserPrefix, NodeName(i));
    o.organizations = {pa::kNodesGroup};
    if (!rsa_keys.empty()) o.key_pem = rsa_keys[i % rsa_keys.size()];
    f.pairs.push_back(Must(pa::MintCertificate(f.ca, o), "node certificate"));
    f.ids.push_back(Must(pa::NodeIdentity::FromPem(f.pairs.back().cert_pem, f.pairs.back().key_pem),
                         "node identity"));
  }
  return f;
}

std::string SignedHeartbeat(const pa::NodeIdentity& id, uint64_t seq, const pa::BootId& boot,
                            const std::string& pool, bool reachable = true) {
  pa::Heartbeat hb;
  hb.node = id.node();
  hb.pool = pool;
  hb.boot_id = boot;
  hb.sequence = seq;
  hb.cloud_reachable = reachable;
  hb.sent_wall_us = pb::RealClock::Get()->NowMicros();
  hb.certificate_fingerprint = id.fingerprint();
  std::string body = Must(pa::EncodeHeartbeatBody(hb), "encode");
  return Must(pa::EncodeHeartbeatDatagram(body, Must(id.Sign(body), "sign")), "datagram");
}

std::shared_ptr<pa::PoolView> PoolOf(int peers, const std::string& self, const std::string& address) {
  auto pool = std::make_shared<pa::PoolView>();
  pool->pool = "bench-pool";
  pool->self = self;
  for (int i = 0; i <= peers; ++i) pool->members[NodeName(i)] = address;
  return pool;
}

// ---------------------------------------------------------------- verify

int Verify(int argc, char** argv) {
  int peers = 500, rounds = 20;
  std::string ca_key = "rsa", keys = "ecdsa,rsa", caches = "on,off", out;
  pb::FlagSet flags;
  flags.Int("peers", &peers, 1, 100'000, "Members of the pool.");
  flags.Int("rounds", &rounds, 1, 100'000, "Heartbeats per member.");
  flags.String("ca-key", &ca_key, "The CA's key: rsa or ecdsa.");
  flags.String("keys", &keys, "The members' keys measured: ecdsa, rsa or both.");
  flags.String("cache", &caches, "Verification with the chain cache on, off or both.");
  flags.String("json", &out, "Also write the results to this file.");
  ParseFlags(flags, argc, argv, 2, kUsage);
  std::string json = absl::StrCat("{\"peers\":", peers, ",\"rounds\":", rounds,
                                  ",\"ca_key\":\"", ca_key == "ecdsa" ? "ecdsa-p256" : "rsa-2048",
                                  "\",\"results\":[");
  bool first = true;
  for (pa::KeyType type : {pa::KeyType::kEcdsaP256, pa::KeyType::kRsa}) {
    if (keys.find(type == pa::KeyType::kRsa ? "rsa" : "ecdsa") == std::string::npos) continue;
    const char* key = type == pa::KeyType::kRsa ? "rsa-2048" : "ecdsa-p256";
    Fleet fleet = MakeFleet(peers, type, ca_key);
    std::vector<std::string> datagrams;
    pa::BootId boot{};
    boot.fill(1);
    for (int r = 1; r <= rounds; ++r) {
      for (int i = 1; i <= peers; ++i) datagrams.push_back(SignedHeartbeat(*fleet.ids[i], r, boot, "bench-pool"));
    }
    // Signing: one heartbeat per round (the same bytes go to every member).
    const int64_t s0 = ThreadCpuUs();
    const int signs = type == pa::KeyType::kRsa ? 500 : 2000;
    for (int k = 0; k < signs; ++k) Must(fleet.ids[0]->Sign(datagrams[k % datagrams.size()]), "sign");
    const double sign_rate = signs * 1e6 / std::max<int64_t>(1, ThreadCpuUs() - s0);
    // Chain verification alone (what a certificate datagram costs once).
    const int64_t c0 = ThreadCpuUs();
    const int chains = 500;
    for (int k = 0; k < chains; ++k) {
      auto r = pa::NodeCertificate::Verify(fleet.ids[1 + k % peers]->certificate_der(), *fleet.authority,
                                           pb::RealClock::Get()->NowMicros());
      if (r.error != pa::CertificateError::kNone) {
        std::fprintf(stderr, "chain: %s\n", r.detail.c_str());
        return 1;
      }
    }
    const double chain_rate = chains * 1e6 / std::max<int64_t>(1, ThreadCpuUs() - c0);
    for (bool cache : {true, false}) {
      if (caches.find(cache ? "on" : "off") == std::string::npos) continue;
      // Every heartbeat's signature checked (no lazy checks): the ceiling.
      pa::VerifierOptions options;
      options.cache_verified_certificates = cache;
      pa::HeartbeatVerifier verifier(fleet.authority, pb::RealClock::Get(), options);
      verifier.SetPool(PoolOf(peers, NodeName(0), "127.0.0.1"));
      for (int i = 1; i <= peers; ++i) {
        auto r = verifier.Receive(*pa::EncodeCertificateDatagram(fleet.ids[i]->certificate_der()));
        if (r.kind != pa::HeartbeatVerifier::Result::Kind::kCertificate) {
          std::fprintf(stderr, "certificate refused: %s\n", r.detail.c_str());
          return 1;
        }
      }
      const int64_t t0 = ThreadCpuUs();
      int64_t accepted = 0;
      for (const std::string& d : datagrams) {
        accepted += verifier.Receive(d).kind == pa::HeartbeatVerifier::Result::Kind::kHeartbeat;
      }
      const int64_t cpu = std::max<int64_t>(1, ThreadCpuUs() - t0);
      const double rate = accepted * 1e6 / cpu;
      std::printf("%-10s cache %-3s  %9.0f heartbeats verified/s per core  (%lld of %zu accepted, %.1f us each)\n",
                  key, cache ? "on" : "off", rate, static_cast<long long>(accepted), datagrams.size(),
                  static_cast<double>(cpu) / std::max<int64_t>(1, accepted));
      absl::StrAppend(&json, first ? "" : ",", "{\"key\":\"", key, "\",\"cache\":", cache ? "true" : "false",
                      ",\"verified_per_s\":", static_cast<int64_t>(rate), ",\"accepted\":", accepted,
                      ",\"datagrams\":", datagrams.size(), ",\"us_per_heartbeat\":",
                      absl::StrFormat("%.2f", static_cast<double>(cpu) / std::max<int64_t>(1, accepted)),
                      ",\"sign_per_s\":", static_cast<int64_t>(sign_rate), ",\"chain_per_s\":",
                      static_cast<int64_t>(chain_rate), ",\"heartbeat_bytes\":", datagrams[0].size(),
                      ",\"certificate_bytes\":", fleet.ids[1]->certificate_der().size(), "}");
      first = false;
    }
    std::printf("%-10s signing %9.0f/s per core; chain verification %7.0f/s; heartbeat %zu B, certificate %zu B DER\n",
                key, sign_rate, chain_rate, datagrams[0].size(), fleet.ids[1]->certificate_der().size());
  }
  json += "]}";
  if (!out.empty()) std::ofstream(out) << json << "\n";
  return 0;
}

// ---------------------------------------------------------------- lan

// The receiver: the LAN side of one agent, exactly as poolcoord-agent runs it.
int Receiver(int argc, char** argv) {
  std::string dir;
  int peers = 500, peer_port = 0, interval = 5, warmup = 10, duration = 60;
  bool verify_all = false;
  pb::FlagSet flags;
  flags.String("dir", &dir, "The folder with ca.pem and self.pem.");
  flags.Int("peers", &peers, 1, 100'000, "Members of the pool.");
  flags.Int("peer-port", &peer_port, 0, 65535, "The members' UDP port.");
  flags.Int("interval", &interval, 1, 3600, "Seconds between heartbeats.");
  flags.Int("warmup", &warmup, 0, 3600, "Seconds before the measurement.");
  flags.Int("duration", &duration, 1, 86400, "Seconds measured.");
  flags.Bool("verify-all", &verify_all, "Verify every heartbeat, not only those that matter.");
  ParseFlags(flags, argc, argv, 2, kUsage);
  const int64_t interval_us = interval * 1'000'000LL;
  auto ca = Must(pa::CertificateAuthority::FromFile(dir + "/ca.pem"), "CA");
  std::shared_ptr<const pa::NodeIdentity> id =
      Must(pa::NodeIdentity::FromFiles(dir + "/self.pem", dir + "/self.pem"), "identity");
  auto udp = Must(pa::UdpTransport::Open("127.0.0.1", 0, static_cast<uint16_t>(peer_port)), "socket");
  pa::AgentOptions options;
  options.freshness.heartbeat_interval_us = interval_us;
  options.lazy_verification = !verify_all;
  auto core = Must(pa::AgentCore::New(id, ca, pb::RealClock::Get(), udp.get(), nullptr, options), "core");
  core->SetPool(PoolOf(peers, id->node(), "127.0.0.1"));
  std::printf("port %d\n", udp->port());
  std::fflush(stdout);

  std::atomic<bool> stop{false};
  std::thread lan([&] {
    absl::Status s = pa::RunLanLoop(core.get(), udp.get(), pb::RealClock::Get(), &stop);
    if (!s.ok()) std::fprintf(stderr, "LAN loop: %s\n", s.ToString().c_str());
  });
  std::this_thread::sleep_for(std::chrono::seconds(warmup));
  const int64_t cpu0 = ProcessCpuUs();
  const auto wall0 = std::chrono::steady_clock::now();
  const int64_t accepted0 = core->verifier_stats().heartbeats_accepted.load() +
                            core->verifier_stats().heartbeats_heard.load();
  std::this_thread::sleep_for(std::chrono::seconds(duration));
  const int64_t cpu = ProcessCpuUs() - cpu0;
  const int64_t wall = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - wall0)
                           .count();
  const int64_t accepted = core->verifier_stats().heartbeats_accepted.load() +
                           core->verifier_stats().heartbeats_heard.load() - accepted0;
  const auto status = core->status();
  std::string drops;
  int64_t dropped_total = 0;
  for (size_t r = 0; r < pa::kDropReasonCount; ++r) {
    const int64_t n = core->verifier_stats().dropped[r].load();
    dropped_total += n;
    if (n > 0) absl::StrAppend(&drops, drops.empty() ? "" : ",", "\"", pa::DropReasonName(static_cast<pa::DropReason>(r)), "\":", n);
  }
  std::printf(
      "{\"peers\":%d,\"interval_s\":%lld,\"duration_s\":%d,\"cpu_us\":%lld,\"wall_us\":%lld,"
      "\"cpu_share\":%.5f,\"rss_kib\":%lld,\"hwm_kib\":%lld,\"accepted\":%lld,\"expected\":%lld,"
      "\"peers_heard\":%zu,\"peers_fresh\":%zu,\"verified\":%lld,\"heard\":%lld,\"rounds\":%lld,\"datagrams_sent\":%lld,\"dropped_total\":%lld,"
      "\"dropped\":{%s},\"certificates_accepted\":%lld}\n",
      peers, static_cast<long long>(interval_us / 1'000'000), duration, static_cast<long long>(cpu),
      static_cast<long long>(wall), static_cast<double>(cpu) / wall,
      static_cast<long long>(StatusKib("VmRSS:")), static_cast<long long>(StatusKib("VmHWM:")),
      static_cast<long long>(accepted), static_cast<long long>(peers * (wall / interval_us)),
      status.peers_heard, status.peers_fresh,
      static_cast<long long>(core->verifier_stats().heartbeats_accepted.load()),
      static_cast<long long>(core->verifier_stats().heartbeats_heard.load()),
      static_cast<long long>(core->stats().rounds.load()),
      static_cast<long long>(core->stats().datagrams_sent.load()),
      static_cast<long long>(dropped_total), drops.c_str(),
      static_cast<long long>(core->verifier_stats().certificates_accepted.load()));
  std::fflush(stdout);
  stop = true;
  lan.join();
  return 0;
}

int Lan(int argc, char** argv) {
  const char* self_path = argv[0];
  int peers = 500, interval = 5, warmup = 10, duration = 60;
  std::string key = "ecdsa", ca_key = "rsa", out;
  double cut_off = 0;
  bool verify_all = false;
  pb::FlagSet flags;
  flags.Int("peers", &peers, 1, 100'000, "Members of the pool.");
  flags.Int("interval", &interval, 1, 3600, "Seconds between heartbeats.");
  flags.Int("warmup", &warmup, 0, 3600, "Seconds before the measurement.");
  flags.Int("duration", &duration, 1, 86400, "Seconds measured.");
  flags.String("key", &key, "The members' keys: ecdsa or rsa.");
  flags.String("ca-key", &ca_key, "The CA's key: rsa or ecdsa.");
  flags.Double("cut-off", &cut_off, "The ratio of members cut off from the cloud, in [0, 1].");
  flags.Bool("verify-all", &verify_all, "Verify every heartbeat, not only those that matter.");
  flags.String("json", &out, "Also write the result to this file.");
  ParseFlags(flags, argc, argv, 2, kUsage);
  const pa::KeyType type = key == "rsa" ? pa::KeyType::kRsa : pa::KeyType::kEcdsaP256;
  if (cut_off < 0 || cut_off > 1) {
    std::fprintf(stderr, "--cut-off: a ratio in [0, 1]\n");
    return 2;
  }
  const int cut_members = static_cast<int>(cut_off * peers + 0.5);
  Fleet fleet = MakeFleet(peers, type, ca_key);

  char tmpl[] = "/tmp/poolcoord-agent-bench.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/ca.pem") << fleet.ca.cert_pem;
  std::ofstream(dir + "/self.pem") << fleet.pairs[0].cert_pem << fleet.pairs[0].key_pem;

  // The members' side: one socket, which also receives the agent's own rounds.
  auto members = Must(pa::UdpTransport::Open("127.0.0.1", 0, 0), "members' socket");

  int out_pipe[2];
  if (pipe(out_pipe) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    const std::string args[] = {"receiver", "--dir=" + dir, absl::StrCat("--peers=", peers),
                                absl::StrCat("--peer-port=", members->port()),
                                absl::StrCat("--interval=", interval), absl::StrCat("--warmup=", warmup),
                                absl::StrCat("--duration=", duration),
                                absl::StrCat("--verify-all=", verify_all ? "true" : "false")};
    std::vector<char*> argv{const_cast<char*>(self_path)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  FILE* from_child = fdopen(out_pipe[0], "r");
  char line[4096];
  int port = 0;
  if (fgets(line, sizeof(line), from_child) == nullptr || std::sscanf(line, "port %d", &port) != 1) {
    std::fprintf(stderr, "the receiver did not start\n");
    return 1;
  }
  const std::string receiver = absl::StrCat("127.0.0.1:", port);

  // Each member heartbeats at its own phase; its certificate goes with its
  // first heartbeat, and again when the agent asks.
  std::map<std::string, int> by_name;
  for (int i = 1; i <= peers; ++i) by_name[NodeName(i)] = i;
  pa::BootId boot{};
  boot.fill(9);
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::seconds(warmup + duration + 2);
  const int64_t slot_us = interval * 1'000'000LL / peers;
  int64_t next = 0;  // event index: member (next % peers) + 1, round next / peers + 1
  int64_t sent = 0, requests = 0;
  std::vector<bool> cert_sent(peers + 1, false);
  while (std::chrono::steady_clock::now() < end) {
    const auto due = start + std::chrono::microseconds(next * slot_us);
    auto drain = [&](int timeout_ms) {
      auto n = members->Receive(timeout_ms, [&](absl::string_view bytes, int64_t) {
        auto d = pa::DecodeDatagram(bytes);
        if (!d.ok() || d->type != pa::DatagramType::kCertificateRequest) return;  // the agent's rounds
        for (int i = 1; i <= peers; ++i) {
          if (fleet.ids[i]->fingerprint() == d->request.fingerprint) {
            members->Send(receiver, *pa::EncodeCertificateDatagram(fleet.ids[i]->certificate_der())).IgnoreError();
            ++requests;
          }
        }
      });
      (void)n;
    };
    while (std::chrono::steady_clock::now() < due) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - std::chrono::steady_clock::now());
      drain(static_cast<int>(std::max<int64_t>(1, left.count())));
    }
    const int member = static_cast<int>(next % peers) + 1;
    const uint64_t round = static_cast<uint64_t>(next / peers) + 1;
    if (!cert_sent[member]) {
      members->Send(receiver, *pa::EncodeCertificateDatagram(fleet.ids[member]->certificate_der())).IgnoreError();
      cert_sent[member] = true;
    }
    members->Send(receiver, SignedHeartbeat(*fleet.ids[member], round, boot, "bench-pool",
                                            /*reachable=*/member > cut_members))
        .IgnoreError();
    ++sent;
    ++next;
  }
  std::string result;
  while (fgets(line, sizeof(line), from_child) != nullptr) {
    if (line[0] == '{') result = line;
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::remove((dir + "/ca.pem").c_str());
  std::remove((dir + "/self.pem").c_str());
  rmdir(dir.c_str());
  if (result.empty()) {
    std::fprintf(stderr, "no result from the receiver (status %d)\n", status);
    return 1;
  }
  while (!result.empty() && (result.back() == '\n')) result.pop_back();
  result.pop_back();  // the closing brace
  absl::StrAppend(&result, ",\"cut_off_members\":", cut_members, ",\"verify_all\":",
                  verify_all ? "true" : "false", ",\"key\":\"",
                  type == pa::KeyType::kRsa ? "rsa-2048" : "ecdsa-p256",
                  "\",\"members_sent\":", sent, ",\"certificate_requests_answered\":", requests, "}");
  std::printf("%s\n", result.c_str());
  if (!out.empty()) std::ofstream(out) << result << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "verify") return Verify(argc, argv);
  if (mode == "lan") return Lan(argc, argv);
  if (mode == "receiver") return Receiver(argc, argv);
  const bool help = mode == "--help" || mode == "-h";
  std::fprintf(help ? stdout : stderr, "usage: %s\n(each mode's flags: MODE --help)\n", kUsage);
  return help ? 0 : 2;
}
