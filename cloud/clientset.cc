#include "cloud/clientset.h"

#include "absl/strings/str_cat.h"
#include "cloud/codec.h"
#include "cloud/errors.h"

namespace poolcoord::cloud {
namespace {

// Runs a watch over `rest`, decoding each line with `decode` and handing it on.
// An ERROR event (or an undecodable line) ends the watch with its error.
template <typename T, typename Decode>
absl::Status WatchLines(RestClient* rest, const std::string& path, const RequestOptions& o,
                        Decode decode, const WatchHandler<T>& handler,
                        base::StreamControl* control) {
  absl::Status failure;
  absl::Status s = rest->Watch(
      path,
      [&](std::string_view line) {
        absl::StatusOr<WatchEvent<T>> ev = decode(line);
        if (!ev.ok()) {
          failure = ev.status();
          return false;
        }
        return handler(*ev);
      },
      control, o);
  if (!failure.ok()) return failure;
  return s;
}

// One request whose 2xx body is decoded with `decode`.
template <typename Decode>
auto Call(absl::StatusOr<std::string> body, Decode decode) -> decltype(decode(std::string_view())) {
  if (!body.ok()) return body.status();
  return decode(*body);
}

class LeaseClient : public LeaseInterface {
 public:
  LeaseClient(RestClient* rest, LeaseResource resource, RequestOptions o)
      : rest_(rest), resource_(std::move(resource)), options_(std::move(o)) {}

  absl::StatusOr<Lease> Get(const std::string& name) override {
    return Call(rest_->Get(absl::StrCat(resource_.collection_path, "/", name), options_),
                DecodeLease);
  }
  absl::StatusOr<Lease> GetFromCache(const std::string& name) override {
    return Call(rest_->Get(absl::StrCat(resource_.collection_path, "/", name, "?resourceVersion=0"),
                           options_),
                DecodeLease);
  }
  absl::StatusOr<LeaseList> List(const ListOptions& options) override {
    return Call(
        rest_->Get(absl::StrCat(resource_.collection_path, ListQuery(options, false)), options_),
        DecodeLeaseList);
  }
  absl::StatusOr<Lease> Create(const Lease& lease) override {
    return Call(rest_->Post(resource_.collection_path,
                            EncodeLease(lease, resource_.api_version, resource_.kind), options_),
                DecodeLease);
  }
  absl::StatusOr<Lease> Update(const Lease& lease) override {
    return Call(rest_->Put(absl::StrCat(resource_.collection_path, "/", lease.metadata.name),
                           EncodeLease(lease, resource_.api_version, resource_.kind), options_),
                DecodeLease);
  }
  absl::Status Delete(const std::string& name) override {
    return rest_->Delete(absl::StrCat(resource_.collection_path, "/", name), options_).status();
  }
  absl::Status Watch(const ListOptions& options, const WatchHandler<Lease>& handler,
                     base::StreamControl* control) override {
    return WatchLines<Lease>(rest_, absl::StrCat(resource_.collection_path, ListQuery(options, true)),
                             options_, DecodeLeaseWatchEvent, handler, control);
  }

 private:
  RestClient* const rest_;
  const LeaseResource resource_;
  const RequestOptions options_;
};

class NodeClient : public NodeInterface {
 public:
  NodeClient(RestClient* rest, RequestOptions o) : rest_(rest), options_(std::move(o)) {}

  absl::StatusOr<Node> Get(const std::string& name) override {
    return Call(rest_->Get(absl::StrCat(kPath, "/", name), options_), DecodeNode);
  }
  absl::StatusOr<NodeList> List(const ListOptions& options) override {
    return Call(rest_->Get(absl::StrCat(kPath, ListQuery(options, false)), options_),
                DecodeNodeList);
  }
  absl::Status Watch(const ListOptions& options, const WatchHandler<Node>& handler,
                     base::StreamControl* control) override {
    return WatchLines<Node>(rest_, absl::StrCat(kPath, ListQuery(options, true)), options_,
                            DecodeNodeWatchEvent, handler, control);
  }
  absl::StatusOr<Node> Patch(const std::string& name, std::string_view patch_type,
                             const std::string& patch) override {
    return Call(rest_->Patch(absl::StrCat(kPath, "/", name), patch_type, patch, options_),
                DecodeNode);
  }

 private:
  static constexpr char kPath[] = "/api/v1/nodes";
  RestClient* const rest_;
  const RequestOptions options_;
};

class EventClient : public EventInterface {
 public:
  EventClient(RestClient* rest, std::string ns, RequestOptions o)
      : rest_(rest),
        path_(absl::StrCat("/api/v1/namespaces/", ns, "/events")),
        options_(std::move(o)) {}

  absl::StatusOr<Event> Create(const Event& event) override {
    return Call(rest_->Post(path_, EncodeEvent(event), options_), DecodeEvent);
  }

 private:
  RestClient* const rest_;
  const std::string path_;
  const RequestOptions options_;
};

class DelegatedLeaseClient : public DelegatedLeaseInterface {
 public:
  DelegatedLeaseClient(RestClient* rest, RequestOptions o) : rest_(rest), options_(std::move(o)) {}

