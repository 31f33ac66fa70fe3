#include "handlers/typed_json.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/string_view.h"

namespace poolcoord::handlers::ssa {
namespace {

using rapidjson::Value;

std::string_view Name(const Value& name) {
  return std::string_view(name.GetString(), name.GetStringLength());
}

const Value* Member(const Value& object, std::string_view name) {
  auto it = object.FindMember(
      Value(rapidjson::StringRef(name.data(), static_cast<rapidjson::SizeType>(name.size()))));
  return it == object.MemberEnd() ? nullptr : &it->value;
}

const char* KindName(const Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "bool";
    case rapidjson::kStringType:
      return "string";
    case rapidjson::kNumberType:
      return "number";
    case rapidjson::kArrayType:
      return "list";
    default:
      return "map";
  }
}

// An undeclared field is an atomic leaf: we neither merge into it nor own parts of it.
const SchemaNode& Untyped() {
  static const SchemaNode* const node = [] {
    auto* n = new SchemaNode();
    n->kind = SchemaNode::Kind::kMap;
    n->atomic = true;
    return n;
  }();
  return *node;
}

const SchemaNode& FieldNode(const SchemaNode& map, std::string_view name) {
  const SchemaNode* t = map.FieldType(name);
  return t ? *t : Untyped();
}

bool IsAtomic(const SchemaNode& n) {
  if (n.kind == SchemaNode::Kind::kMap) return n.atomic;
  if (n.kind == SchemaNode::Kind::kList) return n.list_type == ListType::kAtomic;
  return true;
}

bool EmptyOrNull(const Value* v) {
  if (v == nullptr || v->IsNull()) return true;
  if (v->IsObject()) return v->ObjectEmpty();
  if (v->IsArray()) return v->Empty();
  return false;
}

// ---------------------------------------------------------------- Validate

absl::Status Invalid(const Path& path, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(PathToString(path), ": ", base::Av(message)));
}

absl::Status ValidateAt(const Value& v, const SchemaNode& node, Path& path) {
  if (v.IsNull()) return absl::OkStatus();
  switch (node.kind) {
    case SchemaNode::Kind::kScalar: {
      bool ok = false;
      const char* want = "";
      switch (node.scalar) {
        case ScalarType::kString:
          ok = v.IsString();
          want = "string";
          break;
        case ScalarType::kInteger:
        case ScalarType::kNumber:
          ok = v.IsNumber();
          want = "numeric (int or float)";
          break;
        case ScalarType::kBoolean:
          ok = v.IsBool();
          want = "boolean";
          break;
      }
      if (!ok) return Invalid(path, absl::StrCat("expected ", want, ", got ", KindName(v)));
      return absl::OkStatus();
    }
    case SchemaNode::Kind::kMap: {
      if (!v.IsObject()) return Invalid(path, absl::StrCat("expected map, got ", KindName(v)));
      for (const auto& m : v.GetObject()) {
        const SchemaNode* t = node.FieldType(Name(m.name));
        path.push_back(PathElement::Field(std::string(Name(m.name))));
        absl::Status s = t ? ValidateAt(m.value, *t, path)
                           : Invalid(path, "field not declared in schema");
        path.pop_back();
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
    case SchemaNode::Kind::kList: {
      if (!v.IsArray()) return Invalid(path, absl::StrCat("expected list, got ", KindName(v)));
      std::vector<PathElement> seen;
      for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
        auto pe = ListItemElement(node, v[i], static_cast<int>(i));
        if (!pe.ok()) return Invalid(path, base::Sv(pe.status().message()));
        if (node.list_type != ListType::kAtomic) {
          for (const PathElement& s : seen) {
            if (s == *pe) {
              return Invalid(path, absl::StrCat("duplicate entries for key ", pe->ToString()));
            }
          }
          seen.push_back(*pe);
        }
        path.push_back(*std::move(pe));
        absl::Status s = ValidateAt(v[i], *node.elements, path);
        path.pop_back();
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- ToFieldSet

void ToFieldSetAt(const Value& v, const SchemaNode& node, Path& path, FieldSet& set) {
  switch (node.kind) {
    case SchemaNode::Kind::kScalar:
      set.Insert(path);
      return;
    case SchemaNode::Kind::kMap:
      if (node.atomic || !v.IsObject()) {
        if (node.atomic || !v.IsNull()) set.Insert(path);
        return;
      }
      if (v.ObjectEmpty()) {
        set.Insert(path);
        return;
      }
      for (const auto& m : v.GetObject()) {
        const std::string_view key = Name(m.name);
        path.push_back(PathElement::Field(std::string(key)));
        ToFieldSetAt(m.value, FieldNode(node, key), path, set);
        if (!node.IsNamedField(key)) set.Insert(path);
        path.pop_back();
      }
      return;
    case SchemaNode::Kind::kList:
      if (node.list_type == ListType::kAtomic || !v.IsArray()) {
        if (node.list_type == ListType::kAtomic || !v.IsNull()) set.Insert(path);
        return;
      }
      if (v.Empty()) {
        set.Insert(path);
        return;
      }
      for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
        auto pe = ListItemElement(node, v[i], static_cast<int>(i));
        if (!pe.ok()) continue;  // refused by Validate before any use that matters
        path.push_back(*std::move(pe));
        ToFieldSetAt(v[i], *node.elements, path, set);
        set.Insert(path);
        path.pop_back();
      }
      return;
  }
}

// ---------------------------------------------------------------- Compare

struct ItemIndex {
  std::vector<PathElement> order;  // first occurrence of each element
  std::vector<const Value*> values;

  const Value* Get(const PathElement& pe) const {
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] == pe) return values[i];
    }
    return nullptr;
  }
};

ItemIndex IndexItems(const SchemaNode& list, const Value* v) {
  ItemIndex index;
  if (v == nullptr || !v->IsArray()) return index;
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    auto pe = ListItemElement(list, (*v)[i], static_cast<int>(i));
    if (!pe.ok() || index.Get(*pe) != nullptr) continue;  // repeated items: the first counts
    index.order.push_back(*std::move(pe));
    index.values.push_back(&(*v)[i]);
  }
  return index;
}

