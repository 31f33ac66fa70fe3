// Feeds a MembershipIndex from the cloud cluster's Nodes: a node belongs to the
// pool named by its --pool-label (default OpenYurt's apps.openyurt.io/nodepool).
//
// List+watch as client-go's reflector does: list, watch from the list's
// resourceVersion, reconnect with backoff (0.5 s doubling to 30 s) when the
// stream ends or fails, and relist on 410 Expired. Each change replaces the
// index's "nodes" source content. A kubelet may relabel its own Node unless the
// label is under node-restriction.kubernetes.io/ — see the README.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "election/membership.h"
#include "store/kube_client.h"

namespace poolcoord::election {

class NodeMembershipSource {
 public:
  // Neither pointer owned; both must outlive this object.
  NodeMembershipSource(store::KubeClient* cloud, MembershipIndex* index, std::string pool_label);
  ~NodeMembershipSource();

  // Starts the list+watch loop on a thread of its own.
  void Start();
  // Stops and joins; idempotent.
  void Stop();
  // One list: replaces the index content. Returns the list's resourceVersion.
  absl::StatusOr<std::string> ListOnce();

 private:
  void Run();
  // Applies one watch line; returns false on an ERROR event (relist needed).
  bool ApplyEvent(std::string_view line, std::string* resource_version);
  void Publish();

  store::KubeClient* cloud_;
  MembershipIndex* index_;
  const std::string pool_label_;
  std::atomic<bool> stopping_{false};
  std::map<std::string, std::string> pool_of_;  // node -> pool; owned by the loop thread
  std::thread thread_;
};

}  // namespace poolcoord::election
