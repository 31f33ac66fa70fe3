#define BOOST_TEST_MODULE forwarder
#include "election/forwarder.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/metrics.h"
#include "base/microtime.h"
#include "cloud/errors.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "store/memory_store.h"
#include "tests/cloud_fakes.h"
#include "tests/rules_writes.h"

namespace pe = poolcoord::election;
namespace ps = poolcoord::store;
namespace pc = poolcoord::cloud;
namespace pb = poolcoord::base;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr int64_t kSecond = 1'000'000;

struct Fixture {
  Fixture() : rules(&clock, &membership, {}) {
    clock.Advance(seconds(1000));
    BOOST_REQUIRE(membership.Replace("file", {{"hangzhou", {"hz-1", "hz-2", "hz-3"}}}).ok());
    store = ps::NewMemoryStore({});
    RenewPool();
    for (const char* name : {"hz-1", "hz-2", "hz-3"}) {
      pc::Node n;
      n.metadata.name = name;
      n.taints.push_back({"example.com/keep", "yes", "NoSchedule", std::nullopt});
      nodes.Put(n);
    }
    forwarder = std::make_unique<pe::Forwarder>(store.get(), &rules,
                                                pe::ForwarderCloud{&leases, &nodes, &events},
                                                &clock, &registry, options);
  }

  absl::Status Write(const ps::Object& proposed) {
    return poolcoord::testing::WriteThroughRules(store.get(), rules,
                                                 poolcoord::testing::NodeUser("hz-1"), proposed);
  }

  // hz-1 takes or renews the PoolLease of hangzhou.
  void RenewPool() {
    ps::Object o = poolcoord::testing::PoolLeaseFor("hangzhou", "hz-1");
    o.spec.renew_time_us = clock.NowMicros();  // a renewal sets renewTime
    absl::Status s = Write(o);
    BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  }

  // The leader (renewing its PoolLease) writes or renews the DelegatedLease of `node`.
  void Delegate(const std::string& node, int32_t duration = 40) {
    RenewPool();
    const ps::Object o = poolcoord::testing::DelegatedLeaseFor(node, "hangzhou", "hz-1", duration,
                                                               clock.NowMicros());
    absl::Status s = Write(o);
    BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  }

  // The leader renews, and the forwarder hears of it (its watch enqueues the node).
  void LeaderRenews(const std::string& node) {
    Delegate(node);
    forwarder->SyncNode(node).IgnoreError();
  }

  void Undelegate(const std::string& node) {
    auto deleted = store->Update(
        ps::Kind::kDelegatedLease, node,
        [](const ps::ObjectPtr&, ps::TxnReader&) -> absl::StatusOr<ps::MutableObjectPtr> {
          return nullptr;
        });
    BOOST_REQUIRE(deleted.ok());
  }

  // The kubelet renews its own Lease (GET, change renewTime, PUT: annotations
  // it read are kept, as the real kubelet's update does), on a clock `skew`
  // away from the server's.
  void KubeletRenews(const std::string& node, int64_t skew_us = 0) {
    pc::Lease l = leases.Find(node).value_or(pc::Lease{});
    l.metadata.name = node;
    l.spec.holder_identity = node;
    l.spec.lease_duration_seconds = 40;
    l.spec.renew_time_us = clock.NowMicros() + skew_us;
    leases.Put(l);
  }

  std::optional<int64_t> RenewTime(const std::string& node) {
    auto l = leases.Find(node);
    return l ? l->spec.renew_time_us : std::nullopt;
  }
  std::string Annotation(const std::string& node, const char* key) {
    auto l = leases.Find(node);
    if (!l) return "";
    auto it = l->metadata.annotations.find(key);
    return it == l->metadata.annotations.end() ? "" : it->second;
  }
  bool Tainted(const std::string& node) {
    auto n = nodes.Find(node);
    return n && std::any_of(n->taints.begin(), n->taints.end(),
                            [](const pc::Taint& t) { return t.key == pe::kUnschedulableTaint; });
  }
  int Count(const std::string& node, const std::string& reason) {
    auto r = events.Reasons(node);
    return static_cast<int>(std::count(r.begin(), r.end(), reason));
  }
  uint64_t Errors() { return forwarder->metrics().forward_errors.Value(); }

