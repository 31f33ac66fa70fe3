#include "handlers/apply.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"

namespace poolcoord::handlers::ssa {
namespace {

using rapidjson::Value;

const FieldSet& ResetFieldsOf(const ApplyOptions& o) {
  return o.reset_fields != nullptr ? *o.reset_fields : NoResetFields();
}

constexpr char kKubectlManager[] = "kubectl";
// apimachinery's TotalAnnotationSizeLimitB.
constexpr size_t kTotalAnnotationSizeLimit = 256 * 1024;

const Value* Member(const Value& object, std::string_view name) {
  if (!object.IsObject()) return nullptr;
  auto it = object.FindMember(
      Value(rapidjson::StringRef(name.data(), static_cast<rapidjson::SizeType>(name.size()))));
  return it == object.MemberEnd() ? nullptr : &it->value;
}

Value* MutableMember(Value& object, std::string_view name) {
  if (!object.IsObject()) return nullptr;
  auto it = object.FindMember(
      Value(rapidjson::StringRef(name.data(), static_cast<rapidjson::SizeType>(name.size()))));
  return it == object.MemberEnd() ? nullptr : &it->value;
}

// {"apiVersion": ..., "kind": ...} of `from`: the "empty object" of that kind that
// kube-apiserver's field manager compares a new object against.
Value EmptyObjectLike(const Value& from, Allocator& a) {
  Value out(rapidjson::kObjectType);
  for (const char* key : {"apiVersion", "kind"}) {
    if (const Value* v = Member(from, key)) {
      out.AddMember(Value(key, a), Value(*v, a), a);
    }
  }
  return out;
}

Manager* FindApplier(Managers& managers, const ApplyOptions& o) {
  Manager probe;
  probe.name = o.manager;
  probe.operation = Operation::kApply;
  probe.subresource = o.subresource;
  for (Manager& m : managers) {
    if (m.SameIdentity(probe)) return &m;
  }
  return nullptr;
}

struct Inner {
  Value object;
  Managers managers;
  bool changed = false;
  std::vector<Conflict> conflicts;
};

Inner ApplyOnce(const Value& live, const Value& config, Managers managers, const ApplyOptions& o,
                bool force, Allocator& a) {
  const SchemaNode& root = *o.schema;
  Inner out;
  out.object = Merge(&live, &config, root, a);
  FieldSet last;
  if (Manager* me = FindApplier(managers, o)) {
    last = me->fields;
    me->fields = FieldSet();
  } else {
    Manager m;
    m.name = o.manager;
    m.operation = Operation::kApply;
    m.subresource = o.subresource;
    managers.push_back(std::move(m));
  }
  Manager* me = FindApplier(managers, o);
  me->api_version = o.api_version;
  me->fields = FilterOwnedFields(ToFieldSet(config, root), o.subresource, ResetFieldsOf(o));

  if (!last.Empty()) {
    FieldSet owned;
    for (const Manager& m : managers) owned = owned.Union(m.fields);
    FieldSet remove;
    last.Iterate([&](const Path& p) {
      if (!owned.HasPrefix(p)) remove.Insert(p);
    });
    if (!remove.Empty()) RemoveItems(out.object, remove, root, a);
  }

  const Comparison cmp =
      FilterComparison(Compare(&live, &out.object, root), o.subresource, ResetFieldsOf(o));
  const FieldSet changed = cmp.modified.Union(cmp.added);
  for (const Manager& m : managers) {
    if (&m == me) continue;
    m.fields.Intersection(changed).Iterate([&](const Path& p) {
      Conflict c;
      c.manager.name = m.name;
      c.manager.operation = m.operation;
      c.manager.api_version = m.api_version;
      c.manager.subresource = m.subresource;
      c.path = p;
      out.conflicts.push_back(std::move(c));
    });
  }
  if (!force && !out.conflicts.empty()) return out;
  out.conflicts.clear();
  for (Manager& m : managers) {
    if (&m == me) continue;
    m.fields = m.fields.Difference(changed).Difference(cmp.removed);
  }
  out.changed = live != out.object;
  if (out.changed) me->time = o.now_s;
  managers.erase(std::remove_if(managers.begin(), managers.end(),
                                [](const Manager& m) { return m.fields.Empty(); }),
                 managers.end());
  out.managers = std::move(managers);
  return out;
}

std::string_view LastAppliedOf(const Value& object) {
  const Value* md = Member(object, "metadata");
  const Value* annotations = md ? Member(*md, "annotations") : nullptr;
  const Value* v = annotations ? Member(*annotations, kLastAppliedAnnotation) : nullptr;
  if (v == nullptr || !v->IsString()) return {};
  return std::string_view(v->GetString(), v->GetStringLength());
}

// The fields whose value in the live object still equals the one in its
// last-applied annotation (lastAppliedManager.allowedConflictsFromLastApplied).
std::optional<FieldSet> AllowedFromLastApplied(const Value& live, const ApplyOptions& o) {
  const std::string_view text = LastAppliedOf(live);
  if (text.empty()) return std::nullopt;
  rapidjson::Document last;
  last.Parse(text.data(), text.size());
  if (last.HasParseError() || !last.IsObject() || !Validate(last, *o.schema).ok()) {
    return std::nullopt;
  }
  const FieldSet set = ToFieldSet(last, *o.schema);
  return set.Difference(Compare(&last, &live, *o.schema).modified);
}

bool AnnotationsFit(const Value& annotations) {
  size_t total = 0;
  for (const auto& m : annotations.GetObject()) {
    total += m.name.GetStringLength() + (m.value.IsString() ? m.value.GetStringLength() : 0);
  }
  return total <= kTotalAnnotationSizeLimit;
}

// lastAppliedUpdater: an object that has the annotation gets the applied
// configuration in it (dropped instead when the annotations would grow too big).
// Returns whether the object changed.
bool SyncLastApplied(Value& object, const Value& config, Allocator& a) {
  Value* md = MutableMember(object, "metadata");
  Value* annotations = md ? MutableMember(*md, "annotations") : nullptr;
  if (annotations == nullptr || !annotations->IsObject()) return false;
  auto it = annotations->FindMember(kLastAppliedAnnotation);
  if (it == annotations->MemberEnd()) return false;
  // The annotation is not part of what was applied.
  Value stripped(config, a);
  if (Value* cmd = MutableMember(stripped, "metadata")) {
    if (Value* ca = MutableMember(*cmd, "annotations"); ca && ca->IsObject()) {
      ca->RemoveMember(kLastAppliedAnnotation);
    }
  }
  const std::string value = LastAppliedJson(stripped);
  if (it->value.IsString() && std::string_view(it->value.GetString(), it->value.GetStringLength()) == value) {
    return false;
  }
  it->value.SetString(value.data(), static_cast<rapidjson::SizeType>(value.size()), a);
  if (!AnnotationsFit(*annotations)) annotations->RemoveMember(kLastAppliedAnnotation);
  return true;
}

void WriteGoJson(const Value& v, std::string* out) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      out->append("null");
      return;
    case rapidjson::kFalseType:
      out->append("false");
      return;
    case rapidjson::kTrueType:
      out->append("true");
      return;
    case rapidjson::kStringType:
      AppendGoJsonString(out, std::string_view(v.GetString(), v.GetStringLength()));
      return;
    case rapidjson::kNumberType: {
      if (v.IsInt64()) {
        absl::StrAppend(out, v.GetInt64());
      } else if (v.IsUint64()) {
        absl::StrAppend(out, v.GetUint64());
      } else {
        const double d = v.GetDouble();
        if (std::trunc(d) == d && std::fabs(d) < 1e21) {
          absl::StrAppend(out, static_cast<int64_t>(d));
        } else {
          rapidjson::StringBuffer buf;
          rapidjson::Writer<rapidjson::StringBuffer> w(buf);
          w.Double(d);
          out->append(buf.GetString(), buf.GetSize());
        }
      }
      return;
    }
    case rapidjson::kArrayType: {
      out->push_back('[');
      bool first = true;
      for (const Value& e : v.GetArray()) {
        if (!first) out->push_back(',');
        first = false;
        WriteGoJson(e, out);
      }
      out->push_back(']');
      return;
    }
    case rapidjson::kObjectType: {
      std::vector<const Value::Member*> members;
      for (const auto& m : v.GetObject()) members.push_back(&m);
      std::stable_sort(members.begin(), members.end(), [](const auto* x, const auto* y) {
        return std::string_view(x->name.GetString(), x->name.GetStringLength()) <
               std::string_view(y->name.GetString(), y->name.GetStringLength());
      });
      out->push_back('{');
      for (size_t i = 0; i < members.size(); ++i) {
        if (i) out->push_back(',');
        AppendGoJsonString(out, std::string_view(members[i]->name.GetString(),
                                                 members[i]->name.GetStringLength()));
        out->push_back(':');
        WriteGoJson(members[i]->value, out);
      }
      out->push_back('}');
      return;
    }
  }
}

}  // namespace

