#include "election/membership.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/k8s_names.h"
#include "yaml-cpp/yaml.h"

namespace poolcoord::election {

bool MembershipIndex::Loaded() const {
  absl::MutexLock lock(&mu_);
  return loaded_;
}

const std::string* MembershipIndex::SourceIndex::PoolOf(std::string_view node) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), node,
                             [this](const Entry& e, std::string_view n) { return Name(e) < n; });
  if (it == nodes.end() || Name(*it) != node) return nullptr;
  return &pools[it->pool];
}

const std::string* MembershipIndex::PoolOfLocked(std::string_view node) const {
  const std::string* best = nullptr;
  for (const auto& [source, index] : by_source_) {
    const std::string* pool = index.PoolOf(node);
    if (pool != nullptr && (best == nullptr || *pool < *best)) best = pool;
  }
  return best;
}

std::optional<std::string> MembershipIndex::PoolOf(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  const std::string* pool = PoolOfLocked(node);
  if (pool == nullptr) return std::nullopt;
  return *pool;
}

bool MembershipIndex::IsMember(const std::string& node, const std::string& pool) const {
  absl::MutexLock lock(&mu_);
  const std::string* found = PoolOfLocked(node);
  return found != nullptr && *found == pool;
}

absl::StatusOr<MembershipIndex::SourceIndex> MembershipIndex::BuildSource(const PoolMap& pools) {
  SourceIndex out;
  size_t node_count = 0;
  size_t chars = 0;
  for (const auto& [pool, nodes] : pools) {
    node_count += nodes.size();
    for (const auto& node : nodes) chars += node.size();
  }
  constexpr size_t kMax = std::numeric_limits<uint32_t>::max();
  if (chars > kMax || node_count > kMax || pools.size() > kMax) {
    return absl::InvalidArgumentError("membership: too large (over 4 GiB of node names)");
  }
  out.pools.reserve(pools.size());
  out.names.reserve(chars);
  out.nodes.reserve(node_count);
  for (const auto& [pool, nodes] : pools) {  // std::map: sorted, unique
    const auto index = static_cast<uint32_t>(out.pools.size());
    out.pools.push_back(pool);
    for (const auto& node : nodes) {
      out.nodes.push_back({static_cast<uint32_t>(out.names.size()),
                           static_cast<uint32_t>(node.size()), index});
      out.names += node;
    }
  }
  auto key = [&out](const SourceIndex::Entry& e) { return std::make_pair(out.Name(e), e.pool); };
  std::sort(out.nodes.begin(), out.nodes.end(),
            [&key](const auto& a, const auto& b) { return key(a) < key(b); });
  // A node listed twice in one pool counts once (its characters stay in `names`).
  out.nodes.erase(std::unique(out.nodes.begin(), out.nodes.end(),
                              [&key](const auto& a, const auto& b) { return key(a) == key(b); }),
                  out.nodes.end());
  out.nodes.shrink_to_fit();
  return out;
}

absl::Status MembershipIndex::Replace(const std::string& source, const PoolMap& pools) {
  // Built outside the lock: lookups go on while a 100,000-node file is indexed.
  absl::StatusOr<SourceIndex> built = BuildSource(pools);
  if (!built.ok()) return built.status();
  absl::MutexLock lock(&mu_);
  by_source_[source] = *std::move(built);
  loaded_ = true;
  ++generation_;
  RebuildLocked();
  if (!conflicts_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nodes listed in more than one pool (the first pool by name wins): ",
        absl::StrJoin(conflicts_, "; ")));
  }
  return absl::OkStatus();
}

template <typename Fn>
void MembershipIndex::ForEachNodeLocked(Fn fn) const {
  // A merge of the sources' sorted node lists (there are one or two sources).
  std::vector<std::pair<const SourceIndex*, size_t>> cursors;
  for (const auto& [source, index] : by_source_) {
    if (!index.nodes.empty()) cursors.emplace_back(&index, 0);
  }
  std::vector<std::string_view> node_pools;
  while (true) {
    std::string_view node;
    bool any = false;
    for (const auto& [index, i] : cursors) {
      if (i == index->nodes.size()) continue;
      const std::string_view name = index->Name(index->nodes[i]);
      if (!any || name < node) {
        node = name;
        any = true;
      }
    }
    if (!any) return;
    node_pools.clear();
    for (auto& [index, i] : cursors) {
      for (; i < index->nodes.size() && index->Name(index->nodes[i]) == node; ++i) {
        node_pools.push_back(index->pools[index->nodes[i].pool]);
      }
    }
    if (cursors.size() > 1) {
      std::sort(node_pools.begin(), node_pools.end());
      node_pools.erase(std::unique(node_pools.begin(), node_pools.end()), node_pools.end());
    }
    fn(node, node_pools);
  }
}

MembershipIndex::PoolMap MembershipIndex::Snapshot() const {
  absl::MutexLock lock(&mu_);
  PoolMap merged;
  // Pools listed without nodes still exist for status pages.
  for (const auto& [source, index] : by_source_) {
    for (const auto& pool : index.pools) merged.try_emplace(pool);
  }
  ForEachNodeLocked([&merged](std::string_view node, const std::vector<std::string_view>& pools) {
    merged[std::string(pools.front())].emplace_back(node);
  });
  return merged;
}

