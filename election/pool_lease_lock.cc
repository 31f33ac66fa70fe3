#include "election/pool_lease_lock.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "cloud/codec.h"

namespace poolcoord::election {

LeaderElectionRecord RecordOf(const cloud::Lease& lease) {
  LeaderElectionRecord r;
  r.holder_identity = lease.spec.holder_identity.value_or("");
  r.lease_duration_seconds = lease.spec.lease_duration_seconds.value_or(0);
  r.acquire_time_us = lease.spec.acquire_time_us.value_or(0);
  r.renew_time_us = lease.spec.renew_time_us.value_or(0);
  r.lease_transitions = lease.spec.lease_transitions.value_or(0);
  return r;
}

void SetRecord(const LeaderElectionRecord& record, cloud::Lease* lease) {
  lease->spec.holder_identity = record.holder_identity;
  lease->spec.lease_duration_seconds = record.lease_duration_seconds;
  lease->spec.acquire_time_us = record.acquire_time_us;
  lease->spec.renew_time_us = record.renew_time_us;
  lease->spec.lease_transitions = record.lease_transitions;
}

absl::StatusOr<VersionedRecord> ParseLeaseRecord(std::string_view json) {
  absl::StatusOr<cloud::Lease> lease = cloud::DecodeLease(json);
  if (!lease.ok()) return absl::InvalidArgumentError("lease object is not a JSON object");
  return VersionedRecord{RecordOf(*lease), lease->metadata.resource_version};
}

std::string EncodePoolLease(std::string_view base_json, const std::string& name,
                            const LeaderElectionRecord& record, const std::string& version) {
  cloud::Lease lease;
  if (!base_json.empty()) {
    if (absl::StatusOr<cloud::Lease> base = cloud::DecodeLease(base_json); base.ok()) lease = *base;
  }
  lease.metadata.name = name;
  lease.metadata.resource_version = version;
  SetRecord(record, &lease);
  const cloud::LeaseResource resource = cloud::PoolLeases();
  return cloud::EncodeLease(lease, resource.api_version, resource.kind);
}

ResourceLeaseLock::ResourceLeaseLock(cloud::LeaseInterface* leases, std::string describe,
                                     std::string name, std::string identity)
    : leases_(leases),
      describe_(std::move(describe)),
      name_(std::move(name)),
      identity_(std::move(identity)) {}

std::string ResourceLeaseLock::CurrentChallenge() const {
  absl::MutexLock lock(&mu_);
  return last_.delegation.challenges.empty() ? "" : last_.delegation.challenges.front().value;
}

std::vector<std::string> ResourceLeaseLock::Challenges() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& c : last_.delegation.challenges) out.push_back(c.value);
  return out;
}

std::string ResourceLeaseLock::Describe() const { return absl::StrCat(describe_, "/", name_); }

absl::StatusOr<VersionedRecord> ResourceLeaseLock::Get() {
  absl::StatusOr<cloud::Lease> lease = leases_->Get(name_);
  if (!lease.ok()) return lease.status();
  VersionedRecord out{RecordOf(*lease), lease->metadata.resource_version};
  absl::MutexLock lock(&mu_);
  last_ = *std::move(lease);
  return out;
}

absl::StatusOr<std::string> ResourceLeaseLock::Create(const LeaderElectionRecord& record) {
  cloud::Lease lease;
  lease.metadata.name = name_;
  SetRecord(record, &lease);
  absl::StatusOr<cloud::Lease> created = leases_->Create(lease);
  if (!created.ok()) return created.status();
  std::string version = created->metadata.resource_version;
  absl::MutexLock lock(&mu_);
  last_ = *std::move(created);
  return version;
}

absl::StatusOr<std::string> ResourceLeaseLock::Update(const LeaderElectionRecord& record,
                                                      const std::string& version) {
  cloud::Lease lease;
  {
    absl::MutexLock lock(&mu_);
    lease = last_;
  }
  lease.metadata.name = name_;
  lease.metadata.resource_version = version;
  SetRecord(record, &lease);
  absl::StatusOr<cloud::Lease> updated = leases_->Update(lease);
  if (!updated.ok()) return updated.status();
  std::string new_version = updated->metadata.resource_version;
  absl::MutexLock lock(&mu_);
  last_ = *std::move(updated);
  return new_version;
}

}  // namespace poolcoord::election
