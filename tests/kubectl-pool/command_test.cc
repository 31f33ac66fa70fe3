#define BOOST_TEST_MODULE kubectl_pool_command
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cloud/errors.h"
#include "kubectl-pool/command.h"
#include "tests/kubectl-pool/pool_fixture.h"

namespace poolcoord::kubectl_pool {
namespace {

namespace fs = std::filesystem;
using testing::FakeCloud;

struct Result {
  int code;
  std::string out, err;
};

// Runs kubectl-pool over the fake cloud; records the config it was given.
struct Fixture {
  FakeCloud cloud;
  std::optional<cloud::ClientConfig> connected;
  std::optional<Options> loaded_for;
  absl::Status load_error;

  Environment Env() {
    Environment env;
    env.load_config = [this](const Options& o) -> absl::StatusOr<cloud::ClientConfig> {
      loaded_for = o;
      if (!load_error.ok()) return load_error;
      cloud::ClientConfig c;
      c.rest.server = "https://127.0.0.1:8443";
      return c;
    };
    env.connect = [this](const cloud::ClientConfig& c) -> absl::StatusOr<Connection> {
      connected = c;
      Connection conn;
      conn.clients = cloud.Clients();
      return conn;
    };
    return env;
  }
  Result Run(std::vector<std::string> args) { return RunWith(std::move(args), Env()); }
  Result RunWith(std::vector<std::string> args, Environment env) {
    std::ostringstream out, err;
    int code = kubectl_pool::Run(args, std::move(env), out, err);
    return {code, out.str(), err.str()};
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(command, Fixture)

BOOST_AUTO_TEST_CASE(help_exits_zero_with_usage_on_stdout) {
  for (auto args : std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"describe", "--help"}}) {
    Result r = Run(args);
    BOOST_TEST(r.code == 0);
    BOOST_TEST(r.out.find("kubectl pool describe POOL") != std::string::npos);
    BOOST_TEST(r.out.find("cluster-scoped") != std::string::npos, "-n is explained");
    BOOST_TEST(r.err.empty());
  }
  BOOST_TEST(!loaded_for.has_value(), "--help reads no kubeconfig");
}

BOOST_AUTO_TEST_CASE(usage_mistakes_as_kubectl_prints_them) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--no-such-flag-xyz"}, "Error: unknown flag: --no-such-flag-xyz\n"},
      {{"-x"}, "Error: unknown shorthand flag: 'x' in -x\n"},
      {{"--context"}, "Error: flag needs an argument: --context\n"},
      {{"-n"}, "Error: flag needs an argument: 'n' in -n\n"},
      {{"--insecure-skip-tls-verify=maybe"},
       "Error: invalid argument \"maybe\" for \"--insecure-skip-tls-verify\" flag: "
       "strconv.ParseBool: parsing \"maybe\": invalid syntax\n"},
      {{"describe"}, "Error: describe takes one pool name, got 0\n"},
      {{"describe", "a", "b"}, "Error: describe takes one pool name, got 2\n"},
      {{"frobnicate"}, "Error: unknown command \"frobnicate\" for \"kubectl pool\"\n"},
      // It said: unknown command "list" (a newcomer).
      {{"list", "extra"},
       "Error: list takes no arguments, got 1 (\"extra\"); to show one pool: kubectl pool "
       "describe <pool>\n"},
  };
  for (const auto& [args, want] : cases) {
    Result r = Run(args);
    BOOST_TEST(r.code == 1, args[0]);
    BOOST_TEST(r.err == want + "See 'kubectl pool --help' for usage.\n");
    BOOST_TEST(r.out.empty());
  }
  Result r = Run({"-o", "wide"});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err ==
             "error: unable to match a printer suitable for the output format \"wide\", allowed "
             "formats are: json,yaml\n");
  r = Run({"--request-timeout", "soon"});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err.rfind("error: Invalid timeout value.", 0) == 0, r.err);
  r = Run({"describe", "Hang/zhou"});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err.rfind("error: invalid pool name \"Hang/zhou\": a lowercase RFC 1123 subdomain must "
                         "consist of lower case alphanumeric characters",
                         0) == 0,
             r.err);
  // Not a subdomain either (an empty label), though every character is allowed.
  r = Run({"describe", "hang..zhou"});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err.rfind("error: invalid pool name \"hang..zhou\"", 0) == 0, r.err);
  BOOST_TEST(!loaded_for.has_value());
}

