#define BOOST_TEST_MODULE apiservice_flags
#include <boost/test/unit_test.hpp>

#include "apiservice/flags.h"

namespace poolcoord::apiservice {
namespace {

BOOST_AUTO_TEST_SUITE(ParseFlagsTest)

BOOST_AUTO_TEST_CASE(DefaultsFollowDesign) {
  absl::StatusOr<ServerOptions> o = ParseFlags({});
  BOOST_REQUIRE(o.ok());
  BOOST_TEST(o->secure_port == 8443);
  BOOST_TEST(o->bind_address == "0.0.0.0");
  BOOST_TEST(o->anonymous_auth == false);
  BOOST_TEST(o->pool_label == "apps.openyurt.io/nodepool");
  BOOST_TEST(o->lease_proxy_users ==
             std::vector<std::string>{"openyurt:yurt-coordinator:node-lease-proxy-client"});
  BOOST_TEST(o->forwarder_user == "");
  BOOST_TEST(o->max_lease_duration == 300);
  BOOST_TEST(o->watch_history_size == 10000);
  BOOST_TEST(o->delegated_lease_gc_period == absl::Minutes(5));
  BOOST_TEST(o->max_requests_inflight == 400);
  BOOST_TEST(o->storage_backend == "memory");
  // Unset: the server decides at start, required with a cloud cluster (its
  // forwarder makes DelegatedLeases count), optional standalone (the shared
  // acceptance checks write DelegatedLeases without proofs to a standalone server).
  BOOST_TEST(o->delegation_proof == "");
  // The tests' harness prepends --delegation-proof=optional: a later flag wins.
  auto later = ParseFlags({"--delegation-proof=optional", "--delegation-proof=off"});
  BOOST_REQUIRE(later.ok());
  BOOST_TEST(later->delegation_proof == "off");
  BOOST_TEST(o->leader_elect == false);
  BOOST_TEST(o->leader_elect_lease_duration == absl::Seconds(15));
  BOOST_TEST(o->leader_elect_renew_deadline == absl::Seconds(10));
  BOOST_TEST(o->leader_elect_retry_period == absl::Seconds(2));
  BOOST_TEST(o->leader_elect_resource_namespace == "kube-system");
  BOOST_TEST(o->leader_elect_resource_name == "poolcoord");
  BOOST_TEST(o->requestheader_username_headers == std::vector<std::string>{"X-Remote-User"});
  BOOST_TEST(o->requestheader_group_headers == std::vector<std::string>{"X-Remote-Group"});
  BOOST_TEST(o->requestheader_extra_headers_prefix ==
             std::vector<std::string>{"X-Remote-Extra-"});
  BOOST_TEST(o->authorization_always_allow_paths ==
             (std::vector<std::string>{"/healthz", "/readyz", "/livez"}));
  BOOST_TEST(!o->cert_dir.empty());
  BOOST_TEST(!o->write_kubeconfig.empty());
}

BOOST_AUTO_TEST_CASE(BothValueFormsAndBooleans) {
  absl::StatusOr<ServerOptions> o =
      ParseFlags({"--secure-port=9443", "--bind-address", "127.0.0.1", "--anonymous-auth",
                  "--leader-elect=false", "--forwarder-user", "system:serviceaccount:x:y",
                  "--delegated-lease-gc-period=1h30m", "--leader-elect-retry-period", "500ms",
                  "-v", "3", "--watch-history-size=5"});
  BOOST_REQUIRE_MESSAGE(o.ok(), o.status().ToString());
  BOOST_TEST(o->secure_port == 9443);
  BOOST_TEST(o->bind_address == "127.0.0.1");
  BOOST_TEST(o->anonymous_auth == true);
  BOOST_TEST(o->leader_elect == false);
  BOOST_TEST(o->forwarder_user == "system:serviceaccount:x:y");
  BOOST_TEST(o->delegated_lease_gc_period == absl::Minutes(90));
  BOOST_TEST(o->leader_elect_retry_period == absl::Milliseconds(500));
  BOOST_TEST(o->verbosity == 3);
  BOOST_TEST(o->watch_history_size == 5);

  o = ParseFlags({"--v=2", "--anonymous-auth=true", "--leader-elect=1"});
  BOOST_REQUIRE(o.ok());
  BOOST_TEST(o->verbosity == 2);
  BOOST_TEST(o->anonymous_auth);
  BOOST_TEST(o->leader_elect);
}

BOOST_AUTO_TEST_CASE(ListsReplaceDefaultThenAppend) {
  absl::StatusOr<ServerOptions> o =
      ParseFlags({"--lease-proxy-users=a,b", "--lease-proxy-users", "c",
                  "--requestheader-allowed-names="});
  BOOST_REQUIRE(o.ok());
  BOOST_TEST(o->lease_proxy_users == (std::vector<std::string>{"a", "b", "c"}));
  BOOST_TEST(o->requestheader_allowed_names.empty());
}

BOOST_AUTO_TEST_CASE(UnknownFlagIsAnError) {
  absl::StatusOr<ServerOptions> o = ParseFlags({"--no-such-flag=1"});
  BOOST_REQUIRE(!o.ok());
  BOOST_TEST(o.status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(o.status().message()).find("unknown flag: --no-such-flag") !=
             std::string::npos);
  BOOST_TEST(!ParseFlags({"positional"}).ok());
  BOOST_TEST(!ParseFlags({"-x"}).ok());
}

BOOST_AUTO_TEST_CASE(BadValuesAreErrors) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--secure-port=abc"},
           {"--secure-port=70000"},
           {"--max-lease-duration=0"},
           {"--watch-history-size=-1"},
           {"--delegated-lease-gc-period=5"},
           {"--delegated-lease-gc-period=soon"},
           {"--leader-elect-lease-duration=-5s"},
           {"--anonymous-auth=maybe"},
           {"--storage-backend=sqlite"},
           {"--secure-port"},
           {"--tls-cert-file=/x.crt"}}) {
    absl::StatusOr<ServerOptions> o = ParseFlags(args);
    BOOST_TEST(!o.ok(), "accepted " << args[0]);
    if (!o.ok()) BOOST_TEST(o.status().code() == absl::StatusCode::kInvalidArgument);
  }
  absl::StatusOr<ServerOptions> o = ParseFlags({"--secure-port=abc"});
  BOOST_TEST(std::string(o.status().message()) ==
             "invalid argument \"abc\" for \"--secure-port\" flag: not an integer");
}

