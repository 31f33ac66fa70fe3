// metadata.managedFields as server-side apply keeps them: who (a field manager,
// by operation, apiVersion and subresource) owns which fields, and how an Update
// operation (create, update, non-apply patch) changes that, as
// k8s.io/apiserver's fieldmanager (structured-merge-diff's merge.Updater.Update,
// managedFieldsUpdater, stripMetaManager, capManagersManager) does:
// - the fields an operation adds or changes become its manager's, and every other
//   manager loses them (an update never conflicts); fields it removes leave every
//   manager;
// - the manager's entry merges with its earlier one and its time becomes now; an
//   operation that changes nothing leaves the entries alone;
// - apiVersion, kind and the server-set metadata (name, uid, resourceVersion,
//   generation, creationTimestamp, managedFields, ...) are nobody's; status is
//   nobody's through the main resource, and only status is anybody's through
//   /status;
// - at most kMaxUpdateManagers Update entries: the oldest merge into one
//   "ancient-changes" entry per apiVersion.
// Pure functions over values; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "handlers/field_set.h"
#include "handlers/typed_json.h"
#include "store/object.h"

namespace poolcoord::handlers::ssa {

inline constexpr size_t kMaxUpdateManagers = 10;
inline constexpr char kAncientChangesManager[] = "ancient-changes";
inline constexpr char kBeforeFirstApplyManager[] = "before-first-apply";

enum class Operation { kApply, kUpdate };

struct Manager {
  std::string name;
  Operation operation = Operation::kUpdate;
  std::string api_version;
  std::string subresource;
  std::optional<int64_t> time;  // seconds since the epoch
  FieldSet fields;

  // The key kube-apiserver tells managers apart by (BuildManagerIdentifier): the
  // entry's JSON without fields and time, and without apiVersion for Apply.
  std::string Identifier() const;
  // As a conflict message names the manager: "m" for an applier,
  // "m" with subresource "status" using coordination.pool/v1alpha1 for an updater.
  std::string Describe() const;
  bool SameIdentity(const Manager& other) const;
};

using Managers = std::vector<Manager>;

// Reads stored or sent entries. InvalidArgument when an entry's operation is not
// Apply or Update, its apiVersion is empty, its fieldsType is not "FieldsV1" or
// its fieldsV1 does not parse (kube-apiserver then falls back to the live
// object's entries, or to none).
absl::StatusOr<Managers> DecodeManagers(const store::ManagedFields& entries);

// Writes entries sorted as kube-apiserver sorts them: Apply before Update, then
// by time (seconds; none counts as 0), manager, apiVersion, subresource.
store::ManagedFields EncodeManagers(const Managers& managers);
void SortEntries(store::ManagedFields& entries);

// What an operation's ownership leaves out: the server-set metadata, status
// (main resource) or everything but status (the status subresource), and
// `reset`, the fields a write of that subresource resets (the kind's:
// registry::Strategy::ResetFields).
FieldSet FilterOwnedFields(const FieldSet& fields, std::string_view subresource,
                           const FieldSet& reset);
Comparison FilterComparison(Comparison cmp, std::string_view subresource, const FieldSet& reset);
// The empty set, for a kind that resets nothing.
const FieldSet& NoResetFields();

// The Update operation of `manager` (apiVersion, subresource) at `now_s` that
// made the (filtered) changes `cmp`, applied to `managers`.
void RecordUpdate(const Comparison& cmp, const std::string& manager,
                  const std::string& api_version, const std::string& subresource, int64_t now_s,
                  Managers& managers);

// Merges the oldest Update entries beyond `max` into "ancient-changes".
void CapUpdateManagers(Managers& managers, size_t max = kMaxUpdateManagers);

// Which entries to start from, given the live object's and the request's
// (decodeLiveOrNew): a subresource write, or a request that sends no entries or
// invalid ones, keeps the live object's (invalid live entries count as none); a
// request whose only entry is empty ([{}]) resets them; otherwise the request's.
Managers BaseManagers(const store::ManagedFields* live,
                      const store::ManagedFields& sent,
                      bool subresource);

// The manager kube-apiserver records when a request names none: the User-Agent
// up to its first '/', without unprintable characters, cut to 128 bytes, invalid
// UTF-8 as U+FFFD; "unknown" when that leaves nothing (managerOrUserAgent).
std::string ManagerFromUserAgent(std::string_view user_agent);

}  // namespace poolcoord::handlers::ssa
