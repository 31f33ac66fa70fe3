// One metav1.ManagedFieldsEntry of metadata.managedFields (server-side apply's
// record of who owns which fields), as the object model keeps it.
//
// Every field but the time lives in one immutable record that all entries with
// the same content share: the objects of a kind written by one client carry
// byte-identical manager, operation, apiVersion, fieldsType, fieldsV1 and
// subresource, and only the time differs. A copy of an entry (every write copies
// its object) takes a reference instead of copying strings, two entries compare
// by one pointer, and 100,000 objects written alike hold one copy of each
// distinct record (a copy per object took 44 MiB more for 110,000 objects).
// Records are interned in one process-wide table and freed with their last
// entry, so content equality is pointer equality.
//
// The store keeps entries as written; the field manager (handlers/managed_fields.h)
// is what checks and interprets them: entries the server writes have operation
// "Apply" or "Update", fields_type "FieldsV1" and a fieldsV1 set it produced.
// Thread safety: an entry is a value (thread-compatible); the shared records and
// their table are thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/intrusive_ptr.hpp>

#include "absl/container/inlined_vector.h"

namespace poolcoord::store {

// The text fields of an entry, to build one from.
struct ManagedFieldsText {
  std::string_view manager;
  std::string_view operation;    // "Apply" or "Update"
  std::string_view api_version;  // "coordination.pool/v1alpha1"
  std::string_view fields_type;  // "FieldsV1"
  std::string_view fields_v1;    // the set as compact JSON text; empty when absent
  std::string_view subresource;  // "" for the main resource, "status"
};

namespace internal {
// The shared record (ManagedFieldsEntry's, nowhere else).
struct ManagedFieldsRecord {
  std::string manager, operation, api_version, fields_type, fields_v1, subresource;
  // The entry's JSON as the codec writes it (keys in alphabetical order, empty
  // strings omitted) up to its time: '{' and every other member.
  std::string json_head;
  size_t hash = 0;
  mutable std::atomic<uint32_t> refs{0};
  mutable std::atomic<uint32_t> owner_hint{0};
};
void intrusive_ptr_add_ref(const ManagedFieldsRecord* r);
void intrusive_ptr_release(const ManagedFieldsRecord* r);

// A JSON string as RapidJSON's writer escapes it (\" \\ \b \f \n \r \t, other
// controls as \u00XX); other bytes verbatim (stored strings are valid UTF-8). For
// the JSON the store keeps with its shared records (store/object_codec.h).
void AppendJsonString(std::string* out, std::string_view s);
}  // namespace internal

class ManagedFieldsEntry {
 public:
  // Every field empty, no time (what `{}` and JSON null decode to).
  ManagedFieldsEntry();
  explicit ManagedFieldsEntry(const ManagedFieldsText& text, std::optional<int64_t> time = {});

  std::string_view manager() const { return record_->manager; }
  std::string_view operation() const { return record_->operation; }
  std::string_view api_version() const { return record_->api_version; }
  std::string_view fields_type() const { return record_->fields_type; }
  std::string_view fields_v1() const { return record_->fields_v1; }
  std::string_view subresource() const { return record_->subresource; }
  ManagedFieldsText text() const;

  // Each builds (or finds) the record with one field changed.
  void set_manager(std::string_view v);
  void set_operation(std::string_view v);
  void set_api_version(std::string_view v);
  void set_fields_type(std::string_view v);
  void set_fields_v1(std::string_view v);
  void set_subresource(std::string_view v);

  // metav1.Time: seconds since the epoch.
  std::optional<int64_t> time;

  // '{' and the entry's JSON members before "time", as store/object_codec.h
  // writes them ('{' alone when every field is empty).
  std::string_view json_head() const { return record_->json_head; }

  // A summary of fields_v1 that the field manager caches beside the record
  // (0: none yet), so that a lease renewal need not read fields_v1 again. A
  // function of fields_v1 alone, hence shared; never stored, sent or compared.
  uint32_t owner_hint() const { return record_->owner_hint.load(std::memory_order_relaxed); }
  void set_owner_hint(uint32_t hint) const {
    record_->owner_hint.store(hint, std::memory_order_relaxed);
  }

  // True when every field but the time is equal (one pointer compare).
  bool SameText(const ManagedFieldsEntry& other) const { return record_ == other.record_; }
  friend bool operator==(const ManagedFieldsEntry& a, const ManagedFieldsEntry& b) {
    return a.record_ == b.record_ && a.time == b.time;
  }

 private:
  boost::intrusive_ptr<const internal::ManagedFieldsRecord> record_;
};

// metadata.managedFields of one object. Nearly every object has one entry (its
// creator's) or two (and its renewer's): the first is kept inside the object,
// in the 32 bytes a std::vector would take, without an allocation of its own.
using ManagedFields = absl::InlinedVector<ManagedFieldsEntry, 1>;

// How many distinct records exist now (for tests and the memory benchmark).
size_t ManagedFieldsRecordCount();

}  // namespace poolcoord::store