  // Runs the forwarder's loop on the fake clock for `d`, in 100 ms steps: the
  // rechecks it asked for, and a resync every 5 s. `each` runs before each step.
  template <typename Fn>
  void Run(std::chrono::microseconds d, Fn each) {
    const int64_t end = clock.MonotonicMicros() + d.count();
    while (clock.MonotonicMicros() < end) {
      each();
      if (clock.MonotonicMicros() >= next_resync_) {
        forwarder->SyncAll().IgnoreError();
        next_resync_ = clock.MonotonicMicros() + 5 * kSecond;
      }
      forwarder->SyncDue().IgnoreError();
      clock.Advance(milliseconds(100));
    }
  }
  void Run(std::chrono::microseconds d) {
    Run(d, [] {});
  }

  pb::FakeClock clock;
  pe::MembershipIndex membership;
  pe::LeaseRules rules;
  std::unique_ptr<ps::Store> store;
  poolcoord::testing::FakeLeases leases;
  poolcoord::testing::FakeNodes nodes;
  poolcoord::testing::FakeEvents events;
  pb::MetricsRegistry registry;
  pe::ForwarderOptions options;
  std::unique_ptr<pe::Forwarder> forwarder;
  int64_t next_resync_ = 0;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(forwarding, Fixture)

BOOST_AUTO_TEST_CASE(missing_cloud_lease_is_created_and_marked) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  auto l = leases.Find("hz-2");
  BOOST_REQUIRE(l.has_value());
  BOOST_TEST(l->spec.holder_identity.value_or("") == "hz-2");
  BOOST_TEST(*l->spec.renew_time_us == clock.NowMicros());
  BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation) == "true");
  BOOST_TEST(Annotation("hz-2", pe::kDelegatedSinceAnnotation) ==
             pb::FormatMicroTime(clock.NowMicros()));
  BOOST_TEST(l->metadata.labels.at(pe::kDelegatedLabel) == "true");
  BOOST_TEST(Count("hz-2", "DelegationStarted") == 1);
  BOOST_TEST(forwarder->metrics().forwards.Value() == 1u);
}

BOOST_AUTO_TEST_CASE(renew_time_never_goes_backwards) {
  // The kubelet's clock ran an hour ahead before the node lost the cloud.
  pc::Lease l;
  l.metadata.name = "hz-2";
  l.spec.renew_time_us = clock.NowMicros() + 3600 * kSecond;
  leases.Put(l);
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  BOOST_TEST(*RenewTime("hz-2") == *l.spec.renew_time_us + 1);
}

BOOST_AUTO_TEST_CASE(conflict_is_retried) {
  KubeletRenews("hz-2");
  clock.Advance(seconds(30));
  Delegate("hz-2");
  leases.errors.Inject("update", pc::ApiError(409, "Conflict", "modified"));
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation) == "true");
  BOOST_TEST(Errors() == 0u);  // a conflict is not a failure
}

