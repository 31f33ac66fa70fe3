#include "store/object.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <ostream>
#include <stdexcept>

namespace poolcoord::store {
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

namespace {
// Keys on every DelegatedLease (election/lease_rules.h kPoolLabel,
// kDelegateAnnotation), and the apiVersion of every managedFields entry:
// 100,000 DelegatedLeases share one copy of each.
constexpr std::string_view kInternedKeys[] = {
    "coordination.pool/pool",
    "openyurt.io/delegate-heartbeat",
    "coordination.pool/v1alpha1",
};

bool KeyLess(const StringMap::value_type& item, std::string_view key) { return item.first < key; }
bool LessKey(std::string_view key, const StringMap::value_type& item) { return key < item.first; }
}  // namespace

MapKey::MapKey(std::string_view s) : data_(""), size_(0), owned_(false) {
  if (s.empty()) return;
  if (s.size() > std::numeric_limits<uint32_t>::max()) throw std::length_error("MapKey");
  size_ = static_cast<uint32_t>(s.size());
  for (std::string_view key : kInternedKeys) {
    if (s == key) {
      data_ = key.data();
      return;
    }
  }
  char* copy = new char[s.size()];
  std::memcpy(copy, s.data(), s.size());
  data_ = copy;
  owned_ = true;
}

std::ostream& operator<<(std::ostream& os, const MapKey& key) { return os << key.view(); }

StringMap::StringMap(std::initializer_list<value_type> init) { *this = init; }

StringMap::StringMap(const std::map<std::string, std::string>& m) {
  items_.reserve(m.size());
  for (const auto& [k, v] : m) items_.emplace_back(MapKey(k), v);
}

StringMap& StringMap::operator=(std::initializer_list<value_type> init) {
  // std::map's initializer list keeps the first of equal keys.
  items_.clear();
  items_.reserve(init.size());
  for (const auto& item : init) insert(item);
  return *this;
}

StringMap::operator std::map<std::string, std::string>() const {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : items_) out.emplace_hint(out.end(), k.str(), v);
  return out;
}

StringMap StringMap::FromUnsorted(std::vector<value_type> items) {
  // Stable, so that among equal keys the original order survives and the last
  // one can be kept.
  std::stable_sort(items.begin(), items.end(),
                   [](const value_type& a, const value_type& b) { return a.first < b.first; });
  StringMap out;
  out.items_.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (i + 1 < items.size() && items[i + 1].first == items[i].first) continue;
    out.items_.push_back(std::move(items[i]));
  }
  if (out.items_.capacity() != out.items_.size()) out.items_.shrink_to_fit();
  return out;
}

StringMap::iterator StringMap::lower_bound(std::string_view key) {
  return std::lower_bound(items_.begin(), items_.end(), key, KeyLess);
}
StringMap::const_iterator StringMap::lower_bound(std::string_view key) const {
  return std::lower_bound(items_.begin(), items_.end(), key, KeyLess);
}
StringMap::iterator StringMap::upper_bound(std::string_view key) {
  return std::upper_bound(items_.begin(), items_.end(), key, LessKey);
}
StringMap::const_iterator StringMap::upper_bound(std::string_view key) const {
  return std::upper_bound(items_.begin(), items_.end(), key, LessKey);
}

StringMap::iterator StringMap::find(std::string_view key) {
  auto it = lower_bound(key);
  return it != items_.end() && it->first == key ? it : items_.end();
}
StringMap::const_iterator StringMap::find(std::string_view key) const {
  auto it = lower_bound(key);
  return it != items_.end() && it->first == key ? it : items_.end();
}

std::string& StringMap::at(std::string_view key) {
  auto it = find(key);
  if (it == items_.end()) throw std::out_of_range("StringMap::at");
  return it->second;
}
const std::string& StringMap::at(std::string_view key) const {
  auto it = find(key);
  if (it == items_.end()) throw std::out_of_range("StringMap::at");
  return it->second;
}

std::string& StringMap::operator[](std::string_view key) { return try_emplace(key).first->second; }

std::pair<StringMap::iterator, bool> StringMap::insert(value_type item) {
  auto it = lower_bound(item.first);
  if (it != items_.end() && it->first == item.first) return {it, false};
  return {items_.insert(it, std::move(item)), true};
}

std::pair<StringMap::iterator, bool> StringMap::try_emplace(std::string_view key,
                                                            std::string value) {
  auto it = lower_bound(key);
  if (it != items_.end() && it->first == key) return {it, false};
  return {items_.insert(it, value_type(MapKey(key), std::move(value))), true};
}

std::pair<StringMap::iterator, bool> StringMap::insert_or_assign(std::string_view key,
                                                                 std::string value) {
  auto [it, inserted] = try_emplace(key);
  it->second = std::move(value);
  return {it, inserted};
}

StringMap::size_type StringMap::erase(std::string_view key) {
  auto it = find(key);
  if (it == items_.end()) return 0;
  items_.erase(it);
  return 1;
}

// ---------------------------------------------------------------- delegation fields

const DelegationFields& DelegationOf(const Object& object) {
  static const DelegationFields* const kEmpty = [] {
    auto* empty = new DelegationFields();
    intrusive_ptr_add_ref(empty);  // never freed
    return empty;
  }();
  return object.delegation ? *object.delegation : *kEmpty;
}

DelegationFields& MutableDelegation(Object& object) {
  // Every DelegationFields is created non-const here; one held by this object
  // alone may be changed in place.
  if (object.delegation && object.delegation->use_count() == 1) {
    return const_cast<DelegationFields&>(*object.delegation);
  }
  auto* fresh = object.delegation ? new DelegationFields(*object.delegation) : new DelegationFields();
  object.delegation.reset(fresh);
  return *fresh;
}

namespace {
void DropIfEmpty(Object& object) {
  if (object.delegation && object.delegation->empty()) object.delegation.reset();
}
}  // namespace

void CopyDelegationStatus(Object& to, const Object& from) {
  const DelegationFields& source = DelegationOf(from);
  if (!DelegationOf(to).HasStatus() && !source.HasStatus()) return;
  DelegationFields& target = MutableDelegation(to);
  target.accepted_proof = source.accepted_proof;
  target.challenges = source.challenges;
  DropIfEmpty(to);
}

void ClearDelegationStatus(Object& object) {
  if (!DelegationOf(object).HasStatus()) return;
  DelegationFields& d = MutableDelegation(object);
  d.accepted_proof.reset();
  d.challenges.clear();
  DropIfEmpty(object);
}

void ClearDelegationProof(Object& object) {
  if (!DelegationOf(object).proof) return;
  MutableDelegation(object).proof.reset();
  DropIfEmpty(object);
}

}  // namespace poolcoord::store
