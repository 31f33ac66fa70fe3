// Feeds a MembershipIndex from the cloud cluster's Nodes: a node belongs to the
// pool named by its --pool-label (default OpenYurt's apps.openyurt.io/nodepool).
//
// List+watch of the labelled Nodes (cloud/reflector.h: client-go's reflector
// loop, relisting on 410 Expired). Each change replaces the index's "nodes"
// source content. A kubelet may relabel its own Node unless the label is under
// node-restriction.kubernetes.io/ — see the README.
//
// Thread-safety: Start/Stop from one thread; the index is thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cloud/clientset.h"
#include "cloud/reflector.h"
#include "election/membership.h"

namespace poolcoord::election {

class NodeMembershipSource {
 public:
  // Neither pointer owned; both must outlive this object.
  NodeMembershipSource(cloud::NodeInterface* nodes, MembershipIndex* index, std::string pool_label);
  ~NodeMembershipSource();

  // Starts the list+watch loop on a thread of its own.
  void Start();
  // Stops and joins; idempotent.
  void Stop();
  // One list: replaces the index content. Returns the list's resourceVersion.
  // Errors: the cloud's (cloud/errors.h). Not while started.
  absl::StatusOr<std::string> ListOnce();

 private:
  void Replace(const std::vector<cloud::Node>& nodes);
  void Apply(const cloud::WatchEvent<cloud::Node>& event);
  void Publish();

  MembershipIndex* index_;
  const std::string pool_label_;
  std::map<std::string, std::string> pool_of_;  // node -> pool; owned by the reflector's thread
  cloud::Reflector<cloud::NodeInterface, cloud::NodeList> reflector_;
};

}  // namespace poolcoord::election
