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
  const base::UserInfo user{"system:node:" + writer, "", {"system:nodes", "system:authenticated"}, {}};
  absl::Status s = rules.CheckDelegatedLeaseWriter(user, node);
  if (s.ok()) s = rules.AdmitDelegatedLeaseWrite(user, nullptr, proposed, reader);
  if (s.ok()) return s;
  const store::ApiErrorInfo info = store::ApiErrorFromStatus(s);
  std::vector<cloud::StatusCause> causes;
  for (const store::FieldCause& c : info.causes) causes.push_back({c.type, c.message, c.field});
  return cloud::ApiError(info.code, info.reason, info.message, causes);
}

}  // namespace poolcoord::agent::testing
