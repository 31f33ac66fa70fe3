// The lease rules over a memory store with two pools, for the tests of the
// webhook's decision (tests/election/admission_rules_test.cc) and of its HTTP
// edge (tests/handlers/admission_handler_test.cc). Test thread only.
#pragma once

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "base/clock.h"
#include "base/user_info.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "store/memory_store.h"
#include "store/store.h"
#include "tests/rules_writes.h"

namespace poolcoord::testing {

// The identities the admission tests configure as --forwarder-user and
// --lease-proxy-users.
inline constexpr char kForwarder[] = "system:serviceaccount:kube-system:poolcoord";
inline constexpr char kProxy[] = "openyurt:yurt-coordinator:node-lease-proxy-client";

// The lease rules over a memory store, a fake clock at 100 s and (unless `load`
// is false) two pools: hangzhou (hz-1..hz-4) and beijing (bj-1, bj-2). For the
// tests of the webhook's decision and of its HTTP edge. Test thread only.
struct RulesFixture {
  explicit RulesFixture(bool load = true) : rules(&clock, &membership, {300, kForwarder, {kProxy}}) {
    clock.Advance(std::chrono::seconds(100));
    if (load) {
      BOOST_REQUIRE(membership
                        .Replace("file", {{"hangzhou", {"hz-1", "hz-2", "hz-3", "hz-4"}},
                                          {"beijing", {"bj-1", "bj-2"}}})
                        .ok());
    }
    store = store::NewMemoryStore({});
  }

  absl::Status Write(const base::UserInfo& user, const store::Object& proposed) {
    return WriteThroughRules(store.get(), rules, user, proposed);
  }
  // `holder` (or `as`) takes or renews `pool`'s PoolLease (15 s) at `transitions`.
  absl::Status Lead(const std::string& pool, const std::string& holder, int32_t transitions,
                    const base::UserInfo* as = nullptr) {
    store::Object pool_lease = PoolLeaseFor(pool, holder, 15);
    pool_lease.spec.lease_transitions = transitions;
    pool_lease.spec.renew_time_us = clock.NowMicros();  // a renewal sets renewTime
    return Write(as ? *as : NodeUser(holder), pool_lease);
  }
  // `leader` writes `node`'s DelegatedLease (40 s, renewed now).
  absl::Status Delegate(const std::string& node, const std::string& pool,
                        const std::string& leader) {
    return Write(NodeUser(leader), DelegatedLeaseFor(node, pool, leader, 40, clock.NowMicros()));
  }

  base::FakeClock clock;
  election::MembershipIndex membership;
  election::LeaseRules rules;
  std::unique_ptr<store::Store> store;
};

}  // namespace poolcoord::testing