// The inputs that showed them: --bind-address=notanip failed later, with exit 1;
// --client-ca-file=/nonexistent said "cannot read /nonexistent" without the flag.
// The replica election's timings are checked with the flags, as component-base
// checks kube-apiserver's, by the rule LeaderElector::New applies (client-go's):
// they failed only later, in start-up, and without the flag's name.
BOOST_AUTO_TEST_CASE(LeaderElectTimingsNameTheFlag) {
  absl::StatusOr<ServerOptions> o =
      ParseFlags({"--leader-elect", "--leader-elect-lease-duration=5s"});
  BOOST_REQUIRE(!o.ok());
  BOOST_TEST(std::string(o.status().message()) ==
             "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline");
  o = ParseFlags({"--leader-elect", "--leader-elect-retry-period=9s"});
  BOOST_REQUIRE(!o.ok());
  BOOST_TEST(std::string(o.status().message()) ==
             "--leader-elect-renew-deadline must be greater than "
             "--leader-elect-retry-period*JitterFactor (1.2)");
  // Not electing: the timings are not used, so not judged (as component-base).
  BOOST_TEST(ParseFlags({"--leader-elect-lease-duration=5s"}).ok());
}

BOOST_AUTO_TEST_CASE(BindAddressAndFilesNameTheFlag) {
  absl::StatusOr<ServerOptions> o = ParseFlags({"--bind-address=notanip"});
  BOOST_REQUIRE(!o.ok());
  BOOST_TEST(std::string(o.status().message()) ==
             "invalid argument \"notanip\" for \"--bind-address\" flag: not an IP address");
  BOOST_TEST(ParseFlags({"--bind-address=::1"}).ok());
  for (const char* flag : {"--client-ca-file", "--requestheader-client-ca-file", "--token-auth-file"}) {
    o = ParseFlags({std::string(flag) + "=/nonexistent/file"});
    BOOST_REQUIRE(!o.ok());
    BOOST_TEST(std::string(o.status().message()) ==
               "invalid argument \"/nonexistent/file\" for \"" + std::string(flag) +
                   "\" flag: cannot read it: No such file or directory");
  }
}

