// The kinds of coordination.pool/v1alpha1, PoolLease and DelegatedLease, as
// values: their names (ResourceInfo) and their spec and status types. One model
// serves both: a lease-shaped spec and status whose fields each kind has on the
// wire or not (ResourceInfo::spec_fields). The store holds them in its objects
// (store/object.h), the cloud client in its typed objects (cloud/types.h), and
// one codec writes and reads them for all three (api/codec.h), as k8s.io/api
// holds a group's types apart from the server and the clients that use them.
//
// Times are integers: microseconds (MicroTime on the wire: RFC 3339, exactly 6
// fractional digits, UTC) since the Unix epoch.
//
// Plain values, thread-compatible; the resource table is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace poolcoord::api {

// A kind of the group. The two kinds the rules are about are built in; a kind
// defined above (handlers/registry/) takes the next free number and registers
// its ResourceInfo (RegisterResource).
enum class Kind : uint8_t { kPoolLease = 0, kDelegatedLease = 1 };
inline constexpr size_t kMaxKinds = 8;

// The fields of LeaseSpec, as bits of ResourceInfo::spec_fields.
enum SpecField : uint32_t {
  kSpecHolderIdentity = 1u << 0,
  kSpecLeaseDurationSeconds = 1u << 1,
  kSpecAcquireTime = 1u << 2,
  kSpecRenewTime = 1u << 3,
  kSpecLeaseTransitions = 1u << 4,
  kSpecPoolName = 1u << 5,
  kSpecDelegate = 1u << 6,
  kSpecProof = 1u << 7,  // DelegatedLease spec.proof (write-only: DelegationFields::proof)
};

// The SpecField bit of a spec field's wire name ("renewTime"); 0 for a name the
// spec does not have.
uint32_t SpecFieldBit(std::string_view name);

// A resource of the group, in the order discovery lists them: its names, and
// what the wire shows of the one object model for it.
struct ResourceInfo {
  Kind kind;
  const char* plural;     // "poolleases"
  const char* singular;   // "poollease"
  const char* kind_name;  // "PoolLease"
  const char* short_name; // "pl"
  // The LeaseSpec fields the kind has on the wire (SpecField bits): the codec
  // reads others as unknown fields and never writes them to clients (the
  // storage encoding keeps every field).
  uint32_t spec_fields;
  // The Go struct names decode errors name, as kube-apiserver's decoder would
  // for the kind's types ("LeaseSpec.spec.leaseDurationSeconds").
  const char* spec_struct;
  const char* status_struct;
};
// `kind` must be built in or registered.
const ResourceInfo& InfoFor(Kind kind);
// Returns nullptr when `plural` names no resource of ours.
const ResourceInfo* InfoForPlural(std::string_view plural);
// Makes a kind defined above this floor known (its number beyond the built-in
// ones, below kMaxKinds). `info` must outlive the process. Registering the same
// ResourceInfo again is a no-op; returns false, changing nothing, when another
// kind has its number or plural. Thread-safe; register before any object of the
// kind reaches a store.
bool RegisterResource(const ResourceInfo* info);
// The kinds known now (built in and registered), by number.
std::vector<Kind> KnownKinds();

inline constexpr char kGroup[] = "coordination.pool";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kGroupVersion[] = "coordination.pool/v1alpha1";

