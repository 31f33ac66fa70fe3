// The Store interface: versioned objects of coordination.pool, keyed by
// (kind, name), with one global revision, atomic check-and-write, and watch.
//
// Shape of the contract, as kube-apiserver's storage.Interface has it:
// - every write bumps the one global revision; the object's
//   metadata.resourceVersion becomes that revision;
// - Update(kind, name, fn) runs fn(current, reader) atomically with the write it
//   returns: no other write to any key interleaves (memory: under the store lock;
//   etcd: a transaction comparing the revisions of every key fn read);
// - watches deliver every change after a revision, in revision order, until the
//   window of past events (history) no longer reaches back that far.
// The store knows nothing of the rules above it; it only runs the function it is
// given.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/object.h"

namespace poolcoord::store {

// Read access to other keys inside an Update, consistent with the write.
class TxnReader {
 public:
  virtual ~TxnReader() = default;
  // Returns the object or nullptr when absent.
  virtual ObjectPtr Get(Kind kind, std::string_view name) = 0;
};

// fn(current, reader): `current` is the stored object or nullptr. Returns the
// object to store (the store stamps metadata.resourceVersion), nullptr to delete
// the key (a no-op when absent), or an error that aborts the write and is
// returned unchanged from Update.
using UpdateFn =
    std::function<absl::StatusOr<MutableObjectPtr>(const ObjectPtr& current, TxnReader& reader)>;

enum class EventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct Event {
  EventType type = EventType::kAdded;
  // ADDED/MODIFIED: the new object. DELETED: the last state, carrying the
  // revision of the deletion as its resourceVersion. BOOKMARK (only after
  // Watcher::RequestProgress): an object with only kind and
  // metadata.resourceVersion (= revision).
  ObjectPtr object;
  ObjectPtr previous;  // MODIFIED/DELETED: the state before, for selector transitions
  int64_t revision = 0;

  // The object's JSON (store/object_codec.h EncodeObject), computed by the first
  // consumer that asks and shared by all others: one event reaches every
  // watcher, so a fan-out to 1,000 watchers encodes once, not 1,000 times.
  // Thread-safe. Empty when there is no object.
  const std::string& ObjectJson() const;

 private:
  mutable std::once_flag json_once_;
  mutable std::string json_;
};
using EventPtr = std::shared_ptr<const Event>;

struct WriteResult {
  ObjectPtr object;    // the stored object, or for a delete its last state
  bool created = false;
  bool deleted = false;
};

// The part of a write that every store settles the same way once an UpdateFn has
// given its verdict `next` on `current`, before anything is committed: a delete
// of an absent key changes nothing, a dry run answers with what would be stored
// (resourceVersion unchanged, as k8s.io/apiserver's dry run), and an object to
// store takes its kind and name from the key. `done` means answer with `result`
// now; otherwise `result` says created/deleted and the store commits `next`
// (nullptr: delete `current`).
struct WritePlan {
  WriteResult result;
  bool done = false;
};
WritePlan PlanWrite(Kind kind, std::string_view name, const ObjectPtr& current,
                    MutableObjectPtr& next, bool dry_run);

struct ListResult {
  std::vector<ObjectPtr> items;  // sorted by name
  int64_t revision = 0;          // the revision the list reflects
  std::string next_name;         // non-empty when limit cut the list: first name not returned
  int64_t remaining = 0;         // items left after the cut
};

// Which state a read may answer with: kube-apiserver's resourceVersion rules
// for get and list (k8s.io/apiserver storage/cacher delegator.go). A store
// without a cache always reads the newest state, which satisfies every rule; a
// watch cache (store/cacher.h) answers kAny and kNotOlderThan from memory.
struct Freshness {
  enum class Rule {
    kLatest,        // resourceVersion unset: a consistent (quorum) read
    kAny,           // resourceVersion "0": any state the server holds
    kNotOlderThan,  // resourceVersion N, resourceVersionMatch NotOlderThan or unset
  };
  Rule rule = Rule::kLatest;
  int64_t min_revision = 0;  // kNotOlderThan: N
};

struct ListOptions {
  // Start at names strictly greater than this (continue tokens).
  std::string after_name;
  // 0: no limit.
  int64_t limit = 0;
  // Applied before the limit counts.
  std::function<bool(const Object&)> predicate;
  // Reads the list as of this revision, so later pages of one list match the
  // first (kube-apiserver's etcd3 store continues a list at its first page's
  // revision). 0: the newest. A compacted revision: ExpiredError; a future one:
  // TimeoutError(rv_too_large). The memory store keeps no past states: it
  // undoes the history's later changes over today's objects.
  int64_t at_revision = 0;
  // How fresh the answer must be when at_revision is 0 and after_name empty.
  Freshness freshness;
};

// A stream of events, consumed either blocking (Next, for a thread of one's own)
// or event-driven (TryNext + NotifyWhenReady, for the transport's I/O threads).
class Watcher {
 public:
  virtual ~Watcher() = default;
  // Returns the next event, or nullptr on timeout. After the watcher was closed
  // (Stop, store shutdown, or falling behind) returns an event of type kError
  // once, then nullptr forever; Closed() tells the two apart.
  virtual EventPtr Next(std::chrono::milliseconds timeout) = 0;
  // Next without waiting: nullptr when nothing is ready.
  virtual EventPtr TryNext() = 0;
  // Arranges for `wake` to be called once, from the store's writing thread (it
  // must only hand work off, e.g. post to an executor), when TryNext has
  // something. Returns false, and keeps nothing, when it has something already.
  // A later call replaces an armed `wake`.
  virtual bool NotifyWhenReady(std::function<void()> wake) = 0;
  virtual bool Closed() const = 0;
  // Ends the watch; a blocked Next() returns.
  virtual void Stop() = 0;
  // Asks for a kBookmark event (as etcd's progress request and the watch
  // cache's bookmarks): it comes after every event it covers, and its revision
  // R says that no event of this stream at or below R is still to come, so R is
  // a resume point newer than the last event when other kinds were written
  // since. Returns false, and nothing comes, when the stream cannot tell (the
  // etcd3 store: etcd's JSON gateway takes no requests on an open watch).
  // Without a call no kBookmark event is ever delivered.
  virtual bool RequestProgress() { return false; }
};

// One key of a multi-key read (Store::GetAll).
struct ObjectKey {
  Kind kind;
  std::string_view name;
};

class Store {
 public:
  virtual ~Store() = default;

