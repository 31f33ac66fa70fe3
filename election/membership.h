// Pool membership: which pool each node belongs to. One index serves the API
// rules and the webhook; sources (a YAML/JSON file, later Node labels from the
// cloud cluster) replace its content wholesale.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::election {

class MembershipIndex {
 public:
  // pool name -> node names.
  using PoolMap = std::map<std::string, std::vector<std::string>>;

  MembershipIndex() = default;

  // False until a source has delivered its first content (start-up): the
  // webhook then denies annotated writes with "retry".
  bool Loaded() const;

  // The pool of `node`, or nullopt when the node is in no pool. Thread-safe.
  std::optional<std::string> PoolOf(const std::string& node) const;
  bool IsMember(const std::string& node, const std::string& pool) const;

  // Replaces the content from `source` ("file", "nodes"); the index is the union
  // of every source's content. A node listed in two pools: the first pool in name
  // order wins, and the call returns InvalidArgument naming it (content still set).
  absl::Status Replace(const std::string& source, const PoolMap& pools);

  // A consistent copy, for status pages and tests.
  PoolMap Snapshot() const;
  // Increments on every Replace.
  int64_t Generation() const;

 private:
  void RebuildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, PoolMap> by_source_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> pool_of_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // "<node> in <pool>, <pool>" for each node named by more than one pool; set by
  // RebuildLocked, reported by Replace.
  std::vector<std::string> conflicts_ ABSL_GUARDED_BY(mu_);
};

// Parses `{pools: {<pool>: [<node>, ...]}}` (YAML; JSON is YAML). InvalidArgument
// with the reason when malformed.
absl::StatusOr<MembershipIndex::PoolMap> ParseMembershipYaml(const std::string& text);

}  // namespace poolcoord::election
