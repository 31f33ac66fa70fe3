#include "handlers/managed_fields.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/quote.h"
#include "base/string_view.h"

namespace poolcoord::handlers::ssa {
namespace {

constexpr char kApply[] = "Apply";
constexpr char kUpdate[] = "Update";
constexpr char kFieldsV1[] = "FieldsV1";
constexpr size_t kFieldManagerMaxLength = 128;

const char* OperationName(Operation op) { return op == Operation::kApply ? kApply : kUpdate; }

// Server-set metadata nobody owns (stripMetaManager): removed level by level, so
// metadata.labels stays ownable while metadata itself is not.
const FieldSet& StrippedFields() {
  static const FieldSet* const set = [] {
    auto* s = new FieldSet();
    s->Insert(FieldPath({"apiVersion"}));
    s->Insert(FieldPath({"kind"}));
    s->Insert(FieldPath({"metadata"}));
    for (const char* f : {"name", "namespace", "creationTimestamp", "selfLink", "uid",
                          "clusterName", "generation", "managedFields", "resourceVersion"}) {
      s->Insert(FieldPath({"metadata", f}));
    }
    return s;
  }();
  return *set;
}

const FieldSet& StatusField() {
  static const FieldSet* const set = [] {
    auto* s = new FieldSet();
    s->Insert(FieldPath({"status"}));
    return s;
  }();
  return *set;
}

// The paths of `fields` at or below .status.
FieldSet OnlyStatus(const FieldSet& fields) {
  FieldSet out;
  const PathElement status = PathElement::Field("status");
  if (fields.IsMember(status)) out.Insert(Path{status});
  if (const FieldSet* child = fields.Child(status)) {
    child->Iterate([&](const Path& p) {
      Path full{status};
      full.insert(full.end(), p.begin(), p.end());
      out.Insert(full);
    });
  }
  return out;
}

// One rune of `s` at `i` (advancing i); invalid UTF-8 bytes read as U+FFFD, one each.
uint32_t NextRune(std::string_view s, size_t& i, size_t* width) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t len = 0;
  uint32_t cp = 0;
  if (c < 0x80) {
    len = 1;
    cp = c;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  }
  bool ok = len != 0 && i + len <= s.size();
  for (size_t k = 1; ok && k < len; ++k) {
    ok = (b(i + k) & 0xC0) == 0x80;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (ok && (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
  if (!ok) {
    *width = 1;
    ++i;
    return 0xFFFD;
  }
  *width = len;
  i += len;
  return cp;
}

// Go's unicode.IsPrint for the characters that matter: letters, marks, numbers,
// punctuation, symbols and the ASCII space; not controls, format characters,
// other spaces, separators, surrogates or private use.
bool IsPrint(uint32_t r) {
  if (r < 0x80) return r >= 0x20 && r < 0x7F;
  if (r < 0xA0 || r == 0xA0 || r == 0xAD) return false;
  if ((r >= 0x600 && r <= 0x605) || r == 0x61C || r == 0x6DD || r == 0x70F || r == 0x180E ||
      r == 0x1680) {
    return false;
  }
  if ((r >= 0x2000 && r <= 0x200F) || (r >= 0x2028 && r <= 0x202F) ||
      (r >= 0x205F && r <= 0x206F) || r == 0x3000 || r == 0xFEFF ||
      (r >= 0xFFF9 && r <= 0xFFFB)) {
    return false;
  }
  if ((r >= 0xD800 && r <= 0xF8FF) || r >= 0xF0000) return false;  // surrogates, private use
  return true;
}

void AppendRune(std::string* out, uint32_t r) {
  if (r < 0x80) {
    out->push_back(static_cast<char>(r));
  } else if (r < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (r >> 6)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else if (r < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (r >> 12)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (r >> 18)));
    out->push_back(static_cast<char>(0x80 | ((r >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  }
}

size_t RuneLength(uint32_t r) { return r < 0x80 ? 1 : r < 0x800 ? 2 : r < 0x10000 ? 3 : 4; }

}  // namespace

// ---------------------------------------------------------------- Manager

std::string Manager::Identifier() const {
  // The JSON of a metav1.ManagedFieldsEntry with only these fields, in its Go
  // field order: manager, operation, apiVersion, subresource (omitempty).
  std::string out = "{";
  auto field = [&out](std::string_view key, std::string_view value) {
    if (value.empty()) return;
    if (out.size() > 1) out.push_back(',');
    AppendGoJsonString(&out, key);
    out.push_back(':');
    AppendGoJsonString(&out, value);
  };
  field("manager", name);
  field("operation", OperationName(operation));
  if (operation == Operation::kUpdate) field("apiVersion", api_version);
  field("subresource", subresource);
  out.push_back('}');
  return out;
}

std::string Manager::Describe() const {
  std::string out = base::GoQuote(name);
  if (!subresource.empty()) absl::StrAppend(&out, " with subresource ", base::GoQuote(subresource));
  if (operation == Operation::kUpdate) absl::StrAppend(&out, " using ", api_version);
  return out;
}

bool Manager::SameIdentity(const Manager& other) const {
  return name == other.name && operation == other.operation && subresource == other.subresource &&
         (operation == Operation::kApply || api_version == other.api_version);
}

// ---------------------------------------------------------------- encode, decode

absl::StatusOr<Managers> DecodeManagers(const store::ManagedFields& entries) {
  Managers out;
  out.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const store::ManagedFieldsEntry& e = entries[i];
    Manager m;
    if (e.operation() == kApply) {
      m.operation = Operation::kApply;
    } else if (e.operation() != kUpdate) {
      return absl::InvalidArgumentError("operation must be `Apply` or `Update`");
    }
    if (e.api_version().empty()) return absl::InvalidArgumentError("apiVersion must not be empty");
    if (e.fields_type() != kFieldsV1) {
      return absl::InvalidArgumentError(
          e.fields_type().empty()
              ? absl::StrCat("missing fieldsType in managed fields entry ", i)
              : absl::StrCat("invalid fieldsType \"", base::Av(e.fields_type()),
                             "\" in managed fields entry ", i));
    }
    m.name = e.manager();
    m.api_version = e.api_version();
    m.subresource = e.subresource();
    m.time = e.time;
    if (!e.fields_v1().empty()) {
      auto set = FieldSet::FromJson(e.fields_v1());
      if (!set.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("error decoding fieldsV1 of managed fields entry ", i, ": ",
                         set.status().message()));
      }
      m.fields = *std::move(set);
    }
    // A repeated identity: the later entry wins, as a Go map keyed by it keeps it.
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const Manager& o) { return o.SameIdentity(m); });
    if (same != out.end()) {
      *same = std::move(m);
    } else {
      out.push_back(std::move(m));
    }
  }
  return out;
}

void SortEntries(store::ManagedFields& entries) {
  auto less = [](const store::ManagedFieldsEntry& p, const store::ManagedFieldsEntry& q) {
    if (p.operation() != q.operation()) return p.operation() < q.operation();
    const int64_t pt = p.time.value_or(0), qt = q.time.value_or(0);
    if (pt != qt) return pt < qt;
    if (p.manager() != q.manager()) return p.manager() < q.manager();
    if (p.api_version() != q.api_version()) return p.api_version() < q.api_version();
    return p.subresource() < q.subresource();
  };
  // A handful of entries, nearly always in order already (a renewal moves one):
  // a stable insertion sort, without the buffer std::stable_sort allocates.
  for (size_t i = 1; i < entries.size(); ++i) {
    for (size_t j = i; j > 0 && less(entries[j], entries[j - 1]); --j) {
      std::swap(entries[j], entries[j - 1]);
    }
  }
}

store::ManagedFields EncodeManagers(const Managers& managers) {
  store::ManagedFields out;
  out.reserve(managers.size());
  for (const Manager& m : managers) {
    if (m.fields.Empty()) continue;
    const std::string fields_v1 = m.fields.ToJson();
    out.emplace_back(store::ManagedFieldsText{m.name, OperationName(m.operation), m.api_version,
                                              kFieldsV1, fields_v1, m.subresource},
                     m.time);
  }
  SortEntries(out);
  return out;
}

// ---------------------------------------------------------------- filters

FieldSet FilterOwnedFields(const FieldSet& fields, std::string_view subresource,
                           const FieldSet& reset) {
  if (subresource == "status") return OnlyStatus(fields).Difference(reset);
  return fields.RecursiveDifference(StatusField()).Difference(StrippedFields()).Difference(reset);
}

Comparison FilterComparison(Comparison cmp, std::string_view subresource, const FieldSet& reset) {
  cmp.added = FilterOwnedFields(cmp.added, subresource, reset);
  cmp.removed = FilterOwnedFields(cmp.removed, subresource, reset);
  cmp.modified = FilterOwnedFields(cmp.modified, subresource, reset);
  return cmp;
}

const FieldSet& NoResetFields() {
  static const FieldSet* const none = new FieldSet();
  return *none;
}

// ---------------------------------------------------------------- update

void RecordUpdate(const Comparison& cmp, const std::string& manager,
                  const std::string& api_version, const std::string& subresource, int64_t now_s,
                  Managers& managers) {
  // The operation runs as a manager of its own ("current-operation"), so every
  // existing entry, the manager's earlier one included, loses what it changed.
  const FieldSet changed = cmp.modified.Union(cmp.added);
  for (Manager& m : managers) {
    m.fields = m.fields.Difference(changed).Difference(cmp.removed);
  }
  const FieldSet own = changed.Difference(cmp.removed);
  Manager me;
  me.name = manager;
  me.operation = Operation::kUpdate;
  me.api_version = api_version;
  me.subresource = subresource;
  auto it = std::find_if(managers.begin(), managers.end(),
                         [&](const Manager& m) { return m.SameIdentity(me); });
  if (!own.Empty()) {
    if (it == managers.end()) {
      managers.push_back(std::move(me));
      it = managers.end() - 1;
    }
    it->fields = own.Union(it->fields);
    it->time = now_s;
  }
  managers.erase(std::remove_if(managers.begin(), managers.end(),
                                [](const Manager& m) { return m.fields.Empty(); }),
                 managers.end());
}

void CapUpdateManagers(Managers& managers, size_t max) {
  std::vector<size_t> updaters;
  for (size_t i = 0; i < managers.size(); ++i) {
    if (managers[i].operation == Operation::kUpdate) updaters.push_back(i);
  }
  if (updaters.size() <= max) return;
  std::vector<std::string> ids(managers.size());
  for (size_t i : updaters) ids[i] = managers[i].Identifier();
  std::stable_sort(updaters.begin(), updaters.end(), [&](size_t a, size_t b) {
    const int64_t ta = managers[a].time.value_or(0), tb = managers[b].time.value_or(0);
    if (ta != tb) return ta < tb;
    return ids[a] < ids[b];
  });
  // The oldest entry of each apiVersion becomes the bucket once a second one
  // arrives; later ones merge into it, the bucket taking the newest time.
  std::map<std::string, size_t> first_of_version;
  std::vector<bool> removed(managers.size(), false);
  size_t length = updaters.size();
  for (size_t k = 0; k < updaters.size() && length > max; ++k) {
    const size_t i = updaters[k];
    const std::string& version = managers[i].api_version;
    auto first = first_of_version.find(version);
    if (first == first_of_version.end()) {
      first_of_version.emplace(version, i);
      continue;
    }
    Manager probe;
    probe.name = kAncientChangesManager;
    probe.api_version = version;
    auto bucket = std::find_if(managers.begin(), managers.end(), [&](const Manager& m) {
      return !removed[&m - managers.data()] && m.SameIdentity(probe);
    });
    size_t b;
    if (bucket == managers.end()) {
      b = first->second;
      managers[b].name = kAncientChangesManager;
      managers[b].subresource.clear();
    } else {
      b = static_cast<size_t>(bucket - managers.begin());
    }
    managers[b].fields = managers[i].fields.Union(managers[b].fields);
    managers[b].time = managers[i].time;
    removed[i] = true;
    --length;
  }
  Managers kept;
  kept.reserve(managers.size());
  for (size_t i = 0; i < managers.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(managers[i]));
  }
  managers = std::move(kept);
}

Managers BaseManagers(const store::ManagedFields* live,
                      const store::ManagedFields& sent, bool subresource) {
  auto from_live = [&]() -> Managers {
    if (live == nullptr) return {};
    auto decoded = DecodeManagers(*live);
    return decoded.ok() ? *std::move(decoded) : Managers{};
  };
  if (subresource) return from_live();
  if (sent.size() == 1 && sent[0] == store::ManagedFieldsEntry{}) return {};
  if (sent.empty()) return from_live();
  auto decoded = DecodeManagers(sent);
  if (!decoded.ok() || decoded->empty()) return from_live();
  return *std::move(decoded);
}

std::string ManagerFromUserAgent(std::string_view user_agent) {
  const std::string_view prefix = user_agent.substr(0, user_agent.find('/'));
  if (prefix.empty()) return "unknown";  // no User-Agent (or one starting with '/')
  // The common case, printable ASCII: the prefix itself.
  if (!prefix.empty() && prefix.size() <= kFieldManagerMaxLength &&
      std::all_of(prefix.begin(), prefix.end(), [](char c) { return c >= 0x20 && c < 0x7F; })) {
    return std::string(prefix);
  }
  std::string out;
  size_t i = 0;
  while (i < prefix.size()) {
    size_t width = 0;
    const uint32_t r = NextRune(prefix, i, &width);
    if (!IsPrint(r)) continue;
    if (out.size() + RuneLength(r) > kFieldManagerMaxLength) break;
    AppendRune(&out, r);
  }
  return out.empty() ? "unknown" : out;
}

}  // namespace poolcoord::handlers::ssa
