// A kind's objects ordered by name: how the memory store and the watch cache
// (store/cacher.h) keep them, and the list read both serve from it.
//
// A B-tree of the shared pointers themselves, keyed by the name inside the
// (immutable) object: ~20 bytes per object, where std::map<std::string,
// ObjectPtr> spends a 96-byte node and a second copy of the name.
// Not thread-safe: the owner locks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "store/object.h"
#include "store/store.h"

namespace poolcoord::store {

struct ObjectsByName {
  using is_transparent = void;
  static std::string_view Name(const ObjectPtr& o) { return o->metadata.name; }
  static std::string_view Name(std::string_view name) { return name; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return Name(a) < Name(b);
  }
};
using ObjectSet = absl::btree_set<ObjectPtr, ObjectsByName>;

// The object named `name`, or nullptr.
ObjectPtr FindObject(const ObjectSet& objects, std::string_view name);

// Inserts `object`, or replaces the one of the same name.
void UpsertObject(ObjectSet& objects, ObjectPtr object);

// What was different at an earlier revision: name -> the object as it was
// then, or nullptr where there was none then. Laid over today's ObjectSet, it
// reads the set as of that revision (a list continued at its first page's
// revision, as etcd serves one).
using ObjectOverlay = absl::btree_map<std::string, ObjectPtr, std::less<>>;

// The list read of store.h's ListOptions: names after options.after_name that
// pass options.predicate, cut at options.limit (next_name, remaining), stamped
// with `revision`; with `overlay`, of `objects` with the overlay laid over
// them. at_revision and freshness are the caller's business.
ListResult ListObjects(const ObjectSet& objects, const ListOptions& options, int64_t revision,
                       const ObjectOverlay* overlay = nullptr);

}  // namespace poolcoord::store
