// The objects the server stores and serves: ObjectMeta, and the spec and status
// of the group's kinds (api/types.h), with what only the server keeps.
//
// Objects are immutable once handed to a Store (shared as ObjectPtr); a writer
// copies, mutates the copy and hands it back. Times on the wire are MicroTime
// (RFC 3339, exactly 6 fractional digits, UTC) or Time (RFC 3339 seconds); here
// they are integers: microseconds or seconds since the Unix epoch.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/intrusive_ptr.hpp>
#include <boost/smart_ptr/intrusive_ref_counter.hpp>

#include "api/types.h"
#include "store/managed_fields_entry.h"

namespace poolcoord::store {

// The group's kinds and types (api/types.h), as the store's.
using api::AcceptedProof;
using api::ChangedSpecFields;
using api::DelegationChallenge;
using api::DelegationProof;
using api::InfoFor;
using api::InfoForPlural;
using api::kGroup;
using api::kGroupVersion;
using api::Kind;
using api::KnownKinds;
using api::kMaxKinds;
using api::kVersion;
using api::LeaderTerm;
using api::LeaseSpec;
using api::LeaseStatus;
using api::OptionalLeaderTerm;
using api::RegisterResource;
using api::ResourceInfo;
using api::SpecFieldBit;
using DelegationFields = api::DelegationFields;

// The key of a StringMap entry, 16 bytes. The keys most objects carry
// (api::kCommonMetadataKeys) point to one static copy; any other key owns a
// heap copy of its characters. It reads as a std::string_view; str() makes a
// std::string.
class MapKey {
 public:
  MapKey() noexcept : data_(""), size_(0), owned_(false) {}
  MapKey(std::string_view s);                                      // NOLINT: implicit
  MapKey(const std::string& s) : MapKey(std::string_view(s)) {}  // NOLINT: implicit
  MapKey(const char* s) : MapKey(std::string_view(s)) {}         // NOLINT: implicit
  // A shared static copy stays shared; an owned one is copied.
  MapKey(const MapKey& other)
      : data_(other.data_), size_(other.size_), owned_(false) {
    if (other.owned_) *this = MapKey(other.view());
  }
  MapKey(MapKey&& other) noexcept : data_(other.data_), size_(other.size_), owned_(other.owned_) {
    other.Release();
  }
  MapKey& operator=(const MapKey& other) {
    if (this != &other) *this = MapKey(other);
    return *this;
  }
  MapKey& operator=(MapKey&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = other.data_;
      size_ = other.size_;
      owned_ = other.owned_;
      other.Release();
    }
    return *this;
  }
  ~MapKey() { Free(); }

  std::string_view view() const noexcept { return std::string_view(data_, size_); }
  operator std::string_view() const noexcept { return view(); }  // NOLINT: implicit
  std::string str() const { return std::string(view()); }
  const char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t length() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // True when the characters are the shared static copy (for tests).
  bool interned() const noexcept { return !owned_ && size_ != 0; }

  friend bool operator==(const MapKey& a, const MapKey& b) noexcept { return a.view() == b.view(); }
  friend bool operator==(const MapKey& a, std::string_view b) noexcept { return a.view() == b; }
  friend bool operator==(const MapKey& a, const std::string& b) noexcept { return a.view() == b; }
  friend bool operator==(const MapKey& a, const char* b) noexcept { return a.view() == b; }
  friend auto operator<=>(const MapKey& a, const MapKey& b) noexcept { return a.view() <=> b.view(); }
  friend auto operator<=>(const MapKey& a, std::string_view b) noexcept { return a.view() <=> b; }
  friend auto operator<=>(const MapKey& a, const std::string& b) noexcept {
    return a.view() <=> std::string_view(b);
  }
  friend auto operator<=>(const MapKey& a, const char* b) noexcept {
    return a.view() <=> std::string_view(b);
  }
  friend std::ostream& operator<<(std::ostream& os, const MapKey& key);

 private:
  void Free() noexcept {
    if (owned_) delete[] data_;
  }
  void Release() noexcept {
    data_ = "";
    size_ = 0;
    owned_ = false;
  }
  const char* data_;
  uint32_t size_;
  bool owned_;
};

namespace internal {
// The items of a StringMap, shared copy on write (StringMap's, nowhere else).
struct StringMapRep {
  StringMapRep() = default;
  StringMapRep(const StringMapRep&) = delete;
  StringMapRep& operator=(const StringMapRep&) = delete;
  ~StringMapRep() { delete json.load(std::memory_order_relaxed); }