// The label and annotation keys every DelegatedLease carries
// (election/lease_rules.h kPoolLabel, kDelegateAnnotation): the store keeps one
// copy of each key for all its objects (store::MapKey).
inline constexpr std::string_view kCommonMetadataKeys[] = {
    "coordination.pool/pool",
    "openyurt.io/delegate-heartbeat",
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

// std::optional<LeaderTerm> in LeaderTerm's own 40 bytes: the engaged flag sits
// in LeaderTerm's tail padding, which a derived class may use (Itanium C++ ABI,
// LeaderTerm not being POD), where std::optional adds 8 bytes: they keep a
// stored object within its malloc chunk (store/object.h). Reads and assigns as
// the std::optional it replaces.
class OptionalLeaderTerm {
 public:
  OptionalLeaderTerm() = default;
  OptionalLeaderTerm(std::nullopt_t) {}                                   // NOLINT: implicit
  OptionalLeaderTerm(LeaderTerm term) { emplace(std::move(term)); }      // NOLINT: implicit
  OptionalLeaderTerm(const std::optional<LeaderTerm>& term) {            // NOLINT: implicit
    if (term) emplace(*term);
  }
  OptionalLeaderTerm& operator=(std::nullopt_t) {
    reset();
    return *this;
  }
  OptionalLeaderTerm& operator=(LeaderTerm term) {
    emplace(std::move(term));
    return *this;
  }
  OptionalLeaderTerm& operator=(const std::optional<LeaderTerm>& term) {
    if (term) {
      emplace(*term);
    } else {
      reset();
    }
    return *this;
  }

  bool has_value() const { return slot_.engaged; }
  explicit operator bool() const { return slot_.engaged; }
  const LeaderTerm& operator*() const { return slot_; }
  LeaderTerm& operator*() { return slot_; }
  const LeaderTerm* operator->() const { return &slot_; }
  LeaderTerm* operator->() { return &slot_; }
  void reset() { slot_ = Slot{}; }
  LeaderTerm& emplace(LeaderTerm term) {
    static_cast<LeaderTerm&>(slot_) = std::move(term);
    slot_.engaged = true;
    return slot_;
  }

  friend bool operator==(const OptionalLeaderTerm& a, const OptionalLeaderTerm& b) {
    return a.has_value() == b.has_value() && (!a.has_value() || *a == *b);
  }
  friend bool operator==(const OptionalLeaderTerm& a, const std::optional<LeaderTerm>& b) {
    return a.has_value() == b.has_value() && (!a.has_value() || *a == *b);
  }
  friend bool operator==(const OptionalLeaderTerm& a, const LeaderTerm& b) {
    return a.has_value() && *a == b;
  }

 private:
  struct Slot : LeaderTerm {
    bool engaged = false;
  };
  Slot slot_;
};
static_assert(sizeof(OptionalLeaderTerm) == sizeof(LeaderTerm));

// Verifiable delegation (docs/verifiable-delegation.md): the fields few
// objects have (DelegationFields).

// One challenge the server issued to a pool: PoolLease status.challenges.
struct DelegationChallenge {
  std::string value;          // base64 of 32 random bytes
  int64_t issue_time_us = 0;  // the issuing server's wall clock (MicroTime)
  bool operator==(const DelegationChallenge&) const = default;
};

// DelegatedLease spec.proof as the client wrote it: input to the lease rules,
// which verify it and drop it (write-only, as a Secret's stringData): never
// stored, never returned.
struct DelegationProof {
  std::string heartbeat;    // base64 of the member's heartbeat datagram, as received
  std::string certificate;  // the member's certificate: base64 of its DER, or PEM
  bool operator==(const DelegationProof&) const = default;
};

// DelegatedLease status.proof: what the server verified in the last proof it
// accepted for the node; its sequence is the floor for the next one.
struct AcceptedProof {
  std::string boot_id;     // the heartbeat's boot id, 32 lower-case hex digits
  int64_t sequence = 0;    // the heartbeat's sequence number (below 2^63)
  std::string challenge;   // the challenge it carried
  bool operator==(const AcceptedProof&) const = default;
};

// The fields of verifiable delegation that few objects have (the store keeps
// them behind one pointer: store::Object::delegation): spec.proof, input only,
// and two parts of status.
struct DelegationFields {
  std::optional<DelegationProof> proof;         // DelegatedLease spec.proof
  std::optional<AcceptedProof> accepted_proof;  // DelegatedLease status.proof
  std::vector<DelegationChallenge> challenges;  // PoolLease status.challenges, newest first
  bool HasProof() const { return proof.has_value(); }
  bool HasStatus() const { return accepted_proof.has_value() || !challenges.empty(); }
  bool empty() const { return !proof && !HasStatus(); }
  bool operator==(const DelegationFields&) const = default;
};
// Status follows status: `to` gets the status parts of `from` and keeps its own
// spec.proof.
void CopyStatus(DelegationFields& to, const DelegationFields& from);
void ClearStatus(DelegationFields& fields);
void ClearProof(DelegationFields& fields);
bool SameStatus(const DelegationFields& a, const DelegationFields& b);

// Server-written status. Clients cannot set it through the main resource.
// DelegationFields holds its other parts.
// (`expired` last: Object places `kind` in the padding after it.)
struct LeaseStatus {
  std::optional<int64_t> observed_time_us;      // server wall time of the last renewal
  OptionalLeaderTerm leader_term;               // DelegatedLease: term it was written in
  bool expired = false;                         // DelegatedLease: marked by the GC sweep
  bool operator==(const LeaseStatus&) const = default;
};


// The spec fields (SpecField bits) whose values differ between `a` and `b`
// (spec.proof aside: it is never stored); *removed is set when one of them is
// set in `a` and not in `b`.
uint32_t ChangedSpecFields(const LeaseSpec& a, const LeaseSpec& b, bool* removed);

// The server's wall time of the last renewal (status.observedTime), 0 when none.
int64_t RenewalTime(const LeaseStatus& status);

// About how many bytes the strings behind `spec` and `delegation` hold.
size_t ApproximateBytes(const LeaseSpec& spec, const DelegationFields& delegation);

}  // namespace poolcoord::api
