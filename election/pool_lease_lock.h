// A LeaseLock over poolcoord's PoolLease API (coordination.pool/v1alpha1,
// cluster-scoped, name = pool), spoken over HTTPS with store::KubeClient. It
// mirrors client-go's resourcelock.LeaseLock:
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

// Thread-safe (one mutex around the cached object); normally one elector uses it.
class PoolLeaseLock : public LeaseLock {
 public:
  // `client` is not owned and must outlive the lock. `options` ride on every
  // request (e.g. a per-node bearer token over a shared client).
  PoolLeaseLock(store::KubeClient* client, std::string pool, std::string identity,
                store::KubeRequestOptions options = {});

  absl::StatusOr<VersionedRecord> Get() override;
  absl::StatusOr<std::string> Create(const LeaderElectionRecord& record) override;
  absl::StatusOr<std::string> Update(const LeaderElectionRecord& record,
                                     const std::string& version) override;
  std::string Identity() const override { return identity_; }
  std::string Describe() const override { return "poolleases/" + pool_; }

 private:
  store::KubeClient* const client_;
  const std::string pool_;
  const std::string identity_;
  const store::KubeRequestOptions options_;
  absl::Mutex mu_;
  std::string last_object_json_ ABSL_GUARDED_BY(mu_);  // the object last read or written
};

// Encoding helpers, shared with the simulator and tests.
// Parses a PoolLease (or any Lease-shaped object) JSON into a record and its
// metadata.resourceVersion. InvalidArgument when malformed.
absl::StatusOr<VersionedRecord> ParseLeaseRecord(std::string_view json);
// `base_json`: the object to update ("" for a fresh one named `name`); returns it
// with spec replaced by `record` and resourceVersion set (omitted when empty).
std::string EncodePoolLease(std::string_view base_json, const std::string& name,
                            const LeaderElectionRecord& record, const std::string& version);

}  // namespace poolcoord::election
