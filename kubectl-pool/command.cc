#include "kubectl-pool/command.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/microtime.h"
#include "cloud/clientset.h"
#include "cloud/errors.h"
#include "cloud/rest_client.h"
#include "kubectl-pool/print.h"

namespace poolcoord::kubectl_pool {
namespace {

// The server's clock as its answers' Date headers give it: whole seconds, the
// latest seen. The true time of that answer lies within the second after it,
// so the middle of that second is the estimate.
class DateClock {
 public:
  void Observe(const base::HttpResponse& r) {
    if (r.date.empty()) return;
    absl::StatusOr<int64_t> s = base::ParseHttpDate(r.date);
    if (!s.ok()) return;
    absl::MutexLock lock(&mu_);
    latest_ = std::max(latest_.value_or(*s), *s);
  }
  std::optional<int64_t> NowMicros() {
    absl::MutexLock lock(&mu_);
    if (!latest_) return std::nullopt;
    return *latest_ * 1'000'000 + 500'000;
  }

 private:
  absl::Mutex mu_;
  std::optional<int64_t> latest_ ABSL_GUARDED_BY(mu_);
};

struct RealConnection {
  std::shared_ptr<DateClock> clock = std::make_shared<DateClock>();
  std::unique_ptr<cloud::RestClient> rest;
  std::unique_ptr<cloud::Clientset> clientset;
};

int64_t LocalNowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<Connection> RealConnect(const cloud::ClientConfig& config) {
  auto conn = std::make_shared<RealConnection>();
  cloud::RestConfig rest = config.rest;
  rest.user_agent = "kubectl-pool";
  std::shared_ptr<DateClock> clock = conn->clock;
  rest.response_observer = [clock](const base::HttpResponse& r) { clock->Observe(r); };
  absl::StatusOr<std::unique_ptr<cloud::RestClient>> client = cloud::RestClient::New(rest);
  if (!client.ok()) return client.status();
  conn->rest = *std::move(client);
  conn->clientset = std::make_unique<cloud::Clientset>(conn->rest.get());
  Connection c;
  c.clients.pool_leases = conn->clientset->LeaseShaped(cloud::PoolLeases());
  c.clients.delegated_leases = conn->clientset->DelegatedLeases();
  c.clients.nodes = conn->clientset->Nodes();
  c.clients.server_now_us = [clock] { return clock->NowMicros(); };
  c.clients.local_now_us = LocalNowMicros;
  c.keep_alive = conn;
  return c;
}

// "host:port" of a server URL.
std::string HostOf(const std::string& server) {
  std::string host = server;
  if (size_t p = host.find("://"); p != std::string::npos) host.erase(0, p + 3);
  if (size_t p = host.find('/'); p != std::string::npos) host.erase(p);
  return host;
}

void PrintUsageError(const absl::Status& s, std::ostream& err) {
  err << "Error: " << s.message() << "\nSee 'kubectl pool --help' for usage.\n";
}

}  // namespace

absl::StatusOr<cloud::ClientConfig> LoadConfig(const Options& options,
                                               cloud::KubeconfigLoadingRules rules) {
  const cloud::KubeconfigOverrides& o = options.overrides;
  if (cloud::NoKubeconfigFiles(rules) && o.server.empty()) {
    // kubectl in a pod without a kubeconfig uses the pod's service account.
    absl::StatusOr<cloud::RestConfig> in_cluster = cloud::InClusterConfig();
    if (in_cluster.ok()) {
      cloud::ClientConfig c;
      c.rest = *std::move(in_cluster);
      if (!o.token.empty()) c.rest.bearer_token = o.token;
      if (o.timeout) c.rest.timeout = *o.timeout;
      return c;
    }
  }
  return cloud::LoadClientConfig(rules, o);
}

Environment RealEnvironment() {
  Environment env;
  env.load_config = [](const Options& options) {
    cloud::KubeconfigLoadingRules rules =
        cloud::KubeconfigLoadingRules::FromEnvironment(options.kubeconfig);
    rules.allow_exec_plugins = true;  // one short run: the credential cannot outlive us
    return LoadConfig(options, std::move(rules));
  };
  env.connect = RealConnect;
  return env;
}

std::string ErrorMessage(const absl::Status& status, const std::string& server) {
  const std::string message = cloud::MessageOf(status);
  if (cloud::CodeOf(status) > 0) {
    const std::string reason = cloud::ReasonOf(status);
    if (reason == "Unauthorized") {
      return absl::StrCat("error: You must be logged in to the server (", message, ")");
    }
    if (!reason.empty()) return absl::StrCat("Error from server (", reason, "): ", message);
    return absl::StrCat("Error from server: ", message);
  }
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
    // libcurl says "Couldn't connect to server" (CURLE_COULDNT_CONNECT) where Go
    // says "connection refused": nothing listens there.
    if (absl::StrContains(message, "Connection refused") ||
        absl::StrContains(message, "Couldn't connect to server")) {
      return absl::StrCat("The connection to the server ", HostOf(server),
                          " was refused - did you specify the right host or port?");
    }
    return absl::StrCat("Unable to connect to the server: ", message);
  }
  return absl::StrCat("error: ", message);
}