  // NotFound (NotFoundError) when absent.
  virtual absl::StatusOr<ObjectPtr> Get(Kind kind, std::string_view name) = 0;

  // Get with a freshness rule (resourceVersion on a get). A store reads the
  // newest (the default); a watch cache answers kAny and kNotOlderThan itself.
  // Errors as Get; a watch cache also answers TimeoutError(rv_too_large) for a
  // min_revision in the future.
  virtual absl::StatusOr<ObjectPtr> GetWithFreshness(Kind kind, std::string_view name,
                                                     const Freshness& freshness) {
    (void)freshness;
    return Get(kind, name);
  }

  // Several keys in one consistent read: one entry per key, in order, the object
  // or nullptr when absent. Each entry is at least as new as every write
  // acknowledged before the call began (a key deleted before then is nullptr, a
  // key deleted and created again is the new object), as a Get of each would
  // be; the memory and etcd3 stores read all of them at one revision (etcd3: one
  // transaction of range requests, so one round trip and one quorum read
  // instead of one per key). The watch cache passes it to the store below, as
  // it does Get. Errors: those of Get other than NotFound (Unavailable, ...);
  // the default (a Get per key, for stores that have nothing better) as well.
  // Thread-safe.
  virtual absl::StatusOr<std::vector<ObjectPtr>> GetAll(std::span<const ObjectKey> keys);

  // The current objects of `kind`, by name order. Thread-safe.
  virtual absl::StatusOr<ListResult> List(Kind kind, const ListOptions& options) = 0;

  // Runs fn atomically with the write it returns. With dry_run the result is
  // computed (resourceVersion unchanged) and nothing is stored or watched.
  // Errors: whatever fn returns.
  virtual absl::StatusOr<WriteResult> Update(Kind kind, std::string_view name, const UpdateFn& fn,
                                             bool dry_run = false) = 0;

  // Events for `kind` with revision > from_revision. from_revision 0 means
  // "from now" (the caller lists first for initial state). Returns OutOfRange
  // (ExpiredError, "too old resource version: N (M)") when the history no longer
  // reaches from_revision, TimeoutError(rv_too_large) when from_revision lies in
  // the future.
  virtual absl::StatusOr<std::unique_ptr<Watcher>> Watch(Kind kind, int64_t from_revision) = 0;

  // The newest revision.
  virtual int64_t CurrentRevision() = 0;
  // The oldest revision a watch can still start from.
  virtual int64_t OldestWatchableRevision() = 0;

  // Closes every watcher (SIGTERM). Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace poolcoord::store
