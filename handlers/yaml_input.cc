#include "handlers/yaml_input.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/string_view.h"
#include "store/api_error.h"
#include "store/object_codec.h"
#include "yaml-cpp/yaml.h"

namespace poolcoord::handlers {
namespace {

using rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;

constexpr int kMaxDepth = 512;

absl::Status DecodeError(absl::string_view detail) {
  return store::BadRequestError(absl::StrCat("error decoding YAML: ", detail));
}

bool IsOneOf(std::string_view s, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), s) != options.end();
}

// go-yaml v2's integer forms: [-+]?(0b[01_]+|0x[0-9a-fA-F_]+|0o?[0-7_]+|[0-9_]+).
bool ResolveInt(std::string_view s, Value* out) {
  std::string digits;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'b' || s[1] == 'o')) {
    base = s[1] == 'x' ? 16 : s[1] == 'b' ? 2 : 8;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
  }
  for (char c : s) {
    if (c == '_') continue;
    const bool ok = base == 16 ? absl::ascii_isxdigit(static_cast<unsigned char>(c))
                    : base == 2 ? (c == '0' || c == '1')
                    : base == 8 ? (c >= '0' && c <= '7')
                                : absl::ascii_isdigit(static_cast<unsigned char>(c));
    if (!ok) return false;
    digits.push_back(c);
  }
  if (digits.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return false;
  if (negative) {
    if (v > static_cast<unsigned long long>(INT64_MAX) + 1) return false;
    out->SetInt64(v == static_cast<unsigned long long>(INT64_MAX) + 1
                      ? INT64_MIN
                      : -static_cast<int64_t>(v));
  } else if (v <= static_cast<unsigned long long>(INT64_MAX)) {
    out->SetInt64(static_cast<int64_t>(v));
  } else {
    out->SetUint64(v);
  }
  return true;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool ResolveFloat(std::string_view s, Value* out) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  if (i != s.size()) return false;
  double d = 0;
  if (!absl::SimpleAtod(absl::string_view(s.data(), s.size()), &d) || !std::isfinite(d)) {
    return false;
  }
  out->SetDouble(d);
  return true;
}

void ResolvePlain(const std::string& text, Value* out, Allocator& a) {
  if (IsOneOf(text, {"", "~", "null", "Null", "NULL"})) {
    out->SetNull();
  } else if (IsOneOf(text, {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True",
                            "TRUE"})) {
    out->SetBool(true);
  } else if (IsOneOf(text, {"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False",
                            "FALSE"})) {
    out->SetBool(false);
  } else if (!ResolveInt(text, out) && !ResolveFloat(text, out)) {
    out->SetString(text.data(), static_cast<rapidjson::SizeType>(text.size()), a);
  }
}

class Converter {
 public:
  Converter(Allocator& a, std::vector<DuplicateField>* duplicates)
      : a_(a), duplicates_(duplicates) {}

  absl::Status Convert(const YAML::Node& n, Value* out, const std::string& path, int depth) {
    if (++nodes_ > kMaxYamlNodes) {
      return DecodeError(absl::StrCat("the document expands to more than ", kMaxYamlNodes,
                                      " nodes"));
    }
    if (depth > kMaxDepth) {
      return DecodeError(absl::StrCat("the document nests deeper than ", kMaxDepth, " levels"));
    }
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out->SetNull();
        return absl::OkStatus();
      case YAML::NodeType::Scalar: {
        const std::string& text = n.Scalar();
        const std::string& tag = n.Tag();
        if (tag == "?") {
          ResolvePlain(text, out, a_);
        } else if (tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float" ||
                   tag == "tag:yaml.org,2002:bool" || tag == "tag:yaml.org,2002:null") {
          ResolvePlain(text, out, a_);
        } else {
          out->SetString(text.data(), static_cast<rapidjson::SizeType>(text.size()), a_);
        }
        return absl::OkStatus();
      }
      case YAML::NodeType::Sequence: {
        out->SetArray();
        int i = 0;
        for (const YAML::Node& item : n) {
          Value v;
          if (absl::Status s = Convert(item, &v, absl::StrCat(path, "[", i++, "]"), depth + 1);
              !s.ok()) {
            return s;
          }
          out->PushBack(std::move(v), a_);
        }
        return absl::OkStatus();
      }
      case YAML::NodeType::Map: {
        out->SetObject();
        // Each key's member, so that a mapping of many keys is converted in time
        // in proportion to its size (FindMember is a linear scan).
        absl::flat_hash_map<std::string, rapidjson::SizeType> members;
        for (const auto& pair : n) {
          if (!pair.first.IsScalar()) {
            return DecodeError("a mapping key is not a scalar");
          }
          const std::string& key = pair.first.Scalar();
          const std::string child = path.empty() ? key : absl::StrCat(path, ".", key);
          Value v;
          if (absl::Status s = Convert(pair.second, &v, child, depth + 1); !s.ok()) return s;
          auto [at, inserted] = members.try_emplace(key, out->MemberCount());
          if (!inserted) {
            duplicates_->push_back({child, key, pair.first.Mark().line + 1});
            (out->MemberBegin() + at->second)->value = std::move(v);
            continue;
          }
          out->AddMember(Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), a_),
                         std::move(v), a_);
        }
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }

 private:
  Allocator& a_;
  std::vector<DuplicateField>* duplicates_;
  size_t nodes_ = 0;
};

}  // namespace

absl::StatusOr<JsonBody> ParseYamlBody(std::string_view body) {
  const size_t first = body.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && body[first] == '{') {
    auto json = ParseJsonBody(body);
    if (!json.ok()) return DecodeError(json.status().message());
    return json;
  }
  std::string text(body);
  std::string sanitized;
  if (SanitizeUtf8(text, &sanitized)) text = std::move(sanitized);
  // yaml-cpp parses recursively: bound flow nesting before it runs.
  if (absl::Status s = store::CheckJsonNesting(text, kMaxDepth); !s.ok()) {
    return DecodeError(s.message());
  }
  JsonBody out;
  try {
    const YAML::Node root = YAML::Load(text);
    Converter converter(out.doc.GetAllocator(), &out.duplicates);
    if (absl::Status s = converter.Convert(root, &out.doc, "", 0); !s.ok()) return s;
  } catch (const YAML::Exception& e) {
    return DecodeError(e.what());
  } catch (const std::exception& e) {
    return DecodeError(e.what());
  }
  return out;
}

}  // namespace poolcoord::handlers
