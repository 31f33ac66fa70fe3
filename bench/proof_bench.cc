// poolcoord-proof-bench: the cost of verifiable delegation on the
// server, and the fixtures for measuring it end to end.
//
//   poolcoord-proof-bench inproc [--members=200] [--rounds=10] [--repeats=3] [--json=F]
//     In process, one thread, CPU time of that thread (per core), for ECDSA
//     P-256 and RSA 2048 member keys (the CA has an RSA 2048 key, as kubeadm's):
//     - DelegationProofs::Verify per proof, the certificate cache warm (the
//       steady state: a certificate is verified once per 5 minutes) and cold
//       (its chain verified on every proof);
//     - DelegatedLease writes per second through the lease rules inside the
//       memory store's Update (as the API runs them), with --delegation-proof=
//       required (every write carries a fresh proof) and =off (the same writes
//       without one), alternating `repeats` times in the same run.
//   poolcoord-proof-bench mint DIR KEYS.TSV [--key=ecdsa|rsa]
//     A cluster CA (DIR/ca.crt) and a node certificate and key for every node of
//     KEYS.TSV (bench/fixtures.py's: token, node, pool), in DIR.
//   poolcoord-proof-bench sign DIR KEYS.TSV CHALLENGES.TSV ROUNDS FIRST_SEQUENCE
//     Writes to stdout ROUNDS rounds of KEYS.TSV's lines, round after round,
//     each followed by the node's heartbeat over its pool's challenge
//     (CHALLENGES.TSV: pool, challenge), signed with its key, base64, and its
//     certificate, base64 (fields f3 and f4 for bench/loadgen's templates);
//     sequence numbers FIRST_SEQUENCE, FIRST_SEQUENCE + 1, ... per round.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/clock.h"
#include "base/flag_set.h"
#include "election/delegation_proof.h"
#include "election/heartbeat.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "election/minted_pki.h"
#include "election/node_certificate.h"
#include "store/memory_store.h"
#include "tests/rules_writes.h"

namespace pe = poolcoord::election;
namespace ps = poolcoord::store;
namespace pt = poolcoord::testing;

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "poolcoord-proof-bench: %s\n", what.c_str());
  std::exit(1);
}

using poolcoord::bench::Must;
using poolcoord::bench::ParseFlags;

constexpr char kUsage[] =
    "poolcoord-proof-bench inproc [--members=200] [--rounds=10] [--repeats=3] [--json=FILE]\n"
    "       poolcoord-proof-bench mint DIR KEYS.TSV [--key=ecdsa|rsa]\n"
    "       poolcoord-proof-bench sign DIR KEYS.TSV CHALLENGES.TSV ROUNDS FIRST_SEQUENCE";

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  if (!in) Die("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out || !(out << text)) Die("cannot write " + path);
}

std::vector<std::vector<std::string>> Tsv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(Read(path), '\n', absl::SkipEmpty())) {
    rows.push_back(absl::StrSplit(line, '\t'));
  }
  return rows;
}

std::string SignedDatagram(const pe::NodeIdentity& id, const std::string& pool,
                           const std::string& challenge, uint64_t sequence) {
  pe::Heartbeat hb;
  hb.node = id.node();
  hb.pool = pool;
  hb.boot_id.fill(0x5a);
  hb.sequence = sequence;
  hb.cloud_reachable = false;
  hb.challenge = challenge;
  hb.sent_wall_us = poolcoord::base::RealClock::Get()->NowMicros();
  hb.certificate_fingerprint = id.fingerprint();
  const std::string body = Must(pe::EncodeHeartbeatBody(hb), "heartbeat body");
  const std::string sig = Must(id.Sign(body), "signing");
  return Must(pe::EncodeHeartbeatDatagram(body, sig), "datagram");
}

// ---------------------------------------------------------------- inproc

const char* KeyName(pe::KeyType t) { return t == pe::KeyType::kRsa ? "RSA 2048" : "ECDSA P-256"; }

struct InprocResult {
  pe::KeyType key;
  double verify_warm_us = 0, verify_cold_us = 0;
  std::vector<double> required_per_s, off_per_s;
  size_t heartbeat_bytes = 0, certificate_bytes = 0;
};

