#define BOOST_TEST_MODULE forwarder
#include "controllers/forwarder.h"

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
namespace pcn = poolcoord::controllers;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr int64_t kSecond = 1'000'000;

struct Fixture {
  explicit Fixture(std::vector<std::string> members = {"hz-1", "hz-2", "hz-3"},
                   pcn::ForwarderOptions o = {})
      : rules(&clock, &membership, {}), options(o) {
    clock.Advance(seconds(1000));
    BOOST_REQUIRE(membership.Replace("file", {{"hangzhou", members}}).ok());
    store = ps::NewMemoryStore({});
    RenewPool();
    for (const std::string& name : members) {
      pc::Node n;
      n.metadata.name = name;
      n.taints.push_back({"example.com/keep", "yes", "NoSchedule", std::nullopt});
      nodes.Put(n);
    }
    // What the informer's watch of the marked Leases (a label selector) would
    // deliver: a Lease that stops carrying the label leaves it.
    leases.on_change = [this](const pc::Lease& l) {
      if (!forwarder || !deliver_watch) return;
      auto it = l.metadata.labels.find(pe::kDelegatedLabel);
      const bool selected = it != l.metadata.labels.end() && it->second == "true";
      forwarder->ObserveCloudLease({selected ? "MODIFIED" : "DELETED", l});
    };
    forwarder = std::make_unique<pcn::Forwarder>(store.get(), &rules,
                                                 pcn::ForwarderCloud{&leases, &nodes, &events},
                                                 &clock, &registry, options);
    BOOST_REQUIRE(forwarder->Prime().ok());
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

  // The leader renews, and the forwarder syncs the node at once.
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
  // and labels it read are kept, as the real kubelet's update does), on a
  // clock `skew` away from the server's.
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
    forwarder->FlushEvents();
    auto r = events.Reasons(node);
    return static_cast<int>(std::count(r.begin(), r.end(), reason));
  }
  uint64_t Errors() { return forwarder->metrics().forward_errors.Value(); }
  int Calls(const std::vector<std::string>& calls, const std::string& call) {
    return static_cast<int>(std::count(calls.begin(), calls.end(), call));
  }

  // One step of what the forwarder's threads do: store events, due syncs,
  // a resync every 5 s, Events.
  void Step() {
    forwarder->Pump();
    if (clock.MonotonicMicros() >= next_resync_) {
      forwarder->Resync();
      next_resync_ = clock.MonotonicMicros() + 5 * kSecond;
    }
    forwarder->ProcessReady();
    forwarder->FlushEvents();
  }
  // Runs the forwarder on the fake clock for `d`, in 100 ms steps. `each`
  // runs before each step.
  template <typename Fn>
  void Run(std::chrono::microseconds d, Fn each) {
    const int64_t end = clock.MonotonicMicros() + d.count();
    while (clock.MonotonicMicros() < end) {
      each();
      Step();
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
  pcn::ForwarderOptions options;
  bool deliver_watch = true;
  std::unique_ptr<pcn::Forwarder> forwarder;
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

// The taint is a merge patch conditional on the Node's resourceVersion (the
// chart's RBAC grants nodes get/list/watch/patch, no update), and someone
// else's taint added since our read is never dropped.
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
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  nodes.errors.Inject(
      "patch", pc::ApiError(403, "Forbidden",
                            "nodes \"hz-2\" is forbidden: User \"system:serviceaccount:kube-system:"
                            "poolcoord\" cannot update resource \"nodes\""));
  absl::Status s = forwarder->SyncTaint("hz-2");
  BOOST_TEST(pc::IsForbidden(s));
  BOOST_TEST(Errors() == 1u);
  BOOST_TEST(!Tainted("hz-2"));
  // The next pass tries again and succeeds.
  BOOST_REQUIRE(forwarder->SyncTaint("hz-2").ok());
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
  forwarder->FlushEvents();
  BOOST_TEST(Errors() == 3u);
  BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation) == "true");
  BOOST_TEST(registry.Render().find("poolcoord_forward_errors_total 3\n") != std::string::npos);
  // The informer's list of marked Leases, at a (re)start.
  pb::MetricsRegistry other;
  pcn::Forwarder restarted(store.get(), &rules, pcn::ForwarderCloud{&leases, &nodes, &events},
                           &clock, &other, options);
  leases.errors.Inject("list", pc::ApiError(500, "InternalError", "list down"));
  BOOST_TEST(!restarted.Prime().ok());
  BOOST_TEST(restarted.metrics().forward_errors.Value() == 1u);
}

