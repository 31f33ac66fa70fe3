// Typed clients of the cloud cluster, as client-go's typed clientsets: one
// interface per resource, each returning StatusOr<T> with Kubernetes errors
// (cloud/errors.h: IsNotFound, IsConflict, ...) instead of HTTP codes. Callers
// take the interfaces, so tests hand them fakes; Clientset builds the real ones
// over one RestClient.
//
//   ASSIGN_OR_RETURN(auto rest, RestClient::New(config));
//   Clientset cs(rest.get());
//   ASSIGN_OR_RETURN(Lease l, cs.Leases("kube-node-lease")->Get("n1"));
//   l.spec.renew_time_us = now;
//   absl::StatusOr<Lease> written = cs.Leases("kube-node-lease")->Update(l);
//   if (IsConflict(written.status())) { ... re-read and retry ... }
//
// Thread-safety: the real clients are thread-safe (they hold no state of their
// own); fakes say for themselves.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/http_transport.h"
#include "cloud/rest_client.h"
#include "cloud/types.h"

namespace poolcoord::cloud {

// Called for each event of a watch; return false to end the watch (OK).
template <typename T>
using WatchHandler = std::function<bool(const WatchEvent<T>&)>;

// A Lease-shaped resource: coordination.k8s.io/v1 Leases of one namespace, or
// poolcoord's own PoolLeases (cluster-scoped, same spec).
class LeaseInterface {
 public:
  virtual ~LeaseInterface() = default;
  virtual absl::StatusOr<Lease> Get(const std::string& name) = 0;
  // A GET with resourceVersion=0: kube-apiserver answers from its watch cache,
  // without a read from etcd, maybe a little behind. For a caller whose next
  // write is conditional on the resourceVersion it read (a stale read costs a
  // 409). Defaults to Get.
  virtual absl::StatusOr<Lease> GetFromCache(const std::string& name) { return Get(name); }
  virtual absl::StatusOr<LeaseList> List(const ListOptions& options) = 0;
  // AlreadyExists when the name is taken.
  virtual absl::StatusOr<Lease> Create(const Lease& lease) = 0;
  // A PUT of the whole object; metadata.resource_version is the precondition
  // (Conflict when the object changed since).
  virtual absl::StatusOr<Lease> Update(const Lease& lease) = 0;
  // NotFound when absent.
  virtual absl::Status Delete(const std::string& name) = 0;
  // Streams events as NodeInterface::Watch does (IsResourceExpired: relist).
  virtual absl::Status Watch(const ListOptions& options, const WatchHandler<Lease>& handler,
                             base::StreamControl* control) = 0;
};

// poolcoord's DelegatedLeases (coordination.pool/v1alpha1, cluster-scoped),
// read side: kubectl pool lists them; writers add what they need.
class DelegatedLeaseInterface {
 public:
  virtual ~DelegatedLeaseInterface() = default;
  virtual absl::StatusOr<DelegatedLease> Get(const std::string& name) = 0;
  // options.field_selector may be "spec.poolName=<pool>" (the server supports it).
  virtual absl::StatusOr<DelegatedLeaseList> List(const ListOptions& options) = 0;
};

// core/v1 Nodes (cluster-scoped).
class NodeInterface {
 public:
  virtual ~NodeInterface() = default;
  virtual absl::StatusOr<Node> Get(const std::string& name) = 0;
  virtual absl::StatusOr<NodeList> List(const ListOptions& options) = 0;
  // Streams events from options.resource_version until the server ends the
  // watch, `handler` returns false or control->Stop(): OK. IsResourceExpired
  // when the resourceVersion is too old (relist).
  virtual absl::Status Watch(const ListOptions& options, const WatchHandler<Node>& handler,
                             base::StreamControl* control) = 0;
  // `patch_type`: kMergePatch, kJsonPatch or kStrategicMergePatch (rest_client.h).
  // A merge patch that carries metadata.resourceVersion fails with Conflict
  // when the Node changed since (kube-apiserver checks it as a precondition).
  virtual absl::StatusOr<Node> Patch(const std::string& name, std::string_view patch_type,
                                     const std::string& patch) = 0;
};

// core/v1 Events of one namespace.
class EventInterface {
 public:
  virtual ~EventInterface() = default;
  virtual absl::StatusOr<Event> Create(const Event& event) = 0;
};

// authentication.k8s.io/v1 TokenReviews (create only).
class TokenReviewInterface {
 public:
  virtual ~TokenReviewInterface() = default;
  // The review with its status filled in by the server.
  virtual absl::StatusOr<TokenReview> Create(const TokenReview& review) = 0;
};

// authorization.k8s.io/v1 SubjectAccessReviews (create only).
class SubjectAccessReviewInterface {
 public:
  virtual ~SubjectAccessReviewInterface() = default;
  virtual absl::StatusOr<SubjectAccessReview> Create(const SubjectAccessReview& review) = 0;
};

// core/v1 ConfigMaps of one namespace (read side).
class ConfigMapInterface {
 public:
  virtual ~ConfigMapInterface() = default;
  virtual absl::StatusOr<ConfigMap> Get(const std::string& name) = 0;
  virtual absl::StatusOr<ConfigMapList> List(const ListOptions& options) = 0;
  virtual absl::Status Watch(const ListOptions& options, const WatchHandler<ConfigMap>& handler,
                             base::StreamControl* control) = 0;
};

// Where a Lease-shaped resource lives.
struct LeaseResource {
  std::string collection_path;  // "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
  std::string api_version;      // "coordination.k8s.io/v1"
  std::string kind;             // "Lease"
};
LeaseResource CoordinationLeases(const std::string& ns);
LeaseResource PoolLeases();  // poolcoord's coordination.pool/v1alpha1 PoolLeases
inline constexpr char kDelegatedLeasesPath[] = "/apis/coordination.pool/v1alpha1/delegatedleases";

// The real clients, created on first use and owned here. `rest` is not owned
// and must outlive the Clientset. Thread-safe.
class Clientset {
 public:
  explicit Clientset(RestClient* rest, RequestOptions options = {});
  ~Clientset();

  LeaseInterface* Leases(const std::string& ns);
  // Any Lease-shaped resource (PoolLeases).
  LeaseInterface* LeaseShaped(const LeaseResource& resource);
  DelegatedLeaseInterface* DelegatedLeases();
  NodeInterface* Nodes();
  EventInterface* Events(const std::string& ns);
  TokenReviewInterface* TokenReviews();
  SubjectAccessReviewInterface* SubjectAccessReviews();
  ConfigMapInterface* ConfigMaps(const std::string& ns);

  RestClient* rest() const { return rest_; }

 private:
  template <typename T, typename Make>
  T* Cached(const std::string& key, Make make);

  RestClient* const rest_;
  const RequestOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<void>> clients_ ABSL_GUARDED_BY(mu_);
};

}  // namespace poolcoord::cloud
