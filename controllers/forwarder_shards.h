// Shares forwarding among the replicas of an etcd3-backed poolcoord
// (docs/forwarding.md "Several replicas"): nodes fall into `shards` shards
// (Forwarder::ShardOf), each owned through a coordination.k8s.io Lease
// `<name>-shard-<i>` in the cloud; a replica forwards the nodes of the shards it
// holds.
//
// Who should hold what. Each replica keeps a presence Lease
// `<name>-replica-<identity>` renewed, and lists the Leases of the namespace
// once per retry period: a presence Lease whose record changed within its
// leaseDurationSeconds, as measured on this replica's monotonic clock since it
// first saw that record (client-go's rule for expiry), is a live replica. Every
// replica computes the same assignment from the same live set (Assign: each
// shard to the replica ranked highest for it by a hash of both, none holding
// more than ceil(shards / replicas)), so a lone replica is assigned every shard
// and replicas that see each other split them evenly; a replica joining or
// leaving moves only some shards.
//
// How a shard moves. Every shard has a LeaderElector (client-go's semantics,
// election/leader_elector.h) on every replica; it takes its Lease only while
// the shard is assigned to this replica (LeaderElectionConfig::may_acquire),
// and otherwise keeps reading it, so expiry counts from its last observed
// change and a dead holder's shard is taken as soon as it expires. A holder
// renews every retry period and stops after renew deadline without success.
// A holder whose shard was assigned away first stops forwarding it
// (Forwarder::ReleaseShard returns once no sync of the shard runs), then
// releases the Lease (holder "", as client-go's ReleaseOnCancel); the new
// holder takes it at its next poll. Forwarding of a shard starts when its Lease
// is taken and stops before it is released or lost.
//
// Never two writers for one node: a replica writes for a node only while it
// holds the node's shard Lease; it stops writing when it releases it or when
// its renewals have failed for renew deadline, and another replica takes the
// Lease only after seeing its record unchanged for lease duration > renew
// deadline; a write in flight at that moment is bounded by the cloud client's
// request timeout, which must be below lease duration - renew deadline (the
// server checks it). Even then a late write cannot undo a newer one: every
// cloud Lease write is conditional on the resourceVersion read (409 otherwise).
//
// The longest a shard goes unforwarded when its holder dies: lease duration
// after its last renewal (its Lease expiring on the new holder's clock; the dead
// replica's presence, renewed alongside, expires then too, and the survey is
// timed for that moment, after which the shard's elector polls at once) plus
// request latency. With the defaults (15 s / 10 s / 2 s) and a renewal every
// 10 s, a delegated node's cloud Lease is at most about 27 s old: under a 40 s
// grace period.
//
// Thread-safety: Start/Stop from one thread; Step from one thread at a time
// (the coordinator's own once started); the rest from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "cloud/clientset.h"
#include "election/leader_elector.h"
#include "election/pool_lease_lock.h"

namespace poolcoord::controllers {

struct ForwarderShardsOptions {
  int shards = 8;
  std::string name = "poolcoord";  // Lease names "<name>-shard-<i>", "<name>-replica-<identity>"
  std::string identity;            // this replica's (unique among replicas)
  // client-go's defaults; --leader-elect-lease-duration/-renew-deadline/-retry-period.
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  // A presence Lease unchanged this many lease durations is deleted (a replica
  // that was killed leaves it behind).
  int stale_presence_durations = 20;
};

// What the shards control (Forwarder's AcquireShard/ReleaseShard).
struct ShardTarget {
  std::function<void(int)> acquire;
  std::function<void(int)> release;  // returns once no sync of the shard runs
};

class ForwarderShards {
 public:
  // `leases` (Leases of the namespace the shard Leases live in), `clock` and
  // `metrics` are not owned. InvalidArgument for bad timings (as
  // LeaderElector::New), shards < 1 or an empty identity.
  static absl::StatusOr<std::unique_ptr<ForwarderShards>> New(
      cloud::LeaseInterface* leases, const base::Clock* clock, base::MetricsRegistry* metrics,
      ForwarderShardsOptions options, ShardTarget target);
  ~ForwarderShards();
  ForwarderShards(const ForwarderShards&) = delete;
  ForwarderShards& operator=(const ForwarderShards&) = delete;

  // The shards `me` is assigned among `replicas` (any order; `me` counts as
  // live whether listed or not), the same on every replica for the same set.
  static std::vector<int> Assign(std::vector<std::string> replicas, const std::string& me,
                                 int shards);

  // Runs Step on a thread of its own. Stop stops forwarding every held shard,
  // releases its Lease and the presence Lease, and joins.
  void Start();
  void Stop();

  // One round of whatever is due now: the presence Lease's renewal, the list
  // of replicas and the assignment (once per retry period), each shard's
  // elector. Returns the monotonic µs of the next due step.
  int64_t Step();

  std::vector<int> Held() const;
  std::vector<int> Assigned() const;
  // False when a held shard's renewals have been failing for lease duration +
  // `tolerance` (client-go's HealthzAdaptor), for /livez.
  bool Healthy(absl::Duration tolerance) const;
  const std::string& identity() const { return options_.identity; }

 private:
  ForwarderShards(cloud::LeaseInterface* leases, const base::Clock* clock,
                  base::MetricsRegistry* metrics, ForwarderShardsOptions options,
                  ShardTarget target);
  absl::Status Init();
  void Survey();  // lists the replicas, recomputes the assignment
  void ReleaseAll();

  struct Seen {
    std::string record;     // holder, renewTime, duration: what changes on renewal
    int64_t changed_us = 0;  // our monotonic time of the first sight of `record`
    int32_t duration_s = 0;
    bool held = false;       // record names a holder
  };

  cloud::LeaseInterface* const leases_;
  const base::Clock* const clock_;
  base::MetricsRegistry* const metrics_;
  const ForwarderShardsOptions options_;
  const ShardTarget target_;

  // Step's thread only.
  std::string presence_name_;
  std::unique_ptr<election::ResourceLeaseLock> presence_lock_;
  std::unique_ptr<election::LeaderElector> presence_;
  std::vector<std::unique_ptr<election::ResourceLeaseLock>> locks_;
  std::vector<std::unique_ptr<election::LeaderElector>> electors_;
  std::map<std::string, Seen> seen_;  // presence Lease name -> what we saw
  int64_t next_survey_us_ = 0;
  // When the first live replica's presence expires (as observed), unless it
  // is renewed: the survey that would see it is brought forward to then.
  int64_t next_expiry_us_ = 0;

  mutable absl::Mutex mu_;
  std::vector<bool> assigned_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> held_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar wake_;
  std::thread thread_;
};

}  // namespace poolcoord::controllers
