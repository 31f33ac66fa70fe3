#define BOOST_TEST_MODULE agent_flags
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "agent/flags.h"
#include "agent/kube_agent_cloud.h"
#include "base/microtime.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "election/lease_marks.h"
#include "election/lease_rules.h"
#include "rapidjson/document.h"
#include "store/object_codec.h"
#include "tests/agent/agent_testing.h"

namespace pa = poolcoord::agent;

namespace {
absl::StatusOr<pa::AgentFlags> Parse(std::vector<std::string> args) { return pa::ParseAgentFlags(args); }
}  // namespace

BOOST_AUTO_TEST_CASE(Defaults) {
  auto f = Parse({"--server=https://10.0.0.1:6443"});
  BOOST_REQUIRE_MESSAGE(f.ok(), f.status().ToString());
  BOOST_TEST(f->client_certificate == "/var/lib/kubelet/pki/kubelet-client-current.pem");
  BOOST_TEST(f->pool_label == "apps.openyurt.io/nodepool");
  BOOST_TEST(f->heartbeat_port == 10270);
  BOOST_TEST((f->heartbeat_interval == absl::Seconds(5)));
  BOOST_TEST((f->request_timeout == absl::Seconds(3)));
}

BOOST_AUTO_TEST_CASE(Styles) {
  auto f = Parse({"--server", "https://x:6443", "--heartbeat-interval=2s", "--heartbeat-port", "7000",
                  "-v", "3", "--pool-label=node-restriction.kubernetes.io/pool"});
  BOOST_REQUIRE_MESSAGE(f.ok(), f.status().ToString());
  BOOST_TEST((f->heartbeat_interval == absl::Seconds(2)));
  BOOST_TEST(f->heartbeat_port == 7000);
  BOOST_TEST(f->verbosity == 3);
  BOOST_TEST(Parse({"-h"})->help);
  BOOST_TEST(Parse({"--help"})->help);  // no other flag needed
  BOOST_TEST(Parse({"--server=x", "-v2"})->verbosity == 2);
}