// Issue 11, defect 1: the taint was a PUT of the Node (verb update), which the
// chart's RBAC (nodes: get/list/watch/patch) refuses, and the refusal was
// dropped. It is now a merge patch conditional on the Node's resourceVersion,
// and a refusal is counted and returned.
BOOST_AUTO_TEST_CASE(taint_is_a_conditional_merge_patch) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  const std::string rv = nodes.Find("hz-2")->metadata.resource_version;
  Run(seconds(41), [&] {
    if (clock.MonotonicMicros() % (10 * kSecond) == 0) LeaderRenews("hz-2");
  });
  BOOST_TEST(Tainted("hz-2"));
  const auto n = nodes.Find("hz-2");
  BOOST_TEST(n->taints.size() == 2u);  // someone else's taint is kept
  const std::string expected_patch =
      "patch hz-2 application/merge-patch+json {\"metadata\":{\"resourceVersion\":\"" + rv +
      "\"},\"spec\":{\"taints\":[{\"key\":\"example.com/keep\",\"value\":\"yes\",\"effect\":"
      "\"NoSchedule\"},{\"key\":\"node.openyurt.io/unschedulable\",\"value\":\"true\","
      "\"effect\":\"NoSchedule\"}]}}";
  const auto calls = nodes.Calls();
  BOOST_TEST((std::find(calls.begin(), calls.end(), expected_patch) != calls.end()));
  BOOST_TEST(Count("hz-2", "TaintAdded") == 1);
  const auto all = events.Events();
  auto added = std::find_if(all.begin(), all.end(),
                            [](const pc::Event& e) { return e.reason == "TaintAdded"; });
  BOOST_TEST(added->message ==
             "node hz-2 delegated for 40s: tainted node.openyurt.io/unschedulable=true:NoSchedule");
  BOOST_TEST(Errors() == 0u);
}

// CI (test_cluster_lifecycle, stop 17): the leader deleted ph-08's
// DelegatedLease while its renewal was in flight, the webhook refused the
// write (403), and the refusal was counted as a forwarding error.
BOOST_AUTO_TEST_CASE(renewal_refused_because_delegation_ended_is_not_an_error) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  const auto first = RenewTime("hz-2");
  clock.Advance(seconds(10));
  Delegate("hz-2");
  leases.errors.Inject("update", std::function<absl::Status()>([&] {
                         Undelegate("hz-2");  // between the forwarder's read and its write
                         return pc::ApiError(
                             403, "Forbidden",
                             "admission webhook \"delegated-heartbeat.coordination.pool\" denied "
                             "the request: node \"hz-2\" has no DelegatedLease");
                       }));
  BOOST_TEST(forwarder->SyncNode("hz-2").ok());
  BOOST_TEST(Errors() == 0u);
  BOOST_TEST(forwarder->metrics().forwards_withdrawn.Value() == 1u);
  BOOST_TEST((RenewTime("hz-2") == first));  // nothing written
  BOOST_TEST(registry.Render().find("poolcoord_forwards_withdrawn_total 1\n") != std::string::npos);
}

// The same refusal while the delegation is still current is a real failure.
BOOST_AUTO_TEST_CASE(renewal_refused_while_delegated_is_an_error) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  clock.Advance(seconds(10));
  Delegate("hz-2");
  leases.errors.Inject("update", pc::ApiError(403, "Forbidden", "denied"));
  BOOST_TEST(pc::IsForbidden(forwarder->SyncNode("hz-2")));
  BOOST_TEST(Errors() == 1u);
  BOOST_TEST(forwarder->metrics().forwards_withdrawn.Value() == 0u);
}

BOOST_AUTO_TEST_CASE(refused_taint_is_counted_and_returned) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  clock.Advance(seconds(40));
  Delegate("hz-2");
  nodes.errors.Inject(
      "patch", pc::ApiError(403, "Forbidden",
                            "nodes \"hz-2\" is forbidden: User \"system:serviceaccount:kube-system:"
                            "poolcoord\" cannot update resource \"nodes\""));
  absl::Status s = forwarder->SyncNode("hz-2");
  BOOST_TEST(pc::IsForbidden(s));
  BOOST_TEST(Errors() == 1u);
  BOOST_TEST(!Tainted("hz-2"));
  // The next pass tries again and succeeds.
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  BOOST_TEST(Tainted("hz-2"));
}