// One pool of `members` (member 0 leads) over a memory store, proofs in `mode`.
struct Server {
  Server(poolcoord::base::FakeClock* clock, pe::ProofMode mode, const std::string& ca_pem,
         int members)
      : store(ps::NewMemoryStore({})), proofs(clock, Options(mode), nullptr),
        rules(clock, &membership, Rules(&proofs)) {
    if (!proofs.SetClientCaPem(ca_pem).ok()) Die("CA");
    std::vector<std::string> names;
    for (int i = 0; i < members; ++i) names.push_back(absl::StrFormat("p0-n%d", i));
    if (!membership.Replace("file", {{"p0", names}}).ok()) Die("membership");
    absl::Status s = pt::WriteThroughRules(store.get(), rules, pt::NodeUser("p0-n0"),
                                           pt::PoolLeaseFor("p0", "p0-n0"));
    if (!s.ok()) Die("PoolLease: " + s.ToString());
  }
  static pe::DelegationProofOptions Options(pe::ProofMode mode) {
    pe::DelegationProofOptions o;
    o.mode = mode;
    return o;
  }
  static pe::LeaseRulesOptions Rules(pe::DelegationProofs* p) {
    pe::LeaseRulesOptions o;
    o.delegation_proofs = p;
    return o;
  }
  std::string Challenge() {
    auto pl = Must(store->Get(ps::Kind::kPoolLease, "p0"), "PoolLease");
    const auto& list = ps::DelegationOf(*pl).challenges;
    if (list.empty()) Die("no challenge issued");
    return list.front().value;
  }

  std::unique_ptr<ps::Store> store;
  pe::MembershipIndex membership;
  pe::DelegationProofs proofs;
  pe::LeaseRules rules;
};

