// The pool's members, from the cloud's Nodes, kept on local disk.
//
// The node's pool is the value of --pool-label on its own Node; the members are
// the Nodes carrying the same value, each at its first InternalIP (an IPv4 one
// when it has several, as the heartbeat socket is IPv4 by default). The list is
// watched (cloud::Reflector: list, then watch, relist on 410, backoff while the
// cloud is out of reach) and written to <cache_dir>/peers.json on every change
// (a temporary file renamed over the old one), so an agent that starts while
// its node is cut off still knows its peers. Correctness never depends on that
// file: it only speeds up a cut-off start, and anything the cloud says replaces
// it.
//
// Thread-safety: Start/Stop from one thread; on_change runs on the reflector's
// thread (or the caller's, for LoadCache and Refresh).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/pool_view.h"
#include "cloud/clientset.h"
#include "cloud/reflector.h"

namespace poolcoord::agent {

struct PeerSourceOptions {
  std::string node;        // this node
  std::string pool_label;  // apps.openyurt.io/nodepool
  std::string cache_dir;   // "" = no cache
};

class PeerSource {
 public:
  using OnChange = std::function<void(std::shared_ptr<const PoolView>)>;

  // `nodes` is not owned and must outlive this object.
  PeerSource(cloud::NodeInterface* nodes, PeerSourceOptions options, OnChange on_change);
  ~PeerSource();

  // The pool as last written to the cache, for this node (NotFound when there is
  // none or it names another node; InvalidArgument when it is unreadable).
  absl::StatusOr<std::shared_ptr<const PoolView>> LoadCache() const;
  // This node's pool from its own Node (NotFound with a clear message when the
  // Node carries no pool label; the cloud's errors otherwise).
  absl::StatusOr<std::string> DiscoverPool();
  // Follows the members of `pool` until Stop().
  void Start(const std::string& pool);
  void Stop();

  // The view of `nodes` (the pool's members as listed) for `self`.
  static PoolView ViewOf(const std::string& pool, const std::string& self,
                         const std::vector<cloud::Node>& nodes);
  // The cache file's text for a view, and back.
  static std::string EncodeCache(const PoolView& view);
  static absl::StatusOr<PoolView> DecodeCache(const std::string& text);

 private:
  void Publish(PoolView view);
  void PublishCurrent();
  bool InPool(const cloud::Node& node) const;
  using NodeReflector = cloud::Reflector<cloud::NodeInterface, cloud::NodeList>;

  cloud::NodeInterface* const nodes_;
  const PeerSourceOptions options_;
  const OnChange on_change_;
  std::string pool_;
  std::map<std::string, cloud::Node> current_;  // reflector thread only
  std::unique_ptr<NodeReflector> reflector_;
  PoolView last_published_;
};

}  // namespace poolcoord::agent