  std::vector<std::pair<MapKey, std::string>> items;  // sorted by key, keys unique
  size_t hash = 0;                                   // when interned
  mutable std::atomic<uint32_t> refs{0};
  // When interned: the items as a JSON object, made the first time one is needed.
  mutable std::atomic<const std::string*> json{nullptr};
  bool interned = false;  // in the table of shared item sets: never changed in place
  bool leaked = false;    // a mutable reference or iterator went out: copies take their own
};
void intrusive_ptr_add_ref(const StringMapRep* r);
void intrusive_ptr_release(const StringMapRep* r);
}  // namespace internal

// A map of strings (labels, annotations) kept as one sorted vector of
// (MapKey, std::string) pairs behind one pointer, shared copy on write. An
// object carries one or two entries, for which std::map would spend a 96-byte
// tree node and a heap copy of the key each, on top of a 48-byte header; and
// the objects of a kind mostly carry the same ones (an annotation every object
// of the kind has, the same label for all of a group): a map built by
// FromUnsorted (the codec) or changed by Set is interned when small, so equal
// maps share one copy across objects, and a copy of an object (every write
// makes one) takes a reference instead of allocating.
// The interface is the part of std::map that callers use: key-ordered iteration
// over pairs (`for (const auto& [k, v] : m)`, `it->second`), find/count/at,
// operator[], insert/emplace, erase, ==; keys read as std::string_view. Unlike
// std::map, inserting or erasing invalidates iterators and references, and a
// key must not be changed through an iterator. A non-const accessor that hands
// out a mutable iterator or reference first gives the map its own copy (and
// later copies of the map copy the items too); reading through a const map
// never copies. Callers that take a `const std::map<std::string, std::string>&`
// get a copy through the implicit conversion. Thread-compatible, as std::map.
class StringMap {
 public:
  using key_type = MapKey;
  using mapped_type = std::string;
  using value_type = std::pair<MapKey, std::string>;
  using size_type = std::size_t;
  using iterator = std::vector<value_type>::iterator;
  using const_iterator = std::vector<value_type>::const_iterator;

  StringMap() = default;
  StringMap(const StringMap& other);
  StringMap(StringMap&& other) noexcept = default;
  StringMap& operator=(const StringMap& other);
  StringMap& operator=(StringMap&& other) noexcept = default;
  StringMap(std::initializer_list<value_type> init);
  StringMap(const std::map<std::string, std::string>& m);  // NOLINT: implicit on purpose
  StringMap& operator=(std::initializer_list<value_type> init);
  operator std::map<std::string, std::string>() const;  // NOLINT: implicit on purpose

  // Takes pairs in any order; for equal keys the last one wins (as repeated
  // `m[k] = v` would). Capacity is exactly the number of distinct keys. Interned
  // (shared with equal maps) when small.
  static StringMap FromUnsorted(std::vector<value_type> items);

  const_iterator begin() const { return items().begin(); }
  const_iterator end() const { return items().end(); }
  const_iterator cbegin() const { return items().cbegin(); }
  const_iterator cend() const { return items().cend(); }
  iterator begin() { return Leaked().begin(); }
  iterator end() { return Leaked().end(); }
  bool empty() const { return items().empty(); }
  size_type size() const { return items().size(); }
  void clear() { rep_.reset(); }

  iterator lower_bound(std::string_view key);
  const_iterator lower_bound(std::string_view key) const;
  iterator upper_bound(std::string_view key);
  const_iterator upper_bound(std::string_view key) const;
  iterator find(std::string_view key);
  const_iterator find(std::string_view key) const;
  size_type count(std::string_view key) const { return contains(key) ? 1 : 0; }
  bool contains(std::string_view key) const;
  // std::out_of_range when absent, as std::map::at.
  std::string& at(std::string_view key);
  const std::string& at(std::string_view key) const;
  std::string& operator[](std::string_view key);

  std::pair<iterator, bool> insert(value_type item);
  template <typename It>
  void insert(It first, It last) {
    for (; first != last; ++first) Insert(value_type(MapKey(first->first), first->second));
  }
  template <typename K, typename V>
  std::pair<iterator, bool> emplace(K&& key, V&& value) {
    return insert(value_type(std::forward<K>(key), std::forward<V>(value)));
  }
  std::pair<iterator, bool> try_emplace(std::string_view key, std::string value = {});
  std::pair<iterator, bool> insert_or_assign(std::string_view key, std::string value);
  size_type erase(std::string_view key);
  iterator erase(const_iterator pos);

  // m[key] = value without handing out a reference: nothing changes (and no
  // copy is made) when the map already holds that value; a changed map is
  // interned when small, as FromUnsorted's.
  void Set(std::string_view key, std::string_view value);

