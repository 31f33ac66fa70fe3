#include "handlers/json_input.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "handlers/media_types.h"
#include "rapidjson/reader.h"
#include "store/api_error.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of a \uXXXX escape starting at json[i] (the backslash), or -1.
int EscapedUnit(std::string_view json, size_t i) {
  if (i + 6 > json.size() || json[i] != '\\' || json[i + 1] != 'u') return -1;
  int v = 0;
  for (size_t k = 2; k < 6; ++k) {
    const int h = HexValue(json[i + k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

bool NeedsWork(std::string_view json) {
  // Nearly every body is ASCII without a backslash: say so eight bytes at a
  // time (a renewal's body cost ~440 instructions byte by byte).
  uint64_t high = 0;
  size_t k = 0;
  for (; k + 8 <= json.size(); k += 8) {
    uint64_t word;
    std::memcpy(&word, json.data() + k, 8);
    high |= word;
  }
  for (; k < json.size(); ++k) high |= static_cast<unsigned char>(json[k]);
  if ((high & 0x8080808080808080ULL) == 0 && json.find('\\') == std::string_view::npos) {
    return false;
  }
  for (size_t i = 0; i < json.size(); ++i) {
    const auto c = static_cast<unsigned char>(json[i]);
    if (c >= 0x80) return true;
    if (c == '\\' && i + 2 < json.size() && json[i + 1] == 'u' &&
        (json[i + 2] == 'd' || json[i + 2] == 'D')) {
      return true;
    }
  }
  return false;
}

// SAX handler that names every repeated key, with its line.
class DuplicateFinder : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, DuplicateFinder> {
 public:
  DuplicateFinder(std::string_view text, const rapidjson::StringStream* stream,
                  std::vector<DuplicateField>* out)
      : text_(text), stream_(stream), out_(out) {}

  bool Default() {
    Consumed();
    return true;
  }
  bool StartObject() {
    Consumed();
    frames_.push_back(Frame{true, {}, {}, -1});
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    Frame& f = frames_.back();
    f.key.assign(s, n);
    if (!f.keys.insert(f.key).second) {
      out_->push_back({PathHere(), f.key, LineAt(std::min(stream_->Tell(), text_.size()))});
    }
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    frames_.pop_back();
    return true;
  }
  bool StartArray() {
    Consumed();
    frames_.push_back(Frame{false, {}, {}, -1});
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    frames_.pop_back();
    return true;
  }

 private:
  struct Frame {
    bool object;
    absl::flat_hash_set<std::string> keys;
    std::string key;
    int index = -1;
  };
  // A value starts: an array item advances the index.
  void Consumed() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::string PathHere() const {
    std::string out;
    for (const Frame& f : frames_) {
      if (f.object) {
        if (!out.empty()) out.push_back('.');
        out += f.key;
      } else {
        absl::StrAppend(&out, "[", f.index, "]");
      }
    }
    return out;
  }

  // The line of `offset`: the parse only moves forward, so newlines are counted
  // once over the whole body, not from its start for every repetition (a body
  // of 16,000 repeated keys took seconds that way).
  int LineAt(size_t offset) {
    if (offset > counted_to_) {
      line_ += static_cast<int>(std::count(text_.begin() + counted_to_, text_.begin() + offset, '\n'));
      counted_to_ = offset;
    }
    return line_;
  }

  std::string_view text_;
  size_t counted_to_ = 0;
  int line_ = 1;
  const rapidjson::StringStream* stream_;
  std::vector<DuplicateField>* out_;
  std::vector<Frame> frames_;
};

// Objects up to this many members are checked pair by pair (no allocation, the
// usual case); larger ones through a hash set, so that a body of many keys costs
// time in proportion to its size (any authenticated client can send one).
constexpr rapidjson::SizeType kPairwiseMembers = 16;

std::string_view NameOf(const rapidjson::Value& name) {
  return std::string_view(name.GetString(), name.GetStringLength());
}

bool HasDuplicateKeys(const rapidjson::Value& v) {
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) {
      if (HasDuplicateKeys(e)) return true;
    }
    return false;
  }
  if (!v.IsObject()) return false;
  if (v.MemberCount() <= kPairwiseMembers) {
    for (auto i = v.MemberBegin(); i != v.MemberEnd(); ++i) {
      for (auto j = v.MemberBegin(); j != i; ++j) {
        if (j->name == i->name) return true;
      }
    }
  } else {
    absl::flat_hash_set<std::string_view> seen;
    seen.reserve(v.MemberCount());
    for (auto i = v.MemberBegin(); i != v.MemberEnd(); ++i) {
      if (!seen.insert(NameOf(i->name)).second) return true;
    }
  }
  for (auto i = v.MemberBegin(); i != v.MemberEnd(); ++i) {
    if (HasDuplicateKeys(i->value)) return true;
  }
  return false;
}

std::string Join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : absl::StrCat(prefix, ".", base::Av(key));
}

}  // namespace

