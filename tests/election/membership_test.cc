#define BOOST_TEST_MODULE membership
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "election/membership.h"
#include "election/membership_file_source.h"

namespace pe = poolcoord::election;

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/membership-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string Write(const std::string& name, const std::string& text) const {
    auto p = path / name;
    std::ofstream(p, std::ios::trunc) << text;
    return p.string();
  }
};

// Waits up to `timeout` for `pred`, polling every 20 ms.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(parse)

BOOST_AUTO_TEST_CASE(yaml_and_json_give_the_same_pools) {
  auto yaml = pe::ParseMembershipYaml("pools:\n  hangzhou: [hz-1, hz-2]\n  beijing:\n    - bj-1\n");
  auto json = pe::ParseMembershipYaml(
      R"({"pools": {"hangzhou": ["hz-1", "hz-2"], "beijing": ["bj-1"]}})");
  BOOST_REQUIRE(yaml.ok());
  BOOST_REQUIRE(json.ok());
  BOOST_TEST((*yaml == *json));
  BOOST_TEST(yaml->at("hangzhou").size() == 2u);
  BOOST_TEST(yaml->at("beijing").front() == "bj-1");
}

BOOST_AUTO_TEST_CASE(empty_pools_allowed) {
  auto a = pe::ParseMembershipYaml("pools: {}");
  BOOST_REQUIRE(a.ok());
  BOOST_TEST(a->empty());
  auto b = pe::ParseMembershipYaml("pools:");
  BOOST_REQUIRE(b.ok());
  BOOST_TEST(b->empty());
  auto c = pe::ParseMembershipYaml("pools: {lonely: []}");
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(c->at("lonely").empty());
}

BOOST_AUTO_TEST_CASE(wrong_shapes_rejected_with_reason) {
  struct Case {
    const char* text;
    const char* reason;
  } cases[] = {
      {"", "empty"},
      {"[1, 2]", "not a mapping"},
      {"pool: {a: [x]}", "unknown top-level key \"pool\""},
      {"other: 1", "unknown top-level key"},
      {"pools: [a, b]", "\"pools\" is not a mapping"},
      {"pools: {a: x}", "are not a list"},
      {"pools: {a: [[x]]}", "not a non-empty string"},
      {"pools: {a: [x], b: [x]}", "listed in pools \"a\" and \"b\""},
      {"{\"pools\": {\"a\": [\"x\"]", "not valid YAML"},
  };
  for (const auto& c : cases) {
    auto parsed = pe::ParseMembershipYaml(c.text);
    BOOST_TEST_CONTEXT(c.text) {
      BOOST_REQUIRE(!parsed.ok());
      BOOST_TEST(parsed.status().code() == absl::StatusCode::kInvalidArgument);
      BOOST_TEST(std::string(parsed.status().message()).find(c.reason) != std::string::npos,
                 parsed.status().message());
    }
  }
}