  absl::StatusOr<DelegatedLease> Get(const std::string& name) override {
    return Call(rest_->Get(absl::StrCat(kDelegatedLeasesPath, "/", name), options_),
                DecodeDelegatedLease);
  }
  absl::StatusOr<DelegatedLeaseList> List(const ListOptions& options) override {
    return Call(rest_->Get(absl::StrCat(kDelegatedLeasesPath, ListQuery(options, false)), options_),
                DecodeDelegatedLeaseList);
  }

 private:
  RestClient* const rest_;
  const RequestOptions options_;
};

class TokenReviewClient : public TokenReviewInterface {
 public:
  TokenReviewClient(RestClient* rest, RequestOptions o) : rest_(rest), options_(std::move(o)) {}
  absl::StatusOr<TokenReview> Create(const TokenReview& review) override {
    return Call(rest_->Post("/apis/authentication.k8s.io/v1/tokenreviews",
                            EncodeTokenReview(review), options_),
                DecodeTokenReview);
  }

 private:
  RestClient* const rest_;
  const RequestOptions options_;
};

class SubjectAccessReviewClient : public SubjectAccessReviewInterface {
 public:
  SubjectAccessReviewClient(RestClient* rest, RequestOptions o)
      : rest_(rest), options_(std::move(o)) {}
  absl::StatusOr<SubjectAccessReview> Create(const SubjectAccessReview& review) override {
    return Call(rest_->Post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                            EncodeSubjectAccessReview(review), options_),
                DecodeSubjectAccessReview);
  }

 private:
  RestClient* const rest_;
  const RequestOptions options_;
};

class ConfigMapClient : public ConfigMapInterface {
 public:
  ConfigMapClient(RestClient* rest, std::string ns, RequestOptions o)
      : rest_(rest),
        path_(absl::StrCat("/api/v1/namespaces/", ns, "/configmaps")),
        options_(std::move(o)) {}

  absl::StatusOr<ConfigMap> Get(const std::string& name) override {
    return Call(rest_->Get(absl::StrCat(path_, "/", name), options_), DecodeConfigMap);
  }
  absl::StatusOr<ConfigMapList> List(const ListOptions& options) override {
    return Call(rest_->Get(absl::StrCat(path_, ListQuery(options, false)), options_),
                DecodeConfigMapList);
  }
  absl::Status Watch(const ListOptions& options, const WatchHandler<ConfigMap>& handler,
                     base::StreamControl* control) override {
    return WatchLines<ConfigMap>(rest_, absl::StrCat(path_, ListQuery(options, true)), options_,
                                 DecodeConfigMapWatchEvent, handler, control);
  }

 private:
  RestClient* const rest_;
  const std::string path_;
  const RequestOptions options_;
};

}  // namespace

LeaseResource CoordinationLeases(const std::string& ns) {
  return {absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", ns, "/leases"),
          "coordination.k8s.io/v1", "Lease"};
}

LeaseResource PoolLeases() {
  return {"/apis/coordination.pool/v1alpha1/poolleases", "coordination.pool/v1alpha1", "PoolLease"};
}

Clientset::Clientset(RestClient* rest, RequestOptions options)
    : rest_(rest), options_(std::move(options)) {}

Clientset::~Clientset() = default;

template <typename T, typename Make>
T* Clientset::Cached(const std::string& key, Make make) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<void>& slot = clients_[key];
  if (!slot) slot = std::shared_ptr<T>(make());
  return static_cast<T*>(slot.get());
}

LeaseInterface* Clientset::Leases(const std::string& ns) {
  return LeaseShaped(CoordinationLeases(ns));
}

LeaseInterface* Clientset::LeaseShaped(const LeaseResource& resource) {
  return Cached<LeaseInterface>(absl::StrCat("leases:", resource.collection_path),
                                [&] { return new LeaseClient(rest_, resource, options_); });
}

DelegatedLeaseInterface* Clientset::DelegatedLeases() {
  return Cached<DelegatedLeaseInterface>("delegatedleases",
                                         [&] { return new DelegatedLeaseClient(rest_, options_); });
}

NodeInterface* Clientset::Nodes() {
  return Cached<NodeInterface>("nodes", [&] { return new NodeClient(rest_, options_); });
}

EventInterface* Clientset::Events(const std::string& ns) {
  return Cached<EventInterface>(absl::StrCat("events:", ns),
                                [&] { return new EventClient(rest_, ns, options_); });
}

TokenReviewInterface* Clientset::TokenReviews() {
  return Cached<TokenReviewInterface>("tokenreviews",
                                      [&] { return new TokenReviewClient(rest_, options_); });
}

SubjectAccessReviewInterface* Clientset::SubjectAccessReviews() {
  return Cached<SubjectAccessReviewInterface>(
      "subjectaccessreviews", [&] { return new SubjectAccessReviewClient(rest_, options_); });
}

ConfigMapInterface* Clientset::ConfigMaps(const std::string& ns) {
  return Cached<ConfigMapInterface>(absl::StrCat("configmaps:", ns),
                                    [&] { return new ConfigMapClient(rest_, ns, options_); });
}

}  // namespace poolcoord::cloud