BOOST_AUTO_TEST_CASE(kubelet_back_clears_marks_and_taint) {
  Delegate("hz-2");
  Run(seconds(41), [&] {
    if (clock.MonotonicMicros() % (10 * kSecond) == 0) LeaderRenews("hz-2");
  });
  BOOST_REQUIRE(Tainted("hz-2"));
  KubeletRenews("hz-2");
  BOOST_REQUIRE(forwarder->SyncNode("hz-2").ok());
  Step();  // the taint's removal, queued by the sync
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

// After a flapping link (delegated before, the kubelet back in between), for
// every phase of the DelegatedLease's first write after the kubelet's last
// renewal, the first forward comes within one kubelet renew interval of that
// renewal (plus the 100 ms step of the loop), never after the cloud Lease's
// 40 s duration, and the cloud Lease never goes longer than half the 40 s
// grace period unrenewed.
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

// A delegation that lapsed (no forward for longer than the grace period: the
// node went Unknown) starts anew when forwarding resumes: a new
// delegated-since, DelegationStarted again, the old taint removed until the
// new delegation is old enough, and TaintAdded giving the new age.
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
  Step();
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
  forwarder->Resync();  // queues hz-2
  BOOST_TEST(forwarder->ProcessReady() == 1);  // its Lease (its taint is due in 40 s)
  forwarder->Resync();  // counts it
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
        "# TYPE poolcoord_kubelet_renewals_carried_total counter\n",
        "poolcoord_forwarder_queue_lag_seconds 0\n", "# TYPE poolcoord_forwarder_queue_depth gauge\n",
        "# TYPE poolcoord_forward_conflicts_total counter\n",
        "# TYPE poolcoord_events_dropped_total counter\n",
        "poolcoord_forwarder_owned_shards 1\n"}) {
    BOOST_TEST_CONTEXT(line) { BOOST_TEST(text.find(line) != std::string::npos); }
  }
}

BOOST_AUTO_TEST_SUITE_END()

// The forwarder at scale: reads from its informer, one write per renewal.
BOOST_FIXTURE_TEST_SUITE(scale, Fixture)

// A delegation's first forward reads the Lease once (a GET: it is not marked
// yet, so not in the informer); every renewal after it is one PUT with the
// resourceVersion the informer holds, one per renew interval, however often
// the leader renews the DelegatedLease.
BOOST_AUTO_TEST_CASE(renewals_are_one_put_each_from_the_informer) {
  KubeletRenews("hz-2");
  clock.Advance(seconds(11));
  Delegate("hz-2");
  Run(seconds(35), [&] {
    if (clock.MonotonicMicros() % (2 * kSecond) == 0) Delegate("hz-2");  // the leader, every 2 s
  });
  const auto calls = leases.Calls();
  BOOST_TEST(Calls(calls, "get hz-2") == 1);
  BOOST_TEST(Calls(calls, "update hz-2") == 4);  // at 0, 10, 20 and 30 s
  BOOST_TEST(forwarder->metrics().forwards.Value() == 4u);
  BOOST_TEST(forwarder->metrics().conflicts.Value() == 0u);
  BOOST_TEST(Errors() == 0u);
}

