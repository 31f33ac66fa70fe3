#include "apiservice/flags.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/string_view.h"

namespace poolcoord::apiservice {
namespace {

// absl here is built with its own string_view, not std::string_view.

enum class FlagType { kString, kBool, kInt, kInt64, kDuration, kStringList };

struct Flag {
  std::string name;  // without dashes
  FlagType type;
  std::string help;
  // Exactly one of these points into the ServerOptions being filled.
  std::string* str = nullptr;
  bool* boolean = nullptr;
  int* integer = nullptr;
  int64_t* integer64 = nullptr;
  absl::Duration* duration = nullptr;
  std::vector<std::string>* list = nullptr;
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  bool list_seen = false;  // pflag StringSlice: the first Set replaces the default
};

const char* TypeName(FlagType type) {
  switch (type) {
    case FlagType::kString: return "string";
    case FlagType::kBool: return "";
    case FlagType::kInt: return "int";
    case FlagType::kInt64: return "int";
    case FlagType::kDuration: return "duration";
    case FlagType::kStringList: return "strings";
  }
  return "";
}

// Go's time.Duration.String() shape for the defaults we print ("5m0s", "15s").
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

std::vector<Flag> FlagTable(ServerOptions* o) {
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
  auto i64 = [&](const char* name, int64_t* p, int64_t min, const char* help) {
    Flag f{name, FlagType::kInt64, help};
    f.integer64 = p;
    f.min = min;
    t.push_back(std::move(f));
  };
  auto d = [&](const char* name, absl::Duration* p, const char* help) {
    Flag f{name, FlagType::kDuration, help};
    f.duration = p;
    t.push_back(std::move(f));
  };
  auto l = [&](const char* name, std::vector<std::string>* p, const char* help) {
    Flag f{name, FlagType::kStringList, help};
    f.list = p;
    t.push_back(std::move(f));
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
    "How often the forwarder re-checks every delegated node and marked cloud Lease.");
  d("kubelet-renew-interval", &o->kubelet_renew_interval,
    "The kubelets' Lease renew interval (theirs is 10s): forwarding starts once a delegated "
    "node's own renewal is this old, and renews its cloud Lease at least this often.");
  d("node-monitor-grace-period", &o->node_monitor_grace_period,
    "kube-controller-manager's --node-monitor-grace-period (40s before Kubernetes 1.32, 50s "
    "since): a delegation not forwarded for longer has lapsed, and forwarding again starts a "
    "new one.");
  s("delegation-proof", &o->delegation_proof,
    "What a pool leader's DelegatedLease write must carry (docs/verifiable-delegation.md): "
    "required (the member's own signed, fresh heartbeat in spec.proof, or 403), optional (a "
    "proof given is checked; writes without one pass and are counted, for agents that do not "
    "send proofs yet), or off (the leader's word is taken).");
  d("delegation-challenge-period", &o->delegation_challenge_period,
    "How often each pool with a live PoolLease gets a fresh challenge (its status.challenges), "
    "which members sign into their heartbeats.");
  d("delegation-proof-max-age", &o->delegation_proof_max_age,
    "The oldest challenge a delegation proof may carry, judged on the server's clock (default: "
    "2 x the agents' 5s heartbeat interval + the challenge period); also the longest "
    "leaseDurationSeconds of a proven write.");
  b("leader-elect", &o->leader_elect,
    "Elect one replica (a coordination.k8s.io Lease) to run the forwarder.");
  d("leader-elect-lease-duration", &o->leader_elect_lease_duration,
    "Replica leader election lease duration.");
  d("leader-elect-renew-deadline", &o->leader_elect_renew_deadline,
    "How long the leader retries renewing before giving up.");
  d("leader-elect-retry-period", &o->leader_elect_retry_period,
    "Wait between replica leader election attempts.");
  s("leader-elect-resource-namespace", &o->leader_elect_resource_namespace,
    "Namespace of the replica leader election Lease.");
  s("leader-elect-resource-name", &o->leader_elect_resource_name,
    "Name of the replica leader election Lease.");
  s("write-kubeconfig", &o->write_kubeconfig,
    "Where to write an admin kubeconfig when certificates are generated; empty: none.");
  i("v", &o->verbosity, 0, 10, "Log verbosity; 2 and above logs every request.");
  b("help", &o->help, "Print this help and exit.");
  return t;
}

absl::Status BadValue(const Flag& f, std::string_view value, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrFormat("invalid argument \"%s\" for \"--%s\" flag: %s", value, f.name, why));
}

absl::Status SetFlag(Flag& f, std::string_view value) {
  switch (f.type) {
    case FlagType::kString:
      *f.str = std::string(value);
      return absl::OkStatus();
    case FlagType::kBool: {
      // strconv.ParseBool's spellings.
      std::string v(value);
      if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") {
        *f.boolean = true;
      } else if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" ||
                 v == "False") {
        *f.boolean = false;
      } else {
        return BadValue(f, value, "not a boolean (true or false)");
      }
      return absl::OkStatus();
    }
    case FlagType::kInt:
    case FlagType::kInt64: {
      int64_t n = 0;
      if (!absl::SimpleAtoi(base::Av(value), &n)) return BadValue(f, value, "not an integer");
      if (n < f.min || n > f.max) {
        return BadValue(f, value,
                        f.max == std::numeric_limits<int64_t>::max()
                            ? absl::StrCat("must be at least ", f.min)
                            : absl::StrCat("must be between ", f.min, " and ", f.max));
      }
      if (f.integer) *f.integer = static_cast<int>(n);
      if (f.integer64) *f.integer64 = n;
      return absl::OkStatus();
    }
    case FlagType::kDuration: {
      absl::Duration d;
      if (!absl::ParseDuration(base::Av(value), &d) || d == absl::InfiniteDuration() ||
          d == -absl::InfiniteDuration()) {
        return BadValue(f, value, "not a duration (e.g. 30s, 5m, 1h30m)");
      }
      if (d < absl::ZeroDuration()) return BadValue(f, value, "must not be negative");
      *f.duration = d;
      return absl::OkStatus();
    }
    case FlagType::kStringList: {
      if (!f.list_seen) f.list->clear();
      f.list_seen = true;
      if (value.empty()) return absl::OkStatus();
      for (absl::string_view part : absl::StrSplit(base::Av(value), ',')) {
        f.list->emplace_back(absl::StripAsciiWhitespace(part));
      }
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled flag type");
}

std::string DefaultText(const Flag& f) {
  switch (f.type) {
    case FlagType::kString: return *f.str == "" ? "" : absl::StrCat("\"", *f.str, "\"");
    case FlagType::kBool: return *f.boolean ? "true" : "false";
    case FlagType::kInt: return absl::StrCat(*f.integer);
    case FlagType::kInt64: return absl::StrCat(*f.integer64);
    case FlagType::kDuration: return GoDuration(*f.duration);
    case FlagType::kStringList:
      return f.list->empty() ? "" : absl::StrCat("[", absl::StrJoin(*f.list, ","), "]");
  }
  return "";
}

absl::Status Validate(const ServerOptions& o) {
  if (o.storage_backend != "memory" && o.storage_backend != "etcd3") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "invalid argument \"%s\" for \"--storage-backend\" flag: must be memory or etcd3",
        o.storage_backend));
  }
  if (o.delegation_proof != "required" && o.delegation_proof != "optional" &&
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
  if (o.etcd_certfile.empty() != o.etcd_keyfile.empty()) {
    return absl::InvalidArgumentError(
        "--etcd-certfile and --etcd-keyfile must be given together (the client certificate "
        "for TLS to etcd and its key)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerOptions> ParseFlags(const std::vector<std::string>& args) {
  ServerOptions options;
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
      // Shorthands only: -v and -h.
      body = std::string_view(arg).substr(1);
      std::string_view short_name = body.substr(0, body.find('='));
      if (short_name.size() > 1 && short_name[0] == 'v' &&
          short_name.find_first_not_of("0123456789", 1) == std::string_view::npos) {
        // pflag's "-v2".
        options.verbosity = std::stoi(std::string(short_name.substr(1)));
        continue;
      }
      if (short_name != "v" && short_name != "h") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown shorthand flag: '", base::Av(short_name.substr(0, 1)), "' in ", arg));
      }
      if (short_name == "h") body = "help";
    } else if (arg == "--") {
      if (i + 1 < args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unexpected argument \"", args[i + 1], "\": this command takes flags only"));
      }
      break;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\": this command takes flags only"));
    }
    size_t eq = body.find('=');
    std::string_view name = body.substr(0, eq);
    Flag* f = find(name);
    if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag: --", base::Av(name)));
    if (eq != std::string_view::npos) {
      if (absl::Status st = SetFlag(*f, body.substr(eq + 1)); !st.ok()) return st;
    } else if (f->type == FlagType::kBool) {
      *f->boolean = true;
    } else {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag needs an argument: --", base::Av(name)));
      }
      if (absl::Status st = SetFlag(*f, args[++i]); !st.ok()) return st;
    }
  }
  if (options.help) return options;
  if (absl::Status st = Validate(options); !st.ok()) return st;
  return options;
}

std::string FlagUsage(const std::string& program) {
  ServerOptions defaults;
  std::vector<Flag> table = FlagTable(&defaults);
  std::string out = absl::StrCat(
      "Usage: ", program, " [flags]\n\n",
      "poolcoord-apiserver serves coordination.pool/v1alpha1 (PoolLease, DelegatedLease) as a\n"
      "Kubernetes aggregated API server and the delegate-heartbeat admission webhook.\n\n"
      "Flags:\n");
  for (const Flag& f : table) {
    std::string head = f.name == "v" ? "  -v, --v" : (f.name == "help" ? "  -h, --help" : absl::StrCat("      --", f.name));
    if (*TypeName(f.type)) absl::StrAppend(&head, " ", TypeName(f.type));
    std::string line = absl::StrFormat("%-48s %s", head, f.help);
    std::string def = DefaultText(f);
    if (!def.empty() && f.name != "help") absl::StrAppend(&line, " (default ", def, ")");
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace poolcoord::apiservice