  // The map as a JSON object ({"key":"value",...}, strings escaped as RapidJSON's
  // writer escapes them), kept with an interned map's shared items so that every
  // response and watch event of the objects sharing them copies it instead of
  // escaping it again; nullptr for a map that is not interned.
  const std::string* SharedJson() const;

  // True when both share one copy of their items (for tests).
  bool SharesItemsWith(const StringMap& other) const { return rep_ != nullptr && rep_ == other.rep_; }

  friend bool operator==(const StringMap& a, const StringMap& b) {
    return a.rep_ == b.rep_ || a.items() == b.items();
  }

 private:
  const std::vector<value_type>& items() const;
  // The items to change: this map's own copy (made when shared or interned).
  std::vector<value_type>& Mutable();
  // Mutable(), marked as handed out; an empty map's static empty items.
  std::vector<value_type>& Leaked();
  // Inserts without marking the items handed out; false when the key was there.
  bool Insert(value_type item);
  // Shares the items with an equal interned map, or interns them (when small).
  void Intern();

  boost::intrusive_ptr<internal::StringMapRep> rep_;  // nullptr: empty
};

// metav1.ObjectMeta, the fields we keep. owner_references is kept verbatim as a JSON
// array ("" when absent): we store it, never interpret it.
struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string uid;
  int64_t resource_version = 0;      // the store revision of the last write
  int64_t generation = 0;            // 1 on create, +1 per spec change
  int64_t creation_timestamp = 0;    // seconds since the epoch
  std::optional<int64_t> deletion_timestamp;  // seconds since the epoch
  std::optional<int64_t> deletion_grace_period_seconds;
  StringMap labels;
  StringMap annotations;
  std::vector<std::string> finalizers;
  std::string owner_references_json;
  ManagedFields managed_fields;  // store/managed_fields_entry.h
};

// What Object::delegation points to: the delegation fields, immutable once
// shared (copy, change, then point to the copy: MutableDelegation).
struct SharedDelegationFields
    : DelegationFields,
      boost::intrusive_ref_counter<SharedDelegationFields, boost::thread_safe_counter> {
  SharedDelegationFields() = default;
  explicit SharedDelegationFields(const DelegationFields& fields) : DelegationFields(fields) {}
};

// Every stored object is one make_shared block of Object plus its control
// block, within a 544-byte malloc chunk: the field order keeps it there
// (tests/store/object_test.cc checks the size), labels and annotations are a
// shared pointer each, the first managedFields entry sits inside, and the
// fields few objects have sit behind one pointer.
struct Object {
  ObjectMeta metadata;
  LeaseSpec spec;
  // [[no_unique_address]] lets `kind` take the tail padding of status.
  [[no_unique_address]] LeaseStatus status;
  Kind kind{};
  // The delegation fields (the proof of spec and two parts of status); nullptr when
  // the object has none of them. The proof follows spec, the rest status: see
  // DelegationOf and friends.
  boost::intrusive_ptr<const SharedDelegationFields> delegation;
  // Server-internal, never serialized to clients: this process's monotonic clock
  // (microseconds) when it accepted the last renewal. Expiry is judged from it,
  // never from a client's clock (docs/architecture.md "The rules").
  int64_t observed_monotonic_us = 0;
};

// The object's delegation fields (an empty set when it has none).
const DelegationFields& DelegationOf(const Object& object);
// A copy of the object's delegation fields that the object now points to, for
// changing them (copy on write: other objects sharing the old set keep it).
DelegationFields& MutableDelegation(Object& object);
// Status follows status: `to` gets the status parts of `from`'s delegation
// fields and keeps its own proof, as `to.status = from.status` does for
// LeaseStatus.
void CopyDelegationStatus(Object& to, const Object& from);
// Drops the status parts (a create), or the proof (after the rules read it).
void ClearDelegationStatus(Object& object);
void ClearDelegationProof(Object& object);
// Whether `a` and `b` have the same status: LeaseStatus and the status parts
// of the delegation fields.
bool SameStatus(const Object& a, const Object& b);
// The server's wall time of the object's last renewal (0: none): the renewal
// whose first sight observed_monotonic_us times on this process's clock.
int64_t RenewalTime(const Object& object);

using ObjectPtr = std::shared_ptr<const Object>;
using MutableObjectPtr = std::shared_ptr<Object>;

// About how many bytes `object` holds: the struct and every string behind it,
// shared (interned maps, managedFields) or not, counted in full. What bounds a
// watch history in bytes (--watch-history-bytes).
size_t ApproximateBytes(const Object& object);

}  // namespace poolcoord::store