int Run(const std::vector<std::string>& args, Environment env, std::ostream& out,
        std::ostream& err) {
  const Environment real = RealEnvironment();
  if (!env.load_config) env.load_config = real.load_config;
  if (!env.connect) env.connect = real.connect;

  absl::StatusOr<Options> parsed = ParseArgs(args);
  if (!parsed.ok()) {
    PrintUsageError(parsed.status(), err);
    return 1;
  }
  Options options = *std::move(parsed);
  if (options.help) {
    out << Usage();
    return 0;
  }
  auto fail = [&](const std::string& line) {
    err << line << "\n";
    return 1;
  };
  absl::StatusOr<Output> output = ParseOutput(options.output);
  if (!output.ok()) return fail(absl::StrCat("error: ", output.status().message()));
  if (!options.request_timeout.empty()) {
    absl::StatusOr<std::chrono::milliseconds> t =
        cloud::ParseRequestTimeout(options.request_timeout);
    if (!t.ok()) return fail(absl::StrCat("error: ", t.status().message()));
    options.overrides.timeout = *t;
  } else {
    options.overrides.timeout = std::chrono::milliseconds(0);  // kubectl's default: none
  }
  if (options.pool_label.empty()) return fail("error: --pool-label must not be empty");
  if (options.command == Command::kDescribe) {
    if (absl::Status s = ValidatePoolName(options.pool); !s.ok()) {
      return fail(absl::StrCat("error: ", s.message()));
    }
  }

  absl::StatusOr<cloud::ClientConfig> config = env.load_config(options);
  if (!config.ok()) return fail(absl::StrCat("error: ", config.status().message()));
  absl::StatusOr<Connection> conn = env.connect(*config);
  if (!conn.ok()) return fail(absl::StrCat("error: ", conn.status().message()));

  const bool describe = options.command == Command::kDescribe;
  absl::StatusOr<Snapshot> snapshot =
      Fetch(conn->clients, options.pool_label, describe ? options.pool : "");
  if (!snapshot.ok()) return fail(ErrorMessage(snapshot.status(), config->rest.server));
  absl::StatusOr<std::vector<PoolView>> pools =
      BuildPools(*snapshot, describe ? options.pool : "");
  if (!pools.ok()) return fail(ErrorMessage(pools.status(), config->rest.server));
  for (const auto& w : snapshot->warnings) err << "Warning: " << w << "\n";

  if (*output != Output::kTable) {
    out << FormatObjects(*pools, *snapshot, *output == Output::kJson ? Format::kJson : Format::kYaml,
                         describe);
    return 0;
  }
  if (describe) {
    out << FormatDescribe(pools->front(), *snapshot);
    return 0;
  }
  if (pools->empty()) {
    err << "No pools found.\n";
    return 0;
  }
  out << FormatTable(*pools, *snapshot);
  return 0;
}

}  // namespace poolcoord::kubectl_pool
