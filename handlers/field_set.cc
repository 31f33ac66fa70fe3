#include "handlers/field_set.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/quote.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::handlers::ssa {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

int CompareDouble(double a, double b) {
  if (a < b) return -1;
  if (a > b) return 1;
  return 0;
}

}  // namespace

void AppendGoJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out->append("\\\"");
        continue;
      case '\\':
        out->append("\\\\");
        continue;
      case '\b':
        out->append("\\b");
        continue;
      case '\f':
        out->append("\\f");
        continue;
      case '\n':
        out->append("\\n");
        continue;
      case '\r':
        out->append("\\r");
        continue;
      case '\t':
        out->append("\\t");
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xf]);
      continue;
    }
    // U+2028 and U+2029 are E2 80 A8 / E2 80 A9.
    if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
         static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      out->append(static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029");
      i += 2;
      continue;
    }
    out->push_back(static_cast<char>(c));
  }
  out->push_back('"');
}

// ---------------------------------------------------------------- Scalar

Scalar Scalar::Bool(bool b) {
  Scalar s;
  s.v_ = b;
  return s;
}
Scalar Scalar::Int(int64_t i) {
  Scalar s;
  s.v_ = i;
  return s;
}
Scalar Scalar::Double(double d) {
  Scalar s;
  s.v_ = d;
  return s;
}
Scalar Scalar::String(std::string str) {
  Scalar s;
  s.v_ = std::move(str);
  return s;
}

bool Scalar::FromJson(const rapidjson::Value& v, Scalar* out) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      *out = Scalar();
      return true;
    case rapidjson::kTrueType:
    case rapidjson::kFalseType:
      *out = Bool(v.GetBool());
      return true;
    case rapidjson::kStringType:
      *out = String(std::string(v.GetString(), v.GetStringLength()));
      return true;
    case rapidjson::kNumberType:
      *out = v.IsInt64() ? Int(v.GetInt64()) : Double(v.GetDouble());
      return true;
    default:
      return false;
  }
}

std::string Scalar::ToJson() const {
  std::string out;
  switch (v_.index()) {
    case 0:
      return "null";
    case 1:
      return std::get<bool>(v_) ? "true" : "false";
    case 2:
      return std::to_string(std::get<int64_t>(v_));
    case 3: {
      rapidjson::StringBuffer buf;
      JsonWriter w(buf);
      w.Double(std::get<double>(v_));
      return std::string(buf.GetString(), buf.GetSize());
    }
    default:
      AppendGoJsonString(&out, std::get<std::string>(v_));
      return out;
  }
}

std::string Scalar::ToPathString() const {
  if (is_string()) return base::GoQuote(str());
  return ToJson();
}

rapidjson::Value Scalar::ToValue(rapidjson::Document::AllocatorType& allocator) const {
  switch (v_.index()) {
    case 0:
      return rapidjson::Value();
    case 1:
      return rapidjson::Value(std::get<bool>(v_));
    case 2:
      return rapidjson::Value(static_cast<int64_t>(std::get<int64_t>(v_)));
    case 3:
      return rapidjson::Value(std::get<double>(v_));
    default: {
      const std::string& s = std::get<std::string>(v_);
      return rapidjson::Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), allocator);
    }
  }
}

int Compare(const Scalar& a, const Scalar& b) {
  // Rank: numbers 0, strings 1, bools 2, null 3.
  auto rank = [](const Scalar& s) {
    switch (s.v_.index()) {
      case 2:
      case 3:
        return 0;
      case 4:
        return 1;
      case 1:
        return 2;
      default:
        return 3;
    }
  };
  const int ra = rank(a), rb = rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case 0: {
      const bool ai = a.v_.index() == 2, bi = b.v_.index() == 2;
      if (ai && bi) {
        const int64_t x = std::get<int64_t>(a.v_), y = std::get<int64_t>(b.v_);
        return x < y ? -1 : (x > y ? 1 : 0);
      }
      const double da = ai ? static_cast<double>(std::get<int64_t>(a.v_)) : std::get<double>(a.v_);
      const double db = bi ? static_cast<double>(std::get<int64_t>(b.v_)) : std::get<double>(b.v_);
      return CompareDouble(da, db);
    }
    case 1: {
      const int c = std::get<std::string>(a.v_).compare(std::get<std::string>(b.v_));
      return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    case 2:
      return static_cast<int>(std::get<bool>(a.v_)) - static_cast<int>(std::get<bool>(b.v_));
    default:
      return 0;
  }
}

