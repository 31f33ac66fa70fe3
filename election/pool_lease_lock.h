// LeaseLocks over Lease-shaped API objects, through the typed Lease client
// (cloud::LeaseInterface): poolcoord's PoolLease (coordination.pool/v1alpha1,
// cluster-scoped, name = pool) for the pools, and coordination.k8s.io/v1 Lease
// in the cloud cluster for the election among poolcoord's own replicas. Both
// mirror client-go's resourcelock.LeaseLock:
//   Get:    GET  <collection>/<name>
//   Create: POST <collection>
//   Update: PUT  <collection>/<name>, the object last read with its spec
//           replaced and metadata.resourceVersion set to the version given
//           (labels, annotations, ownerReferences are kept: a PUT replaces the
//           whole object).
// For PoolLeases the server authenticates the caller as system:node:<identity>
// and enforces the pool rules (docs/architecture.md "The rules").
#pragma once

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cloud/clientset.h"
#include "election/lease_lock.h"

namespace poolcoord::election {

inline constexpr char kPoolLeasesPath[] = "/apis/coordination.pool/v1alpha1/poolleases";

// Thread-safe (one mutex around the cached object); normally one elector uses it.
class ResourceLeaseLock : public LeaseLock {
 public:
  // `leases` (the collection the lock lives in) is not owned and must outlive
  // the lock; `describe` names the collection in logs ("poolleases").
  ResourceLeaseLock(cloud::LeaseInterface* leases, std::string describe, std::string name,
                    std::string identity);

  absl::StatusOr<VersionedRecord> Get() override;
  absl::StatusOr<std::string> Create(const LeaderElectionRecord& record) override;
  absl::StatusOr<std::string> Update(const LeaderElectionRecord& record,
                                     const std::string& version) override;
  std::string Identity() const override { return identity_; }
  std::string Describe() const override;

  // The current delegation challenge: the first of status.challenges
  // of the object last read or written — the leader's own renewal answers carry
  // it. "" when there is none (a server without verifiable delegation, a
  // coordination.k8s.io Lease).
  std::string CurrentChallenge() const;
  // Every challenge of status.challenges of that object, newest first.
  std::vector<std::string> Challenges() const;

 private:
  cloud::LeaseInterface* const leases_;
  const std::string describe_;
  const std::string name_;
  const std::string identity_;
  mutable absl::Mutex mu_;
  cloud::Lease last_ ABSL_GUARDED_BY(mu_);  // the object last read or written
};

// The PoolLease of `pool`; `pool_leases` is cloud::Clientset::LeaseShaped(PoolLeases()).
class PoolLeaseLock : public ResourceLeaseLock {
 public:
  PoolLeaseLock(cloud::LeaseInterface* pool_leases, std::string pool, std::string identity)
      : ResourceLeaseLock(pool_leases, "poolleases", std::move(pool), std::move(identity)) {}
};

// The record a Lease carries, and the Lease with `record` as its spec.
LeaderElectionRecord RecordOf(const cloud::Lease& lease);
void SetRecord(const LeaderElectionRecord& record, cloud::Lease* lease);

// Encoding helpers for callers that speak JSON themselves (the simulator).
// Parses a PoolLease (or any Lease-shaped object) JSON into a record and its
// metadata.resourceVersion. InvalidArgument when malformed.
absl::StatusOr<VersionedRecord> ParseLeaseRecord(std::string_view json);
// `base_json`: the object to update ("" for a fresh one named `name`); returns it
// with spec replaced by `record` and resourceVersion set (omitted when empty).
std::string EncodePoolLease(std::string_view base_json, const std::string& name,
                            const LeaderElectionRecord& record, const std::string& version);

}  // namespace poolcoord::election
