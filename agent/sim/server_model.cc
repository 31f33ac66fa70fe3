#include "agent/sim/server_model.h"

#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cloud/errors.h"
#include "store/api_error.h"
#include "store/memory_store.h"
#include "store/object_codec.h"

namespace poolcoord::sim {

absl::Status AsClientError(const absl::Status& server_error) {
  if (server_error.ok()) return server_error;
  const store::ApiErrorInfo info = store::ApiErrorFromStatus(server_error);
  std::vector<cloud::StatusCause> causes;
  for (const store::FieldCause& c : info.causes) causes.push_back({c.type, c.message, c.field});
  return cloud::ApiError(info.code, info.reason, info.message, causes);
}

base::UserInfo NodeUser(const std::string& node) {
  return {"system:node:" + node, "", {"system:nodes", "system:authenticated"}, {}};
}

namespace {

// A store the model uses but does not own: everything passes through but
// Shutdown, which would close what the next model on it still uses.
class Borrowed : public store::Store {
 public:
  explicit Borrowed(std::shared_ptr<store::Store> below) : below_(std::move(below)) {}
  absl::StatusOr<store::ObjectPtr> Get(store::Kind kind, std::string_view name) override {
    return below_->Get(kind, name);
  }
  absl::StatusOr<store::ObjectPtr> GetWithFreshness(store::Kind kind, std::string_view name,
                                                    const store::Freshness& freshness) override {
    return below_->GetWithFreshness(kind, name, freshness);
  }
  absl::StatusOr<std::vector<store::ObjectPtr>> GetAll(std::span<const store::ObjectKey> keys) override {
    return below_->GetAll(keys);
  }
  absl::StatusOr<store::ListResult> List(store::Kind kind, const store::ListOptions& options) override {
    return below_->List(kind, options);
  }
  absl::StatusOr<store::WriteResult> Update(store::Kind kind, std::string_view name,
                                            const store::UpdateFn& fn, bool dry_run) override {
    return below_->Update(kind, name, fn, dry_run);
  }
  absl::StatusOr<std::unique_ptr<store::Watcher>> Watch(store::Kind kind, int64_t from_revision) override {
    return below_->Watch(kind, from_revision);
  }
  int64_t CurrentRevision() override { return below_->CurrentRevision(); }
  int64_t OldestWatchableRevision() override { return below_->OldestWatchableRevision(); }
  void Shutdown() override {}

