// Pool membership: which pool each node belongs to. One index serves the API
// rules and the webhook; sources (a YAML/JSON file, later Node labels from the
// cloud cluster) replace its content wholesale.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
  // One source's content, compact: the node names back to back in one
  // buffer and 12 bytes per node, ~20 bytes in all for a node of 8 characters,
  // where a std::map<std::string, std::string> node spent ~140 and the source's
  // PoolMap copy another ~45.
  struct SourceIndex {
    struct Entry {
      uint32_t offset;  // into names
      uint32_t size;
      uint32_t pool;    // index into pools
    };
    std::vector<std::string> pools;  // sorted, unique; pools without nodes too
    std::string names;
    // Sorted by (node name, pool); a node named by two pools has two entries.
    std::vector<Entry> nodes;

    std::string_view Name(const Entry& e) const {
      return std::string_view(names.data() + e.offset, e.size);
    }
    // The first pool by name that names `node` in this source, or nullptr.
    const std::string* PoolOf(std::string_view node) const;
  };
  static absl::StatusOr<SourceIndex> BuildSource(const PoolMap& pools);
  // The pool of `node` over every source: the first by name.
  const std::string* PoolOfLocked(std::string_view node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls fn(node, pools) for every node of every source in name order, with the
  // node's distinct pools over all sources in name order.
  template <typename Fn>
  void ForEachNodeLocked(Fn fn) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RebuildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, SourceIndex> by_source_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // "<node> in <pool>, <pool>" for each node named by more than one pool; set by
  // RebuildLocked, reported by Replace.
  std::vector<std::string> conflicts_ ABSL_GUARDED_BY(mu_);
};

// Parses `{pools: {<pool>: [<node>, ...]}}` (YAML; JSON is YAML). InvalidArgument
// with the reason when malformed, and with the line and apimachinery's reason for
// a name Kubernetes would refuse where it ends up: a node name must be a DNS-1123
// subdomain (a Node's, its DelegatedLease's and Lease's name), a pool name too
// (its PoolLease's name) and a valid label value (the pool labels): at most 63
// characters.
absl::StatusOr<MembershipIndex::PoolMap> ParseMembershipYaml(const std::string& text);

// What Kubernetes would refuse in a pool's name wherever the name ends up: its
// PoolLease's name (a DNS-1123 subdomain) and a label value (coordination.pool/pool
// and the pool label: at most 63 characters). One message per failed rule, in
// apimachinery's words (base/k8s_names.h); empty: valid. The membership file's
// pool names and PoolLease names are judged by it.
std::vector<std::string> PoolNameErrors(std::string_view name);

}  // namespace poolcoord::election
