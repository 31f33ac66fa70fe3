// The resource lock a LeaderElector competes for, as client-go's
// tools/leaderelection/resourcelock.Interface: one record, read and written with
// optimistic concurrency.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace poolcoord::election {

// client-go's LeaderElectionRecord, mapped onto a LeaseSpec
// (resourcelock/leaselock.go). Times are wall-clock microseconds since the Unix
// epoch (MicroTime on the wire); they only signal "the record changed" to other
// candidates, never expiry.
struct LeaderElectionRecord {
  std::string holder_identity;  // "" = released
  int32_t lease_duration_seconds = 0;
  int64_t acquire_time_us = 0;
  int64_t renew_time_us = 0;
  int32_t lease_transitions = 0;

  bool operator==(const LeaderElectionRecord&) const = default;
};

// A record with the opaque version (the object's resourceVersion) it was read at.
struct VersionedRecord {
  LeaderElectionRecord record;
  std::string version;
};

// Implementations: PoolLeaseLock (HTTPS to poolcoord's PoolLease API); fakes in
// tests. A lock instance serves one elector; thread-safety is the
// implementation's to state.
class LeaseLock {
 public:
  virtual ~LeaseLock() = default;

  // The current record. NotFound when the lock object does not exist; any other
  // error when it cannot be read (Unavailable for transport failures).
  virtual absl::StatusOr<VersionedRecord> Get() = 0;

  // Creates the lock object holding `record`; returns its version.
  // AlreadyExists when someone created it first.
  virtual absl::StatusOr<std::string> Create(const LeaderElectionRecord& record) = 0;

  // Replaces the record, on condition that the object is still at `version`
  // (the resourceVersion precondition); returns the new version. Aborted (409
  // Conflict) when the object changed since; the server's own refusals as their
  // codes (PermissionDenied, Aborted for taking a live lease, InvalidArgument).
  virtual absl::StatusOr<std::string> Update(const LeaderElectionRecord& record,
                                             const std::string& version) = 0;

  // The candidate's identity written as holderIdentity (a node name). Non-empty
  // for a usable lock.
  virtual std::string Identity() const = 0;

  // A human-readable name of the lock ("poolleases/hangzhou"), for logs.
  virtual std::string Describe() const = 0;
};

}  // namespace poolcoord::election
