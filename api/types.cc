#include "api/types.h"

#include <array>
#include <atomic>
#include <mutex>

namespace poolcoord::api {
namespace {

constexpr ResourceInfo kPoolLeaseInfo{
    Kind::kPoolLease, "poolleases", "poollease", "PoolLease", "pl",
    kSpecHolderIdentity | kSpecLeaseDurationSeconds | kSpecAcquireTime | kSpecRenewTime |
        kSpecLeaseTransitions,
    "LeaseSpec", "PoolLeaseStatus"};
constexpr ResourceInfo kDelegatedLeaseInfo{
    Kind::kDelegatedLease, "delegatedleases", "delegatedlease", "DelegatedLease", "dl",
    kSpecHolderIdentity | kSpecLeaseDurationSeconds | kSpecRenewTime | kSpecPoolName |
        kSpecDelegate | kSpecProof,
    "DelegatedLeaseSpec", "DelegatedLeaseStatus"};

// Indexed by Kind. Slots past the built-in kinds are written once, by
// RegisterResource, while readers may run: hence atomics.
std::array<std::atomic<const ResourceInfo*>, kMaxKinds>& Infos() {
  static std::array<std::atomic<const ResourceInfo*>, kMaxKinds> infos{&kPoolLeaseInfo,
                                                                        &kDelegatedLeaseInfo};
  return infos;
}

}  // namespace

const ResourceInfo& InfoFor(Kind kind) {
  return *Infos()[static_cast<size_t>(kind)].load(std::memory_order_acquire);
}

const ResourceInfo* InfoForPlural(std::string_view plural) {
  for (const auto& slot : Infos()) {
    const ResourceInfo* info = slot.load(std::memory_order_acquire);
    if (info != nullptr && plural == info->plural) return info;
  }
  return nullptr;
}

std::vector<Kind> KnownKinds() {
  std::vector<Kind> kinds;
  for (const auto& slot : Infos()) {
    if (const ResourceInfo* info = slot.load(std::memory_order_acquire)) kinds.push_back(info->kind);
  }
  return kinds;
}

bool RegisterResource(const ResourceInfo* info) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const auto index = static_cast<size_t>(info->kind);
  if (index >= kMaxKinds) return false;
  const ResourceInfo* taken = Infos()[index].load(std::memory_order_acquire);
  if (taken == info) return true;
  if (taken != nullptr || InfoForPlural(info->plural) != nullptr) return false;
  Infos()[index].store(info, std::memory_order_release);
  return true;
}

uint32_t SpecFieldBit(std::string_view field) {
  static constexpr std::pair<std::string_view, uint32_t> kBits[] = {
      {"holderIdentity", kSpecHolderIdentity}, {"leaseDurationSeconds", kSpecLeaseDurationSeconds},
      {"acquireTime", kSpecAcquireTime},       {"renewTime", kSpecRenewTime},
      {"leaseTransitions", kSpecLeaseTransitions}, {"poolName", kSpecPoolName},
      {"delegate", kSpecDelegate},             {"proof", kSpecProof}};
  for (const auto& [name, bit] : kBits) {
    if (field == name) return bit;
  }
  return 0;
}

uint32_t ChangedSpecFields(const LeaseSpec& a, const LeaseSpec& b, bool* removed) {
  uint32_t changed = 0;
  auto diff = [&](const auto& x, const auto& y, uint32_t bit) {
    if (x == y) return;
    changed |= bit;
    if (x && !y) *removed = true;
  };
  diff(a.holder_identity, b.holder_identity, kSpecHolderIdentity);
  diff(a.lease_duration_seconds, b.lease_duration_seconds, kSpecLeaseDurationSeconds);
  diff(a.acquire_time_us, b.acquire_time_us, kSpecAcquireTime);
  diff(a.renew_time_us, b.renew_time_us, kSpecRenewTime);
  diff(a.lease_transitions, b.lease_transitions, kSpecLeaseTransitions);
  diff(a.pool_name, b.pool_name, kSpecPoolName);
  diff(a.delegate, b.delegate, kSpecDelegate);
  return changed;
}

int64_t RenewalTime(const LeaseStatus& status) { return status.observed_time_us.value_or(0); }

void CopyStatus(DelegationFields& to, const DelegationFields& from) {
  to.accepted_proof = from.accepted_proof;
  to.challenges = from.challenges;
}

void ClearStatus(DelegationFields& fields) {
  fields.accepted_proof.reset();
  fields.challenges.clear();
}

void ClearProof(DelegationFields& fields) { fields.proof.reset(); }

bool SameStatus(const DelegationFields& a, const DelegationFields& b) {
  return a.accepted_proof == b.accepted_proof && a.challenges == b.challenges;
}

size_t ApproximateBytes(const LeaseSpec& spec, const DelegationFields& d) {
  size_t n = 0;
  for (const auto* text : {&spec.holder_identity, &spec.pool_name, &spec.delegate}) {
    if (*text) n += (*text)->size();
  }
  if (d.proof) n += d.proof->heartbeat.size() + d.proof->certificate.size();
  if (d.accepted_proof) n += d.accepted_proof->boot_id.size() + d.accepted_proof->challenge.size();
  for (const DelegationChallenge& c : d.challenges) n += c.value.size();
  return n;
}

}  // namespace poolcoord::api