std::string LastAppliedJson(const rapidjson::Value& config) {
  std::string out;
  WriteGoJson(config, &out);
  out.push_back('\n');
  return out;
}

absl::StatusOr<ApplyResult> Apply(const rapidjson::Value* live, const rapidjson::Value& config,
                                  Managers managers, const ApplyOptions& options,
                                  rapidjson::Document::AllocatorType& allocator) {
  Value empty_live;
  if (live == nullptr) {
    empty_live = EmptyObjectLike(config, allocator);
    live = &empty_live;
  } else if (managers.empty()) {
    // An object nobody owns yet (made before managedFields existed, or reset):
    // whatever it holds belongs to "before-first-apply".
    Value empty = EmptyObjectLike(*live, allocator);
    RecordUpdate(FilterComparison(Compare(&empty, live, *options.schema), options.subresource,
                                  ResetFieldsOf(options)),
                 kBeforeFirstApplyManager, options.api_version, options.subresource,
                 options.now_s, managers);
  }
  Inner inner = ApplyOnce(*live, config, managers, options, options.force, allocator);
  if (!inner.conflicts.empty() && options.manager == kKubectlManager) {
    if (std::optional<FieldSet> allowed = AllowedFromLastApplied(*live, options)) {
      std::vector<Conflict> rest;
      for (Conflict& c : inner.conflicts) {
        if (!allowed->Has(c.path)) rest.push_back(std::move(c));
      }
      if (rest.empty()) {
        inner = ApplyOnce(*live, config, std::move(managers), options, /*force=*/true, allocator);
      } else {
        inner.conflicts = std::move(rest);
      }
    }
  }
  if (!inner.conflicts.empty()) return ApplyConflictError(std::move(inner.conflicts));
  ApplyResult result;
  result.object = std::move(inner.object);
  result.managers = std::move(inner.managers);
  result.changed = inner.changed;
  if (options.manager == kKubectlManager && SyncLastApplied(result.object, config, allocator)) {
    result.changed = true;
  }
  return result;
}

