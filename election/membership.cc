#include "election/membership.h"

#include <exception>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/yaml.h"

namespace poolcoord::election {

bool MembershipIndex::Loaded() const {
  absl::MutexLock lock(&mu_);
  return loaded_;
}

std::optional<std::string> MembershipIndex::PoolOf(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto it = pool_of_.find(node);
  if (it == pool_of_.end()) return std::nullopt;
  return it->second;
}

bool MembershipIndex::IsMember(const std::string& node, const std::string& pool) const {
  absl::MutexLock lock(&mu_);
  auto it = pool_of_.find(node);
  return it != pool_of_.end() && it->second == pool;
}

absl::Status MembershipIndex::Replace(const std::string& source, const PoolMap& pools) {
  absl::MutexLock lock(&mu_);
  by_source_[source] = pools;
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

MembershipIndex::PoolMap MembershipIndex::Snapshot() const {
  absl::MutexLock lock(&mu_);
  PoolMap merged;
  for (const auto& [node, pool] : pool_of_) merged[pool].push_back(node);
  // Pools listed without nodes still exist for status pages.
  for (const auto& [source, pools] : by_source_) {
    for (const auto& [pool, nodes] : pools) merged.try_emplace(pool);
  }
  return merged;
}

int64_t MembershipIndex::Generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void MembershipIndex::RebuildLocked() {
  // node -> every pool naming it, over all sources; std::set keeps name order so
  // the first pool by name wins deterministically.
  std::map<std::string, std::set<std::string>> pools_of;
  for (const auto& [source, pools] : by_source_) {
    for (const auto& [pool, nodes] : pools) {
      for (const auto& node : nodes) pools_of[node].insert(pool);
    }
  }
  pool_of_.clear();
  conflicts_.clear();
  for (auto& [node, pools] : pools_of) {
    pool_of_.emplace(node, *pools.begin());
    if (pools.size() > 1) {
      conflicts_.push_back(absl::StrCat(node, " in ", absl::StrJoin(pools, ", ")));
    }
  }
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
