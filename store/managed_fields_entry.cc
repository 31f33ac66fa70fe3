#include "store/managed_fields_entry.h"

#include <functional>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::store {
namespace internal {
namespace {

using Record = ManagedFieldsRecord;

size_t HashOf(const ManagedFieldsText& t) {
  return absl::Hash<std::tuple<std::string_view, std::string_view, std::string_view,
                               std::string_view, std::string_view, std::string_view>>{}(
      std::make_tuple(t.manager, t.operation, t.api_version, t.fields_type, t.fields_v1,
                      t.subresource));
}

bool SameText(const Record& r, const ManagedFieldsText& t) {
  return r.fields_v1 == t.fields_v1 && r.manager == t.manager && r.operation == t.operation &&
         r.api_version == t.api_version && r.fields_type == t.fields_type &&
         r.subresource == t.subresource;
}

// Keys in alphabetical order, as kube-apiserver serializes a custom resource;
// empty strings omitted (omitempty). fieldsV1 is written as it is: the codec's
// decoder and the field manager produce it as compact JSON.
std::string JsonHead(const Record& r) {
  std::string out = "{";
  auto member = [&out](std::string_view key, std::string_view value, bool raw) {
    if (value.empty()) return;
    if (out.size() > 1) out.push_back(',');
    out.push_back('"');
    out.append(key);
    out.append("\":");
    if (raw) {
      out.append(value);
    } else {
      AppendJsonString(&out, value);
    }
  };
  member("apiVersion", r.api_version, false);
  member("fieldsType", r.fields_type, false);
  member("fieldsV1", r.fields_v1, true);
  member("manager", r.manager, false);
  member("operation", r.operation, false);
  member("subresource", r.subresource, false);
  return out;
}

struct Key {
  const ManagedFieldsText& text;
  size_t hash;
};

struct RecordHash {
  using is_transparent = void;
  size_t operator()(const Record* r) const { return r->hash; }
  size_t operator()(const Key& k) const { return k.hash; }
};
struct RecordEq {
  using is_transparent = void;
  bool operator()(const Record* a, const Record* b) const { return a == b; }
  bool operator()(const Key& k, const Record* r) const {
    return k.hash == r->hash && SameText(*r, k.text);
  }
  bool operator()(const Record* r, const Key& k) const { return (*this)(k, r); }
};

// Every live record, by content. A record's count goes from 1 to 0 only under
// mu, and a lookup takes its reference under mu, so a record found here is never
// one being freed.
struct Table {
  absl::Mutex mu;
  absl::flat_hash_set<const Record*, RecordHash, RecordEq> records ABSL_GUARDED_BY(mu);
};

Table& TheTable() {
  static Table* const table = new Table();  // never destroyed: entries may outlive statics
  return *table;
}

const Record* Intern(const ManagedFieldsText& text) {
  const Key key{text, HashOf(text)};
  Table& t = TheTable();
  absl::MutexLock lock(&t.mu);
  auto it = t.records.find(key);
  if (it != t.records.end()) {
    (*it)->refs.fetch_add(1, std::memory_order_relaxed);
    return *it;
  }
  auto* r = new Record();
  r->manager = text.manager;
  r->operation = text.operation;
  r->api_version = text.api_version;
  r->fields_type = text.fields_type;
  r->fields_v1 = text.fields_v1;
  r->subresource = text.subresource;
  r->json_head = JsonHead(*r);
  r->hash = key.hash;
  r->refs.store(1, std::memory_order_relaxed);
  t.records.insert(r);
  return r;
}

const Record* EmptyRecord() {
  // One reference held for ever: the record every default entry points to.
  static const Record* const empty = Intern(ManagedFieldsText{});
  return empty;
}

}  // namespace

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out->push_back('"');
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xF]);
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

void intrusive_ptr_add_ref(const ManagedFieldsRecord* r) {
  r->refs.fetch_add(1, std::memory_order_relaxed);
}

void intrusive_ptr_release(const ManagedFieldsRecord* r) {
  uint32_t n = r->refs.load(std::memory_order_relaxed);
  while (n > 1) {
    if (r->refs.compare_exchange_weak(n, n - 1, std::memory_order_release,
                                      std::memory_order_relaxed)) {
      return;
    }
  }
  // Perhaps the last reference: decide under the table's lock, where a lookup
  // may have just taken one.
  Table& t = TheTable();
  {
    absl::MutexLock lock(&t.mu);
    if (r->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    t.records.erase(r);
  }
  delete r;
}

}  // namespace internal

ManagedFieldsEntry::ManagedFieldsEntry() : record_(internal::EmptyRecord()) {}

ManagedFieldsEntry::ManagedFieldsEntry(const ManagedFieldsText& text, std::optional<int64_t> t)
    : time(t), record_(internal::Intern(text), /*add_ref=*/false) {}

ManagedFieldsText ManagedFieldsEntry::text() const {
  return {record_->manager,   record_->operation, record_->api_version,
          record_->fields_type, record_->fields_v1, record_->subresource};
}

void ManagedFieldsEntry::set_manager(std::string_view v) {
  ManagedFieldsText t = text();
  t.manager = v;
  record_.reset(internal::Intern(t), false);
}
void ManagedFieldsEntry::set_operation(std::string_view v) {
  ManagedFieldsText t = text();
  t.operation = v;
  record_.reset(internal::Intern(t), false);
}
void ManagedFieldsEntry::set_api_version(std::string_view v) {
  ManagedFieldsText t = text();
  t.api_version = v;
  record_.reset(internal::Intern(t), false);
}
void ManagedFieldsEntry::set_fields_type(std::string_view v) {
  ManagedFieldsText t = text();
  t.fields_type = v;
  record_.reset(internal::Intern(t), false);
}
void ManagedFieldsEntry::set_fields_v1(std::string_view v) {
  ManagedFieldsText t = text();
  t.fields_v1 = v;
  record_.reset(internal::Intern(t), false);
}
void ManagedFieldsEntry::set_subresource(std::string_view v) {
  ManagedFieldsText t = text();
  t.subresource = v;
  record_.reset(internal::Intern(t), false);
}

size_t ManagedFieldsRecordCount() {
  internal::Table& t = internal::TheTable();
  absl::MutexLock lock(&t.mu);
  return t.records.size();
}

}  // namespace poolcoord::store