// Names Kubernetes would refuse where they end up (a pool names a PoolLease and
// a label value, a node a Node, its DelegatedLease and its Lease) were taken as
// they came: each is refused with the line it sits on and apimachinery's reason.
BOOST_AUTO_TEST_CASE(names_are_checked_as_kubernetes_checks_them) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"pools:\n  hangzhou:\n    - hz-1\n    - Bad_Node\n",
       "membership: node \"Bad_Node\" (line 4, column 7) is not a valid node name: a lowercase RFC "
       "1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
       "start and end with an alphanumeric character (e.g. 'example.com', regex used for "
       "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"},
      {"pools:\n  Hang Zhou: [hz-1]\n", "membership: pool \"Hang Zhou\" (line 2, column 3) is not a valid pool name: a lowercase RFC 1123 subdomain"},
      {"pools: {a: [-x]}", "node \"-x\" (line 1, column 13) is not a valid node name"},
      {"pools: {a: [x.]}", "node \"x.\""},
      {"pools: {a: [\"x/y\"]}", "node \"x/y\""},
      {"pools: {a.-b: [x]}", "pool \"a.-b\""},
      // A pool name is also a label value: at most 63 characters.
      {"pools: {aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: [x]}",
       "is not a valid pool name: must be no more than 63 characters"},
  };
  for (const auto& c : cases) {
    auto parsed = pe::ParseMembershipYaml(c.text);
    BOOST_TEST_CONTEXT(c.text) {
      BOOST_REQUIRE(!parsed.ok());
      BOOST_TEST(parsed.status().code() == absl::StatusCode::kInvalidArgument);
      BOOST_TEST(std::string(parsed.status().message()).find(c.want) != std::string::npos,
                 parsed.status().message());
    }
  }
  // What Kubernetes accepts passes: dots, digits first, a 253-character node name.
  const std::string long_node(253, 'n');
  auto ok = pe::ParseMembershipYaml("pools: {edge.pool-1: [1node, n.example.com, " + long_node + "]}");
  BOOST_REQUIRE_MESSAGE(ok.ok(), ok.status());
  BOOST_TEST(ok->at("edge.pool-1").size() == 3u);
  auto too_long = pe::ParseMembershipYaml("pools: {a: [" + long_node + "n]}");
  BOOST_REQUIRE(!too_long.ok());
  BOOST_TEST(std::string(too_long.status().message()).find("must be no more than 253 characters") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(duplicate_node_in_one_pool_kept_once) {
  auto a = pe::ParseMembershipYaml("pools: {a: [x, x, y]}");
  BOOST_REQUIRE(a.ok());
  BOOST_TEST(a->at("a").size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(membership_index)

BOOST_AUTO_TEST_CASE(not_loaded_until_first_replace) {
  pe::MembershipIndex index;
  BOOST_TEST(!index.Loaded());
  BOOST_TEST(!index.PoolOf("hz-1").has_value());
  BOOST_TEST(index.Replace("file", {}).ok());
  BOOST_TEST(index.Loaded());
  BOOST_TEST(index.Generation() == 1);
}

BOOST_AUTO_TEST_CASE(lookups_and_replace) {
  pe::MembershipIndex index;
  BOOST_REQUIRE(index.Replace("file", {{"hangzhou", {"hz-1", "hz-2"}}, {"beijing", {"bj-1"}}}).ok());
  BOOST_TEST(index.PoolOf("hz-2").value() == "hangzhou");
  BOOST_TEST(index.IsMember("bj-1", "beijing"));
  BOOST_TEST(!index.IsMember("bj-1", "hangzhou"));
  BOOST_TEST(!index.PoolOf("nobody").has_value());
  BOOST_REQUIRE(index.Replace("file", {{"hangzhou", {"hz-1"}}}).ok());
  BOOST_TEST(!index.PoolOf("hz-2").has_value());
  BOOST_TEST(!index.PoolOf("bj-1").has_value());
  BOOST_TEST(index.Generation() == 2);
}

BOOST_AUTO_TEST_CASE(sources_union_and_conflict_first_pool_wins) {
  pe::MembershipIndex index;
  BOOST_REQUIRE(index.Replace("file", {{"zeta", {"n-1"}}, {"alpha", {"n-2"}}}).ok());
  absl::Status s = index.Replace("nodes", {{"beta", {"n-1"}}});
  BOOST_TEST(s.code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(s.message()).find("n-1") != std::string::npos);
  BOOST_TEST(index.PoolOf("n-1").value() == "beta");  // "beta" < "zeta"
  BOOST_TEST(index.PoolOf("n-2").value() == "alpha");
  auto snap = index.Snapshot();
  BOOST_TEST(snap.count("zeta") == 1u);  // still listed, now empty
  BOOST_TEST(snap.at("beta").size() == 1u);
  BOOST_TEST(index.Replace("nodes", {}).ok());  // conflict gone
  BOOST_TEST(index.PoolOf("n-1").value() == "zeta");
}

BOOST_AUTO_TEST_CASE(one_source_naming_a_node_twice_first_pool_wins) {
  pe::MembershipIndex index;
  absl::Status s = index.Replace("nodes", {{"zeta", {"n-1", "n-2"}}, {"beta", {"n-1"}},
                                           {"alpha", {"n-3", "n-3"}}});
  BOOST_TEST(s.code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(s.message()).find("n-1 in beta, zeta") != std::string::npos,
             s.message());
  BOOST_TEST(std::string(s.message()).find("n-3") == std::string::npos);  // same pool twice
  BOOST_TEST(index.PoolOf("n-1").value() == "beta");
  BOOST_TEST(index.IsMember("n-1", "beta"));
  BOOST_TEST(!index.IsMember("n-1", "zeta"));
  BOOST_TEST(index.PoolOf("n-3").value() == "alpha");
  auto snap = index.Snapshot();
  BOOST_TEST((snap == pe::MembershipIndex::PoolMap{
                          {"alpha", {"n-3"}}, {"beta", {"n-1"}}, {"zeta", {"n-2"}}}));
}

BOOST_AUTO_TEST_CASE(snapshot_merges_sources_in_name_order) {
  pe::MembershipIndex index;
  BOOST_REQUIRE(index.Replace("file", {{"a", {"n-5", "n-1"}}, {"empty", {}}}).ok());
  BOOST_REQUIRE(index.Replace("nodes", {{"a", {"n-3", "n-1"}}, {"b", {"n-2"}}}).ok());
  BOOST_TEST((index.Snapshot() == pe::MembershipIndex::PoolMap{
                                      {"a", {"n-1", "n-3", "n-5"}}, {"b", {"n-2"}}, {"empty", {}}}));
  BOOST_TEST(index.PoolOf("n-1").value() == "a");  // in two sources, one pool: no conflict
  BOOST_TEST(!index.PoolOf("").has_value());
  BOOST_TEST(!index.PoolOf("n-").has_value());
  BOOST_TEST(!index.PoolOf("n-50").has_value());
}

BOOST_AUTO_TEST_CASE(large_membership_lookups) {
  pe::MembershipIndex::PoolMap pools;
  for (int p = 0; p < 2000; ++p) {
    auto& nodes = pools["pool-" + std::to_string(p)];
    for (int n = 0; n < 10; ++n) {
      nodes.push_back("pool-" + std::to_string(p) + "-node-" + std::to_string(n));
    }
  }
  pe::MembershipIndex index;
  BOOST_REQUIRE(index.Replace("file", pools).ok());
  for (const auto& [pool, nodes] : pools) {
    for (const auto& node : nodes) BOOST_REQUIRE(index.PoolOf(node).value() == pool);
  }
  BOOST_TEST(!index.PoolOf("pool-1-node-10").has_value());
  BOOST_TEST((index.Snapshot() == pools));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(file_source)

BOOST_AUTO_TEST_CASE(start_fails_on_missing_or_malformed_file) {
  TempDir dir;
  pe::MembershipIndex index;
  pe::MembershipFileSource missing((dir.path / "nope.yaml").string(), &index);
  BOOST_TEST(missing.Start().code() == absl::StatusCode::kNotFound);
  pe::MembershipFileSource bad(dir.Write("bad.yaml", "pools: [x]"), &index);
  absl::Status s = bad.Start();
  BOOST_TEST(s.code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(s.message()).find("bad.yaml") != std::string::npos);
  BOOST_TEST(!index.Loaded());
}

BOOST_AUTO_TEST_CASE(reloads_on_change_and_keeps_last_good_on_broken_file) {
  TempDir dir;
  pe::MembershipIndex index;
  const std::string path = dir.Write("m.yaml", "pools: {hangzhou: [hz-1]}\n");
  pe::MembershipFileSource source(path, &index, absl::Milliseconds(50));
  BOOST_REQUIRE(source.Start().ok());
  BOOST_TEST(index.PoolOf("hz-1").value() == "hangzhou");

  dir.Write("m.yaml", R"({"pools": {"hangzhou": ["hz-1", "hz-2"]}})");
  BOOST_TEST(WaitFor([&] { return index.IsMember("hz-2", "hangzhou"); }));

  BOOST_TEST(source.LastLoadStatus().ok());

  const int64_t gen = index.Generation();
  dir.Write("m.yaml", "pools: {hangzhou: hz-1");  // broken
  // First that the poller read the broken file, then that nothing changed.
  BOOST_TEST(WaitFor([&] {
    return source.LastLoadStatus().code() == absl::StatusCode::kInvalidArgument;
  }));
  BOOST_TEST(index.Generation() == gen);
  BOOST_TEST(index.IsMember("hz-2", "hangzhou"));

  // Atomic rename-replace, as a ConfigMap volume or `mv` does it.
  const std::string staged = dir.Write("m.yaml.new", "pools: {beijing: [bj-1]}\n");
  std::filesystem::rename(staged, path);
  BOOST_TEST(WaitFor([&] { return index.IsMember("bj-1", "beijing"); }));
  BOOST_TEST(!index.PoolOf("hz-1").has_value());
  BOOST_TEST(source.LastLoadStatus().ok());
  source.Stop();
}

BOOST_AUTO_TEST_CASE(poll_once_reports_outcome) {
  TempDir dir;
  pe::MembershipIndex index;
  const std::string path = dir.Write("m.yaml", "pools: {a: [x]}\n");
  pe::MembershipFileSource source(path, &index, absl::Hours(1));
  BOOST_REQUIRE(source.Start().ok());
  BOOST_TEST(source.PollOnce().ok());  // unchanged
  dir.Write("m.yaml", "pools: {a: [x], b: [x]}\n");
  BOOST_TEST(source.PollOnce().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(source.PollOnce().ok());  // same broken file: not retried, not re-logged
  BOOST_TEST(source.LastLoadStatus().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(index.IsMember("x", "a"));
  std::filesystem::remove(path);
  BOOST_TEST(source.PollOnce().code() == absl::StatusCode::kNotFound);
  BOOST_TEST(source.LastLoadStatus().code() == absl::StatusCode::kNotFound);
  BOOST_TEST(index.IsMember("x", "a"));
  source.Stop();
  source.Stop();  // idempotent
}

BOOST_AUTO_TEST_SUITE_END()