BOOST_AUTO_TEST_CASE(every_failed_cloud_call_is_counted) {
  Delegate("hz-2");
  leases.errors.Inject("get", pc::ApiError(503, "ServiceUnavailable", "down"));
  BOOST_TEST(pc::IsServiceUnavailable(forwarder->SyncNode("hz-2")));
  BOOST_TEST(Errors() == 1u);
  leases.errors.Inject("create", pc::ApiError(403, "Forbidden", "no"));
  BOOST_TEST(pc::IsForbidden(forwarder->SyncNode("hz-2")));
  BOOST_TEST(Errors() == 2u);
  events.errors.Inject("create", pc::ApiError(500, "InternalError", "events down"));
  BOOST_TEST(forwarder->SyncNode("hz-2").ok());  // a lost Event does not stop forwarding
  BOOST_TEST(Errors() == 3u);
  BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation) == "true");
  leases.errors.Inject("list", pc::ApiError(500, "InternalError", "list down"));
  BOOST_TEST(!forwarder->SyncAll().ok());
  BOOST_TEST(Errors() == 4u);
  BOOST_TEST(registry.Render().find("poolcoord_forward_errors_total 4\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(kubelet_back_clears_marks_and_taint) {
  Delegate("hz-2");
  Run(seconds(41), [&] {
    if (clock.MonotonicMicros() % (10 * kSecond) == 0) LeaderRenews("hz-2");
  });
  BOOST_REQUIRE(Tainted("hz-2"));
  KubeletRenews("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation).empty());
  BOOST_TEST(Annotation("hz-2", pe::kDelegatedSinceAnnotation).empty());
  BOOST_TEST(!Tainted("hz-2"));
  BOOST_TEST(nodes.Find("hz-2")->taints.size() == 1u);
  BOOST_TEST(Count("hz-2", "DelegationStopped") == 1);
  BOOST_TEST(Count("hz-2", "TaintRemoved") == 1);
}

// A node that came back while its DelegatedLease runs out (the leader no longer
// renews it) is left to its kubelet: no forward that would fight it.
BOOST_AUTO_TEST_CASE(returning_kubelet_is_not_fought) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  clock.Advance(seconds(3));
  KubeletRenews("hz-2");
  const uint64_t forwards = forwarder->metrics().forwards.Value();
  Run(seconds(35), [&] {
    if (clock.MonotonicMicros() % (10 * kSecond) == 0) KubeletRenews("hz-2");
  });
  BOOST_TEST(forwarder->metrics().forwards.Value() == forwards);
  BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation).empty());
  BOOST_TEST(Count("hz-2", "DelegationStarted") == 1);
}

// Issue 11, defect 2: after a flapping link (delegated before, the kubelet back
// in between), the first forward of the next delegation came 40-47 s after the
// kubelet's last own renewal: the forwarder waited for the cloud Lease's 40 s
// duration. For every phase of the DelegatedLease's first write after the
// kubelet's last renewal, the first forward must now come within one kubelet
// renew interval of that renewal (plus the 100 ms step of the loop), and the
// cloud Lease must never go longer than half the 40 s grace period unrenewed.
BOOST_AUTO_TEST_CASE(flapping_link_is_forwarded_within_one_renew_interval) {
  // The first delegation, and the kubelet coming back: the flap.
  Delegate("hz-2");
  Run(seconds(12), [&] {
    if (clock.MonotonicMicros() % (5 * kSecond) == 0) LeaderRenews("hz-2");
  });
  Undelegate("hz-2");
  for (int phase = 0; phase < 20; ++phase) {
    // The kubelet renews for a while, every 10 s, then the link drops just
    // after a renewal; the leader notices `phase` x 0.5 s later.
    for (int i = 0; i < 3; ++i) {
      KubeletRenews("hz-2");
      Run(seconds(10));
    }
    KubeletRenews("hz-2");
    const int64_t last_own = clock.MonotonicMicros();
    const int64_t delegate_at = last_own + phase * 500'000;
    int64_t last_change = last_own;
    int64_t longest_gap = 0;
    std::optional<int64_t> first_forward;
    std::optional<int64_t> seen = RenewTime("hz-2");
    Run(seconds(60), [&] {
      const int64_t now = clock.MonotonicMicros();
      if (now >= delegate_at && (now - delegate_at) % (10 * kSecond) == 0) LeaderRenews("hz-2");
      if (RenewTime("hz-2") != seen) {
        seen = RenewTime("hz-2");
        if (!first_forward) first_forward = now;
        longest_gap = std::max(longest_gap, now - last_change);
        last_change = now;
      }
    });
    longest_gap = std::max(longest_gap, clock.MonotonicMicros() - last_change);
    BOOST_TEST_CONTEXT("phase " << phase) {
      BOOST_REQUIRE(first_forward.has_value());
      BOOST_TEST(*first_forward - last_own <= 10 * kSecond + 100'000);
      BOOST_TEST(*first_forward >= delegate_at);
      BOOST_TEST(longest_gap <= 20 * kSecond);
      BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation) == "true");
    }
    // The link comes back: the kubelet renews, the leader stops delegating.
    Undelegate("hz-2");
    KubeletRenews("hz-2");
    BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
    BOOST_REQUIRE(Annotation("hz-2", pe::kDelegateAnnotation).empty());
  }
  BOOST_TEST(Errors() == 0u);
}

