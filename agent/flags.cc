#include "agent/flags.h"

#include <limits>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace poolcoord::agent {
namespace {

enum class FlagType { kString, kBool, kInt, kDuration };

struct Flag {
  std::string name;
  FlagType type;
  std::string help;
  std::string* str = nullptr;
  bool* boolean = nullptr;
  int* integer = nullptr;
  absl::Duration* duration = nullptr;
  int64_t min = 0, max = std::numeric_limits<int>::max();
};

absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Go's time.Duration.String() for whole seconds ("5s", "1m30s").
std::string GoDuration(absl::Duration d) {
  int64_t total = absl::ToInt64Seconds(d);
  if (absl::Seconds(total) != d) return absl::FormatDuration(d);
  if (total == 0) return "0s";
  std::string out;
  if (total >= 3600) absl::StrAppend(&out, total / 3600, "h");
  if (total >= 60) absl::StrAppend(&out, (total % 3600) / 60, "m");
  absl::StrAppend(&out, total % 60, "s");
  return out;
}

std::vector<Flag> FlagTable(AgentFlags* o) {
  std::vector<Flag> t;
  auto s = [&](const char* name, std::string* p, const char* help) {
    Flag f{name, FlagType::kString, help};
    f.str = p;
    t.push_back(std::move(f));
  };
  auto b = [&](const char* name, bool* p, const char* help) {
    Flag f{name, FlagType::kBool, help};
    f.boolean = p;
    t.push_back(std::move(f));
  };
  auto i = [&](const char* name, int* p, int64_t min, int64_t max, const char* help) {
    Flag f{name, FlagType::kInt, help};
    f.integer = p;
    f.min = min;
    f.max = max;
    t.push_back(std::move(f));
  };
  auto d = [&](const char* name, absl::Duration* p, const char* help) {
    Flag f{name, FlagType::kDuration, help};
    f.duration = p;
    t.push_back(std::move(f));
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
  return t;
}

absl::Status BadValue(const Flag& f, std::string_view value, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrFormat("invalid argument \"%s\" for \"--%s\" flag: %s",
                                                    Av(value), f.name, Av(why)));
}

absl::Status SetFlag(Flag& f, std::string_view value) {
  switch (f.type) {
    case FlagType::kString:
      *f.str = std::string(value);
      return absl::OkStatus();
    case FlagType::kBool: {
      std::string v(value);
      if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") {
        *f.boolean = true;
      } else if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" || v == "False") {
        *f.boolean = false;
      } else {
        return BadValue(f, value, "not a boolean (true or false)");
      }
      return absl::OkStatus();
    }
    case FlagType::kInt: {
      int64_t n = 0;
      if (!absl::SimpleAtoi(Av(value), &n)) return BadValue(f, value, "not an integer");
      if (n < f.min || n > f.max) {
        return BadValue(f, value, absl::StrCat("must be between ", f.min, " and ", f.max));
      }
      *f.integer = static_cast<int>(n);
      return absl::OkStatus();
    }
    case FlagType::kDuration: {
      absl::Duration d;
      if (!absl::ParseDuration(Av(value), &d) || d == absl::InfiniteDuration() ||
          d == -absl::InfiniteDuration()) {
        return BadValue(f, value, "not a duration (e.g. 5s, 1m30s)");
      }
      if (d <= absl::ZeroDuration()) return BadValue(f, value, "must be positive");
      *f.duration = d;
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled flag type");
}

std::string DefaultText(const Flag& f) {
  switch (f.type) {
    case FlagType::kString: return f.str->empty() ? "" : absl::StrCat("\"", *f.str, "\"");
    case FlagType::kBool: return *f.boolean ? "true" : "false";
    case FlagType::kInt: return absl::StrCat(*f.integer);
    case FlagType::kDuration: return GoDuration(*f.duration);
  }
  return "";
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
  if (o.leader_elect_lease_duration <= o.leader_elect_renew_deadline) {
    return absl::InvalidArgumentError(
        "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline");
  }
  if (o.leader_elect_renew_deadline <= o.leader_elect_retry_period * 1.2) {
    return absl::InvalidArgumentError(
        "--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AgentFlags> ParseAgentFlags(const std::vector<std::string>& args) {
  AgentFlags options;
  std::vector<Flag> table = FlagTable(&options);
  auto find = [&](std::string_view name) -> Flag* {
    for (Flag& f : table) {
      if (f.name == name) return &f;
    }
    return nullptr;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string_view body;
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      body = std::string_view(arg).substr(2);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      body = std::string_view(arg).substr(1);
      std::string_view short_name = body.substr(0, body.find('='));
      if (short_name.size() > 1 && short_name[0] == 'v' &&
          short_name.find_first_not_of("0123456789", 1) == std::string_view::npos) {
        options.verbosity = std::stoi(std::string(short_name.substr(1)));  // pflag's "-v2"
        continue;
      }
      if (short_name != "v" && short_name != "h") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown shorthand flag: '", Av(short_name.substr(0, 1)), "' in ", arg));
      }
      if (short_name == "h") body = "help";
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\": this command takes flags only"));
    }
    const size_t eq = body.find('=');
    std::string_view name = body.substr(0, eq);
    Flag* f = find(name);
    if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag: --", Av(name)));
    if (eq != std::string_view::npos) {
      if (absl::Status st = SetFlag(*f, body.substr(eq + 1)); !st.ok()) return st;
    } else if (f->type == FlagType::kBool) {
      *f->boolean = true;
    } else {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag needs an argument: --", Av(name)));
      }
      if (absl::Status st = SetFlag(*f, args[++i]); !st.ok()) return st;
    }
  }
  if (options.help) return options;
  if (absl::Status st = Validate(options); !st.ok()) return st;
  return options;
}

std::string AgentFlagUsage(const std::string& program) {
  AgentFlags defaults;
  std::vector<Flag> table = FlagTable(&defaults);
  std::string out = absl::StrCat(
      "Usage: ", program, " [flags]\n\n",
      "poolcoord-agent runs on every edge node: it heartbeats its pool's members over the LAN\n"
      "with datagrams signed by the node's kubelet key, campaigns for the pool's PoolLease while\n"
      "the cloud sees the node, and as the pool leader writes the DelegatedLease of each member\n"
      "whose fresh heartbeat says it is cut off from the cloud (docs/agent.md).\n\n"
      "Flags:\n");
  for (const Flag& f : table) {
    std::string head = f.name == "v" ? "  -v, --v" : (f.name == "help" ? "  -h, --help" : absl::StrCat("      --", f.name));
    const char* type = f.type == FlagType::kString ? "string"
                       : f.type == FlagType::kInt  ? "int"
                       : f.type == FlagType::kDuration ? "duration"
                                                       : "";
    if (*type) absl::StrAppend(&head, " ", type);
    std::string line = absl::StrFormat("%-44s %s", head, f.help);
    std::string def = DefaultText(f);
    if (!def.empty() && f.name != "help") absl::StrAppend(&line, " (default ", def, ")");
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace poolcoord::agent
