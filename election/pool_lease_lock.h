// LeaseLocks over Lease-shaped API objects, spoken over HTTPS with
// store::KubeClient: poolcoord's PoolLease (coordination.pool/v1alpha1,
// cluster-scoped, name = pool) for the pools, and coordination.k8s.io/v1 Lease
// in the cloud cluster for the election among poolcoord's own replicas. Both
// mirror client-go's resourcelock.LeaseLock (shown for PoolLease):
//   Get:    GET  /apis/coordination.pool/v1alpha1/poolleases/<pool>
//   Create: POST /apis/coordination.pool/v1alpha1/poolleases
//   Update: PUT  /apis/coordination.pool/v1alpha1/poolleases/<pool>, the object
//           last read with its spec replaced and metadata.resourceVersion set to
//           the version given (labels, annotations, uid are kept: a PUT replaces
//           the whole object).
// The server authenticates the caller as system:node:<identity> (client
// certificate or bearer token) and enforces the pool rules (DESIGN.md).
#pragma once

#include <string>

#include "absl/synchronization/mutex.h"
#include "election/lease_lock.h"
#include "store/kube_client.h"

namespace poolcoord::election {

inline constexpr char kPoolLeasesPath[] = "/apis/coordination.pool/v1alpha1/poolleases";

// Where a Lease-shaped object lives: its collection path and its GVK.
struct LeaseResource {
  std::string collection_path;  // "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
  std::string api_version;      // "coordination.k8s.io/v1"
  std::string kind;             // "Lease"
};
LeaseResource PoolLeaseResource();
LeaseResource CoordinationLeaseResource(const std::string& ns);

// Thread-safe (one mutex around the cached object); normally one elector uses it.
class ResourceLeaseLock : public LeaseLock {
 public:
  // `client` is not owned and must outlive the lock. `options` ride on every
  // request (e.g. a per-node bearer token over a shared client).
  ResourceLeaseLock(store::KubeClient* client, LeaseResource resource, std::string name,
                    std::string identity, store::KubeRequestOptions options = {});

  absl::StatusOr<VersionedRecord> Get() override;
  absl::StatusOr<std::string> Create(const LeaderElectionRecord& record) override;
  absl::StatusOr<std::string> Update(const LeaderElectionRecord& record,
                                     const std::string& version) override;
  std::string Identity() const override { return identity_; }
  std::string Describe() const override;

 private:
  store::KubeClient* const client_;
  const LeaseResource resource_;
  const std::string name_;
  const std::string identity_;
  const store::KubeRequestOptions options_;
  absl::Mutex mu_;
  std::string last_object_json_ ABSL_GUARDED_BY(mu_);  // the object last read or written
};

// The PoolLease of `pool`.
class PoolLeaseLock : public ResourceLeaseLock {
 public:
  PoolLeaseLock(store::KubeClient* client, std::string pool, std::string identity,
                store::KubeRequestOptions options = {})
      : ResourceLeaseLock(client, PoolLeaseResource(), std::move(pool), std::move(identity),
                          std::move(options)) {}
};

// Encoding helpers, shared with the simulator and tests.
// Parses a PoolLease (or any Lease-shaped object) JSON into a record and its
// metadata.resourceVersion. InvalidArgument when malformed.
absl::StatusOr<VersionedRecord> ParseLeaseRecord(std::string_view json);
// `base_json`: the object to update ("" for a fresh one named `name`); returns it
// with spec replaced by `record` and resourceVersion set (omitted when empty).
std::string EncodeLease(const LeaseResource& resource, std::string_view base_json,
                        const std::string& name, const LeaderElectionRecord& record,
                        const std::string& version);
inline std::string EncodePoolLease(std::string_view base_json, const std::string& name,
                                   const LeaderElectionRecord& record, const std::string& version) {
  return EncodeLease(PoolLeaseResource(), base_json, name, record, version);
}

}  // namespace poolcoord::election