InprocResult Inproc(pe::KeyType key, int members, int rounds, int repeats) {
  InprocResult r;
  r.key = key;
  const pe::MintedKeyPair ca = Must(pe::MintCertificateAuthority("bench-ca", [] {
    pe::MintOptions o;
    o.key_type = pe::KeyType::kRsa;
    return o;
  }()), "CA");
  // One key for every member (RSA generation is slow), one certificate each.
  const pe::MintedKeyPair first = Must(pe::MintNodeCertificate(ca, "p0-n0", key), "node");
  std::vector<std::unique_ptr<pe::NodeIdentity>> ids;
  for (int i = 0; i < members; ++i) {
    pe::MintOptions o;
    o.key_type = key;
    o.key_pem = first.key_pem;
    o.common_name = absl::StrFormat("system:node:p0-n%d", i);
    o.organizations = {"system:nodes"};
    const pe::MintedKeyPair pair = Must(pe::MintCertificate(ca, o), "node certificate");
    ids.push_back(Must(pe::NodeIdentity::FromPem(pair.cert_pem, pair.key_pem), "identity"));
  }

  poolcoord::base::FakeClock clock(poolcoord::base::RealClock::Get()->NowMicros());
  clock.Advance(std::chrono::seconds(100));
  Server required(&clock, pe::ProofMode::kRequired, ca.cert_pem, members);
  Server off(&clock, pe::ProofMode::kOff, ca.cert_pem, members);
  const std::string challenge = required.Challenge();

  // The members' proofs, signed ahead (signing is the member's cost, not the
  // server's): rounds x members, sequence = round + 1 (+ rounds per repeat).
  const int total_rounds = rounds * repeats;
  std::vector<std::vector<ps::DelegationProof>> proofs(static_cast<size_t>(total_rounds));
  for (int round = 0; round < total_rounds; ++round) {
    for (int i = 1; i < members; ++i) {
      const std::string d = SignedDatagram(*ids[static_cast<size_t>(i)], "p0", challenge,
                                           static_cast<uint64_t>(round + 1));
      r.heartbeat_bytes = d.size();
      r.certificate_bytes = ids[static_cast<size_t>(i)]->certificate_der().size();
      proofs[static_cast<size_t>(round)].push_back(
          {absl::Base64Escape(d), absl::Base64Escape(ids[static_cast<size_t>(i)]->certificate_der())});
    }
  }
  auto lease = [&](int i, int64_t renew) {
    return pt::DelegatedLeaseFor(absl::StrFormat("p0-n%d", i), "p0", "p0-n0", 7, renew);
  };
  const auto leader = pt::NodeUser("p0-n0");

  // Verify alone, warm cache (after one pass that fills it) and cold.
  {
    auto pl = Must(required.store->Get(ps::Kind::kPoolLease, "p0"), "PoolLease");
    auto verify_all = [&](bool cold) {
      const double t0 = ThreadCpuSeconds();
      size_t n = 0;
      for (int round = 0; round < rounds; ++round) {
        for (int i = 1; i < members; ++i) {
          if (cold && !required.proofs.SetClientCaPem(ca.cert_pem).ok()) Die("CA");
          auto v = required.proofs.Verify(proofs[static_cast<size_t>(round)][static_cast<size_t>(i - 1)],
                                          absl::StrFormat("p0-n%d", i), "p0", *pl, std::nullopt, 7);
          if (!v.ok()) Die("verify: " + v.status().ToString());
          ++n;
        }
      }
      return (ThreadCpuSeconds() - t0) * 1e6 / static_cast<double>(n);
    };
    verify_all(false);
    r.verify_warm_us = verify_all(false);
    r.verify_cold_us = verify_all(true);
  }

  // Writes through the rules, alternating the two modes.
  int64_t renew = clock.NowMicros();
  for (int rep = 0; rep < repeats; ++rep) {
    {
      const double t0 = ThreadCpuSeconds();
      size_t n = 0;
      for (int round = rep * rounds; round < (rep + 1) * rounds; ++round) {
        for (int i = 1; i < members; ++i) {
          ps::Object dl = lease(i, ++renew);
          ps::MutableDelegation(dl).proof =
              proofs[static_cast<size_t>(round)][static_cast<size_t>(i - 1)];
          absl::Status s = pt::WriteThroughRules(required.store.get(), required.rules, leader, dl);
          if (!s.ok()) Die("write with proof: " + s.ToString());
          ++n;
        }
      }
      r.required_per_s.push_back(static_cast<double>(n) / (ThreadCpuSeconds() - t0));
    }
    {
      const double t0 = ThreadCpuSeconds();
      size_t n = 0;
      for (int round = rep * rounds; round < (rep + 1) * rounds; ++round) {
        for (int i = 1; i < members; ++i) {
          absl::Status s = pt::WriteThroughRules(off.store.get(), off.rules, leader, lease(i, ++renew));
          if (!s.ok()) Die("write: " + s.ToString());
          ++n;
        }
      }
      r.off_per_s.push_back(static_cast<double>(n) / (ThreadCpuSeconds() - t0));
    }
  }
  if (required.proofs.Count("accepted") == 0) Die("no proof was accepted");
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int RunInproc(int argc, char** argv) {
  int members = 200, rounds = 10, repeats = 3;
  std::string out;
  poolcoord::base::FlagSet flags;
  flags.Int("members", &members, 1, 100'000, "Members of the pool, each writing its proof.");
  flags.Int("rounds", &rounds, 1, 100'000, "Renewals per member.");
  flags.Int("repeats", &repeats, 1, 1000, "Runs of each series; the median is reported.");
  flags.String("json", &out, "Also write the results to this file.");
  ParseFlags(flags, argc, argv, 2, kUsage);
  std::string json = "[";
  std::printf("| member key | Verify, cache warm | Verify, chain each time | writes/s per core, "
              "proofs required | writes/s per core, proofs off | required / off | heartbeat | "
              "certificate (DER) |\n|---|---|---|---|---|---|---|---|\n");
  for (pe::KeyType key : {pe::KeyType::kEcdsaP256, pe::KeyType::kRsa}) {
    InprocResult r = Inproc(key, members, rounds, repeats);
    const double req = Median(r.required_per_s), off = Median(r.off_per_s);
    std::printf("| %s | %.1f µs | %.1f µs | %.0f | %.0f | %.1f%% | %zu B | %zu B |\n", KeyName(key),
                r.verify_warm_us, r.verify_cold_us, req, off, 100 * req / off, r.heartbeat_bytes,
                r.certificate_bytes);
    std::fflush(stdout);
    json += absl::StrFormat(
        "%s{\"key\":\"%s\",\"verify_warm_us\":%.2f,\"verify_cold_us\":%.2f,"
        "\"required_writes_per_s\":%.0f,\"off_writes_per_s\":%.0f,\"ratio\":%.4f,"
        "\"heartbeat_bytes\":%zu,\"certificate_bytes\":%zu}",
        json.size() > 1 ? "," : "", KeyName(key), r.verify_warm_us, r.verify_cold_us, req, off,
        req / off, r.heartbeat_bytes, r.certificate_bytes);
  }
  json += "]";
  if (!out.empty()) Write(out, json + "\n");
  return 0;
}

// ---------------------------------------------------------------- fixtures

int RunMint(int argc, char** argv) {
  std::string key_name = "ecdsa";
  std::vector<std::string> pos;
  poolcoord::base::FlagSet flags;
  flags.String("key", &key_name, "The members' keys: ecdsa or rsa.");
  ParseFlags(flags, argc, argv, 2, kUsage, &pos);
  if (pos.size() != 2) Die("usage: mint DIR KEYS.TSV [--key=ecdsa|rsa]");
  const std::string& dir = pos[0];
  const pe::KeyType key = key_name == "rsa" ? pe::KeyType::kRsa : pe::KeyType::kEcdsaP256;
  pe::MintOptions ca_options;
  ca_options.key_type = pe::KeyType::kRsa;
  const pe::MintedKeyPair ca = Must(pe::MintCertificateAuthority("bench-ca", ca_options), "CA");
  Write(dir + "/ca.crt", ca.cert_pem);
  std::string shared_key;
  for (const auto& row : Tsv(pos[1])) {
    if (row.size() < 2) continue;
    pe::MintOptions o;
    o.key_type = key;
    o.key_pem = shared_key;  // one key pair for all (RSA generation is slow)
    o.common_name = "system:node:" + row[1];
    o.organizations = {"system:nodes"};
    const pe::MintedKeyPair pair = Must(pe::MintCertificate(ca, o), "node certificate");
    shared_key = pair.key_pem;
    Write(dir + "/" + row[1] + ".crt", pair.cert_pem);
    Write(dir + "/" + row[1] + ".key", pair.key_pem);
  }
  return 0;
}

int RunSign(int argc, char** argv) {
  std::vector<std::string> pos;
  poolcoord::base::FlagSet flags;
  ParseFlags(flags, argc, argv, 2, kUsage, &pos);
  if (pos.size() != 5) Die("usage: sign DIR KEYS.TSV CHALLENGES.TSV ROUNDS FIRST_SEQUENCE");
  const std::string& dir = pos[0];
  const auto keys = Tsv(pos[1]);
  std::map<std::string, std::string> challenges;
  for (const auto& row : Tsv(pos[2])) {
    if (row.size() >= 2) challenges[row[0]] = row[1];
  }
  int rounds = 0, first = 0;
  if (!absl::SimpleAtoi(pos[3], &rounds) || !absl::SimpleAtoi(pos[4], &first)) Die("numbers");
  std::map<std::string, std::unique_ptr<pe::NodeIdentity>> ids;
  for (const auto& row : keys) {
    if (row.size() < 3) continue;
    ids[row[1]] = Must(pe::NodeIdentity::FromPem(Read(dir + "/" + row[1] + ".crt"),
                                                 Read(dir + "/" + row[1] + ".key")),
                       "identity");
  }
  for (int round = 0; round < rounds; ++round) {
    for (const auto& row : keys) {
      if (row.size() < 3) continue;
      auto c = challenges.find(row[2]);
      if (c == challenges.end()) Die("no challenge for pool " + row[2]);
      const pe::NodeIdentity& id = *ids[row[1]];
      const std::string d = SignedDatagram(id, row[2], c->second, static_cast<uint64_t>(first + round));
      std::printf("%s\t%s\t%s\t%s\t%s\n", row[0].c_str(), row[1].c_str(), row[2].c_str(),
                  absl::Base64Escape(d).c_str(), absl::Base64Escape(id.certificate_der()).c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "inproc") return RunInproc(argc, argv);
  if (mode == "mint") return RunMint(argc, argv);
  if (mode == "sign") return RunSign(argc, argv);
  const bool help = mode == "--help" || mode == "-h";
  std::fprintf(help ? stdout : stderr, "usage: %s\n", kUsage);
  return help ? 0 : 2;
}