BOOST_AUTO_TEST_CASE(Errors) {
  auto message = [](std::vector<std::string> args) {
    auto f = pa::ParseAgentFlags(args);
    BOOST_TEST(!f.ok());
    BOOST_TEST(f.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(f.status().message());
  };
  BOOST_TEST(message({"--nope"}).find("unknown flag: --nope") != std::string::npos);
  BOOST_TEST(message({"--server=x", "--heartbeat-interval=soon"}).find("not a duration") != std::string::npos);
  BOOST_TEST(message({"--server=x", "--heartbeat-interval=0s"}).find("positive") != std::string::npos);
  BOOST_TEST(message({"--server=x", "--heartbeat-port=70000"}).find("between") != std::string::npos);
  BOOST_TEST(message({"--server=x", "--heartbeat-port"}).find("needs an argument") != std::string::npos);
  BOOST_TEST(message({}).find("--kubeconfig or --server") != std::string::npos);
  BOOST_TEST(message({"--server=x", "--request-timeout=10s"}).find("below") != std::string::npos);
  BOOST_TEST(message({"--server=x", "--leader-elect-lease-duration=5s"}).find("greater") != std::string::npos);
  BOOST_TEST(message({"positional"}).find("flags only") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(Usage) {
  const std::string u = pa::AgentFlagUsage("poolcoord-agent");
  for (const char* flag : {"--client-certificate", "--pool-label", "--heartbeat-port", "--peer-cache-dir",
                           "--request-timeout", "-h, --help"}) {
    BOOST_TEST(u.find(flag) != std::string::npos, flag);
  }
}

BOOST_AUTO_TEST_CASE(DelegatedLeaseJson) {
  pa::DelegatedLeaseWrite w = pa::testing::HangzhouWrite();
  rapidjson::Document d;
  const std::string create = pa::EncodeDelegatedLease(w);
  d.Parse(create.c_str());
  BOOST_REQUIRE(!d.HasParseError());
  BOOST_TEST(std::string(d["kind"].GetString()) == "DelegatedLease");
  BOOST_TEST(std::string(d["metadata"]["name"].GetString()) == "hz-2");
  BOOST_TEST(!d["metadata"].HasMember("resourceVersion"));
  BOOST_TEST(std::string(d["metadata"]["annotations"]["openyurt.io/delegate-heartbeat"].GetString()) == "true");
  BOOST_TEST(std::string(d["spec"]["holderIdentity"].GetString()) == "hz-2");
  BOOST_TEST(std::string(d["spec"]["poolName"].GetString()) == "hangzhou");
  BOOST_TEST(std::string(d["spec"]["delegate"].GetString()) == "hz-1");
  BOOST_TEST(std::string(d["spec"]["renewTime"].GetString()) == "2026-01-01T00:00:00.123456Z");
  BOOST_TEST(d["spec"]["leaseDurationSeconds"].GetInt() == 7);
  w.resource_version = "42";
  d.Parse(pa::EncodeDelegatedLease(w).c_str());
  BOOST_TEST(std::string(d["metadata"]["resourceVersion"].GetString()) == "42");
  BOOST_TEST(*pa::ResourceVersionOf(R"({"metadata":{"resourceVersion":"7"}})") == "7");
  BOOST_TEST(!pa::ResourceVersionOf("{}").ok());
  BOOST_TEST(!pa::ResourceVersionOf("not json").ok());
}

// One codec: the server reads what the agent writes, proof included, and
// kubectl pool (the cloud client) reads what the server answers.
BOOST_AUTO_TEST_CASE(TheAgentTheServerAndTheClientShareOneCodec) {
  pa::DelegatedLeaseWrite w = pa::testing::HangzhouWrite();
  poolcoord::cloud::DelegatedLease sent = pa::DelegatedLeaseOf(w);
  sent.delegation.proof = poolcoord::api::DelegationProof{"aGI=", "Y2VydA=="};
  std::vector<std::string> unknown;
  auto stored = poolcoord::store::DecodeObjectJson(poolcoord::cloud::EncodeDelegatedLease(sent),
                                                   poolcoord::store::Kind::kDelegatedLease, &unknown);
  BOOST_REQUIRE_MESSAGE(stored.ok(), stored.status().ToString());
  BOOST_TEST(unknown.empty());
  BOOST_TEST(((*stored)->spec == sent.spec));
  BOOST_TEST((poolcoord::store::DelegationOf(**stored).proof == sent.delegation.proof));
  BOOST_TEST((*stored)->metadata.annotations.at(poolcoord::election::kDelegateAnnotation) == "true");

  (*stored)->status.observed_time_us = 1'767'225'600'000'000;
  (*stored)->status.leader_term = poolcoord::api::LeaderTerm{"uid-1", 2};
  poolcoord::store::ClearDelegationProof(**stored);
  poolcoord::store::MutableDelegation(**stored).accepted_proof = poolcoord::api::AcceptedProof{"ab", 3, "c"};
  auto read = poolcoord::cloud::DecodeDelegatedLease(poolcoord::store::EncodeObject(**stored));
  BOOST_REQUIRE(read.ok());
  BOOST_TEST((read->spec == sent.spec));
  BOOST_TEST((read->status == (*stored)->status));
  BOOST_TEST((read->delegation == poolcoord::store::DelegationOf(**stored)));
}

BOOST_AUTO_TEST_CASE(NodeLeaseObservations) {
  poolcoord::cloud::Lease lease;
  lease.spec.renew_time_us = 1'767'225'600'000'001;
  BOOST_TEST(pa::ObserveNodeLease(lease).exists);
  BOOST_TEST(!pa::ObserveNodeLease(lease).forwarded);  // the kubelet's
  lease.metadata.annotations[poolcoord::election::kForwardedRenewTimeAnnotation] =
      poolcoord::base::FormatMicroTime(1'767'225'600'000'001);
  BOOST_TEST(pa::ObserveNodeLease(lease).forwarded);  // the forwarder wrote last
  lease.spec.renew_time_us = 1'767'225'610'000'000;   // the kubelet renewed since
  BOOST_TEST(!pa::ObserveNodeLease(lease).forwarded);
  lease.metadata.annotations[poolcoord::election::kForwardedRenewTimeAnnotation] = "garbage";
  BOOST_TEST(!pa::ObserveNodeLease(lease).forwarded);
  // A kubelet renewal the forwarder carried past its own last renewTime (the
  // kubelet's clock runs behind) is still the kubelet's: the cloud sees the
  // node itself.
  lease.metadata.annotations[poolcoord::election::kForwardedRenewTimeAnnotation] =
      poolcoord::base::FormatMicroTime(1'767'225'620'000'000);
  lease.spec.renew_time_us = 1'767'225'620'000'001;
  lease.metadata.annotations[poolcoord::election::kCarriedRenewTimeAnnotation] =
      poolcoord::base::FormatMicroTime(1'767'225'620'000'001);
  BOOST_TEST(!pa::ObserveNodeLease(lease).forwarded);
}

BOOST_AUTO_TEST_CASE(AnsweredOrNot) {
  BOOST_TEST(pa::KubeAgentCloud::Answered(absl::OkStatus()));
  BOOST_TEST(pa::KubeAgentCloud::Answered(poolcoord::cloud::ApiError(403, "Forbidden", "no")));
  BOOST_TEST(pa::KubeAgentCloud::Answered(poolcoord::cloud::ApiError(503, "ServiceUnavailable", "agg")));
  BOOST_TEST(!pa::KubeAgentCloud::Answered(absl::UnavailableError("connect: no route to host")));
  BOOST_TEST(!pa::KubeAgentCloud::Answered(absl::DeadlineExceededError("timeout")));
}
