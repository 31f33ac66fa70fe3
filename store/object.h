// The object model of coordination.pool/v1alpha1: PoolLease and DelegatedLease.
//
// Objects are immutable once handed to a Store (shared as ObjectPtr); a writer
// copies, mutates the copy and hands it back. Times on the wire are MicroTime
// (RFC 3339, exactly 6 fractional digits, UTC) or Time (RFC 3339 seconds); here
// they are integers: microseconds or seconds since the Unix epoch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace poolcoord::store {

enum class Kind { kPoolLease, kDelegatedLease };

// The two resources of the group, in the order they appear in discovery.
struct ResourceInfo {
  Kind kind;
  const char* plural;     // "poolleases"
  const char* singular;   // "poollease"
  const char* kind_name;  // "PoolLease"
  const char* short_name; // "pl"
};
const ResourceInfo& InfoFor(Kind kind);
// Returns nullptr when `plural` names no resource of ours.
const ResourceInfo* InfoForPlural(std::string_view plural);

inline constexpr char kGroup[] = "coordination.pool";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kGroupVersion[] = "coordination.pool/v1alpha1";

// metav1.ObjectMeta, the fields we keep. owner_references and managed_fields are
// kept verbatim as JSON arrays ("" when absent): we store them, never interpret them.
struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string uid;
  int64_t resource_version = 0;      // the store revision of the last write
  int64_t generation = 0;            // 1 on create, +1 per spec change
  int64_t creation_timestamp = 0;    // seconds since the epoch
  std::optional<int64_t> deletion_timestamp;  // seconds since the epoch
  std::optional<int64_t> deletion_grace_period_seconds;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> finalizers;
  std::string owner_references_json;
  std::string managed_fields_json;
};

// coordination.k8s.io/v1 LeaseSpec plus the DelegatedLease fields.
struct LeaseSpec {
  std::optional<std::string> holder_identity;
  std::optional<int32_t> lease_duration_seconds;
  std::optional<int64_t> acquire_time_us;  // MicroTime
  std::optional<int64_t> renew_time_us;    // MicroTime
  std::optional<int32_t> lease_transitions;
  std::optional<std::string> pool_name;    // DelegatedLease only
  std::optional<std::string> delegate;     // DelegatedLease only
  bool operator==(const LeaseSpec&) const = default;
};

// Identifies one leader term: one PoolLease object (uid) at one leaseTransitions.
struct LeaderTerm {
  std::string pool_lease_uid;
  int32_t lease_transitions = 0;
  bool operator==(const LeaderTerm&) const = default;
};

// Server-written status. Clients cannot set it through the main resource.
struct LeaseStatus {
  std::optional<int64_t> observed_time_us;      // server wall time of the last accepted write
  std::optional<int64_t> last_forward_time_us;  // DelegatedLease: last forward to the cloud Lease
  bool expired = false;                         // DelegatedLease: marked by the GC sweep
  std::optional<LeaderTerm> leader_term;        // DelegatedLease: term it was written in
};

struct Object {
  Kind kind = Kind::kPoolLease;
  ObjectMeta metadata;
  LeaseSpec spec;
  LeaseStatus status;
  // Server-internal, never serialized to clients: this process's monotonic clock
  // (microseconds) when it accepted the last renewal. Expiry is judged from it,
  // never from the client's renewTime (DESIGN.md "The rules").
  int64_t observed_monotonic_us = 0;
};

using ObjectPtr = std::shared_ptr<const Object>;
using MutableObjectPtr = std::shared_ptr<Object>;

}  // namespace poolcoord::store
