#include "election/node_membership_source.h"

#include <pthread.h>

#include "absl/time/time.h"
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
  o.thread_name = "membership-list";
  // Only labelled Nodes matter: the label selector ("exists") keeps lists small.
  o.list.label_selector = pool_label;
  return o;
}

}  // namespace

NodeMembershipSource::NodeMembershipSource(cloud::NodeInterface* nodes, MembershipIndex* index,
                                           std::string pool_label,
                                           std::chrono::milliseconds publish_interval)
    : index_(index),
      pool_label_(std::move(pool_label)),
      publish_interval_(publish_interval),
      reflector_(
          nodes, Options(pool_label_),
          [this](const std::vector<cloud::Node>& all) { Replace(all); },
          [this](const cloud::WatchEvent<cloud::Node>& ev) { Apply(ev); }) {}

NodeMembershipSource::~NodeMembershipSource() { Stop(); }

void NodeMembershipSource::Start() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = false;
  }
  publisher_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "membership");
    PublishLoop();
  });
  reflector_.Start("");
}

void NodeMembershipSource::Stop() {
  reflector_.Stop();
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (publisher_.joinable()) publisher_.join();
  bool dirty;
  {
    absl::MutexLock l(&mu_);
    dirty = dirty_;
  }
  if (dirty) Publish();
}

absl::StatusOr<std::string> NodeMembershipSource::ListOnce() { return reflector_.ListOnce(); }

void NodeMembershipSource::Publish() {
  absl::MutexLock p(&publish_mu_);
  MembershipIndex::PoolMap pools;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [node, pool] : pool_of_) {
      if (!pool.empty()) pools[pool].push_back(node);
    }
    dirty_ = false;
  }
  absl::Status s = index_->Replace("nodes", pools);
  if (!s.ok()) base::LogWarning("pool membership from Nodes: ", s.message());
}

void NodeMembershipSource::PublishLoop() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](NodeMembershipSource* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->dirty_ || self->stopping_;
          },
          this));
      if (stopping_) return;
    }
    Publish();
    // The events of the next interval are published together.
    absl::MutexLock l(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(publish_interval_));
    if (stopping_) return;
  }
}

void NodeMembershipSource::Replace(const std::vector<cloud::Node>& nodes) {
  {
    absl::MutexLock l(&mu_);
    pool_of_.clear();
    for (const cloud::Node& n : nodes) {
      if (!n.metadata.name.empty()) pool_of_[n.metadata.name] = PoolOf(n, pool_label_);
    }
  }
  Publish();  // a list is published at once: start-up waits for it (Loaded)
}

void NodeMembershipSource::Apply(const cloud::WatchEvent<cloud::Node>& ev) {
  const std::string& name = ev.object.metadata.name;
  if (name.empty()) return;
  const std::string pool = PoolOf(ev.object, pool_label_);
  absl::MutexLock l(&mu_);
  if (ev.type == "DELETED" || pool.empty()) {
    if (pool_of_.erase(name)) dirty_ = true;
  } else if (auto [it, added] = pool_of_.try_emplace(name, pool); added || it->second != pool) {
    it->second = pool;
    dirty_ = true;
  }
}

}  // namespace poolcoord::election
