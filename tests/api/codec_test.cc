// The one codec of the group's spec and status (api/codec.h), on its own: what
// it writes, what it reads back, what it refuses and what it does not know.
// tests/store/object_codec_test.cc covers it inside the server's objects,
// tests/agent/agent_flags_test.cc between the agent, the server and kubectl pool.
#define BOOST_TEST_MODULE api_codec
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "api/codec.h"
#include "api/types.h"
#include "rapidjson/document.h"

namespace api = poolcoord::api;

namespace {

// {"spec":...,"status":...} as WriteSpec and WriteStatus write them.
std::string Write(const api::LeaseSpec& spec, uint32_t fields, const api::DelegationProof* proof,
                  const api::LeaseStatus& status, const api::DelegationFields& delegation) {
  rapidjson::StringBuffer buf;
  api::JsonWriter w(buf);
  w.StartObject();
  api::WriteSpec(w, spec, fields, proof);
  api::WriteStatus(w, status, delegation);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  BOOST_REQUIRE(!d.HasParseError());
  return d;
}

api::LeaseSpec FullSpec() {
  api::LeaseSpec s;
  s.holder_identity = "hz-2";
  s.lease_duration_seconds = 40;
  s.acquire_time_us = 1'767'225'600'000'000;
  s.renew_time_us = 1'767'225'601'123'456;
  s.lease_transitions = 3;
  s.pool_name = "hangzhou";
  s.delegate = "hz-1";
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(what_is_written_reads_back) {
  const api::LeaseSpec spec = FullSpec();
  api::LeaseStatus status;
  status.observed_time_us = 1'767'225'602'000'001;
  status.leader_term = api::LeaderTerm{"uid-1", 3};
  status.expired = true;
  api::DelegationFields delegation;
  delegation.accepted_proof = api::AcceptedProof{"0123456789abcdef0123456789abcdef", 9, "Y2g="};
  delegation.challenges = {{"bmV3", 1'767'225'600'000'000}, {"b2xk", 1'767'225'595'000'000}};
  const api::DelegationProof proof{"aGI=", "Y2VydA=="};
  const std::string json = Write(spec, ~uint32_t{0}, &proof, status, delegation);
  rapidjson::Document d = Parse(json);
  BOOST_TEST(std::string(d["spec"]["renewTime"].GetString()) == "2026-01-01T00:00:01.123456Z");

  api::LeaseSpec spec_back;
  api::LeaseStatus status_back;
  api::DelegationFields delegation_back;
  std::vector<std::string> unknown;
  api::DecodeFindings findings;
  findings.unknown = &unknown;
  api::DecodeSpec(d["spec"], ~uint32_t{0}, &spec_back, &delegation_back, &findings);
  api::DecodeStatus(d["status"], &status_back, &delegation_back, &findings);
  BOOST_TEST(findings.causes.empty());
  BOOST_TEST(unknown.empty());
  BOOST_TEST((spec_back == spec));
  BOOST_TEST((status_back == status));
  delegation.proof = proof;
  BOOST_TEST((delegation_back == delegation));
}

BOOST_AUTO_TEST_CASE(a_kind_writes_and_reads_only_its_own_spec_fields) {
  const api::ResourceInfo& pool = api::InfoFor(api::Kind::kPoolLease);
  const api::DelegationProof proof{"aGI=", "Y2VydA=="};
  rapidjson::Document d = Parse(Write(FullSpec(), pool.spec_fields, &proof, {}, {}));
  BOOST_TEST(!d["spec"].HasMember("poolName"));
  BOOST_TEST(!d["spec"].HasMember("proof"));  // not a PoolLease field
  BOOST_TEST(!d.HasMember("status"));         // nothing in it
  BOOST_TEST(d["spec"].HasMember("acquireTime"));

  const api::ResourceInfo& delegated = api::InfoFor(api::Kind::kDelegatedLease);
  rapidjson::Document written = Parse(Write(FullSpec(), ~uint32_t{0}, nullptr, {}, {}));
  api::LeaseSpec spec;
  api::DelegationFields delegation;
  std::vector<std::string> unknown;
  api::DecodeFindings findings;
  findings.unknown = &unknown;
  api::DecodeSpec(written["spec"], delegated.spec_fields, &spec, &delegation, &findings);
  BOOST_TEST(!spec.acquire_time_us.has_value());
  BOOST_TEST(!spec.lease_transitions.has_value());
  BOOST_TEST(unknown == (std::vector<std::string>{"spec.acquireTime", "spec.leaseTransitions"}),
             boost::test_tools::per_element());
  BOOST_TEST(findings.causes.empty());
}

BOOST_AUTO_TEST_CASE(refusals_are_causes_and_leave_the_field_unset) {
  rapidjson::Document d = Parse(
      R"({"spec":{"holderIdentity":7,"leaseDurationSeconds":"x","renewTime":"2026-01-01T00:00:00Z",
          "leaseTransitions":4294967296,"proof":{"heartbeat":1}},
          "status":{"expired":"yes","challenges":{},"leaderTerm":[]}})");
  api::LeaseSpec spec;
  api::LeaseStatus status;
  api::DelegationFields delegation;
  api::DecodeFindings findings;
  api::DecodeSpec(d["spec"], ~uint32_t{0}, &spec, &delegation, &findings);
  api::DecodeStatus(d["status"], &status, &delegation, &findings);
  std::vector<std::string> fields;
  for (const api::FieldCause& c : findings.causes) fields.push_back(c.field);
  const std::vector<std::string> want = {
      "spec.holderIdentity",   "spec.leaseDurationSeconds", "spec.renewTime",
      "spec.leaseTransitions", "spec.proof.heartbeat",      "status.expired",
      "status.challenges",     "status.leaderTerm"};
  BOOST_TEST(fields == want, boost::test_tools::per_element());
  BOOST_TEST(!spec.holder_identity.has_value());
  BOOST_TEST(!spec.renew_time_us.has_value());
  BOOST_TEST(findings.causes[0].message ==
             R"(Invalid value: "integer": spec.holderIdentity in body must be of type string: "integer")");
  BOOST_TEST(findings.causes[2].message.find("must be a MicroTime") != std::string::npos);
  // An integral number fills an integer field; null is absent.
  rapidjson::Document lenient = Parse(R"({"leaseDurationSeconds":40.0,"holderIdentity":null})");
  api::LeaseSpec s;
  s.holder_identity = "before";
  api::DecodeFindings none;
  api::DecodeSpec(lenient, ~uint32_t{0}, &s, &delegation, &none);
  BOOST_TEST(none.causes.empty());
  BOOST_TEST(s.lease_duration_seconds.value() == 40);
  BOOST_TEST(!s.holder_identity.has_value());
}
