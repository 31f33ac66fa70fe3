#include "store/object.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <ostream>
#include <stdexcept>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/synchronization/mutex.h"

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
// kDelegateAnnotation): 100,000 DelegatedLeases share one copy of each.
constexpr std::string_view kInternedKeys[] = {
    "coordination.pool/pool",
    "openyurt.io/delegate-heartbeat",
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

// ---------------------------------------------------------------- StringMap

namespace internal {
namespace {

using Items = std::vector<StringMap::value_type>;

// Maps larger than this stay with their objects (a kubectl
// last-applied-configuration annotation is large and differs per object).
constexpr size_t kMaxInternedItems = 8;
constexpr size_t kMaxInternedBytes = 512;

size_t HashItems(const Items& items) {
  size_t h = items.size();
  for (const auto& [k, v] : items) {
    h = absl::HashOf(h, k.view(), std::string_view(v));
  }
  return h;
}

struct ItemsKey {
  const Items* items;
  size_t hash;
};
struct RepHash {
  using is_transparent = void;
  size_t operator()(const StringMapRep* r) const { return r->hash; }
  size_t operator()(const ItemsKey& k) const { return k.hash; }
};
struct RepEq {
  using is_transparent = void;
  bool operator()(const StringMapRep* a, const StringMapRep* b) const { return a == b; }
  bool operator()(const ItemsKey& k, const StringMapRep* r) const {
    return k.hash == r->hash && *k.items == r->items;
  }
  bool operator()(const StringMapRep* r, const ItemsKey& k) const { return (*this)(k, r); }
};

// Every interned item set. An interned rep's count goes from 1 to 0 only under
// mu, and a lookup takes its reference under mu, so a rep found here is never
// one being freed.
struct RepTable {
  absl::Mutex mu;
  absl::flat_hash_set<const StringMapRep*, RepHash, RepEq> reps ABSL_GUARDED_BY(mu);
};

RepTable& TheRepTable() {
  static RepTable* const table = new RepTable();  // never destroyed: maps may outlive statics
  return *table;
}

}  // namespace

void intrusive_ptr_add_ref(const StringMapRep* r) {
  r->refs.fetch_add(1, std::memory_order_relaxed);
}

void intrusive_ptr_release(const StringMapRep* r) {
  if (!r->interned) {
    if (r->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete r;
    return;
  }
  uint32_t n = r->refs.load(std::memory_order_relaxed);
  while (n > 1) {
    if (r->refs.compare_exchange_weak(n, n - 1, std::memory_order_release,
                                      std::memory_order_relaxed)) {
      return;
    }
  }
  RepTable& t = TheRepTable();
  {
    absl::MutexLock lock(&t.mu);
    if (r->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    t.reps.erase(r);
  }
  delete r;
}

}  // namespace internal

namespace {
// What an empty map's iterators point into, const or not: nothing can be
// changed through them, so it is never changed.
std::vector<StringMap::value_type>& EmptyItems() {
  static auto* const empty = new std::vector<StringMap::value_type>();
  return *empty;
}
}  // namespace

StringMap::StringMap(const StringMap& other) {
  if (other.rep_ == nullptr) return;
  if (!other.rep_->leaked) {
    rep_ = other.rep_;
    return;
  }
  rep_.reset(new internal::StringMapRep());
  rep_->items = other.rep_->items;
}

StringMap& StringMap::operator=(const StringMap& other) {
  if (this != &other) *this = StringMap(other);
  return *this;
}

StringMap::StringMap(std::initializer_list<value_type> init) { *this = init; }

StringMap::StringMap(const std::map<std::string, std::string>& m) {
  if (m.empty()) return;
  rep_.reset(new internal::StringMapRep());
  rep_->items.reserve(m.size());
  for (const auto& [k, v] : m) rep_->items.emplace_back(MapKey(k), v);
}

StringMap& StringMap::operator=(std::initializer_list<value_type> init) {
  // std::map's initializer list keeps the first of equal keys.
  rep_.reset();
  if (init.size() == 0) return *this;
  Mutable().reserve(init.size());
  for (const auto& item : init) Insert(item);
  return *this;
}

StringMap::operator std::map<std::string, std::string>() const {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : items()) out.emplace_hint(out.end(), k.str(), v);
  return out;
}

StringMap StringMap::FromUnsorted(std::vector<value_type> items) {
  // Stable, so that among equal keys the original order survives and the last
  // one can be kept.
  std::stable_sort(items.begin(), items.end(),
                   [](const value_type& a, const value_type& b) { return a.first < b.first; });
  StringMap out;
  if (items.empty()) return out;
  std::vector<value_type>& kept = out.Mutable();
  kept.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (i + 1 < items.size() && items[i + 1].first == items[i].first) continue;
    kept.push_back(std::move(items[i]));
  }
  if (kept.capacity() != kept.size()) kept.shrink_to_fit();
  out.Intern();
  return out;
}

const std::vector<StringMap::value_type>& StringMap::items() const {
  return rep_ ? rep_->items : EmptyItems();
}

std::vector<StringMap::value_type>& StringMap::Mutable() {
  if (rep_ == nullptr) {
    rep_.reset(new internal::StringMapRep());
  } else if (rep_->interned || rep_->refs.load(std::memory_order_acquire) != 1) {
    auto* own = new internal::StringMapRep();
    own->items = rep_->items;
    rep_.reset(own);
  }
  return rep_->items;
}

std::vector<StringMap::value_type>& StringMap::Leaked() {
  if (rep_ == nullptr) return EmptyItems();  // nothing to change through these iterators
  std::vector<value_type>& items = Mutable();
  rep_->leaked = true;
  return items;
}

bool StringMap::Insert(value_type item) {
  if (contains(item.first)) return false;
  std::vector<value_type>& items = Mutable();
  items.insert(std::lower_bound(items.begin(), items.end(), item.first, KeyLess), std::move(item));
  return true;
}

void StringMap::Intern() {
  if (rep_ == nullptr || rep_->interned || rep_->items.size() > internal::kMaxInternedItems) return;
  size_t bytes = 0;
  for (const auto& [k, v] : rep_->items) bytes += k.size() + v.size();
  if (bytes > internal::kMaxInternedBytes) return;
  const size_t hash = internal::HashItems(rep_->items);
  // Interned in place when nothing else holds or can reach these items.
  const bool own = rep_->refs.load(std::memory_order_acquire) == 1 && !rep_->leaked;
  internal::RepTable& t = internal::TheRepTable();
  boost::intrusive_ptr<internal::StringMapRep> shared;
  {
    absl::MutexLock lock(&t.mu);
    auto it = t.reps.find(internal::ItemsKey{&rep_->items, hash});
    if (it != t.reps.end()) {
      auto* found = const_cast<internal::StringMapRep*>(*it);
      found->refs.fetch_add(1, std::memory_order_relaxed);
      shared.reset(found, /*add_ref=*/false);
    } else {
      internal::StringMapRep* r = rep_.get();
      if (!own) {
        r = new internal::StringMapRep();
        r->items = rep_->items;
        r->refs.store(1, std::memory_order_relaxed);
        shared.reset(r, /*add_ref=*/false);
      }
      r->hash = hash;
      r->interned = true;
      t.reps.insert(r);
    }
  }
  if (shared) rep_ = std::move(shared);
}

const std::string* StringMap::SharedJson() const {
  if (rep_ == nullptr || !rep_->interned) return nullptr;
  if (const std::string* json = rep_->json.load(std::memory_order_acquire)) return json;
  auto* text = new std::string("{");
  for (const auto& [k, v] : rep_->items) {
    if (text->size() > 1) text->push_back(',');
    internal::AppendJsonString(text, k.view());
    text->push_back(':');
    internal::AppendJsonString(text, v);
  }
  text->push_back('}');
  const std::string* expected = nullptr;
  if (!rep_->json.compare_exchange_strong(expected, text, std::memory_order_acq_rel)) {
    delete text;  // another thread made it first
    return expected;
  }
  return text;
}

StringMap::iterator StringMap::lower_bound(std::string_view key) {
  auto& items = Leaked();
  return std::lower_bound(items.begin(), items.end(), key, KeyLess);
}
StringMap::const_iterator StringMap::lower_bound(std::string_view key) const {
  return std::lower_bound(items().begin(), items().end(), key, KeyLess);
}
StringMap::iterator StringMap::upper_bound(std::string_view key) {
  auto& items = Leaked();
  return std::upper_bound(items.begin(), items.end(), key, LessKey);
}
StringMap::const_iterator StringMap::upper_bound(std::string_view key) const {
  return std::upper_bound(items().begin(), items().end(), key, LessKey);
}

StringMap::iterator StringMap::find(std::string_view key) {
  auto& items = Leaked();
  auto it = std::lower_bound(items.begin(), items.end(), key, KeyLess);
  return it != items.end() && it->first == key ? it : items.end();
}
StringMap::const_iterator StringMap::find(std::string_view key) const {
  auto it = lower_bound(key);
  return it != items().end() && it->first == key ? it : items().end();
}

bool StringMap::contains(std::string_view key) const {
  const auto& items = this->items();
  auto it = std::lower_bound(items.begin(), items.end(), key, KeyLess);
  return it != items.end() && it->first == key;
}

std::string& StringMap::at(std::string_view key) {
  if (!contains(key)) throw std::out_of_range("StringMap::at");
  return find(key)->second;
}
const std::string& StringMap::at(std::string_view key) const {
  auto it = find(key);
  if (it == items().end()) throw std::out_of_range("StringMap::at");
  return it->second;
}

std::string& StringMap::operator[](std::string_view key) { return try_emplace(key).first->second; }

std::pair<StringMap::iterator, bool> StringMap::insert(value_type item) {
  const std::string key = item.first.str();
  const bool inserted = Insert(std::move(item));
  return {find(key), inserted};
}

std::pair<StringMap::iterator, bool> StringMap::try_emplace(std::string_view key,
                                                            std::string value) {
  const bool inserted = Insert(value_type(MapKey(key), std::move(value)));
  return {find(key), inserted};
}

std::pair<StringMap::iterator, bool> StringMap::insert_or_assign(std::string_view key,
                                                                 std::string value) {
  auto [it, inserted] = try_emplace(key);
  it->second = std::move(value);
  return {it, inserted};
}

StringMap::size_type StringMap::erase(std::string_view key) {
  if (!contains(key)) return 0;
  std::vector<value_type>& items = Mutable();
  items.erase(std::lower_bound(items.begin(), items.end(), key, KeyLess));
  if (items.empty()) rep_.reset();
  return 1;
}

StringMap::iterator StringMap::erase(const_iterator pos) {
  const auto index = pos - items().begin();  // pos may point into a shared copy
  std::vector<value_type>& items = Leaked();
  return items.erase(items.begin() + index);
}

void StringMap::Set(std::string_view key, std::string_view value) {
  const StringMap& self = *this;  // reading must not copy
  if (auto it = self.find(key); it != self.end() && it->second == value) return;
  std::vector<value_type>& items = Mutable();
  auto it = std::lower_bound(items.begin(), items.end(), key, KeyLess);
  if (it != items.end() && it->first == key) {
    it->second.assign(value);
  } else {
    items.insert(it, value_type(MapKey(key), std::string(value)));
  }
  Intern();
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

bool SameStatus(const Object& a, const Object& b) {
  const DelegationFields& da = DelegationOf(a);
  const DelegationFields& db = DelegationOf(b);
  return a.status == b.status && da.accepted_proof == db.accepted_proof &&
         da.challenges == db.challenges;
}

size_t ApproximateBytes(const Object& object) {
  const ObjectMeta& m = object.metadata;
  size_t n = sizeof(Object) + m.name.size() + m.generate_name.size() + m.uid.size() +
             m.owner_references_json.size();
  for (const StringMap* map : {&m.labels, &m.annotations}) {
    for (const auto& [key, value] : *map) n += key.size() + value.size();
  }
  for (const std::string& f : m.finalizers) n += f.size();
  for (const auto* text : {&object.spec.holder_identity, &object.spec.pool_name, &object.spec.delegate}) {
    if (*text) n += (*text)->size();
  }
  const DelegationFields& d = DelegationOf(object);
  if (d.proof) n += d.proof->heartbeat.size() + d.proof->certificate.size();
  if (d.accepted_proof) n += d.accepted_proof->boot_id.size() + d.accepted_proof->challenge.size();
  for (const DelegationChallenge& c : d.challenges) n += c.value.size();
  return n;
}

}  // namespace poolcoord::store
