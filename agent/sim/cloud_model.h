// The cloud cluster as poolcoord-sim models it: the node Leases in
// kube-node-lease, the Nodes and the Events of a kube-apiserver, with its
// semantics for what poolcoord's forwarder, the modelled kubelets and the agents
// use:
// - one resourceVersion counter; a PUT whose resourceVersion is not the
//   object's is 409 Conflict, a POST of an existing name 409 AlreadyExists, a
//   GET of a missing object 404 NotFound, each with a metav1.Status body;
// - LIST with a labelSelector (key or key=value); a Node watch that stays quiet
//   (the Nodes do not change during a run) and ends after a while, as
//   kube-apiserver's watch timeout does;
// - a JSON merge patch of a Node's spec.taints with the resourceVersion
//   precondition (what the forwarder's taint uses).
// Two ways in, one state: the typed clients (NodeLeases(), Nodes(), Events():
// cloud/clientset.h's interfaces, in-process, for the deterministic
// simulation's server), and plain HTTP on 127.0.0.1 (Serve(), for a server
// process's --kubeconfig: the forwarder and the Node membership source). The
// modelled kubelets and the agents' reads of their own Lease call in directly.
//
// The verdict lives here: the node lifecycle controller takes a node's Lease
// as a sign of life only when its renewTime is later than the renewTime it
// counted last (`savedLease.Spec.RenewTime.Before(observedLease...)`), and
// dates it on its own clock when it sees it. LastChange() is the last such
// time on the clock's monotonic time, Changes() every one of them. So a
// renewal whose renewTime does not grow (a kubelet whose clock runs behind the
// forwarder's, taking its Lease back) keeps the node as old as it was.
//
// Thread-safety: everything is thread-safe (one mutex); the lease observer is
// called after it is released.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "cloud/clientset.h"
#include "cloud/types.h"

namespace poolcoord::sim {

class CloudModel {
 public:
  struct NodeSpec {
    std::string name;
    std::map<std::string, std::string> labels;
    std::string internal_ip;
  };

  // `clock` dates the signs of life (its monotonic time); nullptr: the
  // machine's (base::RealClock). Not owned.
  explicit CloudModel(std::vector<NodeSpec> nodes, const base::Clock* clock = nullptr);
  ~CloudModel();

  // Serves HTTP on 127.0.0.1:`port` (0: a free one) until Stop().
  absl::Status Serve(int port);
  void Stop();
  int port() const { return port_; }

  // The typed clients over this state (owned here): the Leases of
  // kube-node-lease (Watch unimplemented: see set_lease_observer), the Nodes
  // (a watch stays quiet until its control stops it) and Events (any
  // namespace). Each call is one request of the server's.
  cloud::LeaseInterface* NodeLeases() { return leases_client_.get(); }
  cloud::NodeInterface* Nodes() { return nodes_client_.get(); }
  cloud::EventInterface* Events() { return events_client_.get(); }

  // Called with every stored Lease (create, update, a kubelet's renewal):
  // what a watch of kube-node-lease would carry. Set before use.
  void set_lease_observer(std::function<void(const cloud::Lease&)> observer) {
    lease_observer_ = std::move(observer);
  }

  // The node's kubelet renews its Lease as the kubelet does: read it, write it
  // back (annotations kept) with holderIdentity, leaseDurationSeconds 40 and
  // renewTime = `renew_wall_us` (its own clock); create it when missing.
  void KubeletRenew(const std::string& node, int64_t renew_wall_us);
  absl::StatusOr<cloud::Lease> GetLease(const std::string& node);

  // When the node's Lease renewTime last changed (the clock's monotonic µs;
  // 0: never), and every change since the start.
  int64_t LastChange(const std::string& node);
  std::vector<int64_t> Changes(const std::string& node);
  // Writes by the server (its forwarder): counts.
  int64_t server_lease_writes() const { return server_lease_writes_.load(); }
  int64_t server_requests() const { return server_requests_.load(); }
  int64_t taints_set() const { return taint_patches_.load(); }
  int64_t events_created() const { return events_created_.load(); }
  // Lease writes whose renewTime did not grow past the last one counted.
  int64_t renewals_not_counted();

  // --- kube-apiserver's answers, typed (the HTTP server and the typed
  // clients both call these). Errors are cloud/errors.h's Kubernetes errors.
  absl::StatusOr<cloud::Lease> LeaseGet(const std::string& name);
  absl::StatusOr<cloud::LeaseList> LeaseList(const std::string& label_selector);
  absl::StatusOr<cloud::Lease> LeaseCreate(cloud::Lease lease);
  absl::StatusOr<cloud::Lease> LeaseUpdate(cloud::Lease lease);
  absl::StatusOr<cloud::Node> NodeGet(const std::string& name);
  absl::StatusOr<cloud::NodeList> NodeList(const std::string& label_selector);
  // A JSON merge patch of spec.taints, with metadata.resourceVersion as a
  // precondition when given.
  absl::StatusOr<cloud::Node> NodePatch(const std::string& name, const std::string& patch);

 private:
  struct Response {
    int status = 200;
    std::string body;
  };
  struct NodeState {
    NodeSpec spec;
    std::string resource_version;
    std::vector<cloud::Taint> taints;
  };
  class LeaseClient;
  class NodeClient;
  class EventClient;

  Response Handle(const std::string& method, const std::string& target, const std::string& body);
  Response HandleLeases(const std::string& method, const std::string& name, const std::string& query,
                        const std::string& body);
  Response HandleNodes(const std::string& method, const std::string& name, const std::string& query,
                       const std::string& body);
  void Connection(int fd);
  void AcceptLoop();
  // Dates `written`'s renewTime on the cloud's clock when it differs from the
  // `stored` one (nullptr: a create), in whole seconds, as kube-apiserver's
  // managedFields time does (cloud::Lease::renew_time_written_us).
  void DateRenewTimeLocked(const cloud::Lease* stored, cloud::Lease* written)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A write stored `renew_time` into the node's Lease: a sign of life when it
  // is later than the last one counted.
  void RecordRenewLocked(const std::string& node, const std::optional<int64_t>& renew_time)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  cloud::Node NodeLocked(const NodeState& state) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Observe(const cloud::Lease& lease);

  const base::Clock* const clock_;
  absl::Mutex mu_;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 1000;
  std::map<std::string, cloud::Lease> leases_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, NodeState> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<int64_t>> changes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> counted_renew_time_ ABSL_GUARDED_BY(mu_);  // wall µs
  int64_t renewals_not_counted_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> server_lease_writes_{0}, server_requests_{0}, taint_patches_{0},
      events_created_{0};
  std::function<void(const cloud::Lease&)> lease_observer_;
  std::unique_ptr<cloud::LeaseInterface> leases_client_;
  std::unique_ptr<cloud::NodeInterface> nodes_client_;
  std::unique_ptr<cloud::EventInterface> events_client_;

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex conn_mu_;
  std::vector<std::thread> connections_ ABSL_GUARDED_BY(conn_mu_);
};

}  // namespace poolcoord::sim