bool SanitizeUtf8(std::string_view s, std::string* out) {
  for (size_t i = 0; i < s.size();) {
    const size_t len = base::Utf8SequenceLength(s, i);
    if (len == 0) {
      *out = base::ToValidUtf8(s);
      return true;
    }
    i += len;
  }
  return false;
}

bool SanitizeJsonText(std::string_view json, std::string* out) {
  if (!NeedsWork(json)) return false;
  std::string result;
  result.reserve(json.size() + 16);
  bool changed = false, in_string = false;
  size_t i = 0;
  while (i < json.size()) {
    const char c = json[i];
    const auto uc = static_cast<unsigned char>(c);
    if (uc >= 0x80) {
      const size_t len = base::Utf8SequenceLength(json, i);
      if (len == 0) {
        result += kReplacement;
        changed = true;
        ++i;
      } else {
        result.append(json.data() + i, len);
        i += len;
      }
      continue;
    }
    if (!in_string) {
      in_string = c == '"';
      result.push_back(c);
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = false;
    } else if (c == '\\') {
      const int unit = EscapedUnit(json, i);
      if (unit >= 0xD800 && unit <= 0xDFFF) {
        const int next = unit <= 0xDBFF ? EscapedUnit(json, i + 6) : -1;
        if (next >= 0xDC00 && next <= 0xDFFF) {
          result.append(json.data() + i, 12);
          i += 12;
        } else {
          result += "\\uFFFD";
          changed = true;
          i += 6;
        }
        continue;
      }
      // Any other escape: copy it with the character it escapes.
      result.push_back(c);
      if (i + 1 < json.size()) result.push_back(json[i + 1]);
      i += 2;
      continue;
    }
    result.push_back(c);
    ++i;
  }
  if (!changed) return false;
  *out = std::move(result);
  return true;
}

void RemoveDuplicateKeys(rapidjson::Value& value, std::vector<DuplicateField>* out,
                         const std::string& prefix) {
  if (value.IsArray()) {
    for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
      RemoveDuplicateKeys(value[i], out, absl::StrCat(prefix, "[", i, "]"));
    }
    return;
  }
  if (!value.IsObject()) return;
  // Report in document order: a repetition when it is met, before its content.
  absl::flat_hash_set<std::string_view> seen;
  seen.reserve(value.MemberCount());
  for (auto i = value.MemberBegin(); i != value.MemberEnd(); ++i) {
    const std::string_view key = NameOf(i->name);
    if (!seen.insert(key).second) out->push_back({Join(prefix, key), std::string(key), 0});
    RemoveDuplicateKeys(i->value, out, Join(prefix, key));
  }
  if (seen.size() == value.MemberCount()) return;
  // Keep the last of each key, in document order, in one pass: the kept members
  // move forward over the dropped ones, then the tail goes (erasing one member at
  // a time shifts the rest each time).
  absl::flat_hash_map<std::string_view, rapidjson::SizeType> last;
  last.reserve(seen.size());
  rapidjson::SizeType index = 0;
  for (auto i = value.MemberBegin(); i != value.MemberEnd(); ++i, ++index) last[NameOf(i->name)] = index;
  std::vector<bool> keep(value.MemberCount());
  for (const auto& [name, at] : last) keep[at] = true;
  auto write = value.MemberBegin();
  index = 0;
  for (auto i = value.MemberBegin(); i != value.MemberEnd(); ++i, ++index) {
    if (!keep[index]) continue;
    if (write != i) {
      write->name.Swap(i->name);
      write->value.Swap(i->value);
    }
    ++write;
  }
  value.EraseMember(write, value.MemberEnd());
}

absl::StatusOr<JsonBody> ParseJsonBody(std::string_view body) {
  // Bodies are read as sent, whatever Content-Encoding says, as kube-apiserver
  // reads them (1.32.6 answers a gzip body 400, a json parse error at '\x1f'):
  // a gzip body's error says so, since "offset 0" alone does not.
  const bool gzip = body.size() >= 2 && body[0] == '\x1f' && body[1] == '\x8b';
  std::string sanitized;
  if (SanitizeJsonText(body, &sanitized)) body = sanitized;
  if (absl::Status s = store::CheckJsonNesting(body); !s.ok()) return s;
  JsonBody out;
  out.doc.Parse(body.data(), body.size());
  if (out.doc.HasParseError()) {
    return store::BadRequestError(absl::StrCat(
        "the request body is not valid JSON: ", ParseErrorText(out.doc.GetParseError()),
        " at offset ", out.doc.GetErrorOffset(),
        gzip ? " (the body is gzip-compressed: send it uncompressed, request bodies are read "
               "as sent whatever Content-Encoding says)"
             : ""));
  }
  if (!HasDuplicateKeys(out.doc)) return out;
  // Rare: name each repetition with its line, then keep the last of each key.
  const std::string text(body);
  rapidjson::StringStream stream(text.c_str());
  DuplicateFinder finder(text, &stream, &out.duplicates);
  rapidjson::Reader reader;
  reader.Parse(stream, finder);
  std::vector<DuplicateField> ignored;
  RemoveDuplicateKeys(out.doc, &ignored);
  return out;
}

}  // namespace poolcoord::handlers
