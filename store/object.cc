#include "store/object.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <ostream>
#include <stdexcept>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::store {

namespace {
bool KeyLess(const StringMap::value_type& item, std::string_view key) { return item.first < key; }
bool LessKey(std::string_view key, const StringMap::value_type& item) { return key < item.first; }
}  // namespace

MapKey::MapKey(std::string_view s) : data_(""), size_(0), owned_(false) {
  if (s.empty()) return;
  if (s.size() > std::numeric_limits<uint32_t>::max()) throw std::length_error("MapKey");
  size_ = static_cast<uint32_t>(s.size());
  // Every object of a kind that carries one of these keys shares one copy of it.
  for (std::string_view key : api::kCommonMetadataKeys) {
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
  static const SharedDelegationFields* const kEmpty = [] {
    auto* empty = new SharedDelegationFields();
    intrusive_ptr_add_ref(empty);  // never freed
    return empty;
  }();
  return object.delegation ? *object.delegation : *kEmpty;
}

DelegationFields& MutableDelegation(Object& object) {
  // Every SharedDelegationFields is created non-const here; one held by this
  // object alone may be changed in place.
  if (object.delegation && object.delegation->use_count() == 1) {
    return const_cast<SharedDelegationFields&>(*object.delegation);
  }
  auto* fresh = object.delegation ? new SharedDelegationFields(*object.delegation)
                                  : new SharedDelegationFields();
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
  api::CopyStatus(MutableDelegation(to), source);
  DropIfEmpty(to);
}

void ClearDelegationStatus(Object& object) {
  if (!DelegationOf(object).HasStatus()) return;
  api::ClearStatus(MutableDelegation(object));
  DropIfEmpty(object);
}

void ClearDelegationProof(Object& object) {
  if (!DelegationOf(object).HasProof()) return;
  api::ClearProof(MutableDelegation(object));
  DropIfEmpty(object);
}

bool SameStatus(const Object& a, const Object& b) {
  return a.status == b.status && api::SameStatus(DelegationOf(a), DelegationOf(b));
}

int64_t RenewalTime(const Object& object) { return api::RenewalTime(object.status); }

size_t ApproximateBytes(const Object& object) {
  const ObjectMeta& m = object.metadata;
  size_t n = sizeof(Object) + m.name.size() + m.generate_name.size() + m.uid.size() +
             m.owner_references_json.size();
  for (const StringMap* map : {&m.labels, &m.annotations}) {
    for (const auto& [key, value] : *map) n += key.size() + value.size();
  }
  for (const std::string& f : m.finalizers) n += f.size();
  return n + api::ApproximateBytes(object.spec, DelegationOf(object));
}

}  // namespace poolcoord::store