// kubectl hands the plugin its global flags unchanged, in every spelling pflag
// takes; they reach the kubeconfig loading as overrides.
BOOST_AUTO_TEST_CASE(kubectl_flags_in_every_spelling) {
  Result r = Run({"--context=edge", "--cluster", "c1", "--user=u1", "-s", "https://s:1",
                  "--token", "tok", "--certificate-authority=/ca.crt", "--client-certificate",
                  "/c.crt", "--client-key=/c.key", "--insecure-skip-tls-verify",
                  "--request-timeout=5s", "--kubeconfig", "/kc", "-nkube-system",
                  "--pool-label=example.com/pool"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST_REQUIRE(loaded_for.has_value());
  const Options& o = *loaded_for;
  BOOST_TEST(o.overrides.context == "edge");
  BOOST_TEST(o.overrides.cluster == "c1");
  BOOST_TEST(o.overrides.user == "u1");
  BOOST_TEST(o.overrides.server == "https://s:1");
  BOOST_TEST(o.overrides.token == "tok");
  BOOST_TEST(o.overrides.certificate_authority == "/ca.crt");
  BOOST_TEST(o.overrides.client_certificate == "/c.crt");
  BOOST_TEST(o.overrides.client_key == "/c.key");
  BOOST_TEST(*o.overrides.insecure_skip_tls_verify);
  BOOST_TEST(o.overrides.timeout->count() == 5000);
  BOOST_TEST(o.kubeconfig == "/kc");
  BOOST_TEST(o.namespace_ == "kube-system");
  BOOST_TEST(o.pool_label == "example.com/pool");
  BOOST_TEST(cloud.nodes.Calls().back() == "list example.com/pool");

  r = Run({"-o=json", "--insecure-skip-tls-verify=false", "--namespace", "x", "-ojson"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(!*loaded_for->overrides.insecure_skip_tls_verify);
  BOOST_TEST(loaded_for->overrides.timeout->count() == 0, "kubectl's default: no timeout");
  BOOST_TEST(r.out.find("\"kind\": \"PoolList\"") != std::string::npos);

  // Flags after the subcommand and its argument, and "--".
  r = Run({"describe", "--context", "edge", "hangzhou", "-o", "yaml"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("kind: Pool\n") != std::string::npos);
  r = Run({"describe", "--", "hangzhou"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("Name:              hangzhou") == 0u);
}

BOOST_AUTO_TEST_CASE(list_and_describe) {
  Result r = Run({});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.err.empty());
  BOOST_TEST(r.out.rfind("NAME       LEADER   TERM   EXPIRES", 0) == 0, r.out);
  BOOST_TEST(r.out.find("hangzhou   hz-1     3      in 11s") != std::string::npos, r.out);
  BOOST_TEST(Run({"list"}).out == r.out);

  r = Run({"describe", "beijing"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("Expires:           expired 60s ago") != std::string::npos, r.out);

  r = Run({"describe", "nowhere"});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err.rfind("error: pool \"nowhere\" not found", 0) == 0, r.err);

  // Nothing to show: kubectl's "No resources found" on stderr, exit 0; JSON an empty list.
  Environment env = Env();
  env.connect = [](const cloud::ClientConfig&) -> absl::StatusOr<Connection> {
    static poolcoord::testing::FakeLeases leases;
    static poolcoord::testing::FakeDelegatedLeases dls;
    Connection c;
    c.clients.pool_leases = &leases;
    c.clients.delegated_leases = &dls;
    c.clients.server_now_us = [] { return testing::kNow; };
    return c;
  };
  r = RunWith({}, env);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.empty());
  BOOST_TEST(r.err == "No pools found.\n");
  r = RunWith({"-o", "json"}, env);
  BOOST_TEST(r.out.find("\"items\": []") != std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(errors_as_kubectl_prints_them) {
  cloud.pool_leases.errors.Inject(
      "list", cloud::ApiError(403, "Forbidden",
                              "poolleases.coordination.pool is forbidden: User \"x\" cannot list "
                              "resource \"poolleases\""));
  Result r = Run({});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err ==
             "Error from server (Forbidden): poolleases.coordination.pool is forbidden: User \"x\" "
             "cannot list resource \"poolleases\"\n");
  BOOST_TEST(r.out.empty());

  cloud.pool_leases.errors.Inject("list", cloud::ApiError(401, "Unauthorized", "Unauthorized"));
  BOOST_TEST(Run({}).err == "error: You must be logged in to the server (Unauthorized)\n");

  cloud.pool_leases.errors.Inject(
      "list", cloud::StatusFromResponse(404, "{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                                             "\"status\":\"Failure\",\"message\":\"the server could "
                                             "not find the requested resource\",\"reason\":"
                                             "\"NotFound\",\"code\":404}"));
  BOOST_TEST(Run({}).err ==
             "Error from server (NotFound): the server could not find the requested resource\n");

  cloud.pool_leases.errors.Inject(
      "list", absl::UnavailableError("GET https://127.0.0.1:8443/apis/coordination.pool/v1alpha1/"
                                     "poolleases: Couldn't connect to server (Failed to connect to "
                                     "127.0.0.1 port 8443 after 0 ms: Couldn't connect to server)"));
  BOOST_TEST(Run({}).err ==
             "The connection to the server 127.0.0.1:8443 was refused - did you specify the right "
             "host or port?\n");
  cloud.pool_leases.errors.Inject(
      "list", absl::UnavailableError("GET https://127.0.0.1:8443/x: SSL peer certificate or SSH "
                                     "remote key was not OK"));
  BOOST_TEST(Run({}).err.rfind("Unable to connect to the server: GET https://127.0.0.1:8443/x: SSL", 0) ==
             0);

  load_error = absl::NotFoundError("stat /nope: no such file or directory");
  BOOST_TEST(Run({}).err == "error: stat /nope: no such file or directory\n");
}

BOOST_AUTO_TEST_CASE(warnings_go_to_stderr_and_the_output_still_comes) {
  cloud.server_now.reset();
  cloud.nodes.errors.Inject("list", cloud::ApiError(403, "Forbidden", "nodes is forbidden"));
  Result r = Run({});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.err ==
             "Warning: cannot list Nodes (nodes is forbidden): members are taken from the "
             "DelegatedLeases\n"
             "Warning: the server sent no Date header: expiry is judged on this machine's clock\n");
  BOOST_TEST(r.out.find("MEMBERS (DELEGATEDLEASES)") != std::string::npos);
}

// The real kubeconfig loading behind the command: KUBECONFIG's files merged,
// --context choosing among them, --server over the file.
BOOST_AUTO_TEST_CASE(kubeconfig_merge_and_context_choose_the_server) {
  const fs::path dir = fs::temp_directory_path() / ("kubectl-pool-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a") << "current-context: direct\n"
                              "clusters:\n- name: poolcoord\n  cluster: {server: https://127.0.0.1:8443, "
                              "insecure-skip-tls-verify: true}\n"
                              "users:\n- name: admin\n  user: {token: admin-token}\n"
                              "contexts:\n- name: direct\n  context: {cluster: poolcoord, user: admin}\n";
  std::ofstream(dir / "b") << "current-context: cloud\n"
                              "clusters:\n- name: cloud\n  cluster: {server: https://10.0.0.1:6443}\n"
                              "users:\n- name: ops\n  user: {token: ops-token}\n"
                              "contexts:\n- name: cloud\n  context: {cluster: cloud, user: ops}\n";
  Environment env = Env();
  env.load_config = [&](const Options& o) {
    cloud::KubeconfigLoadingRules rules;
    if (!o.kubeconfig.empty()) {
      rules.explicit_path = o.kubeconfig;
    } else {
      for (const char* f : {"missing", "a", "b"}) rules.precedence.push_back((dir / f).string());
    }
    return LoadConfig(o, rules);
  };
  Result r = RunWith({}, env);
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(connected->rest.server == "https://127.0.0.1:8443", "a's current-context wins");
  BOOST_TEST(connected->rest.bearer_token == "admin-token");
  BOOST_TEST(connected->rest.tls.insecure_skip_verify);

  r = RunWith({"--context", "cloud"}, env);
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(connected->rest.server == "https://10.0.0.1:6443");
  BOOST_TEST(connected->rest.bearer_token == "ops-token");

  r = RunWith({"--context=cloud", "--user", "admin", "--server", "https://other:1"}, env);
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(connected->rest.server == "https://other:1");
  BOOST_TEST(connected->rest.bearer_token == "admin-token");

  r = RunWith({"--kubeconfig", (dir / "b").string(), "--context", "direct"}, env);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err == "error: context \"direct\" not found in " + (dir / "b").string() + "\n");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::kubectl_pool