// In a storm every cut-off node's first forward waits for its kubelet's last
// renewal to age one renew interval: that wait costs no second read (the
// write, conditional on the resourceVersion read, would fail if the kubelet had
// written meanwhile).
BOOST_AUTO_TEST_CASE(a_first_forward_reads_the_lease_once) {
  KubeletRenews("hz-2");
  clock.Advance(seconds(3));
  Delegate("hz-2");
  leases.ClearCalls();
  std::optional<int64_t> forwarded_at;
  const std::optional<int64_t> own = RenewTime("hz-2");
  Run(seconds(9), [&] {
    if (!forwarded_at && RenewTime("hz-2") != own) forwarded_at = clock.NowMicros();
  });
  BOOST_REQUIRE(forwarded_at.has_value());
  BOOST_TEST(*forwarded_at - *own >= 10 * kSecond);
  BOOST_TEST(*forwarded_at - *own <= 10 * kSecond + 200'000);
  BOOST_TEST((leases.Calls() == std::vector<std::string>{"get hz-2", "update hz-2"}));
}

// A write the informer has not brought yet (the kubelet's, here) makes our
// PUT conflict: the Lease is read once, and what it says is acted on (the
// kubelet is back: the marks go).
BOOST_AUTO_TEST_CASE(a_stale_informer_costs_one_conflict_and_one_read) {
  Delegate("hz-2");
  Run(seconds(3));
  leases.ClearCalls();
  deliver_watch = false;
  clock.Advance(seconds(3));
  KubeletRenews("hz-2");
  deliver_watch = true;
  Run(seconds(5));  // the next renewal falls due at 10 s
  const auto calls = leases.Calls();
  BOOST_TEST(calls == (std::vector<std::string>{"update hz-2", "get hz-2", "update hz-2"}),
             "calls: " << calls.size());
  BOOST_TEST(forwarder->metrics().conflicts.Value() == 1u);
  BOOST_TEST(Annotation("hz-2", pe::kDelegateAnnotation).empty());
  BOOST_TEST(Count("hz-2", "DelegationStopped") == 1);
}

// A restarted forwarder knows each delegated Lease's next renewal from the
// marks alone: none is written early, none late.
BOOST_AUTO_TEST_CASE(a_restart_keeps_each_renewal_on_time) {
  Delegate("hz-2");
  Run(seconds(4), [&] {
    if (clock.MonotonicMicros() % (2 * kSecond) == 0) Delegate("hz-2");
  });
  const std::optional<int64_t> first = RenewTime("hz-2");
  forwarder.reset();
  pb::MetricsRegistry other;
  forwarder = std::make_unique<pcn::Forwarder>(store.get(), &rules,
                                               pcn::ForwarderCloud{&leases, &nodes, &events},
                                               &clock, &other, options);
  BOOST_REQUIRE(forwarder->Prime().ok());
  std::optional<int64_t> renewed_at;
  Run(seconds(8), [&] {
    if (clock.MonotonicMicros() % (2 * kSecond) == 0) Delegate("hz-2");
    if (!renewed_at && RenewTime("hz-2") != first) renewed_at = clock.NowMicros();
  });
  BOOST_REQUIRE(renewed_at.has_value());
  BOOST_TEST(*renewed_at - *first >= 10 * kSecond);
  BOOST_TEST(*renewed_at - *first <= 10 * kSecond + 200'000);
  BOOST_TEST(forwarder->metrics().forwards.Value() == 1u);
  BOOST_TEST(forwarder->metrics().delegations_started.Value() == 0u);  // the same delegation
}

// A kubelet whose clock ran an hour ahead left a renewTime an hour away: every
// forward after it writes that value + 1 µs (the node lifecycle controller
// counts only growing renewTimes), yet each is due one renew interval after
// the last write, on our clock, not an hour later; and a restart, which
// cannot know when a future value was written, waits one interval at most.
BOOST_AUTO_TEST_CASE(a_renew_time_ahead_of_our_clock_delays_no_renewal) {
  pc::Lease l;
  l.metadata.name = "hz-2";
  l.spec.renew_time_us = clock.NowMicros() + 3600 * kSecond;
  leases.Put(l);
  Delegate("hz-2");
  Run(seconds(35), [&] {
    if (clock.MonotonicMicros() % (5 * kSecond) == 0) Delegate("hz-2");
  });
  BOOST_TEST(forwarder->metrics().forwards.Value() == 4u);  // at 0, 10, 20, 30 s
  BOOST_TEST(*RenewTime("hz-2") == *l.spec.renew_time_us + 4);
  forwarder.reset();
  pb::MetricsRegistry other;
  forwarder = std::make_unique<pcn::Forwarder>(store.get(), &rules,
                                               pcn::ForwarderCloud{&leases, &nodes, &events},
                                               &clock, &other, options);
  BOOST_REQUIRE(forwarder->Prime().ok());
  Run(seconds(11), [&] {
    if (clock.MonotonicMicros() % (5 * kSecond) == 0) Delegate("hz-2");
  });
  BOOST_TEST(forwarder->metrics().forwards.Value() == 1u);
  BOOST_TEST(forwarder->metrics().delegations_started.Value() == 0u);
}

// The simulator's seeds 21 and 512: a kubelet whose clock ran 20 s ahead
// renewed 21 s before its pool delegated it, so its renewTime looked 1 s old
// and the first forward waited 9 s more, its Lease 30 s unrenewed. The server's
// managedFields time of that write (whole seconds, its clock) dates it: the
// first forward comes at once. Without that record it still waits.
BOOST_AUTO_TEST_CASE(the_server_dates_a_renewal_written_by_a_clock_ahead) {
  for (bool dated : {true, false}) {
    const std::string node = dated ? "hz-2" : "hz-3";
    const int64_t written = clock.NowMicros() - 21 * kSecond;
    pc::Lease l;
    l.metadata.name = node;
    l.spec.renew_time_us = written + 20 * kSecond;
    if (dated) l.renew_time_written_us = written / kSecond * kSecond;
    leases.Put(l);
    Delegate(node);
    const int64_t delegated = clock.MonotonicMicros();
    std::optional<int64_t> first_forward;
    Run(seconds(12), [&] {
      if (!first_forward && RenewTime(node) != l.spec.renew_time_us) {
        first_forward = clock.MonotonicMicros();
      }
    });
    BOOST_REQUIRE(first_forward.has_value());
    if (dated) {
      BOOST_TEST(*first_forward - delegated <= 200'000);
    } else {
      BOOST_TEST(*first_forward - delegated >= 8 * kSecond);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

std::vector<std::string> Many(int n) {
  std::vector<std::string> out{"hz-1"};
  for (int i = 0; i < n; ++i) out.push_back("m-" + std::to_string(100 + i));
  return out;
}

struct ManyNodes : Fixture {
  ManyNodes() : Fixture(Many(40)) {}
};

}  // namespace

// Behind (the workers stalled for 30 s), the forwarder renews the most
// overdue Lease first, and says how far behind it is.
BOOST_FIXTURE_TEST_CASE(the_oldest_renewal_goes_first_when_behind, ManyNodes) {
  for (int i = 0; i < 40; ++i) {
    Delegate("m-" + std::to_string(100 + (i * 7) % 40));
    forwarder->Pump();
    forwarder->ProcessReady();
    clock.Advance(milliseconds(100));
  }
  std::vector<std::string> first_order;
  for (const auto& call : leases.Calls()) {
    if (call.rfind("create ", 0) == 0) first_order.push_back(call.substr(7));
  }
  BOOST_REQUIRE(first_order.size() == 40u);
  clock.Advance(seconds(30));  // nothing processed: every renewal is overdue
  for (int i = 0; i < 40; ++i) {
    if (i % 5 == 0) Delegate("m-" + std::to_string(100 + i));  // keep them live
  }
  RenewPool();
  forwarder->Pump();
  forwarder->ProcessReady(0);
  const double lag = forwarder->queue().Lag(0) / 1e6;
  BOOST_TEST(lag >= 23.9);  // the first was due 24 s ago (at +10 s of 4 s of writes)
  BOOST_TEST(lag <= 24.1);
  leases.ClearCalls();
  for (int i = 0; i < 40; ++i) BOOST_REQUIRE(forwarder->ProcessReady(1) == 1);
  std::vector<std::string> renewal_order;
  for (const auto& call : leases.Calls()) {
    if (call.rfind("update ", 0) == 0) renewal_order.push_back(call.substr(7));
  }
  BOOST_TEST(renewal_order == first_order);
}

namespace {

pcn::ForwarderOptions BulkAt(int waiting) {
  pcn::ForwarderOptions o;
  o.bulk_first_reads = waiting;
  return o;
}

struct Storm : Fixture {
  Storm() : Fixture(Many(40), BulkAt(10)) {}
  // Every member's kubelet renewed once, 11 s ago (a first forward is due).
  void KubeletsRenewedLongAgo() {
    for (int i = 0; i < 40; ++i) KubeletRenews("m-" + std::to_string(100 + i));
    clock.Advance(seconds(11));
  }
  // The leader delegates members m-<100+from> .. m-<100+to-1>.
  void Delegations(int from, int to) {
    for (int i = from; i < to; ++i) Delegate("m-" + std::to_string(100 + i));
  }
  int Gets() {
    const auto calls = leases.Calls();
    return static_cast<int>(std::count_if(calls.begin(), calls.end(), [](const std::string& c) {
      return c.rfind("get ", 0) == 0;
    }));
  }
};

}  // namespace

// A storm's first forwards: the Leases none of them has a copy of yet come in
// one LIST (from kube-apiserver's watch cache), not a GET each.
BOOST_FIXTURE_TEST_CASE(a_storm_reads_its_leases_with_one_list, Storm) {
  KubeletsRenewedLongAgo();
  Delegations(0, 40);
  leases.ClearCalls();
  Run(seconds(2));
  const auto calls = leases.Calls();
  BOOST_TEST(Calls(calls, "list ") == 1);  // unfiltered: every node Lease
  BOOST_TEST(Gets() == 0);
  for (int i = 0; i < 40; ++i) {
    const std::string node = "m-" + std::to_string(100 + i);
    BOOST_TEST(Calls(calls, "update " + node) == 1, node);
    BOOST_TEST(Annotation(node, pe::kDelegateAnnotation) == "true", node);
  }
  BOOST_TEST(forwarder->metrics().conflicts.Value() == 0u);
  BOOST_TEST(Errors() == 0u);
}

// A listed copy is only a copy: a kubelet that renewed after the LIST is
// seen through the 409 and is not fought.
BOOST_FIXTURE_TEST_CASE(a_kubelet_renewal_after_the_list_is_not_fought, Storm) {
  KubeletsRenewedLongAgo();
  Delegations(1, 40);
  forwarder->Pump();  // queued when their events arrive
  clock.Advance(milliseconds(100));
  Delegations(0, 1);  // m-100 is due last
  deliver_watch = false;
  // The LIST happens on the first sync; m-100's kubelet writes right after it.
  forwarder->Pump();
  BOOST_REQUIRE(forwarder->ProcessReady(1) == 1);
  KubeletRenews("m-100");
  const std::optional<int64_t> own = RenewTime("m-100");
  deliver_watch = true;
  Run(seconds(2));
  BOOST_TEST(Calls(leases.Calls(), "list ") == 1);
  BOOST_TEST(forwarder->metrics().conflicts.Value() == 1u);
  BOOST_TEST((RenewTime("m-100") == own));  // its own renewal stands
  BOOST_TEST(Annotation("m-100", pe::kDelegateAnnotation).empty());
}

// A few first reads in a namespace many times their number: GETs (a listed
// item costs a fraction of a GET, not nothing).
BOOST_FIXTURE_TEST_CASE(a_small_storm_among_many_leases_reads_by_get, Storm) {
  for (int i = 0; i < 400; ++i) KubeletRenews("other-" + std::to_string(i));
  KubeletsRenewedLongAgo();
  Delegations(0, 20);  // 20 waiting: a LIST (the namespace's size not known yet)
  Run(seconds(2));
  BOOST_TEST(Calls(leases.Calls(), "list ") == 1);
  BOOST_TEST(Gets() == 0);
  leases.ClearCalls();
  clock.Advance(seconds(11));
  Delegations(20, 32);  // 12 waiting, 440 Leases listed last time: 12 GETs
  Run(seconds(2), [&] { Delegations(0, 20); });
  BOOST_TEST(Calls(leases.Calls(), "list ") == 0);
  BOOST_TEST(Gets() == 12);
  for (int i = 20; i < 32; ++i) {
    BOOST_TEST(Annotation("m-" + std::to_string(100 + i), pe::kDelegateAnnotation) == "true");
  }
}

// Fewer waiting than bulk_first_reads: each reads its own.
BOOST_FIXTURE_TEST_CASE(a_few_first_reads_are_gets, Storm) {
  KubeletsRenewedLongAgo();
  Delegations(0, 9);
  leases.ClearCalls();
  Run(seconds(2));
  BOOST_TEST(Calls(leases.Calls(), "list ") == 0);
  BOOST_TEST(Gets() == 9);
}
