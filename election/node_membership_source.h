// Feeds a MembershipIndex from the cloud cluster's Nodes: a node belongs to the
// pool named by its --pool-label (default OpenYurt's apps.openyurt.io/nodepool).
//
// List+watch of the labelled Nodes (cloud/reflector.h: client-go's reflector
// loop, relisting on 410 Expired). A list replaces the index's "nodes" source
// content at once. Watch events that change a node's pool are published
// together, at most once per `publish_interval` (on a thread of the source's
// own): a publication rebuilds the whole source, O(nodes), so one per event
// made a burst of N new Nodes cost O(N^2) (12,000 Nodes created at once took
// the index minutes to learn, and the pool's DelegatedLeases were refused with
// 422 meanwhile). A change reaches the index within about publish_interval
// plus one rebuild. Events that leave every pool as it was (status updates)
// publish nothing. A kubelet may relabel its own Node unless the label is under
// node-restriction.kubernetes.io/ — see the README.
//
// Thread-safety: Start/Stop from one thread; the index is thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cloud/clientset.h"
#include "cloud/reflector.h"
#include "election/membership.h"

namespace poolcoord::election {

class NodeMembershipSource {
 public:
  // Neither pointer owned; both must outlive this object.
  NodeMembershipSource(cloud::NodeInterface* nodes, MembershipIndex* index, std::string pool_label,
                       std::chrono::milliseconds publish_interval = std::chrono::milliseconds(100));
  ~NodeMembershipSource();

  // Starts the list+watch loop and the publisher, each on a thread of its own.
  void Start();
  // Stops and joins both; what the watch brought is published first. Idempotent.
  void Stop();
  // One list: replaces the index content. Returns the list's resourceVersion.
  // Errors: the cloud's (cloud/errors.h). Not while started.
  absl::StatusOr<std::string> ListOnce();

 private:
  void Replace(const std::vector<cloud::Node>& nodes);
  void Apply(const cloud::WatchEvent<cloud::Node>& event);
  // Copies pool_of_ into the index. Publications happen in the order of the
  // states they copy (publish_mu_ spans the copy and the Replace).
  void Publish() ABSL_LOCKS_EXCLUDED(publish_mu_, mu_);
  void PublishLoop() ABSL_LOCKS_EXCLUDED(publish_mu_, mu_);

  MembershipIndex* index_;
  const std::string pool_label_;
  const std::chrono::milliseconds publish_interval_;
  absl::Mutex publish_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  std::map<std::string, std::string> pool_of_ ABSL_GUARDED_BY(mu_);  // node -> pool
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;  // pool_of_ changed since the last publication
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread publisher_;
  cloud::Reflector<cloud::NodeInterface, cloud::NodeList> reflector_;
};

}  // namespace poolcoord::election