int64_t MembershipIndex::Generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void MembershipIndex::RebuildLocked() {
  // Collected outside the lambda: clang's analysis cannot see that it runs under mu_.
  std::vector<std::string> conflicts;
  ForEachNodeLocked([&conflicts](std::string_view node, const std::vector<std::string_view>& pools) {
    if (pools.size() < 2) return;
    std::string line(node);
    line += " in ";
    for (size_t i = 0; i < pools.size(); ++i) {
      if (i > 0) line += ", ";
      line += pools[i];
    }
    conflicts.push_back(std::move(line));
  });
  conflicts_ = std::move(conflicts);
}

namespace {

std::string Where(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return "";
  return absl::StrCat(" (line ", mark.line + 1, ", column ", mark.column + 1, ")");
}

absl::Status ShapeError(const std::string& what, const YAML::Node& node) {
  return absl::InvalidArgumentError(absl::StrCat(
      "membership: ", what, Where(node), "; expected {pools: {<pool>: [<node>, ...]}}"));
}

// A name that Kubernetes would refuse where it ends up: a pool's name is its
// PoolLease's name (a DNS-1123 subdomain) and a label value (coordination.pool/pool
// and the pool label: at most 63 characters); a node's name is a Node's name
// (ValidateNodeName: a DNS-1123 subdomain), its DelegatedLease's and its Lease's.
absl::Status CheckName(const char* what, const std::string& name, const YAML::Node& node,
                       bool pool) {
  std::vector<std::string> errs = pool ? PoolNameErrors(name) : base::IsDNS1123Subdomain(name);
  if (errs.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("membership: ", what, " \"", name, "\"", Where(node),
                                                 " is not a valid ", what, " name: ",
                                                 absl::StrJoin(errs, "; ")));
}

absl::StatusOr<MembershipIndex::PoolMap> ParseRoot(const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) {
    return ShapeError("the document is empty", root);
  }
  if (!root.IsMap()) return ShapeError("the top level is not a mapping", root);
  MembershipIndex::PoolMap out;
  bool seen_pools = false;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) return ShapeError("a top-level key is not a string", entry.first);
    const std::string key = entry.first.Scalar();
    if (key != "pools") {
      return ShapeError(absl::StrCat("unknown top-level key \"", key, "\""), entry.first);
    }
    seen_pools = true;
    const YAML::Node& pools = entry.second;
    if (pools.IsNull()) continue;  // `pools:` with nothing under it: no pools
    if (!pools.IsMap()) return ShapeError("\"pools\" is not a mapping of pool names", pools);
    std::map<std::string, std::string> pool_of;
    for (const auto& pool_entry : pools) {
      if (!pool_entry.first.IsScalar() || pool_entry.first.Scalar().empty()) {
        return ShapeError("a pool name is not a non-empty string", pool_entry.first);
      }
      const std::string pool = pool_entry.first.Scalar();
      if (absl::Status s = CheckName("pool", pool, pool_entry.first, true); !s.ok()) return s;
      if (out.count(pool)) {
        return ShapeError(absl::StrCat("pool \"", pool, "\" is listed twice"), pool_entry.first);
      }
      auto& members = out[pool];
      const YAML::Node& nodes = pool_entry.second;
      if (nodes.IsNull()) continue;  // `pool:` with no nodes
      if (!nodes.IsSequence()) {
        return ShapeError(absl::StrCat("the nodes of pool \"", pool, "\" are not a list"), nodes);
      }
      std::set<std::string> seen;
      for (const auto& node : nodes) {
        if (!node.IsScalar() || node.Scalar().empty()) {
          return ShapeError(absl::StrCat("a node of pool \"", pool, "\" is not a non-empty string"),
                            node);
        }
        const std::string name = node.Scalar();
        if (absl::Status s = CheckName("node", name, node, false); !s.ok()) return s;
        auto [it, inserted] = pool_of.emplace(name, pool);
        if (!inserted && it->second != pool) {
          return ShapeError(absl::StrCat("node \"", name, "\" is listed in pools \"", it->second,
                                         "\" and \"", pool, "\"; a node belongs to one pool"),
                            node);
        }
        if (seen.insert(name).second) members.push_back(name);
      }
    }
  }
  if (!seen_pools) return ShapeError("the key \"pools\" is missing", root);
  return out;
}

}  // namespace

std::vector<std::string> PoolNameErrors(std::string_view name) {
  std::vector<std::string> errs = base::IsDNS1123Subdomain(name);
  if (errs.empty()) errs = base::IsValidLabelValue(name);
  return errs;
}

absl::StatusOr<MembershipIndex::PoolMap> ParseMembershipYaml(const std::string& text) {
  // yaml-cpp reports errors by throwing; this is the edge where they are caught.
  try {
    return ParseRoot(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("membership: not valid YAML: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("membership: ", e.what()));
  }
}

}  // namespace poolcoord::election
