#include "election/node_membership_source.h"

#include "base/log.h"

namespace poolcoord::election {
namespace {

std::string PoolOf(const cloud::Node& node, const std::string& label) {
  auto it = node.metadata.labels.find(label);
  return it == node.metadata.labels.end() ? "" : it->second;
}

cloud::ReflectorOptions Options(const std::string& pool_label) {
  cloud::ReflectorOptions o;
  o.name = "pool membership from Nodes";
  // Only labelled Nodes matter: the label selector ("exists") keeps lists small.
  o.list.label_selector = pool_label;
  return o;
}

}  // namespace

NodeMembershipSource::NodeMembershipSource(cloud::NodeInterface* nodes, MembershipIndex* index,
                                           std::string pool_label)
    : index_(index),
      pool_label_(std::move(pool_label)),
      reflector_(
          nodes, Options(pool_label_),
          [this](const std::vector<cloud::Node>& all) { Replace(all); },
          [this](const cloud::WatchEvent<cloud::Node>& ev) { Apply(ev); }) {}

NodeMembershipSource::~NodeMembershipSource() { Stop(); }

void NodeMembershipSource::Start() { reflector_.Start(""); }

void NodeMembershipSource::Stop() { reflector_.Stop(); }

absl::StatusOr<std::string> NodeMembershipSource::ListOnce() { return reflector_.ListOnce(); }

void NodeMembershipSource::Publish() {
  MembershipIndex::PoolMap pools;
  for (const auto& [node, pool] : pool_of_) {
    if (!pool.empty()) pools[pool].push_back(node);
  }
  absl::Status s = index_->Replace("nodes", pools);
  if (!s.ok()) base::LogWarning("pool membership from Nodes: ", s.message());
}

void NodeMembershipSource::Replace(const std::vector<cloud::Node>& nodes) {
  pool_of_.clear();
  for (const cloud::Node& n : nodes) {
    if (!n.metadata.name.empty()) pool_of_[n.metadata.name] = PoolOf(n, pool_label_);
  }
  Publish();
}

void NodeMembershipSource::Apply(const cloud::WatchEvent<cloud::Node>& ev) {
  const std::string& name = ev.object.metadata.name;
  if (name.empty()) return;
  const std::string pool = PoolOf(ev.object, pool_label_);
  if (ev.type == "DELETED" || pool.empty()) {
    if (pool_of_.erase(name)) Publish();
  } else if (pool_of_[name] != pool) {
    pool_of_[name] = pool;
    Publish();
  }
}

}  // namespace poolcoord::election
