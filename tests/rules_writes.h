// Writes the way the REST API makes them, for tests of what reads the store
// (the forwarder, the DelegatedLease GC, the webhook): the lease rules run
// inside the store's Update, so a write a real client could not make fails here
// too (the kinds' field validation aside: pass valid objects).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "base/user_info.h"
#include "election/lease_rules.h"
#include "store/store.h"

namespace poolcoord::testing {

inline base::UserInfo NodeUser(const std::string& name) {
  return {"system:node:" + name, "", {"system:nodes", "system:authenticated"}, {}};
}

inline base::UserInfo AdminUser() { return {"admin", "", {"system:masters", "system:authenticated"}, {}}; }

// The server's own forwarder, as the tests configure --forwarder-user.
inline base::UserInfo ForwarderUser() {
  return {"system:serviceaccount:kube-system:poolcoord", "", {"system:serviceaccounts"}, {}};
}

// `proposed` written by `user` through `rules` (the uid kept or made up, the
// status carried over as a spec write does).
inline absl::Status WriteThroughRules(store::Store* store, const election::LeaseRules& rules,
                                      const base::UserInfo& user, const store::Object& proposed) {
  auto result = store->Update(
      proposed.kind, proposed.metadata.name,
      [&](const store::ObjectPtr& current,
          store::TxnReader& reader) -> absl::StatusOr<store::MutableObjectPtr> {
        auto next = std::make_shared<store::Object>(proposed);
        next->metadata.uid = current ? current->metadata.uid : "uid-" + proposed.metadata.name;
        if (current) {
          next->status = current->status;
          store::CopyDelegationStatus(*next, *current);
        }
        // The lease rules as each kind's strategy calls them (its field
        // validation, in handlers/registry/, is not run here).
        absl::Status s = next->kind == store::Kind::kPoolLease
                             ? rules.AdmitPoolLeaseWrite(user, current, *next)
                             : rules.AdmitDelegatedLeaseWrite(user, current, *next, reader);
        if (!s.ok()) return s;
        return next;
      });
  return result.status();
}

// The PoolLease of `pool` held by `holder` (taken, or renewed when it holds it).
inline store::Object PoolLeaseFor(const std::string& pool, const std::string& holder,
                                  int32_t duration_seconds = 300) {
  store::Object o;
  o.kind = store::Kind::kPoolLease;
  o.metadata.name = pool;
  o.spec.holder_identity = holder;
  o.spec.lease_duration_seconds = duration_seconds;
  o.spec.lease_transitions = 0;
  return o;
}

// A PoolLease of `pool` as a client sends it, with every spec field set:
// acquired at `acquire_us` (none when nullopt), renewed at 2000 us.
inline store::Object HeldPoolLease(const std::string& pool, const std::string& holder,
                                   int32_t duration_seconds, int32_t transitions,
                                   std::optional<int64_t> acquire_us = 1000) {
  store::Object o = PoolLeaseFor(pool, holder, duration_seconds);
  o.spec.lease_transitions = transitions;
  o.spec.acquire_time_us = acquire_us;
  o.spec.renew_time_us = 2000;
  return o;
}

// The DelegatedLease of `node` in `pool` as its leader `delegate` writes it.
inline store::Object DelegatedLeaseFor(const std::string& node, const std::string& pool,
                                       const std::string& delegate, int32_t duration_seconds,
                                       int64_t renew_us) {
  store::Object o;
  o.kind = store::Kind::kDelegatedLease;
  o.metadata.name = node;
  o.metadata.annotations[election::kDelegateAnnotation] = "true";
  o.spec.holder_identity = node;
  o.spec.lease_duration_seconds = duration_seconds;
  o.spec.renew_time_us = renew_us;
  o.spec.pool_name = pool;
  o.spec.delegate = delegate;
  return o;
}

}  // namespace poolcoord::testing
