// The server's own answer to a DelegatedLease write, for the agent's unit
// tests: election::LeaseRules (the rules poolcoord-apiserver runs) judges the
// write against the pool's PoolLease, and the answer is what the agent's HTTP
// client makes of the metav1.Status (cloud/errors.h), so a test of how the
// agent takes a 403 runs on the server's real wording, not a restatement of it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/clock.h"
#include "base/user_info.h"
#include "cloud/errors.h"
#include "election/lease_lock.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "store/api_error.h"
#include "store/object.h"
#include "store/store.h"

namespace poolcoord::agent::testing {

// A PoolLease as the server stores it: `holder` ("" unheld) renewed at the
// server's monotonic `renewed_mono_us` for `duration_seconds`.
inline store::ObjectPtr ServerPoolLease(const std::string& pool, const std::string& holder,
                                        int32_t duration_seconds, int64_t renewed_mono_us) {
  auto o = std::make_shared<store::Object>();
  o->kind = store::Kind::kPoolLease;
  o->metadata.name = pool;
  o->metadata.uid = "3f0c6a54-0000-4000-8000-000000000001";
  o->spec.holder_identity = holder;
  o->spec.lease_duration_seconds = duration_seconds;
  o->spec.lease_transitions = 0;
  // 0 means "never observed by this server"; a renewal is always after it.
  o->observed_monotonic_us = std::max<int64_t>(1, renewed_mono_us);
  return o;
}

// A PoolLease holding `record`, as the server stores it, its last renewal at
// the server's monotonic `renewed_mono_us`.
inline store::ObjectPtr ServerPoolLeaseOf(const std::string& pool,
                                          const election::LeaderElectionRecord& record,
                                          int64_t renewed_mono_us) {
  store::ObjectPtr o = ServerPoolLease(pool, record.holder_identity, record.lease_duration_seconds,
                                       renewed_mono_us);
  auto* spec = &std::const_pointer_cast<store::Object>(o)->spec;
  spec->acquire_time_us = record.acquire_time_us;
  spec->renew_time_us = record.renew_time_us;
  spec->lease_transitions = record.lease_transitions;
  return o;
}

// The error `s` of the server's rules as the agent's HTTP client receives it
// (the metav1.Status it becomes, cloud/errors.h).
inline absl::Status AsClientError(const absl::Status& s) {
  const store::ApiErrorInfo info = store::ApiErrorFromStatus(s);
  std::vector<cloud::StatusCause> causes;
  for (const store::FieldCause& c : info.causes) causes.push_back({c.type, c.message, c.field});
  return cloud::ApiError(info.code, info.reason, info.message, causes);
}

inline base::UserInfo ServerNodeUser(const std::string& node) {
  return {"system:node:" + node, "", {"system:nodes", "system:authenticated"}, {}};
}

// The answer of the server's lease rules to `writer` (a member of `pool`)
// writing the PoolLease of `pool` as `record` over `current` (nullptr: a
// create), at `clock`'s time: OK with *renewed_mono_us set to the server's time
// of the lease's last renewal after the write (moved only by a write that
// renews or acquires, election::RenewsLease), else the error as the agent's
// client receives it (403 another's live lease, 409, 422 a wrong
// leaseTransitions).
inline absl::Status ServerAnswerToPoolLeaseWrite(const base::Clock* clock, const std::string& writer,
                                                 const std::string& pool,
                                                 const store::ObjectPtr& current,
                                                 const election::LeaderElectionRecord& record,
                                                 int64_t* renewed_mono_us) {
  election::MembershipIndex membership;
  if (absl::Status s = membership.Replace("file", {{pool, {writer}}}); !s.ok()) return s;
  election::LeaseRules rules(clock, &membership, {});
  store::Object proposed =
      *ServerPoolLeaseOf(pool, record, current ? current->observed_monotonic_us : 0);
  if (current) proposed.status = current->status;
  absl::Status s = rules.AdmitPoolLeaseWrite(ServerNodeUser(writer), current, proposed);
  if (!s.ok()) return AsClientError(s);
  *renewed_mono_us = proposed.observed_monotonic_us;
  return s;
}

// The answer of the server's lease rules to `writer` (a node identity) writing
// the DelegatedLease of `node` in `pool`, whose PoolLease is `pool_lease`
// (nullptr: there is none), at `clock`'s time: OK when the rules admit it, else
// the error as the agent's client receives it.
inline absl::Status ServerAnswerToDelegatedLeaseWrite(const base::Clock* clock,
                                                      const election::MembershipIndex::PoolMap& pools,
                                                      const std::string& writer,
                                                      const std::string& node,
                                                      const std::string& pool,
                                                      store::ObjectPtr pool_lease) {
  election::MembershipIndex membership;
  if (absl::Status s = membership.Replace("file", pools); !s.ok()) return s;
  election::LeaseRules rules(clock, &membership, {});
  struct Reader : store::TxnReader {
    store::ObjectPtr pool_lease;
    store::ObjectPtr Get(store::Kind kind, std::string_view) override {
      return kind == store::Kind::kPoolLease ? pool_lease : nullptr;
    }
  } reader;
  reader.pool_lease = std::move(pool_lease);
  store::Object proposed;
  proposed.kind = store::Kind::kDelegatedLease;
  proposed.metadata.name = node;
  proposed.spec.holder_identity = node;
  proposed.spec.pool_name = pool;
  proposed.spec.renew_time_us = clock->NowMicros();
  proposed.spec.lease_duration_seconds = 7;
  const base::UserInfo user = ServerNodeUser(writer);
  absl::Status s = rules.CheckDelegatedLeaseWriter(user, node);
  if (s.ok()) s = rules.AdmitDelegatedLeaseWrite(user, nullptr, proposed, reader);
  return s.ok() ? s : AsClientError(s);
}

}  // namespace poolcoord::agent::testing