// Issue 11, defect 3: a delegation that lapsed (no forward for longer than the
// grace period: the node went Unknown) kept its delegated-since when
// forwarding resumed, so the taint went on at once, with no DelegationStarted
// and a wrong age in TaintAdded. Resuming now starts a new delegation.
BOOST_AUTO_TEST_CASE(resumed_delegation_after_a_gap_starts_anew) {
  Delegate("hz-2");
  Run(seconds(45), [&] {
    if (clock.MonotonicMicros() % (10 * kSecond) == 0) LeaderRenews("hz-2");
  });
  BOOST_REQUIRE(Tainted("hz-2"));
  const std::string first_since = Annotation("hz-2", pe::kDelegatedSinceAnnotation);
  Undelegate("hz-2");
  Run(seconds(60));  // nothing renews the cloud Lease: longer than the 40 s grace
  BOOST_REQUIRE(Annotation("hz-2", pe::kDelegateAnnotation) == "true");  // marks stay
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  BOOST_TEST(Annotation("hz-2", pe::kDelegatedSinceAnnotation) ==
             pb::FormatMicroTime(clock.NowMicros()));
  BOOST_TEST(Annotation("hz-2", pe::kDelegatedSinceAnnotation) != first_since);
  BOOST_TEST(Count("hz-2", "DelegationStarted") == 2);
  BOOST_TEST(!Tainted("hz-2"));  // the lapsed delegation's taint goes
  Run(seconds(41), [&] {
    if (clock.MonotonicMicros() % (10 * kSecond) == 0) LeaderRenews("hz-2");
  });
  BOOST_TEST(Tainted("hz-2"));
  const auto all = events.Events();
  auto last_added = std::find_if(all.rbegin(), all.rend(),
                                 [](const pc::Event& e) { return e.reason == "TaintAdded"; });
  BOOST_TEST(last_added->message ==
             "node hz-2 delegated for 40s: tainted node.openyurt.io/unschedulable=true:NoSchedule");
}

// A gap shorter than the grace period resumes the same delegation.
BOOST_AUTO_TEST_CASE(short_gap_resumes_the_delegation) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  const std::string since = Annotation("hz-2", pe::kDelegatedSinceAnnotation);
  Undelegate("hz-2");
  Run(seconds(20));
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  BOOST_TEST(Annotation("hz-2", pe::kDelegatedSinceAnnotation) == since);
  BOOST_TEST(Count("hz-2", "DelegationStarted") == 1);
}