absl::Status ApplyConflictError(std::vector<Conflict> conflicts) {
  std::stable_sort(conflicts.begin(), conflicts.end(), [](const Conflict& a, const Conflict& b) {
    return a.manager.Identifier() < b.manager.Identifier();
  });
  store::ApiErrorInfo info;
  info.code = 409;
  info.reason = "Conflict";
  for (const Conflict& c : conflicts) {
    info.causes.push_back({"FieldManagerConflict",
                           absl::StrCat("conflict with ", c.manager.Describe()),
                           PathToString(c.path)});
  }
  if (conflicts.size() == 1) {
    info.message = absl::StrCat("Apply failed with 1 conflict: conflict with ",
                                conflicts[0].manager.Describe(), ": ",
                                PathToString(conflicts[0].path));
  } else {
    std::vector<std::string> lines;
    std::string current;
    for (const Conflict& c : conflicts) {
      const std::string id = c.manager.Identifier();
      if (id != current) {
        lines.push_back(absl::StrCat("conflicts with ", c.manager.Describe(), ":"));
        current = id;
      }
      lines.push_back(absl::StrCat("- ", PathToString(c.path)));
    }
    info.message = absl::StrCat("Apply failed with ", conflicts.size(),
                                " conflicts: ", absl::StrJoin(lines, "\n"));
  }
  return store::MakeApiError(absl::StatusCode::kAborted, info);
}

}  // namespace poolcoord::handlers::ssa
