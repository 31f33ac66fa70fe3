#include "handlers/patch.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "handlers/validation.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"

namespace poolcoord::handlers {
namespace {

using rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;


void MergeInto(Value& target, const Value& patch, Allocator& allocator) {
  if (!patch.IsObject()) {
    target.CopyFrom(patch, allocator);
    return;
  }
  if (!target.IsObject()) target.SetObject();
  for (const auto& member : patch.GetObject()) {
    auto it = target.FindMember(member.name);
    if (member.value.IsNull()) {
      // EraseMember keeps the order of the remaining members (RemoveMember would not).
      if (it != target.MemberEnd()) target.EraseMember(it);
      continue;
    }
    if (it != target.MemberEnd()) {
      MergeInto(it->value, member.value, allocator);
    } else {
      // A new member still goes through MergeInto so nested nulls are dropped.
      Value value;
      MergeInto(value, member.value, allocator);
      target.AddMember(Value(member.name, allocator), value, allocator);
    }
  }
}

// ---- JSON patch ----

enum class OpKind { kAdd, kRemove, kReplace, kMove, kCopy, kTest };

struct Operation {
  OpKind kind = OpKind::kAdd;
  std::string name;                 // "add", ...
  std::string path;                 // as written, for messages
  std::vector<std::string> tokens;  // unescaped reference tokens of path
  std::string from;
  std::vector<std::string> from_tokens;
  const Value* value = nullptr;  // points into `ops`
};

absl::Status Unprocessable(std::string message) {
  store::ApiErrorInfo info;
  info.code = 422;
  info.reason = "Invalid";
  info.message = std::move(message);
  return store::MakeApiError(absl::StatusCode::kInvalidArgument, info);
}

// RFC 6901: "" is the whole document, otherwise '/'-separated tokens.
std::optional<std::vector<std::string>> ParsePointer(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) return tokens;
  if (pointer.front() != '/') return std::nullopt;
  pointer.remove_prefix(1);
  while (true) {
    size_t slash = pointer.find('/');
    std::string_view raw = pointer.substr(0, slash);
    std::string token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '~') {
        token.push_back(raw[i]);
        continue;
      }
      if (i + 1 == raw.size() || (raw[i + 1] != '0' && raw[i + 1] != '1')) return std::nullopt;
      token.push_back(raw[++i] == '0' ? '~' : '/');
    }
    tokens.push_back(std::move(token));
    if (slash == std::string_view::npos) break;
    pointer.remove_prefix(slash + 1);
  }
  return tokens;
}

// An array index: "0" or digits without a leading zero.
std::optional<size_t> ParseIndex(const std::string& token) {
  if (token.empty() || token.size() > 9) return std::nullopt;
  if (token.size() > 1 && token[0] == '0') return std::nullopt;
  size_t index = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + static_cast<size_t>(c - '0');
  }
  return index;
}

// The value at tokens[0, count), or nullptr when it does not exist.
Value* Resolve(Value& root, const std::vector<std::string>& tokens, size_t count) {
  Value* current = &root;
  for (size_t i = 0; i < count; ++i) {
    const std::string& token = tokens[i];
    if (current->IsObject()) {
      auto it = current->FindMember(
          Value(rapidjson::StringRef(token.data(), static_cast<rapidjson::SizeType>(token.size()))));
      if (it == current->MemberEnd()) return nullptr;
      current = &it->value;
    } else if (current->IsArray()) {
      auto index = ParseIndex(token);
      if (!index || *index >= current->Size()) return nullptr;
      current = &(*current)[static_cast<rapidjson::SizeType>(*index)];
    } else {
      return nullptr;
    }
  }
  return current;
}

Value* Resolve(Value& root, const std::vector<std::string>& tokens) {
  return Resolve(root, tokens, tokens.size());
}

Value Key(const std::string& token, Allocator& allocator) {
  return Value(token.data(), static_cast<rapidjson::SizeType>(token.size()), allocator);
}

// Compact JSON of a value for messages, cut at 100 bytes.
std::string Render(const Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value.Accept(writer);
  std::string out(buffer.GetString(), buffer.GetSize());
  if (out.size() > 100) out = out.substr(0, 100) + "...";
  return out;
}

std::string Describe(const Operation& op) {
  return absl::StrCat(op.name, " operation failed: path ", base::GoQuote(op.path));
}