// Found by poolcoord-sim once its verdict became the node lifecycle
// controller's rule (a Lease counts only when its renewTime grows): a kubelet
// whose clock runs 30 s behind the server came back from a delegation, its
// renewals were all earlier than the forwarder's last renewTime, the forwarder
// dropped its marks at the first one, and for 30 s no renewal counted (the
// node went Unknown at grace 40 s while it renewed every 10 s). Each such
// renewal is now carried past the last renewTime until the kubelet's clock
// catches up; then the marks go.
BOOST_AUTO_TEST_CASE(returning_kubelet_behind_the_server_keeps_the_lease_growing) {
  constexpr int64_t kBehind = -30 * kSecond;
  KubeletRenews("hz-2", kBehind);
  Delegate("hz-2");
  Run(seconds(41), [&] {
    if (clock.MonotonicMicros() % (10 * kSecond) == 0) LeaderRenews("hz-2");
  });
  BOOST_REQUIRE(Tainted("hz-2"));
  Undelegate("hz-2");  // the leader hears the node reach the cloud again
  // What the node lifecycle controller counts: renewTime values that grow.
  int64_t counted = RenewTime("hz-2").value_or(0);
  int64_t counted_at = clock.MonotonicMicros(), longest = 0;
  int carried_seen = 0, read_as_forwarded = 0;
  Run(seconds(60), [&] {
    if (clock.MonotonicMicros() % (10 * kSecond) == 5 * kSecond) KubeletRenews("hz-2", kBehind);
    const int64_t r = RenewTime("hz-2").value_or(0);
    if (r > counted) {
      counted = r;
      counted_at = clock.MonotonicMicros();
    }
    longest = std::max(longest, clock.MonotonicMicros() - counted_at);
    // A carried renewal is the kubelet's: the node's agent must not read it
    // as the forwarder's (agent::ObserveNodeLease).
    if (Annotation("hz-2", pe::kCarriedRenewTimeAnnotation) == pb::FormatMicroTime(r)) {
      ++carried_seen;
      if (Annotation("hz-2", pe::kForwardedRenewTimeAnnotation) == pb::FormatMicroTime(r)) {
        ++read_as_forwarded;
      }
    }
  });
  BOOST_TEST(carried_seen > 0);
  BOOST_TEST(read_as_forwarded == 0);
  BOOST_TEST(longest <= 15 * kSecond + 500'000, "longest time without a counted renewal: " << longest);
  BOOST_TEST(forwarder->metrics().renewals_carried.Value() >= 3u);
  BOOST_TEST(!Tainted("hz-2"));
  // The kubelet's clock has passed the carried renewTime: its own renewals
  // count again and the marks are gone.
  BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation).empty());
  BOOST_TEST(Annotation("hz-2", pe::kCarriedRenewTimeAnnotation).empty());
  BOOST_TEST(Count("hz-2", "DelegationStopped") == 1);
}

// A dead kubelet writes nothing, so nothing is carried: no false liveness.
BOOST_AUTO_TEST_CASE(nothing_is_carried_without_a_kubelet_write) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  Undelegate("hz-2");
  const std::optional<int64_t> last = RenewTime("hz-2");
  Run(seconds(60));
  BOOST_TEST((RenewTime("hz-2") == last));
  BOOST_TEST(forwarder->metrics().renewals_carried.Value() == 0u);
}

BOOST_AUTO_TEST_CASE(metrics_keep_their_names) {
  Delegate("hz-2");
  BOOST_REQUIRE(forwarder->SyncAll().ok());
  const std::string text = registry.Render();
  for (const char* line :
       {"poolcoord_forwards_total 1\n", "poolcoord_forward_errors_total 0\n",
        "poolcoord_delegations_started_total 1\n", "poolcoord_delegated_nodes 1\n",
        "poolcoord_pools_without_leader 0\n", "poolcoord_forward_duration_seconds_count 1\n",
        "poolcoord_forward_duration_seconds_bucket{le=\"0.005\"} 1\n",
        "# TYPE poolcoord_pool_leader_changes_total counter\n",
        "# TYPE poolcoord_taints_added_total counter\n",
        "# TYPE poolcoord_taints_removed_total counter\n",
        "# TYPE poolcoord_delegations_stopped_total counter\n",
        "# TYPE poolcoord_kubelet_renewals_carried_total counter\n"}) {
    BOOST_TEST_CONTEXT(line) { BOOST_TEST(text.find(line) != std::string::npos); }
  }
}

BOOST_AUTO_TEST_SUITE_END()
