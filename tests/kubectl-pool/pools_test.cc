#define BOOST_TEST_MODULE kubectl_pool_pools
#include <boost/test/unit_test.hpp>

#include "cloud/errors.h"
#include "kubectl-pool/pools.h"
#include "kubectl-pool/print.h"
#include "rapidjson/document.h"
#include "tests/kubectl-pool/pool_fixture.h"

namespace poolcoord::kubectl_pool {
namespace {

using testing::FakeCloud;
using testing::kNow;
using testing::kSecond;

const PoolView& Find(const std::vector<PoolView>& pools, const std::string& name) {
  for (const auto& p : pools) {
    if (p.name == name) return p;
  }
  BOOST_FAIL("no pool " << name);
  return pools.front();
}

std::vector<PoolView> Build(FakeCloud& cloud, bool with_nodes = true) {
  auto s = Fetch(cloud.Clients(with_nodes), testing::kLabel);
  BOOST_TEST_REQUIRE(s.ok(), s.status().ToString());
  auto pools = BuildPools(*s);
  BOOST_TEST_REQUIRE(pools.ok(), pools.status().ToString());
  return *pools;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(aggregation)

BOOST_AUTO_TEST_CASE(leader_term_and_expiry_on_the_servers_clock) {
  FakeCloud cloud;
  auto pools = Build(cloud);
  BOOST_TEST(pools.size() == 3u);
  const PoolView& hz = Find(pools, "hangzhou");
  BOOST_TEST(hz.leader == "hz-1");
  BOOST_TEST(*hz.term == 3);
  BOOST_TEST(*hz.expiry_us == kNow + 11 * kSecond, "observedTime + leaseDurationSeconds");
  BOOST_TEST(!hz.expired);
  const PoolView& bj = Find(pools, "beijing");
  BOOST_TEST(bj.expired);
  BOOST_TEST(*bj.expiry_us == kNow - 60 * kSecond);
  const PoolView& rel = Find(pools, "released");
  BOOST_TEST(rel.leader.empty());
  BOOST_TEST(*rel.term == 1);

  // The same objects, a minute later on the server's clock: hangzhou has expired.
  cloud.server_now = kNow + 60 * kSecond;
  BOOST_TEST(Find(Build(cloud), "hangzhou").expired);
}

BOOST_AUTO_TEST_CASE(members_from_labelled_nodes) {
  FakeCloud cloud;
  auto s = Fetch(cloud.Clients(), testing::kLabel);
  BOOST_TEST_REQUIRE(s.ok());
  BOOST_TEST((s->members_from == MembersFrom::kNodes));
  BOOST_TEST(cloud.nodes.Calls().back() == std::string("list ") + testing::kLabel);
  auto pools = *BuildPools(*s);
  const PoolView& hz = Find(pools, "hangzhou");
  BOOST_TEST(hz.member_count == 4, "hz-1..hz-4; stray is labelled beijing");
  std::vector<std::string> names;
  for (const auto& m : hz.members) names.push_back(m.name + (m.in_pool ? "" : "*"));
  BOOST_TEST(names == (std::vector<std::string>{"hz-1", "hz-2", "hz-3", "hz-4", "stray*"}));
  BOOST_TEST(hz.delegated == 3, "hz-2, hz-3 and stray are live; hz-4 expired");
  BOOST_TEST_REQUIRE(hz.longest.has_value());
  BOOST_TEST(hz.longest->name == "hz-3");
  BOOST_TEST(hz.longest->delegation->delegated_for_us == 130 * kSecond);
  BOOST_TEST(Find(pools, "beijing").member_count == 3);
  BOOST_TEST(Find(pools, "beijing").delegated == 0);
  BOOST_TEST(Find(pools, "released").members.empty());
}

BOOST_AUTO_TEST_CASE(delegations_live_term_and_writer) {
  FakeCloud cloud;
  // The pools are kept: Find's reference into a temporary vector dangled (ThreadSanitizer
  // reported the heap-use-after-free; g++ builds read the freed memory unnoticed).
  const auto pools = Build(cloud);
  const PoolView& hz = Find(pools, "hangzhou");
  auto member = [&](const std::string& n) -> const Delegation& {
    for (const auto& m : hz.members) {
      if (m.name == n) return *m.delegation;
    }
    BOOST_FAIL("no member " << n);
    return *hz.members.front().delegation;
  };
  BOOST_TEST(!hz.members[0].delegation.has_value(), "hz-1, the leader, is not delegated");
  BOOST_TEST(member("hz-3").live);
  BOOST_TEST(member("hz-3").current_term);
  BOOST_TEST(member("hz-3").delegate == "hz-1");
  BOOST_TEST(*member("hz-3").renew_time_us == kNow - 2 * kSecond - 300'000);
  BOOST_TEST(*member("hz-3").observed_time_us == kNow - 2 * kSecond);
  BOOST_TEST(member("hz-2").live);
  BOOST_TEST(!member("hz-2").current_term, "written at leaseTransitions 2");
  BOOST_TEST(!member("hz-4").live);
  BOOST_TEST(*member("hz-4").expiry_us == kNow - 10 * kSecond);
  BOOST_TEST(member("hz-4").delegated_for_us == 0);

  // Once the PoolLease has expired no delegation belongs to the current term.
  cloud.server_now = kNow + 12 * kSecond;
  const auto pools_later = Build(cloud);
  const PoolView& later = Find(pools_later, "hangzhou");
  for (const auto& m : later.members) {
    if (m.delegation) BOOST_TEST(!m.delegation->current_term, m.name);
  }
}

// Straight to poolcoord there is no Nodes API (404): the DelegatedLeases name
// the members, and every output says so.
BOOST_AUTO_TEST_CASE(members_from_delegated_leases_without_a_nodes_api) {
  FakeCloud cloud;
  cloud.nodes.errors.Inject("list", cloud::ApiError(404, "NotFound",
                                                    "the server could not find the requested resource"));
  auto s = Fetch(cloud.Clients(), testing::kLabel);
  BOOST_TEST_REQUIRE(s.ok(), s.status().ToString());
  BOOST_TEST((s->members_from == MembersFrom::kDelegatedLeases));
  BOOST_TEST(s->warnings.empty());
  auto pools = *BuildPools(*s);
  const PoolView& hz = Find(pools, "hangzhou");
  BOOST_TEST(hz.member_count == 4, "hz-2, hz-3, hz-4, stray");
  for (const auto& m : hz.members) BOOST_TEST(m.in_pool);
  BOOST_TEST(Find(pools, "beijing").member_count == 0);
  BOOST_TEST(FormatTable(pools, *s).find("MEMBERS (DELEGATEDLEASES)") != std::string::npos);

  // The same with no Nodes client at all.
  BOOST_TEST((Fetch(cloud.Clients(false), testing::kLabel)->members_from ==
              MembersFrom::kDelegatedLeases));
}

BOOST_AUTO_TEST_CASE(nodes_forbidden_warns_other_errors_fail) {
  FakeCloud cloud;
  // As the transport hands it on: a Status body (its message alone is shown).
  cloud.nodes.errors.Inject(
      "list", cloud::StatusFromResponse(403, R"({"kind":"Status","apiVersion":"v1","code":403,)"
                                             R"("reason":"Forbidden","message":"nodes is forbidden"})"));
  auto s = Fetch(cloud.Clients(), testing::kLabel);
  BOOST_TEST_REQUIRE(s.ok());
  BOOST_TEST((s->members_from == MembersFrom::kDelegatedLeases));
  BOOST_TEST_REQUIRE(s->warnings.size() == 1u);
  BOOST_TEST(s->warnings[0] ==
             "cannot list Nodes (nodes is forbidden): members are taken from the DelegatedLeases");
  cloud.nodes.errors.Inject("list", cloud::ApiError(500, "InternalError", "etcd is down"));
  BOOST_TEST(cloud::CodeOf(Fetch(cloud.Clients(), testing::kLabel).status()) == 500);
  cloud.pool_leases.errors.Inject("list", cloud::ApiError(403, "Forbidden", "no"));
  BOOST_TEST(cloud::IsForbidden(Fetch(cloud.Clients(), testing::kLabel).status()));
  cloud.delegated.errors.Inject("list", cloud::ApiError(404, "NotFound", "no APIService"));
  BOOST_TEST(cloud::IsNotFound(Fetch(cloud.Clients(), testing::kLabel).status()));
}

BOOST_AUTO_TEST_CASE(no_date_header_falls_back_to_this_machine_with_a_warning) {
  FakeCloud cloud;
  cloud.server_now.reset();
  auto s = Fetch(cloud.Clients(), testing::kLabel);
  BOOST_TEST_REQUIRE(s.ok());
  BOOST_TEST(!s->server_time_from_date);
  BOOST_TEST(s->server_now_us == kNow + 3600 * kSecond);
  BOOST_TEST_REQUIRE(s->warnings.size() == 1u);
  BOOST_TEST(s->warnings[0].find("no Date header") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(one_pool) {
  FakeCloud cloud;
  auto s = Fetch(cloud.Clients(), testing::kLabel, "beijing");
  BOOST_TEST_REQUIRE(s.ok());
  BOOST_TEST(cloud.nodes.Calls().back() == std::string("list ") + testing::kLabel + "=beijing");
  BOOST_TEST(s->delegated_leases.empty(), "the field selector spec.poolName=beijing");
  auto pools = BuildPools(*s, "beijing");
  BOOST_TEST_REQUIRE(pools.ok());
  BOOST_TEST(pools->size() == 1u);
  BOOST_TEST(pools->front().member_count == 3);
  auto none = BuildPools(*s, "nowhere");
  BOOST_TEST(absl::IsNotFound(none.status()));
  BOOST_TEST(std::string(none.status().message()) ==
             "pool \"nowhere\" not found: no PoolLease, no DelegatedLease and no Node labelled "
             "apps.openyurt.io/nodepool=nowhere names it");
  // A pool known only from its labelled Nodes (nobody elected yet) is a pool.
  cloud.nodes.Put(testing::LabelledNode("sz-1", "shenzhen"));
  auto sz = BuildPools(*Fetch(cloud.Clients(), testing::kLabel), "shenzhen");
  BOOST_TEST_REQUIRE(sz.ok());
  BOOST_TEST(!sz->front().pool_lease.has_value());
  BOOST_TEST(!sz->front().term.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(printing)

BOOST_AUTO_TEST_CASE(human_durations_as_kubectl_prints_ages) {
  const std::vector<std::pair<int64_t, std::string>> cases = {
      {-5, "<invalid>"},   {-1, "0s"},        {0, "0s"},         {59, "59s"},       {119, "119s"},
      {120, "2m"},         {130, "2m10s"},    {599, "9m59s"},    {600, "10m"},
      {179 * 60, "179m"},  {3 * 3600, "3h"},  {3 * 3600 + 60, "3h1m"}, {8 * 3600, "8h"},
      {47 * 3600, "47h"},  {48 * 3600, "2d"}, {50 * 3600, "2d2h"},  {8 * 86400, "8d"},
      {729 * 86400, "729d"}, {730 * 86400, "2y"}, {731 * 86400, "2y1d"}, {9 * 365 * 86400, "9y"}};
  for (const auto& [seconds, want] : cases) {
    BOOST_TEST(HumanDuration(seconds * kSecond + 999'999 * (seconds >= 0)) == want, seconds);
  }
  BOOST_TEST(RelativeExpiry(kNow + 11 * kSecond, kNow) == "in 11s");
  BOOST_TEST(RelativeExpiry(kNow - 60 * kSecond, kNow) == "expired 60s ago");
  BOOST_TEST(RelativeExpiry(kNow, kNow) == "expired 0s ago");
}

BOOST_AUTO_TEST_CASE(table_as_kubectl_lays_it_out) {
  FakeCloud cloud;
  auto s = *Fetch(cloud.Clients(), testing::kLabel);
  BOOST_TEST(FormatTable(*BuildPools(s), s) ==
             "NAME       LEADER   TERM   EXPIRES           MEMBERS (NODES)   DELEGATED   LONGEST DELEGATION\n"
             "beijing    bj-1     0      expired 60s ago   3                 0           <none>\n"
             "hangzhou   hz-1     3      in 11s            4                 3           hz-3 (2m10s)\n"
             "released   <none>   1      released          0                 0           <none>\n");
}

// A holderIdentity is any string: columns align by characters, as kubectl's
// tabwriter does, not by bytes (found by a newcomer: a 2-byte-per-character
// holder pushed the next columns 1 space right per character).
BOOST_AUTO_TEST_CASE(table_aligns_by_characters_not_bytes) {
  FakeCloud cloud;
  cloud.pool_leases.Put(testing::PoolLease("beijing", "北京-1", 10, 0, kNow - 70 * kSecond));
  auto s = *Fetch(cloud.Clients(), testing::kLabel);
  BOOST_TEST(FormatTable(*BuildPools(s), s) ==
             "NAME       LEADER   TERM   EXPIRES           MEMBERS (NODES)   DELEGATED   LONGEST DELEGATION\n"
             "beijing    北京-1     0      expired 60s ago   3                 0           <none>\n"
             "hangzhou   hz-1     3      in 11s            4                 3           hz-3 (2m10s)\n"
             "released   <none>   1      released          0                 0           <none>\n");
}

BOOST_AUTO_TEST_CASE(describe_shows_each_member_with_its_renewal_and_writer) {
  FakeCloud cloud;
  auto s = *Fetch(cloud.Clients(), testing::kLabel, "hangzhou");
  const std::string out = FormatDescribe(BuildPools(s, "hangzhou")->front(), s);
  for (const std::string want : {
           "Name:              hangzhou\n",
           "Leader:            hz-1\n",
           "Term:              3 (leaseTransitions of PoolLease uid uid-hangzhou)\n",
           "Lease Duration:    15s\n",
           "Renew Time:        2025-12-31T23:59:55.750000Z (the leader's clock)\n",
           "Observed Time:     2025-12-31T23:59:56.000000Z (the server's clock)\n",
           "Expires:           in 11s (2026-01-01T00:00:11.000000Z)\n",
           "Server Time:       2026-01-01T00:00:00.000000Z (the server's Date header)\n",
           "Members:           4 from Nodes labelled apps.openyurt.io/nodepool=hangzhou\n",
           "Delegated:         3 live DelegatedLeases; longest: hz-3 for 2m10s\n",
           "  NODE                                DELEGATED   DELEGATE   RENEW TIME (LEADER'S CLOCK)   "
           "OBSERVED TIME (SERVER'S CLOCK)          EXPIRES           TERM      SINCE\n",
           "  hz-1                                no          <none>     <none>                        "
           "<none>                                  <none>            <none>    <none>\n",
           "  hz-3                                yes         hz-1       2025-12-31T23:59:57.700000Z   "
           "2025-12-31T23:59:58.000000Z (2s ago)    in 38s            current   2m10s\n",
           "  hz-2                                yes         hz-1       2025-12-31T23:59:58.700000Z   "
           "2025-12-31T23:59:59.000000Z (1s ago)    in 39s            earlier   20s\n",
           "  hz-4                                expired     hz-1       2025-12-31T23:59:09.700000Z   "
           "2025-12-31T23:59:10.000000Z (50s ago)   expired 10s ago   current   <none>\n",
           "  stray (not labelled in this pool)   yes         hz-1 "}) {
    BOOST_TEST(out.find(want) != std::string::npos, "missing: " << want << "\nin:\n" << out);
  }
  // A pool without a PoolLease says why it has no leader.
  cloud.nodes.Put(testing::LabelledNode("sz-1", "shenzhen"));
  auto sz = *Fetch(cloud.Clients(), testing::kLabel, "shenzhen");
  const std::string sz_out = FormatDescribe(BuildPools(sz, "shenzhen")->front(), sz);
  BOOST_TEST(sz_out.find("Leader:       <none>\nTerm:         <none> (no PoolLease: nobody has been "
                         "elected)\n") != std::string::npos,
             sz_out);
}

BOOST_AUTO_TEST_CASE(json_is_a_pool_list) {
  FakeCloud cloud;
  auto s = *Fetch(cloud.Clients(), testing::kLabel);
  const std::string text = FormatObjects(*BuildPools(s), s, Format::kJson, false);
  rapidjson::Document d;
  d.Parse(text.c_str());
  BOOST_TEST_REQUIRE(!d.HasParseError());
  BOOST_TEST(d["apiVersion"].GetString() == std::string("kubectl-pool.coordination.pool/v1alpha1"));
  BOOST_TEST(d["kind"].GetString() == std::string("PoolList"));
  BOOST_TEST(d["membersFrom"].GetString() == std::string("Nodes"));
  BOOST_TEST(d["serverTime"].GetString() == std::string("2026-01-01T00:00:00.000000Z"));
  BOOST_TEST(d["serverTimeSource"].GetString() == std::string("Date"));
  BOOST_TEST_REQUIRE(d["items"].Size() == 3u);
  const auto& hz = d["items"][1];
  BOOST_TEST(hz["kind"].GetString() == std::string("Pool"));
  BOOST_TEST(hz["metadata"]["name"].GetString() == std::string("hangzhou"));
  BOOST_TEST(hz["leader"].GetString() == std::string("hz-1"));
  BOOST_TEST(hz["term"].GetInt() == 3);
  BOOST_TEST(hz["poolLease"]["expiresInSeconds"].GetInt() == 11);
  BOOST_TEST(hz["poolLease"]["expiryTime"].GetString() == std::string("2026-01-01T00:00:11.000000Z"));
  BOOST_TEST(hz["memberCount"].GetInt() == 4);
  BOOST_TEST(hz["delegated"].GetInt() == 3);
  BOOST_TEST(hz["longestDelegation"]["node"].GetString() == std::string("hz-3"));
  BOOST_TEST(hz["longestDelegation"]["delegatedSeconds"].GetInt() == 130);
  BOOST_TEST_REQUIRE(hz["members"].Size() == 5u);
  BOOST_TEST(hz["members"][0]["delegation"].IsNull());
  BOOST_TEST(hz["members"][2]["delegation"]["delegate"].GetString() == std::string("hz-1"));
  BOOST_TEST(hz["members"][2]["delegation"]["currentTerm"].GetBool());
  BOOST_TEST(!hz["members"][4]["inPool"].GetBool());
  const auto& bj = d["items"][0];
  BOOST_TEST(bj["poolLease"]["expiresInSeconds"].GetInt() == -60);
  BOOST_TEST(bj["poolLease"]["expired"].GetBool());
  BOOST_TEST(d["items"][2]["leader"].IsNull());
  BOOST_TEST(text.find("\n    \"kind\": \"PoolList\"") != std::string::npos, "4-space indent");

  // describe -o json: the Pool alone.
  auto one = *Fetch(cloud.Clients(), testing::kLabel, "hangzhou");
  rapidjson::Document pool;
  pool.Parse(FormatObjects(*BuildPools(one, "hangzhou"), one, Format::kJson, true).c_str());
  BOOST_TEST(pool["kind"].GetString() == std::string("Pool"));
}

BOOST_AUTO_TEST_CASE(yaml_quotes_what_would_read_back_as_another_type) {
  FakeCloud cloud;
  cloud::Lease odd = testing::PoolLease("yes", "123", 15, 0, kNow);
  odd.metadata.uid = "null";
  cloud.pool_leases.Put(odd);
  auto s = *Fetch(cloud.Clients(), testing::kLabel, "yes");
  const std::string y = FormatObjects(*BuildPools(s, "yes"), s, Format::kYaml, true);
  for (const std::string want : {"kind: Pool\n", "  name: \"yes\"\n", "leader: \"123\"\n",
                                 "  uid: \"null\"\n", "  observedTime: \"2026-01-01T00:00:00.000000Z\"\n",
                                 "longestDelegation: null\n", "members: []\n"}) {
    BOOST_TEST(y.find(want) != std::string::npos, "missing " << want << " in\n" << y);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::kubectl_pool