class Comparer {
 public:
  explicit Comparer(Comparison* out) : out_(out) {}

  void Walk(const Value* lhs, const Value* rhs, const SchemaNode& node, Path& path) {
    bool leaf = true;
    if (node.kind == SchemaNode::Kind::kMap && !node.atomic) {
      const Value* l = lhs && lhs->IsObject() ? lhs : nullptr;
      const Value* r = rhs && rhs->IsObject() ? rhs : nullptr;
      const bool typed = (lhs == nullptr || l || lhs->IsNull()) && (rhs == nullptr || r || rhs->IsNull());
      if (typed && !(EmptyOrNull(lhs) && EmptyOrNull(rhs))) {
        leaf = false;
        if (l) {
          for (const auto& m : l->GetObject()) {
            const std::string_view key = Name(m.name);
            path.push_back(PathElement::Field(std::string(key)));
            Walk(&m.value, r ? Member(*r, key) : nullptr, FieldNode(node, key), path);
            path.pop_back();
          }
        }
        if (r) {
          for (const auto& m : r->GetObject()) {
            const std::string_view key = Name(m.name);
            if (l && Member(*l, key)) continue;
            path.push_back(PathElement::Field(std::string(key)));
            Walk(nullptr, &m.value, FieldNode(node, key), path);
            path.pop_back();
          }
        }
      }
    } else if (node.kind == SchemaNode::Kind::kList && node.list_type != ListType::kAtomic) {
      const Value* l = lhs && lhs->IsArray() ? lhs : nullptr;
      const Value* r = rhs && rhs->IsArray() ? rhs : nullptr;
      const bool typed = (lhs == nullptr || l || lhs->IsNull()) && (rhs == nullptr || r || rhs->IsNull());
      if (typed && !(EmptyOrNull(lhs) && EmptyOrNull(rhs))) {
        leaf = false;
        const ItemIndex li = IndexItems(node, l), ri = IndexItems(node, r);
        for (size_t i = 0; i < ri.order.size(); ++i) {
          path.push_back(ri.order[i]);
          Walk(li.Get(ri.order[i]), ri.values[i], *node.elements, path);
          path.pop_back();
        }
        for (size_t i = 0; i < li.order.size(); ++i) {
          if (ri.Get(li.order[i]) != nullptr) continue;
          path.push_back(li.order[i]);
          Walk(li.values[i], nullptr, *node.elements, path);
          path.pop_back();
        }
      }
    }
    if (leaf) {
      if (lhs == nullptr) {
        out_->added.Insert(path);
      } else if (rhs == nullptr) {
        out_->removed.Insert(path);
      } else if (*lhs != *rhs) {
        out_->modified.Insert(path);
      }
      return;
    }
    if (lhs == nullptr) {
      out_->added.Insert(path);
    } else if (rhs == nullptr) {
      out_->removed.Insert(path);
    }
  }

