#define BOOST_TEST_MODULE cleanup
#include "controllers/cleanup.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/microtime.h"
#include "cloud/errors.h"
#include "controllers/delegation_marks.h"
#include "election/lease_marks.h"
#include "election/lease_rules.h"
#include "tests/cloud_fakes.h"

namespace pe = poolcoord::election;
namespace pc = poolcoord::cloud;
namespace pb = poolcoord::base;
namespace pcn = poolcoord::controllers;
using std::chrono::microseconds;
using std::chrono::seconds;
using Names = std::vector<std::string>;

namespace {

constexpr int64_t kRenew = 1'767'225'600'000'000;  // a renewTime, 2026-01-01

struct Fixture {
  pb::FakeClock clock;
  poolcoord::testing::FakeLeases leases;
  poolcoord::testing::FakeNodes nodes;
  std::vector<microseconds> slept;

  pcn::CleanupCloud cloud() { return {&leases, &nodes}; }

  // A node Lease as the kubelet keeps it, with someone else's annotation and label.
  pc::Lease Plain(const std::string& name) {
    pc::Lease l;
    l.metadata.name = name;
    l.metadata.namespace_ = "kube-node-lease";
    l.metadata.annotations["example.com/owner"] = "ops";
    l.metadata.labels["example.com/rack"] = "r1";
    l.spec.holder_identity = name;
    l.spec.lease_duration_seconds = 40;
    l.spec.renew_time_us = kRenew;
    return l;
  }
  // As the forwarder leaves it (election/lease_marks.h).
  pc::Lease Marked(const std::string& name) {
    pc::Lease l = Plain(name);
    l.metadata.annotations[pe::kDelegateAnnotation] = "true";
    l.metadata.annotations[pe::kDelegatedSinceAnnotation] = pb::FormatMicroTime(kRenew - 60'000'000);
    l.metadata.annotations[pe::kForwardedRenewTimeAnnotation] = pb::FormatMicroTime(kRenew);
    l.metadata.annotations[pe::kCarriedRenewTimeAnnotation] = pb::FormatMicroTime(kRenew - 1);
    l.metadata.labels[pe::kDelegatedLabel] = "true";
    return l;
  }
  void PutNode(const std::string& name, bool ours) {
    pc::Node n;
    n.metadata.name = name;
    n.taints.push_back({"example.com/keep", "yes", "NoSchedule", std::nullopt});
    if (ours) n.taints.push_back({pe::kUnschedulableTaint, "true", "NoSchedule", std::nullopt});
    nodes.Put(n);
  }
  Names TaintKeys(const std::string& node) {
    Names keys;
    const pc::Node n = *nodes.Find(node);
    for (const auto& t : n.taints) keys.push_back(t.key);
    return keys;
  }
  pcn::CleanupOptions Options() {
    pcn::CleanupOptions o;
    o.quiet_period = seconds(15);
    o.timeout = seconds(120);
    o.sleep = [this](microseconds d) {
      slept.push_back(d);
      clock.Advance(d);
    };
    return o;
  }
};

Names Sorted(Names v) {
  std::sort(v.begin(), v.end());
  return v;
}

bool Has(const std::vector<std::string>& calls, const std::string& call) {
  return std::find(calls.begin(), calls.end(), call) != calls.end();
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cleanup, Fixture)

BOOST_AUTO_TEST_CASE(removes_our_marks_and_taints_and_keeps_everyone_elses) {
  leases.Put(Marked("n1"));                // delegated by us, tainted
  leases.Put(Plain("n2"));                 // never delegated
  pc::Lease yurt = Plain("n3");            // delegated by OpenYurt's lease proxy: its taint
  yurt.metadata.annotations[pe::kDelegateAnnotation] = "true";
  leases.Put(yurt);
  leases.Put(Plain("n4"));                 // marks cleared, the taint left (a forwarder killed)
  PutNode("n1", true);
  PutNode("n2", false);
  PutNode("n3", true);
  PutNode("n4", true);
  PutNode("n5", true);                     // tainted, no Lease at all

  const pcn::CleanupPass pass = pcn::CleanupOnce(cloud(), 5);
  BOOST_TEST(pass.errors.empty());
  BOOST_TEST(pass.leases_cleared == Names{"n1"});
  BOOST_TEST(Sorted(pass.taints_removed) == (Names{"n1", "n4", "n5"}));
  BOOST_TEST(pass.taints_kept == Names{"n3"});
  // Only what carries our label is listed: the forwarder's own selector.
  BOOST_TEST(Has(leases.Calls(), std::string("list ") + pe::kDelegatedLabel));

  const pc::Lease n1 = *leases.Find("n1");
  BOOST_TEST(n1.metadata.annotations.size() == 1u);
  BOOST_TEST(n1.metadata.annotations.at("example.com/owner") == "ops");
  BOOST_TEST(n1.metadata.labels.size() == 1u);
  BOOST_TEST(n1.metadata.labels.at("example.com/rack") == "r1");
  // The Lease itself is the kubelet's: untouched.
  BOOST_TEST(*n1.spec.renew_time_us == kRenew);
  BOOST_TEST(*n1.spec.holder_identity == "n1");
  // OpenYurt's delegation keeps its annotation and its taint.
  BOOST_TEST(leases.Find("n3")->metadata.annotations.count(pe::kDelegateAnnotation) == 1u);
  BOOST_TEST(TaintKeys("n3") == (Names{"example.com/keep", pe::kUnschedulableTaint}));
  for (const char* n : {"n1", "n2", "n4", "n5"}) {
    BOOST_TEST(TaintKeys(n) == Names{"example.com/keep"}, n);
  }
  BOOST_TEST(!leases.Find("n2")->metadata.annotations.empty());

  // A second pass finds nothing.
  BOOST_TEST(pcn::CleanupOnce(cloud(), 5).clean());
}

BOOST_AUTO_TEST_CASE(a_lease_written_meanwhile_is_read_again_and_cleared) {
  leases.Put(Marked("n1"));
  PutNode("n1", true);
  // The kubelet renews between our list and our write: 409, read, write again.
  const int64_t kubelet = kRenew + 10'000'000;
  leases.errors.Inject("update", [&] {
    pc::Lease l = *leases.Find("n1");
    l.spec.renew_time_us = kubelet;
    leases.Put(l);
    return absl::OkStatus();
  });
  // Someone taints the Node between our read and our patch: 409, read, patch again.
  nodes.errors.Inject("patch", [&] {
    pc::Node n = *nodes.Find("n1");
    n.taints.push_back({"example.com/maintenance", "", "NoExecute", std::nullopt});
    nodes.Put(n, "MODIFIED");
    return absl::OkStatus();
  });
  const pcn::CleanupPass pass = pcn::CleanupOnce(cloud(), 5);
  BOOST_TEST(pass.errors.empty());
  BOOST_TEST(pass.leases_cleared == Names{"n1"});
  BOOST_TEST(pass.taints_removed == Names{"n1"});
  const pc::Lease n1 = *leases.Find("n1");
  BOOST_TEST(!pcn::CarriesDelegationMarks(n1));
  BOOST_TEST(n1.metadata.annotations.count(pe::kDelegateAnnotation) == 0u);
  BOOST_TEST(*n1.spec.renew_time_us == kubelet);  // the kubelet's renewal is kept
  const Names calls = leases.Calls();
  BOOST_TEST(std::count(calls.begin(), calls.end(), "update n1") == 2);
  BOOST_TEST(Has(calls, "get n1"));
  BOOST_TEST(TaintKeys("n1") == (Names{"example.com/keep", "example.com/maintenance"}));
}

BOOST_AUTO_TEST_CASE(a_lease_cleared_by_someone_meanwhile_is_left_alone) {
  leases.Put(Marked("n1"));
  leases.errors.Inject("update", [&] {
    pc::Lease l = *leases.Find("n1");  // the forwarder saw the kubelet come back
    pcn::StripDelegationMarks(&l);
    leases.Put(l);
    return absl::OkStatus();
  });
  const pcn::CleanupPass pass = pcn::CleanupOnce(cloud(), 5);
  BOOST_TEST(pass.errors.empty());
  BOOST_TEST(pass.leases_cleared.empty());
  const Names calls = leases.Calls();
  BOOST_TEST(std::count(calls.begin(), calls.end(), "update n1") == 1);
}

BOOST_AUTO_TEST_CASE(conflicts_beyond_the_retries_are_an_error_of_the_pass) {
  leases.Put(Marked("n1"));
  leases.Put(Marked("n2"));
  for (int i = 0; i < 3; ++i) {
    leases.errors.Inject("update", pc::ApiError(409, "Conflict", "the object has been modified"));
  }
  const pcn::CleanupPass pass = pcn::CleanupOnce(cloud(), 2);
  BOOST_TEST_REQUIRE(pass.errors.size() == 1u);
  BOOST_TEST(pass.errors[0].find("Lease kube-node-lease/n1") == 0u, pass.errors[0]);
  BOOST_TEST(pass.errors[0].find("conflicting after 2 retries") != std::string::npos);
  BOOST_TEST(pass.leases_cleared == Names{"n2"});  // the rest go on
  BOOST_TEST(!pass.clean());
}

BOOST_AUTO_TEST_CASE(an_unreadable_lease_leaves_the_taint_and_fails_the_pass) {
  PutNode("n1", true);
  leases.errors.Inject("get", pc::ApiError(503, "ServiceUnavailable", "etcd leader changed"));
  const pcn::CleanupPass pass = pcn::CleanupOnce(cloud(), 5);
  BOOST_TEST_REQUIRE(pass.errors.size() == 1u);
  BOOST_TEST(pass.errors[0].find("Node n1") == 0u, pass.errors[0]);
  BOOST_TEST(pass.taints_removed.empty());
  BOOST_TEST(TaintKeys("n1") == (Names{"example.com/keep", pe::kUnschedulableTaint}));
}

BOOST_AUTO_TEST_CASE(passes_repeat_until_one_finds_nothing) {
  leases.Put(Marked("n1"));
  PutNode("n1", true);
  // A server of the release still stopping: its forwarder marks n1 again
  // during the first wait.
  pcn::CleanupOptions o = Options();
  o.sleep = [&](microseconds d) {
    slept.push_back(d);
    clock.Advance(d);
    if (slept.size() == 1) {
      pc::Lease l = *leases.Find("n1");
      l.metadata.annotations[pe::kDelegateAnnotation] = "true";
      l.metadata.annotations[pe::kDelegatedSinceAnnotation] = pb::FormatMicroTime(kRenew);
      l.metadata.annotations[pe::kForwardedRenewTimeAnnotation] = pb::FormatMicroTime(kRenew + 1);
      l.metadata.labels[pe::kDelegatedLabel] = "true";
      leases.Update(l).IgnoreError();
    }
  };
  absl::StatusOr<pcn::CleanupReport> r = pcn::Cleanup(cloud(), &clock, o);
  BOOST_TEST_REQUIRE(r.ok(), r.status().ToString());
  BOOST_TEST(r->passes == 3);
  BOOST_TEST(r->leases_cleared == 2);
  BOOST_TEST(r->taints_removed == 1);
  BOOST_TEST(slept == (std::vector<microseconds>{seconds(15), seconds(15)}));
  BOOST_TEST(!pcn::CarriesDelegationMarks(*leases.Find("n1")));
}

BOOST_AUTO_TEST_CASE(a_clean_cloud_is_still_looked_at_twice) {
  // The first pass may come before a forward that was already due.
  leases.Put(Plain("n1"));
  PutNode("n1", false);
  absl::StatusOr<pcn::CleanupReport> r = pcn::Cleanup(cloud(), &clock, Options());
  BOOST_TEST_REQUIRE(r.ok(), r.status().ToString());
  BOOST_TEST(r->passes == 2);
  BOOST_TEST(r->leases_cleared == 0);
  BOOST_TEST(slept == std::vector<microseconds>{seconds(15)});
}

BOOST_AUTO_TEST_CASE(an_unreachable_cloud_gives_up_at_the_timeout) {
  for (int i = 0; i < 20; ++i) {
    leases.errors.Inject("list", pc::ApiError(503, "ServiceUnavailable", "connection refused"));
  }
  absl::StatusOr<pcn::CleanupReport> r = pcn::Cleanup(cloud(), &clock, Options());
  BOOST_TEST(absl::IsDeadlineExceeded(r.status()), r.status().ToString());
  BOOST_TEST(r.status().message().find("connection refused") != std::string::npos,
             r.status().ToString());
  // Passes at 0, 15, ..., 120 s: none after the timeout.
  BOOST_TEST(slept.size() == 8u);
  BOOST_TEST(clock.MonotonicMicros() <= 120'000'000);
}

BOOST_AUTO_TEST_CASE(a_forwarder_that_never_stops_is_reported) {
  leases.Put(Marked("n1"));
  pcn::CleanupOptions o = Options();
  o.sleep = [&](microseconds d) {
    clock.Advance(d);
    pc::Lease l = *leases.Find("n1");
    l.metadata.labels[pe::kDelegatedLabel] = "true";
    l.metadata.annotations[pe::kDelegatedSinceAnnotation] = pb::FormatMicroTime(kRenew);
    leases.Update(l).IgnoreError();
  };
  absl::StatusOr<pcn::CleanupReport> r = pcn::Cleanup(cloud(), &clock, o);
  BOOST_TEST(absl::IsDeadlineExceeded(r.status()), r.status().ToString());
  BOOST_TEST(r.status().message().find("still found marks (Leases of n1") != std::string::npos,
             r.status().ToString());
}

BOOST_AUTO_TEST_SUITE_END()