// ---------------------------------------------------------------- PathElement

PathElement PathElement::Field(std::string name) {
  PathElement pe;
  pe.type_ = Type::kField;
  pe.name_ = std::move(name);
  return pe;
}

PathElement PathElement::Key(std::vector<std::pair<std::string, Scalar>> fields) {
  PathElement pe;
  pe.type_ = Type::kKey;
  std::sort(fields.begin(), fields.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  pe.key_ = std::move(fields);
  return pe;
}

PathElement PathElement::Value(Scalar value) {
  PathElement pe;
  pe.type_ = Type::kValue;
  pe.value_ = std::move(value);
  return pe;
}

PathElement PathElement::Index(int index) {
  PathElement pe;
  pe.type_ = Type::kIndex;
  pe.index_ = index;
  return pe;
}

std::string PathElement::ToFieldsV1Key() const {
  switch (type_) {
    case Type::kField:
      return absl::StrCat("f:", name_);
    case Type::kKey: {
      std::string out = "k:{";
      for (size_t i = 0; i < key_.size(); ++i) {
        if (i) out.push_back(',');
        AppendGoJsonString(&out, key_[i].first);
        out.push_back(':');
        out += key_[i].second.ToJson();
      }
      out.push_back('}');
      return out;
    }
    case Type::kValue:
      return absl::StrCat("v:", value_.ToJson());
    case Type::kIndex:
      return absl::StrCat("i:", index_);
  }
  return "";
}

absl::StatusOr<PathElement> PathElement::FromFieldsV1Key(std::string_view key) {
  if (key.size() < 2 || key[1] != ':') {
    return absl::InvalidArgumentError(absl::StrCat("bad path element \"", Sv(key), "\""));
  }
  const std::string_view rest = key.substr(2);
  switch (key[0]) {
    case 'f':
      return Field(std::string(rest));
    case 'i': {
      int i = 0;
      if (!absl::SimpleAtoi(Sv(rest), &i)) {
        return absl::InvalidArgumentError(absl::StrCat("bad index in \"", Sv(key), "\""));
      }
      return Index(i);
    }
    case 'k':
    case 'v': {
      rapidjson::Document d;
      d.Parse(rest.data(), rest.size());
      if (d.HasParseError()) {
        return absl::InvalidArgumentError(absl::StrCat("bad JSON in \"", Sv(key), "\""));
      }
      if (key[0] == 'v') {
        Scalar s;
        if (!Scalar::FromJson(d, &s)) {
          return absl::InvalidArgumentError(absl::StrCat("non-scalar value in \"", Sv(key), "\""));
        }
        return Value(std::move(s));
      }
      if (!d.IsObject()) {
        return absl::InvalidArgumentError(absl::StrCat("key is not an object in \"", Sv(key), "\""));
      }
      std::vector<std::pair<std::string, Scalar>> fields;
      for (const auto& m : d.GetObject()) {
        Scalar s;
        if (!Scalar::FromJson(m.value, &s)) {
          return absl::InvalidArgumentError(absl::StrCat("non-scalar key in \"", Sv(key), "\""));
        }
        fields.emplace_back(std::string(m.name.GetString(), m.name.GetStringLength()),
                            std::move(s));
      }
      return Key(std::move(fields));
    }
    default:
      return absl::NotFoundError(absl::StrCat("unknown path element kind in \"", Sv(key), "\""));
  }
}

std::string PathElement::ToString() const {
  switch (type_) {
    case Type::kField:
      return absl::StrCat(".", name_);
    case Type::kKey: {
      std::string out = "[";
      for (size_t i = 0; i < key_.size(); ++i) {
        absl::StrAppend(&out, i ? "," : "", key_[i].first, "=", key_[i].second.ToPathString());
      }
      out.push_back(']');
      return out;
    }
    case Type::kValue:
      return absl::StrCat("[=", value_.ToPathString(), "]");
    case Type::kIndex:
      return absl::StrCat("[", index_, "]");
  }
  return "";
}

int Compare(const PathElement& a, const PathElement& b) {
  if (a.type_ != b.type_) return a.type_ < b.type_ ? -1 : 1;
  switch (a.type_) {
    case PathElement::Type::kField: {
      const int c = a.name_.compare(b.name_);
      return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    case PathElement::Type::kKey: {
      for (size_t i = 0;; ++i) {
        if (i >= a.key_.size() && i >= b.key_.size()) return 0;
        if (i >= a.key_.size()) return -1;
        if (i >= b.key_.size()) return 1;
        if (int c = a.key_[i].first.compare(b.key_[i].first); c != 0) return c < 0 ? -1 : 1;
        if (int c = Compare(a.key_[i].second, b.key_[i].second); c != 0) return c;
      }
    }
    case PathElement::Type::kValue:
      return Compare(a.value_, b.value_);
    case PathElement::Type::kIndex:
      return a.index_ < b.index_ ? -1 : (a.index_ > b.index_ ? 1 : 0);
  }
  return 0;
}

std::string PathToString(const Path& path) {
  std::string out;
  for (const PathElement& pe : path) out += pe.ToString();
  return out;
}

Path FieldPath(std::initializer_list<std::string_view> fields) {
  Path p;
  for (std::string_view f : fields) p.push_back(PathElement::Field(std::string(f)));
  return p;
}

// ---------------------------------------------------------------- FieldSet

FieldSet* FieldSet::MutableChild(const PathElement& pe) {
  auto it = std::lower_bound(children_.begin(), children_.end(), pe,
                             [](const ChildNode& c, const PathElement& p) { return c.pe < p; });
  if (it == children_.end() || !(it->pe == pe)) it = children_.insert(it, ChildNode{pe, FieldSet()});
  return &it->set;
}

void FieldSet::Insert(const PathElement* begin, const PathElement* end) {
  if (begin == end) return;
  if (end - begin == 1) {
    auto it = std::lower_bound(members_.begin(), members_.end(), *begin);
    if (it == members_.end() || !(*it == *begin)) members_.insert(it, *begin);
    return;
  }
  MutableChild(*begin)->Insert(begin + 1, end);
}

void FieldSet::Insert(const Path& path) { Insert(path.data(), path.data() + path.size()); }

bool FieldSet::IsMember(const PathElement& pe) const {
  return std::binary_search(members_.begin(), members_.end(), pe);
}

const FieldSet* FieldSet::Child(const PathElement& pe) const {
  auto it = std::lower_bound(children_.begin(), children_.end(), pe,
                             [](const ChildNode& c, const PathElement& p) { return c.pe < p; });
  if (it == children_.end() || !(it->pe == pe)) return nullptr;
  return &it->set;
}

bool FieldSet::Has(const Path& path) const {
  const FieldSet* s = this;
  for (size_t i = 0; i < path.size(); ++i) {
    if (i + 1 == path.size()) return s->IsMember(path[i]);
    s = s->Child(path[i]);
    if (s == nullptr) return false;
  }
  return false;
}

bool FieldSet::HasPrefix(const Path& prefix) const {
  const FieldSet* s = this;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (i + 1 == prefix.size()) return s->IsMember(prefix[i]) || s->Child(prefix[i]) != nullptr;
    s = s->Child(prefix[i]);
    if (s == nullptr) return false;
  }
  return !Empty();
}

FieldSet FieldSet::Union(const FieldSet& other) const {
  FieldSet out;
  std::set_union(members_.begin(), members_.end(), other.members_.begin(), other.members_.end(),
                 std::back_inserter(out.members_));
  size_t i = 0, j = 0;
  while (i < children_.size() || j < other.children_.size()) {
    if (j == other.children_.size() ||
        (i < children_.size() && children_[i].pe < other.children_[j].pe)) {
      out.children_.push_back(children_[i++]);
    } else if (i == children_.size() || other.children_[j].pe < children_[i].pe) {
      out.children_.push_back(other.children_[j++]);
    } else {
      out.children_.push_back({children_[i].pe, children_[i].set.Union(other.children_[j].set)});
      ++i;
      ++j;
    }
  }
  return out;
}

FieldSet FieldSet::Intersection(const FieldSet& other) const {
  FieldSet out;
  std::set_intersection(members_.begin(), members_.end(), other.members_.begin(),
                        other.members_.end(), std::back_inserter(out.members_));
  for (const ChildNode& c : children_) {
    if (const FieldSet* oc = other.Child(c.pe)) {
      FieldSet s = c.set.Intersection(*oc);
      if (!s.Empty()) out.children_.push_back({c.pe, std::move(s)});
    }
  }
  return out;
}

FieldSet FieldSet::Difference(const FieldSet& other) const {
  FieldSet out;
  std::set_difference(members_.begin(), members_.end(), other.members_.begin(),
                      other.members_.end(), std::back_inserter(out.members_));
  for (const ChildNode& c : children_) {
    if (const FieldSet* oc = other.Child(c.pe)) {
      FieldSet s = c.set.Difference(*oc);
      if (!s.Empty()) out.children_.push_back({c.pe, std::move(s)});
    } else {
      out.children_.push_back(c);
    }
  }
  return out;
}

FieldSet FieldSet::RecursiveDifference(const FieldSet& other) const {
  FieldSet out;
  std::set_difference(members_.begin(), members_.end(), other.members_.begin(),
                      other.members_.end(), std::back_inserter(out.members_));
  for (const ChildNode& c : children_) {
    if (other.IsMember(c.pe)) continue;
    if (const FieldSet* oc = other.Child(c.pe)) {
      FieldSet s = c.set.RecursiveDifference(*oc);
      if (!s.Empty()) out.children_.push_back({c.pe, std::move(s)});
    } else {
      out.children_.push_back(c);
    }
  }
  return out;
}

void FieldSet::IteratePrefix(Path& prefix, const std::function<void(const Path&)>& fn) const {
  for (const PathElement& pe : members_) {
    prefix.push_back(pe);
    fn(prefix);
    prefix.pop_back();
  }
  for (const ChildNode& c : children_) {
    prefix.push_back(c.pe);
    c.set.IteratePrefix(prefix, fn);
    prefix.pop_back();
  }
}

void FieldSet::Iterate(const std::function<void(const Path&)>& fn) const {
  Path prefix;
  IteratePrefix(prefix, fn);
}

size_t FieldSet::Size() const {
  size_t n = members_.size();
  for (const ChildNode& c : children_) n += c.set.Size();
  return n;
}

bool operator==(const FieldSet& a, const FieldSet& b) {
  if (a.members_ != b.members_ || a.children_.size() != b.children_.size()) return false;
  for (size_t i = 0; i < a.children_.size(); ++i) {
    if (!(a.children_[i].pe == b.children_[i].pe) || !(a.children_[i].set == b.children_[i].set)) {
      return false;
    }
  }
  return true;
}

template <typename Writer>
void FieldSet::WriteContents(Writer& w, bool include_self) const {
  if (include_self && !Empty()) {
    w.Key(".");
    w.StartObject();
    w.EndObject();
  }
  auto key = [&w](const PathElement& pe) {
    const std::string k = pe.ToFieldsV1Key();
    w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
  };
  size_t mi = 0, ci = 0;
  while (mi < members_.size() || ci < children_.size()) {
    const int c = mi == members_.size()    ? 1
                  : ci == children_.size() ? -1
                                           : Compare(members_[mi], children_[ci].pe);
    if (c < 0) {
      key(members_[mi++]);
      w.StartObject();
      w.EndObject();
    } else {
      key(children_[ci].pe);
      w.StartObject();
      children_[ci].set.WriteContents(w, /*include_self=*/c == 0);
      w.EndObject();
      if (c == 0) ++mi;
      ++ci;
    }
  }
}

std::string FieldSet::ToJson() const {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  WriteContents(w, false);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

// Reads one level of FieldsV1 into `out`; sets *is_member when the level says
// "." or is empty (a leaf). Keys may come in any order and repeat (the last
// child of a repeated key wins, as structured-merge-diff keeps it).
absl::Status FieldSet::ReadLevel(const rapidjson::Value& v, FieldSet* out, bool* is_member) {
  if (!v.IsObject()) return absl::InvalidArgumentError("a FieldsV1 level is not an object");
  *is_member = v.ObjectEmpty();
  for (const auto& m : v.GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (key == ".") {
      if (!m.value.IsObject()) return absl::InvalidArgumentError("\".\" is not an object");
      *is_member = true;
      continue;
    }
    auto pe = PathElement::FromFieldsV1Key(key);
    if (absl::IsNotFound(pe.status())) continue;  // a kind a later version may know
    if (!pe.ok()) return pe.status();
    bool child_member = false;
    FieldSet child;
    if (absl::Status s = ReadLevel(m.value, &child, &child_member); !s.ok()) return s;
    if (child_member) out->Insert(&*pe, &*pe + 1);
    if (!child.Empty()) *out->MutableChild(*pe) = std::move(child);
  }
  return absl::OkStatus();
}

absl::StatusOr<FieldSet> FieldSet::FromJson(const rapidjson::Value& json) {
  FieldSet out;
  bool root_member = false;
  if (absl::Status s = ReadLevel(json, &out, &root_member); !s.ok()) return s;
  return out;
}

absl::StatusOr<FieldSet> FieldSet::FromJson(std::string_view json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError()) return absl::InvalidArgumentError("fieldsV1 is not valid JSON");
  return FromJson(d);
}

// ---------------------------------------------------------------- FieldsV1 scan

std::optional<bool> FieldsV1HasFieldPath(std::string_view json,
                                         std::initializer_list<std::string_view> fields) {
  // FieldsV1 holds only objects and keys, so every string is a key. One pass:
  // `matched` path elements found, the next is looked for among the keys at
  // depth matched + 1; leaving that object means it is absent.
  const std::string_view* path = fields.begin();
  const size_t n = fields.size();
  size_t matched = 0;
  int depth = 0;
  size_t i = 0;
  const size_t size = json.size();
  while (i < size) {
    const char c = json[i];
    if (c == '"') {
      const size_t start = ++i;
      while (i < size && json[i] != '"') {
        if (json[i] == '\\') return std::nullopt;
        ++i;
      }
      if (i == size) return std::nullopt;
      const std::string_view key(json.data() + start, i - start);
      ++i;
      if (i >= size || json[i] != ':') return std::nullopt;
      if (depth != static_cast<int>(matched) + 1) continue;
      const std::string_view want = path[matched];
      if (key.size() != want.size() + 2 || key[0] != 'f' || key[1] != ':' ||
          key.substr(2) != want) {
        continue;
      }
      if (++matched < n) continue;
      // A member: its value is {} or starts with ".".
      if (json.compare(i, 3, ":{}") == 0) return true;
      return json.compare(i, 6, ":{\".\":") == 0;
    }
    if (c == '{') {
      ++depth;
    } else if (c == '}') {
      if (--depth < static_cast<int>(matched) + 1) return depth < 0 ? std::nullopt : std::optional<bool>(false);
    } else if (c != ':' && c != ',') {
      return std::nullopt;  // not compact FieldsV1
    }
    ++i;
  }
  return std::nullopt;
}

bool FieldsV1ChildMembers(std::string_view json, std::string_view parent,
                          const std::function<void(std::string_view)>& fn) {
  int depth = 0;
  bool inside = false;  // within parent's object
  const size_t size = json.size();
  size_t i = 0;
  while (i < size) {
    const char c = json[i];
    if (c == '"') {
      const size_t start = ++i;
      while (i < size && json[i] != '"') {
        if (json[i] == '\\') return false;
        ++i;
      }
      if (i == size) return false;
      const std::string_view key(json.data() + start, i - start);
      ++i;
      if (i >= size || json[i] != ':') return false;
      if (depth == 1 && !inside) {
        if (key.size() == parent.size() + 2 && key.substr(0, 2) == "f:" && key.substr(2) == parent) {
          inside = true;
        }
      } else if (depth == 2 && inside && key.size() > 2 && key.substr(0, 2) == "f:" &&
                 (json.compare(i, 3, ":{}") == 0 || json.compare(i, 6, ":{\".\":") == 0)) {
        fn(key.substr(2));
      }
      continue;
    }
    if (c == '{') {
      ++depth;
    } else if (c == '}') {
      if (--depth < 0) return false;
      if (depth == 1 && inside) return true;  // parent's object ends
      if (depth == 0) return true;
    } else if (c != ':' && c != ',') {
      return false;
    }
    ++i;
  }
  return false;
}

}  // namespace poolcoord::handlers::ssa