 private:
  Comparison* out_;
};

// ---------------------------------------------------------------- Merge

Value Copy(const Value* v, Allocator& a) { return v ? Value(*v, a) : Value(); }

Value MergeAt(const Value* lhs, const Value* rhs, const SchemaNode& node, Allocator& a);

Value MergeMap(const Value* lhs, const Value* rhs, const SchemaNode& node, Allocator& a) {
  const Value* l = lhs && lhs->IsObject() ? lhs : nullptr;
  const Value* r = rhs && rhs->IsObject() ? rhs : nullptr;
  Value out(rapidjson::kObjectType);
  if (l) {
    for (const auto& m : l->GetObject()) {
      const std::string_view key = Name(m.name);
      const Value* rv = r ? Member(*r, key) : nullptr;
      out.AddMember(Value(m.name, a), MergeAt(&m.value, rv, FieldNode(node, key), a), a);
    }
  }
  if (r) {
    for (const auto& m : r->GetObject()) {
      const std::string_view key = Name(m.name);
      if (l && Member(*l, key)) continue;
      out.AddMember(Value(m.name, a), MergeAt(nullptr, &m.value, FieldNode(node, key), a), a);
    }
  }
  return out;
}

// Keeps lhs's order; an item only rhs has goes where rhs places it relative to the
// items both have (structured-merge-diff's list merge).
Value MergeList(const Value* lhs, const Value* rhs, const SchemaNode& node, Allocator& a) {
  const ItemIndex li = IndexItems(node, lhs), ri = IndexItems(node, rhs);
  std::vector<const PathElement*> shared;
  for (const PathElement& pe : ri.order) {
    if (li.Get(pe) != nullptr) shared.push_back(&pe);
  }
  size_t next_shared = 0;
  auto advance_shared = [&] { ++next_shared; };
  auto is_next_shared = [&](const PathElement& pe) {
    return next_shared < shared.size() && *shared[next_shared] == pe;
  };
  std::vector<PathElement> merged_rhs;
  auto merged = [&](const PathElement& pe) {
    for (const PathElement& m : merged_rhs) {
      if (m == pe) return true;
    }
    return false;
  };
  Value out(rapidjson::kArrayType);
  size_t l = 0, r = 0;
  const size_t ln = li.order.size(), rn = ri.order.size();
  while (l < ln || r < rn) {
    if (l < ln && r < rn) {
      const PathElement& pe = li.order[l];
      if (pe == ri.order[r]) {
        merged_rhs.push_back(pe);
        out.PushBack(MergeAt(li.values[l], ri.values[r], *node.elements, a), a);
        ++l;
        ++r;
        advance_shared();
        continue;
      }
      if (ri.Get(pe) != nullptr && next_shared < shared.size() && !is_next_shared(pe)) {
        ++l;  // a shared item out of rhs's order: it is placed when rhs reaches it
        continue;
      }
    }
    if (l < ln) {
      const PathElement& pe = li.order[l];
      if (ri.Get(pe) == nullptr) {
        out.PushBack(MergeAt(li.values[l], nullptr, *node.elements, a), a);
        ++l;
        continue;
      }
      if (merged(pe)) {
        ++l;
        continue;
      }
    }
    if (r < rn) {
      const PathElement& pe = ri.order[r];
      merged_rhs.push_back(pe);
      out.PushBack(MergeAt(li.Get(pe), ri.values[r], *node.elements, a), a);
      ++r;
      if (is_next_shared(pe)) advance_shared();
    }
  }
  return out;
}