// Adds `value` (moved from) at op.tokens.
absl::Status Add(rapidjson::Document& doc, const Operation& op, Value& value) {
  Allocator& allocator = doc.GetAllocator();
  if (op.tokens.empty()) {
    static_cast<Value&>(doc) = value;  // replaces the whole document
    return absl::OkStatus();
  }
  Value* parent = Resolve(doc, op.tokens, op.tokens.size() - 1);
  if (parent == nullptr) {
    return Unprocessable(absl::StrCat(Describe(op), ": the parent does not exist"));
  }
  const std::string& last = op.tokens.back();
  if (parent->IsObject()) {
    auto it = parent->FindMember(Key(last, allocator));
    if (it != parent->MemberEnd()) {
      it->value = value;
    } else {
      parent->AddMember(Key(last, allocator), value, allocator);
    }
    return absl::OkStatus();
  }
  if (parent->IsArray()) {
    size_t size = parent->Size();
    std::optional<size_t> index = last == "-" ? std::optional<size_t>(size) : ParseIndex(last);
    if (!index || *index > size) {
      return Unprocessable(absl::StrCat(Describe(op), ": array index ", base::GoQuote(last),
                                        " is out of range (size ", size, ")"));
    }
    // RapidJSON has no insert: append, then bubble the new element into place.
    parent->PushBack(value, allocator);
    for (size_t i = size; i > *index; --i) {
      (*parent)[static_cast<rapidjson::SizeType>(i)].Swap(
          (*parent)[static_cast<rapidjson::SizeType>(i - 1)]);
    }
    return absl::OkStatus();
  }
  return Unprocessable(absl::StrCat(Describe(op), ": the parent is neither an object nor an array"));
}

// Removes the value at `tokens` and hands it back in `removed`.
absl::Status Remove(Value& root, const Operation& op, const std::vector<std::string>& tokens,
                    const std::string& shown_path, Value* removed) {
  if (tokens.empty()) {
    return Unprocessable(absl::StrCat(op.name, " operation failed: cannot remove the whole document"));
  }
  Value* parent = Resolve(root, tokens, tokens.size() - 1);
  const std::string& last = tokens.back();
  if (parent != nullptr && parent->IsObject()) {
    auto it = parent->FindMember(
        Value(rapidjson::StringRef(last.data(), static_cast<rapidjson::SizeType>(last.size()))));
    if (it != parent->MemberEnd()) {
      removed->Swap(it->value);
      parent->EraseMember(it);
      return absl::OkStatus();
    }
  } else if (parent != nullptr && parent->IsArray()) {
    auto index = ParseIndex(last);
    if (index && *index < parent->Size()) {
      removed->Swap((*parent)[static_cast<rapidjson::SizeType>(*index)]);
      parent->Erase(parent->Begin() + *index);
      return absl::OkStatus();
    }
  }
  return Unprocessable(absl::StrCat(op.name, " operation failed: path ", base::GoQuote(shown_path),
                                    " does not exist"));
}

// Bytes a value would take as JSON, roughly; counting stops once past `limit`.
size_t ApproxSize(const Value& v, size_t limit) {
  size_t n = 8;
  if (v.IsString()) return n + v.GetStringLength();
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) {
      if (n > limit) break;
      n += ApproxSize(e, limit - n);
    }
  } else if (v.IsObject()) {
    for (const auto& m : v.GetObject()) {
      if (n > limit) break;
      n += m.name.GetStringLength() + ApproxSize(m.value, limit - n);
    }
  }
  return n;
}

// A patch may copy at most this much in total: 23 "copy" ops of a value into
// itself doubled it each time (1 GB from a 1.3 KB patch, reported by a newcomer).
constexpr size_t kMaxCopiedBytes = 3 * 1024 * 1024;