BOOST_AUTO_TEST_CASE(Etcd3IsParsed) {
  absl::StatusOr<ServerOptions> o =
      ParseFlags({"--storage-backend=etcd3", "--etcd-servers=https://a:2379,https://b:2379"});
  BOOST_REQUIRE(o.ok());
  BOOST_TEST(o->storage_backend == "etcd3");
  BOOST_TEST(o->etcd_servers.size() == 2u);
}

BOOST_AUTO_TEST_CASE(HelpListsEveryFlagWithDefault) {
  absl::StatusOr<ServerOptions> o = ParseFlags({"--help"});
  BOOST_REQUIRE(o.ok());
  BOOST_TEST(o->help);
  BOOST_TEST(ParseFlags({"-h"})->help);
  std::string usage = FlagUsage("poolcoord-apiserver");
  for (const char* flag :
       {"--secure-port", "--bind-address", "--cert-dir", "--tls-cert-file",
        "--tls-private-key-file", "--client-ca-file", "--token-auth-file", "--anonymous-auth",
        "--requestheader-client-ca-file", "--requestheader-allowed-names",
        "--requestheader-username-headers", "--requestheader-group-headers",
        "--requestheader-extra-headers-prefix", "--authentication-kubeconfig",
        "--authorization-kubeconfig", "--authorization-always-allow-paths", "--kubeconfig",
        "--pool-membership-file", "--pool-label", "--lease-proxy-users", "--forwarder-user",
        "--max-lease-duration", "--watch-history-size", "--delegated-lease-gc-period",
        "--max-requests-inflight", "--storage-backend", "--etcd-servers", "--leader-elect",
        "--leader-elect-lease-duration", "--leader-elect-renew-deadline",
        "--leader-elect-retry-period", "--leader-elect-resource-namespace",
        "--leader-elect-resource-name", "--write-kubeconfig", "--v", "--help"}) {
    BOOST_TEST(usage.find(std::string(flag) + " ") != std::string::npos, flag);
  }
  BOOST_TEST(usage.find("(default 8443)") != std::string::npos);
  BOOST_TEST(usage.find("(default 5m0s)") != std::string::npos);
  BOOST_TEST(usage.find("(default \"apps.openyurt.io/nodepool\")") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(HelpClaimsNoFlagIsUnused) {
  // --authentication-kubeconfig and --authorization-kubeconfig were once
  // "accepted; not used yet" in --help long after they were used.
  std::string usage = FlagUsage("poolcoord-apiserver");
  BOOST_TEST(usage.find("not used yet") == std::string::npos, usage);
  for (auto [flag, what] : {std::pair{"--authentication-kubeconfig", "TokenReview"},
                            std::pair{"--authorization-kubeconfig", "SubjectAccessReview"}}) {
    size_t at = usage.find(std::string(flag) + " ");
    BOOST_REQUIRE(at != std::string::npos);
    std::string text = usage.substr(at, usage.find("\n  --", at + 1) - at);
    BOOST_TEST(text.find(what) != std::string::npos, text);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
