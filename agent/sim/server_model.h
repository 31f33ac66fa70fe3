// poolcoord-apiserver's own parts in one process, on one clock, driven by the
// caller, with no thread of their own: the memory store behind the watch cache
// (store/cacher.h, driven), the pool membership, the delegation proofs, the
// lease rules (election/lease_rules.h), the DelegatedLease GC and, given a
// cloud, the forwarder (controllers/forwarder.h, driven). For the
// deterministic simulation (agent/sim/README.md) and the agent core's test
// world (tests/agent/agent_world.h), so that neither restates the rules.
//
// The API as agents reach it: reads and writes of PoolLeases and
// DelegatedLeases with the REST semantics handlers/registry's generic store
// gives what agents send. The body is decoded by the store's codec; server
// metadata (uid, creationTimestamp, generation) is set and kept as the generic
// store does; status is dropped on create and kept from the stored object on
// update, as each kind's strategy does (store::ClearDelegationStatus,
// CopyDelegationStatus); an update needs the resourceVersion it replaces (409
// Conflict when stale); a delete may carry one. A DelegatedLease's proof is
// prechecked off the store's step (DelegationProofs::Precheck), then inside the
// step come the calls each kind's strategy makes: CheckDelegatedLeaseWriter,
// AdmitPoolLeaseWrite / AdmitDelegatedLeaseWrite, AdmitPoolLeaseDelete /
// AdmitDelegatedLeaseDelete. The kinds' field validation (422, in
// handlers/registry/, above this layer) is not run: callers send valid
// objects. Answers are the stored object's JSON (store::EncodeObject) and
// errors are what an HTTP client makes of the server's metav1.Status
// (cloud/errors.h), so the agents' own decoding runs on them.
//
// Thread-safety: none; one thread calls everything (the store and the rules
// underneath are thread-safe, but driven parts are not meant to be raced).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "base/user_info.h"
#include "cloud/clientset.h"
#include "controllers/delegated_lease_gc.h"
#include "controllers/forwarder.h"
#include "election/delegation_proof.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "store/cacher.h"
#include "store/object.h"

namespace poolcoord::sim {

struct ServerModelOptions {
  const base::Clock* clock = nullptr;  // required; not owned
  election::MembershipIndex::PoolMap pools;
  // The client CA the proofs' certificates chain to (nullptr: none, every
  // proof refused as no_client_ca).
  std::shared_ptr<const election::CertificateAuthority> client_ca;
  election::DelegationProofOptions proofs;
  int32_t max_lease_duration_seconds = 300;
  // Where new uids' bytes come from (16 per uid); unset: the proofs' source,
  // or a counter.
  std::function<void(unsigned char* bytes, size_t n)> random_bytes;
  // The forwarder writes through these; without node_leases there is none.
  controllers::ForwarderCloud cloud;
  controllers::ForwarderOptions forwarder;
  absl::Duration gc_period = absl::Minutes(5);
  // The store below the watch cache, when the caller keeps it across the
  // model's restarts (as etcd3 keeps its keys while poolcoord-apiserver
  // restarts); the model never shuts it down. Null: a memory store of the
  // model's own, gone with it (--storage-backend=memory).
  std::shared_ptr<store::Store> store;
};

class ServerModel {
 public:
  // Builds every part, loads the membership and primes the forwarder (one
  // LIST of the cloud's marked Leases). Errors: the store's or the cloud's.
  static absl::StatusOr<std::unique_ptr<ServerModel>> Start(ServerModelOptions options);
  ~ServerModel();
  ServerModel(const ServerModel&) = delete;
  ServerModel& operator=(const ServerModel&) = delete;

  // --- the API (see the file comment). `kind` is kPoolLease or
  // kDelegatedLease; `body` a JSON object of the kind.
  // GET with no resourceVersion: a consistent read.
  absl::StatusOr<std::string> Get(store::Kind kind, const std::string& name);
  absl::StatusOr<std::string> Create(const base::UserInfo& user, store::Kind kind,
                                     std::string_view body);
  // PUT of `name` (the body's metadata.resourceVersion is the precondition).
  absl::StatusOr<std::string> Update(const base::UserInfo& user, store::Kind kind,
                                     const std::string& name, std::string_view body);
  // DELETE with Preconditions.resourceVersion when `resource_version` is set.
  absl::Status Delete(const base::UserInfo& user, store::Kind kind, const std::string& name,
                      const std::string& resource_version);

  // --- driving
  // The store's events into the watch cache, and the cache's into the
  // forwarder's queue.
  void Dispatch();
  // What the forwarder has due now, synced, and its Events sent; returns the
  // syncs. 0 without a forwarder.
  int Forward();
  // When Forward has work next (monotonic µs; INT64_MAX: none).
  int64_t NextForwardDue() const;
  // The forwarder's resync (every ForwarderOptions::resync_period).
  void Resync();
  // One sweep of the DelegatedLease GC (every second in the server).
  controllers::GcSweepResult SweepGc();
  // A watch event of the cloud's Leases the forwarder marked, for its informer.
  void ObserveCloudLease(const cloud::WatchEvent<cloud::Lease>& event);

  store::Store* store() { return cache_.get(); }
  const election::LeaseRules& rules() const { return *rules_; }
  election::DelegationProofs& proofs() { return *proofs_; }
  election::MembershipIndex& membership() { return membership_; }
  controllers::Forwarder* forwarder() { return forwarder_.get(); }
  const base::MetricsRegistry& metrics() const { return registry_; }

 private:
  explicit ServerModel(ServerModelOptions options);
  std::string NewUid();
  // The lease rules of a create (current == nullptr) or an update of `kind`,
  // inside the store's step, as each kind's strategy calls them: a PoolLease's
  // AdmitPoolLeaseWrite; a DelegatedLease's CheckDelegatedLeaseWriter, then
  // AdmitDelegatedLeaseWrite. The rules' errors, unchanged.
  // A store step on an object that must exist (an update, a delete): 404 Not
  // Found when it does not, else `fn`'s answer.
  absl::StatusOr<store::WriteResult> UpdateExisting(store::Kind kind, const std::string& name,
                                                    const store::UpdateFn& fn);
  absl::Status AdmitWrite(const base::UserInfo& user, store::Kind kind,
                          const store::ObjectPtr& current, store::Object& proposed,
                          store::TxnReader& reader) const;

  ServerModelOptions options_;
  base::MetricsRegistry registry_;
  election::MembershipIndex membership_;
  std::unique_ptr<store::DrivenCacher> cache_;
  std::unique_ptr<election::DelegationProofs> proofs_;
  std::unique_ptr<election::LeaseRules> rules_;
  std::unique_ptr<controllers::DelegatedLeaseGc> gc_;
  std::unique_ptr<controllers::Forwarder> forwarder_;
  uint64_t uid_counter_ = 0;
};

// An HTTP client's view of a server error (store/api_error.h's payload as the
// answer's metav1.Status carries it): cloud/errors.h's predicates hold on it.
absl::Status AsClientError(const absl::Status& server_error);

// A node identity as the server authenticates a kubelet client certificate.
base::UserInfo NodeUser(const std::string& node);

}  // namespace poolcoord::sim