absl::Status Apply(rapidjson::Document& doc, const Operation& op, size_t* copied) {
  Allocator& allocator = doc.GetAllocator();
  switch (op.kind) {
    case OpKind::kAdd: {
      Value value(*op.value, allocator);
      return Add(doc, op, value);
    }
    case OpKind::kRemove: {
      Value removed;
      return Remove(doc, op, op.tokens, op.path, &removed);
    }
    case OpKind::kReplace: {
      Value* target = Resolve(doc, op.tokens);
      if (target == nullptr) return Unprocessable(absl::StrCat(Describe(op), " does not exist"));
      target->CopyFrom(*op.value, allocator);
      return absl::OkStatus();
    }
    case OpKind::kMove: {
      if (op.from_tokens == op.tokens) {
        if (Resolve(doc, op.from_tokens) == nullptr) {
          return Unprocessable(absl::StrCat(op.name, " operation failed: from ", base::GoQuote(op.from),
                                            " does not exist"));
        }
        return absl::OkStatus();
      }
      // RFC 6902 4.4: a location cannot be moved into one of its children.
      if (op.tokens.size() > op.from_tokens.size() &&
          std::equal(op.from_tokens.begin(), op.from_tokens.end(), op.tokens.begin())) {
        return Unprocessable(absl::StrCat(op.name, " operation failed: cannot move ",
                                          base::GoQuote(op.from), " into its own child ",
                                          base::GoQuote(op.path)));
      }
      Value moved;
      if (auto s = Remove(doc, op, op.from_tokens, op.from, &moved); !s.ok()) return s;
      return Add(doc, op, moved);
    }
    case OpKind::kCopy: {
      Value* source = Resolve(doc, op.from_tokens);
      if (source == nullptr) {
        return Unprocessable(absl::StrCat(op.name, " operation failed: from ", base::GoQuote(op.from),
                                          " does not exist"));
      }
      *copied += ApproxSize(*source, kMaxCopiedBytes);
      if (*copied > kMaxCopiedBytes) {
        return store::RequestEntityTooLargeError(absl::StrCat(
            "the JSON patch copies more than ", kMaxCopiedBytes, " bytes in total"));
      }
      Value copy(*source, allocator);
      return Add(doc, op, copy);
    }
    case OpKind::kTest: {
      Value* target = Resolve(doc, op.tokens);
      if (target == nullptr) return Unprocessable(absl::StrCat(Describe(op), " does not exist"));
      // RapidJSON's == compares numbers by value (1 == 1.0) and objects regardless
      // of member order, as RFC 6902 4.6 asks.
      if (!(*target == *op.value)) {
        return Unprocessable(absl::StrCat(Describe(op), ": found ", Render(*target),
                                          ", expected ", Render(*op.value)));
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

// Structural checks of one operation (400 on failure).
absl::StatusOr<Operation> Decode(const Value& raw, size_t index) {
  auto bad = [index](std::string_view what) {
    return store::BadRequestError(
        absl::StrCat("invalid JSON patch: operation ", index, ": ", base::Av(what)));
  };
  if (!raw.IsObject()) return bad("must be an object");
  auto op_it = raw.FindMember("op");
  if (op_it == raw.MemberEnd() || !op_it->value.IsString()) return bad("missing \"op\"");
  Operation op;
  op.name.assign(op_it->value.GetString(), op_it->value.GetStringLength());
  static constexpr std::pair<const char*, OpKind> kOps[] = {
      {"add", OpKind::kAdd},   {"remove", OpKind::kRemove}, {"replace", OpKind::kReplace},
      {"move", OpKind::kMove}, {"copy", OpKind::kCopy},     {"test", OpKind::kTest}};
  bool known = false;
  for (const auto& [name, kind] : kOps) {
    if (op.name == name) {
      op.kind = kind;
      known = true;
    }
  }
  if (!known) {
    return bad(absl::StrCat("unknown op ", base::GoQuote(op.name),
                            "; supported: add, remove, replace, move, copy, test"));
  }
  auto path_it = raw.FindMember("path");
  if (path_it == raw.MemberEnd() || !path_it->value.IsString()) {
    return bad(absl::StrCat(op.name, " needs a string \"path\""));
  }
  op.path.assign(path_it->value.GetString(), path_it->value.GetStringLength());
  auto tokens = ParsePointer(op.path);
  if (!tokens) return bad(absl::StrCat("invalid JSON pointer ", base::GoQuote(op.path)));
  op.tokens = *std::move(tokens);
  if (op.kind == OpKind::kMove || op.kind == OpKind::kCopy) {
    auto from_it = raw.FindMember("from");
    if (from_it == raw.MemberEnd() || !from_it->value.IsString()) {
      return bad(absl::StrCat(op.name, " needs a string \"from\""));
    }
    op.from.assign(from_it->value.GetString(), from_it->value.GetStringLength());
    auto from_tokens = ParsePointer(op.from);
    if (!from_tokens) return bad(absl::StrCat("invalid JSON pointer ", base::GoQuote(op.from)));
    op.from_tokens = *std::move(from_tokens);
  }
  if (op.kind == OpKind::kAdd || op.kind == OpKind::kReplace || op.kind == OpKind::kTest) {
    auto value_it = raw.FindMember("value");
    if (value_it == raw.MemberEnd()) return bad(absl::StrCat(op.name, " needs a \"value\""));
    op.value = &value_it->value;
  }
  return op;
}

}  // namespace

absl::Status ApplyMergePatch(Value& target, const Value& patch, Allocator& allocator) {
  MergeInto(target, patch, allocator);
  return absl::OkStatus();
}

absl::Status ApplyJsonPatch(rapidjson::Document& doc, const Value& ops) {
  if (!ops.IsArray()) {
    return store::BadRequestError("invalid JSON patch: the body must be a JSON array of operations");
  }
  if (ops.Size() > kMaxJsonPatchOperations) {
    return store::RequestEntityTooLargeError(
        absl::StrCat("The allowed maximum operations in a JSON patch is ", kMaxJsonPatchOperations,
                     ", got ", ops.Size()));
  }
  std::vector<Operation> decoded;
  decoded.reserve(ops.Size());
  for (rapidjson::SizeType i = 0; i < ops.Size(); ++i) {
    auto op = Decode(ops[i], i);
    if (!op.ok()) return op.status();
    decoded.push_back(*std::move(op));
  }
  // All or nothing: work on a copy and swap it in only when every op applied.
  rapidjson::Document work;
  work.CopyFrom(doc, work.GetAllocator());
  size_t copied = 0;
  for (const auto& op : decoded) {
    if (auto status = Apply(work, op, &copied); !status.ok()) return status;
  }
  doc.Swap(work);
  return absl::OkStatus();
}

}  // namespace poolcoord::handlers