 private:
  std::shared_ptr<store::Store> below_;
};

}  // namespace

ServerModel::ServerModel(ServerModelOptions options) : options_(std::move(options)) {}

ServerModel::~ServerModel() {
  if (cache_) cache_->Shutdown();
}

absl::StatusOr<std::unique_ptr<ServerModel>> ServerModel::Start(ServerModelOptions options) {
  if (options.clock == nullptr) return absl::InvalidArgumentError("ServerModel needs a clock");
  auto m = std::unique_ptr<ServerModel>(new ServerModel(std::move(options)));
  const ServerModelOptions& o = m->options_;
  if (absl::Status s = m->membership_.Replace("file", o.pools); !s.ok()) return s;
  std::unique_ptr<store::Store> below;
  if (o.store != nullptr) {
    below = std::make_unique<Borrowed>(o.store);
  } else {
    store::MemoryStoreOptions memory;
    memory.clock = o.clock;
    below = store::NewMemoryStore(memory);
  }
  auto cache = store::NewDrivenCacher(std::move(below), {});
  if (!cache.ok()) return cache.status();
  m->cache_ = *std::move(cache);
  m->proofs_ = std::make_unique<election::DelegationProofs>(o.clock, o.proofs, &m->registry_);
  m->proofs_->SetClientCa(o.client_ca);
  election::LeaseRulesOptions rules;
  rules.max_lease_duration_seconds = o.max_lease_duration_seconds;
  rules.delegation_proofs = m->proofs_.get();
  m->rules_ = std::make_unique<election::LeaseRules>(o.clock, &m->membership_, rules);
  m->gc_ = std::make_unique<controllers::DelegatedLeaseGc>(m->cache_.get(), m->rules_.get(),
                                                           o.gc_period);
  if (o.cloud.node_leases != nullptr) {
    m->forwarder_ = std::make_unique<controllers::Forwarder>(
        m->cache_.get(), m->rules_.get(), o.cloud, o.clock, &m->registry_, o.forwarder);
    if (absl::Status s = m->forwarder_->Prime(); !s.ok()) return s;
  }
  return m;
}

std::string ServerModel::NewUid() {
  unsigned char b[16];
  if (options_.random_bytes) {
    options_.random_bytes(b, sizeof(b));
  } else if (options_.proofs.random_bytes) {
    options_.proofs.random_bytes(b, sizeof(b));
  } else {
    const uint64_t n = ++uid_counter_;
    for (size_t i = 0; i < sizeof(b); ++i) b[i] = static_cast<unsigned char>(n >> (8 * (i % 8)));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // a version-4 UUID's shape
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char out[37];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

absl::StatusOr<std::string> ServerModel::Get(store::Kind kind, const std::string& name) {
  absl::StatusOr<store::ObjectPtr> got = cache_->Get(kind, name);
  if (!got.ok()) return AsClientError(got.status());
  return store::EncodeObject(**got);
}

namespace {

// The delegation proof's signature, off the store's step, as the
// DelegatedLease strategy's Precheck runs it.
void Precheck(election::DelegationProofs* proofs, const base::UserInfo& user,
              const store::Object& proposed) {
  if (proofs == nullptr || user.IsMaster()) return;
  const auto& proof = store::DelegationOf(proposed).proof;
  if (proof) proofs->Precheck(*proof, proposed.metadata.name);
}

}  // namespace

absl::Status ServerModel::AdmitWrite(const base::UserInfo& user, store::Kind kind,
                                     const store::ObjectPtr& current, store::Object& proposed,
                                     store::TxnReader& reader) const {
  if (kind == store::Kind::kPoolLease) return rules_->AdmitPoolLeaseWrite(user, current, proposed);
  if (absl::Status s = rules_->CheckDelegatedLeaseWriter(user, proposed.metadata.name); !s.ok()) {
    return s;
  }
  return rules_->AdmitDelegatedLeaseWrite(user, current, proposed, reader);
}

absl::StatusOr<store::WriteResult> ServerModel::UpdateExisting(store::Kind kind,
                                                              const std::string& name,
                                                              const store::UpdateFn& fn) {
  return cache_->Update(kind, name,
                        [&](const store::ObjectPtr& current,
                            store::TxnReader& reader) -> absl::StatusOr<store::MutableObjectPtr> {
                          if (!current) return store::NotFoundError(store::InfoFor(kind).plural, name);
                          return fn(current, reader);
                        });
}

absl::StatusOr<std::string> ServerModel::Create(const base::UserInfo& user, store::Kind kind,
                                                std::string_view body) {
  absl::StatusOr<store::MutableObjectPtr> decoded = store::DecodeObjectJson(body, kind, nullptr);
  if (!decoded.ok()) return AsClientError(decoded.status());
  store::Object& obj = **decoded;
  // Server metadata, as the generic store's PrepareCreate; status is the
  // server's (the lease kinds' PrepareForCreate).
  obj.metadata.resource_version = 0;
  obj.metadata.uid = NewUid();
  obj.metadata.creation_timestamp = options_.clock->NowMicros() / 1'000'000;
  obj.metadata.generation = 1;
  obj.status = store::LeaseStatus{};
  store::ClearDelegationStatus(obj);
  obj.observed_monotonic_us = 0;
  if (kind == store::Kind::kDelegatedLease) Precheck(proofs_.get(), user, obj);
  const std::string name = obj.metadata.name;
  auto result = cache_->Update(
      kind, name,
      [&](const store::ObjectPtr& current,
          store::TxnReader& reader) -> absl::StatusOr<store::MutableObjectPtr> {
        if (current) return store::AlreadyExistsError(store::InfoFor(kind).plural, name);
        auto next = std::make_shared<store::Object>(obj);
        if (absl::Status s = AdmitWrite(user, kind, current, *next, reader); !s.ok()) return s;
        return next;
      });
  if (!result.ok()) return AsClientError(result.status());
  return store::EncodeObject(*result->object);
}

absl::StatusOr<std::string> ServerModel::Update(const base::UserInfo& user, store::Kind kind,
                                                const std::string& name, std::string_view body) {
  absl::StatusOr<store::MutableObjectPtr> decoded = store::DecodeObjectJson(body, kind, nullptr);
  if (!decoded.ok()) return AsClientError(decoded.status());
  store::MutableObjectPtr proposed = *std::move(decoded);
  if (proposed->metadata.name != name) {
    return AsClientError(store::BadRequestError(absl::StrCat(
        "the name of the object (", proposed->metadata.name, ") does not match the name on the URL (",
        name, ")")));
  }
  if (kind == store::Kind::kDelegatedLease) Precheck(proofs_.get(), user, *proposed);
  const store::ResourceInfo& info = store::InfoFor(kind);
  auto result = UpdateExisting(
      kind, name,
      [&](const store::ObjectPtr& current,
          store::TxnReader& reader) -> absl::StatusOr<store::MutableObjectPtr> {
        if (proposed->metadata.resource_version == 0) {
          return store::InvalidError(info.kind_name, name,
                                     {store::FieldInvalid("metadata.resourceVersion", "0x0",
                                                          "must be specified for an update")});
        }
        if (proposed->metadata.resource_version != current->metadata.resource_version) {
          return store::StaleResourceVersionError(info.plural, name);
        }
        if (!proposed->metadata.uid.empty() && proposed->metadata.uid != current->metadata.uid) {
          return store::ConflictError(info.plural, name,
                                      absl::StrCat("Precondition failed: UID in precondition: ",
                                                   proposed->metadata.uid, ", UID in object meta: ",
                                                   current->metadata.uid));
        }
        auto next = std::make_shared<store::Object>(*proposed);
        // Status stays as stored through the main resource (PrepareForUpdate).
        next->status = current->status;
        store::CopyDelegationStatus(*next, *current);
        next->observed_monotonic_us = current->observed_monotonic_us;
        // Server-owned metadata (rest.BeforeUpdate).
        next->metadata.uid = current->metadata.uid;
        next->metadata.creation_timestamp = current->metadata.creation_timestamp;
        next->metadata.generation =
            current->metadata.generation + (next->spec == current->spec ? 0 : 1);
        if (absl::Status s = AdmitWrite(user, kind, current, *next, reader); !s.ok()) return s;
        return next;
      });
  if (!result.ok()) return AsClientError(result.status());
  return store::EncodeObject(*result->object);
}

absl::Status ServerModel::Delete(const base::UserInfo& user, store::Kind kind,
                                 const std::string& name, const std::string& resource_version) {
  const store::ResourceInfo& info = store::InfoFor(kind);
  auto result = UpdateExisting(
      kind, name,
      [&](const store::ObjectPtr& current,
          store::TxnReader& reader) -> absl::StatusOr<store::MutableObjectPtr> {
        if (!resource_version.empty() &&
            resource_version != std::to_string(current->metadata.resource_version)) {
          return store::ConflictError(
              info.plural, name,
              absl::StrCat("Precondition failed: ResourceVersion in precondition: ", resource_version,
                           ", ResourceVersion in object meta: ", current->metadata.resource_version));
        }
        absl::Status admitted = kind == store::Kind::kPoolLease
                                    ? rules_->AdmitPoolLeaseDelete(user, *current)
                                    : rules_->AdmitDelegatedLeaseDelete(user, *current, reader);
        if (!admitted.ok()) return admitted;
        return store::MutableObjectPtr(nullptr);
      });
  return result.ok() ? absl::OkStatus() : AsClientError(result.status());
}

void ServerModel::Dispatch() {
  cache_->Dispatch();
  if (forwarder_) forwarder_->Pump();
}

int ServerModel::Forward() {
  if (!forwarder_) return 0;
  const int n = forwarder_->ProcessReady();
  forwarder_->FlushEvents();
  return n;
}

int64_t ServerModel::NextForwardDue() const {
  return forwarder_ ? forwarder_->NextDue() : std::numeric_limits<int64_t>::max();
}

void ServerModel::Resync() {
  if (forwarder_) forwarder_->Resync();
}

controllers::GcSweepResult ServerModel::SweepGc() { return gc_->SweepOnce(); }

void ServerModel::ObserveCloudLease(const cloud::WatchEvent<cloud::Lease>& event) {
  if (forwarder_) forwarder_->ObserveCloudLease(event);
}

}  // namespace poolcoord::sim