Value MergeAt(const Value* lhs, const Value* rhs, const SchemaNode& node, Allocator& a) {
  const bool keep_rhs_leaf = [&] {
    if (IsAtomic(node)) return true;
    if (EmptyOrNull(lhs) && EmptyOrNull(rhs)) return true;
    const bool want_object = node.kind == SchemaNode::Kind::kMap;
    auto fits = [&](const Value* v) {
      return v == nullptr || v->IsNull() || (want_object ? v->IsObject() : v->IsArray());
    };
    return !fits(lhs) || !fits(rhs);
  }();
  if (keep_rhs_leaf) return Copy(rhs ? rhs : lhs, a);
  return node.kind == SchemaNode::Kind::kMap ? MergeMap(lhs, rhs, node, a)
                                             : MergeList(lhs, rhs, node, a);
}

}  // namespace

absl::StatusOr<PathElement> ListItemElement(const SchemaNode& list, const Value& item,
                                            int index) {
  switch (list.list_type) {
    case ListType::kSet: {
      Scalar s;
      if (!Scalar::FromJson(item, &s)) {
        return absl::InvalidArgumentError(
            absl::StrCat("element ", index, ": a set may only hold scalars, got ", KindName(item)));
      }
      return PathElement::Value(std::move(s));
    }
    case ListType::kMap: {
      if (!item.IsObject()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "element ", index, ": associative list with keys has an element that is not a map"));
      }
      std::vector<std::pair<std::string, Scalar>> fields;
      for (const std::string& key : list.keys) {
        const Value* v = Member(item, key);
        Scalar s;
        if (v == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              "element ", index, ": associative list with keys has an element that omits key "
              "field \"", key, "\" (and doesn't have default value)"));
        }
        if (!Scalar::FromJson(*v, &s)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "element ", index, ": key field \"", key, "\" is not a scalar"));
        }
        fields.emplace_back(key, std::move(s));
      }
      return PathElement::Key(std::move(fields));
    }
    case ListType::kAtomic:
      break;
  }
  return PathElement::Index(index);
}

absl::Status Validate(const Value& value, const SchemaNode& node) {
  Path path;
  return ValidateAt(value, node, path);
}

FieldSet ToFieldSet(const Value& value, const SchemaNode& node) {
  FieldSet set;
  Path path;
  ToFieldSetAt(value, node, path, set);
  return set;
}

Comparison Compare(const Value* lhs, const Value* rhs, const SchemaNode& node) {
  Comparison out;
  Path path;
  Comparer(&out).Walk(lhs, rhs, node, path);
  return out;
}

Value Merge(const Value* lhs, const Value* rhs, const SchemaNode& node, Allocator& allocator) {
  return MergeAt(lhs, rhs, node, allocator);
}

void RemoveItems(Value& value, const FieldSet& set, const SchemaNode& node,
                 Allocator& allocator) {
  if (IsAtomic(node)) return;
  if (node.kind == SchemaNode::Kind::kMap && value.IsObject()) {
    for (auto it = value.MemberBegin(); it != value.MemberEnd();) {
      const PathElement pe = PathElement::Field(std::string(Name(it->name)));
      if (set.IsMember(pe)) {
        it = value.EraseMember(it);
        continue;
      }
      if (const FieldSet* child = set.Child(pe)) {
        RemoveItems(it->value, *child, FieldNode(node, Name(it->name)), allocator);
      }
      ++it;
    }
  } else if (node.kind == SchemaNode::Kind::kList && value.IsArray()) {
    for (rapidjson::SizeType i = 0; i < value.Size();) {
      auto pe = ListItemElement(node, value[i], static_cast<int>(i));
      if (pe.ok() && set.IsMember(*pe)) {
        value.Erase(value.Begin() + i);
        continue;
      }
      if (pe.ok()) {
        if (const FieldSet* child = set.Child(*pe)) {
          RemoveItems(value[i], *child, *node.elements, allocator);
        }
      }
      ++i;
    }
  }
}

}  // namespace poolcoord::handlers::ssa
