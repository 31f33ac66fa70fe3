#include "handlers/selectors.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "handlers/validation.h"
#include "store/api_error.h"

namespace poolcoord::handlers {
namespace {


bool ParseInt64(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  const char* begin = text.data();
  if (*begin == '+' && text.size() > 1 && text[1] != '-') ++begin;  // strconv.ParseInt takes '+'
  auto [ptr, ec] = std::from_chars(begin, text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// ---- label selector lexer (labels/selector.go's Lexer) ----

enum class Tok {
  kEnd,
  kIdentifier,
  kDoesNotExist,  // !
  kEquals,        // =
  kDoubleEquals,  // ==
  kNotEquals,     // !=
  kIn,
  kNotIn,
  kOpenPar,
  kClosedPar,
  kComma,
  kGreaterThan,  // >
  kLessThan,     // <
};

struct Token {
  Tok tok;
  std::string literal;
};

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsSpecialSymbol(char c) {
  return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

std::vector<Token> Lex(std::string_view s) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (true) {
    while (i < s.size() && IsWhitespace(s[i])) ++i;
    if (i == s.size()) break;
    char c = s[i];
    if (IsSpecialSymbol(c)) {
      // Longest match: "!=" and "==" are the only two-character symbols.
      if (i + 1 < s.size() && s[i + 1] == '=' && (c == '!' || c == '=')) {
        tokens.push_back({c == '!' ? Tok::kNotEquals : Tok::kDoubleEquals, std::string{c, '='}});
        i += 2;
        continue;
      }
      Tok tok = Tok::kComma;
      switch (c) {
        case '=': tok = Tok::kEquals; break;
        case '!': tok = Tok::kDoesNotExist; break;
        case '(': tok = Tok::kOpenPar; break;
        case ')': tok = Tok::kClosedPar; break;
        case ',': tok = Tok::kComma; break;
        case '>': tok = Tok::kGreaterThan; break;
        case '<': tok = Tok::kLessThan; break;
      }
      tokens.push_back({tok, std::string(1, c)});
      ++i;
      continue;
    }
    size_t start = i;
    while (i < s.size() && !IsWhitespace(s[i]) && !IsSpecialSymbol(s[i])) ++i;
    std::string word(s.substr(start, i - start));
    Tok tok = word == "in" ? Tok::kIn : word == "notin" ? Tok::kNotIn : Tok::kIdentifier;
    tokens.push_back({tok, std::move(word)});
  }
  tokens.push_back({Tok::kEnd, ""});
  return tokens;
}

// ---- label selector parser (labels/selector.go's Parser) ----

using Op = LabelSelector::Operator;
using Requirement = LabelSelector::Requirement;

// In the Values context the keywords "in" and "notin" are plain identifiers, so
// `in in (notin)` parses.
enum class Context { kKeyAndOperator, kValues };

class Parser {
 public:
  explicit Parser(std::string_view text) : tokens_(Lex(text)) {}

  // Returns the requirements, or the error message.
  std::variant<std::vector<Requirement>, std::string> Run() {
    std::vector<Requirement> out;
    while (true) {
      const Token& t = Lookahead(Context::kValues);
      switch (Kind(t, Context::kValues)) {
        case Tok::kIdentifier:
        case Tok::kDoesNotExist: {
          std::string err;
          auto r = ParseRequirement(&err);
          if (!r) return absl::StrCat("unable to parse requirement: ", err);
          out.push_back(*std::move(r));
          const Token& next = Consume(Context::kValues);
          Tok next_kind = Kind(next, Context::kValues);
          if (next_kind == Tok::kEnd) return out;
          if (next_kind != Tok::kComma) {
            return absl::StrCat("found '", next.literal, "', expected: ',' or 'end of string'");
          }
          const Token& after = Lookahead(Context::kValues);
          Tok after_kind = Kind(after, Context::kValues);
          if (after_kind != Tok::kIdentifier && after_kind != Tok::kDoesNotExist) {
            return absl::StrCat("found '", after.literal, "', expected: identifier after ','");
          }
          break;
        }
        case Tok::kEnd:
          return out;
        default:
          return absl::StrCat("found '", t.literal,
                              "', expected: !, identifier, or 'end of string'");
      }
    }
  }

 private:
  static Tok Kind(const Token& t, Context context) {
    if (context == Context::kValues && (t.tok == Tok::kIn || t.tok == Tok::kNotIn)) {
      return Tok::kIdentifier;
    }
    return t.tok;
  }
  const Token& Lookahead(Context) const { return tokens_[pos_]; }
  const Token& Consume(Context) {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;  // kEnd repeats forever
    return t;
  }

  std::optional<Requirement> ParseRequirement(std::string* err) {
    Requirement r;
    const Token* t = &Consume(Context::kValues);
    bool does_not_exist = false;
    if (Kind(*t, Context::kValues) == Tok::kDoesNotExist) {
      does_not_exist = true;
      t = &Consume(Context::kValues);
    }
    if (Kind(*t, Context::kValues) != Tok::kIdentifier) {
      *err = absl::StrCat("found '", t->literal, "', expected: identifier");
      return std::nullopt;
    }
    r.key = t->literal;
    if (auto msgs = IsQualifiedName(r.key); !msgs.empty()) {
      *err = absl::StrCat("key: Invalid value: ", base::GoQuote(r.key), ": ", absl::StrJoin(msgs, "; "));
      return std::nullopt;
    }
    // "!k" takes no operator; in "!k=v" the caller then stops at the '='.
    Tok next = Kind(Lookahead(Context::kValues), Context::kValues);
    if (does_not_exist || next == Tok::kEnd || next == Tok::kComma) {
      r.op = does_not_exist ? Op::kDoesNotExist : Op::kExists;
      return r;
    }
    const Token& op = Consume(Context::kKeyAndOperator);
    switch (Kind(op, Context::kKeyAndOperator)) {
      case Tok::kIn: r.op = Op::kIn; break;
      case Tok::kNotIn: r.op = Op::kNotIn; break;
      case Tok::kEquals:
      case Tok::kDoubleEquals: r.op = Op::kEquals; break;
      case Tok::kNotEquals: r.op = Op::kNotEquals; break;
      case Tok::kGreaterThan: r.op = Op::kGreaterThan; break;
      case Tok::kLessThan: r.op = Op::kLessThan; break;
      default:
        *err = absl::StrCat("found '", op.literal, "', expected: in, notin, =, ==, !=, gt, lt");
        return std::nullopt;
    }
    bool ok = (r.op == Op::kIn || r.op == Op::kNotIn) ? ParseValues(&r.values, err)
                                                       : ParseExactValue(&r.values, err);
    if (!ok) return std::nullopt;
    std::sort(r.values.begin(), r.values.end());
    r.values.erase(std::unique(r.values.begin(), r.values.end()), r.values.end());
    if (!ValidateValues(r, err)) return std::nullopt;
    return r;
  }

  // "(a,b)"; "()" and empty list slots stand for the empty value, as in Kubernetes.
  bool ParseValues(std::vector<std::string>* values, std::string* err) {
    const Token& open = Consume(Context::kValues);
    if (open.tok != Tok::kOpenPar) {
      *err = absl::StrCat("found '", open.literal, "' expected: '('");
      return false;
    }
    const Token& first = Lookahead(Context::kValues);
    Tok first_kind = Kind(first, Context::kValues);
    if (first_kind == Tok::kClosedPar) {
      Consume(Context::kValues);
      values->push_back("");
      return true;
    }
    if (first_kind != Tok::kIdentifier && first_kind != Tok::kComma) {
      *err = absl::StrCat("found '", first.literal, "', expected: ',', ')' or identifier");
      return false;
    }
    // A value or an empty slot, then ',' or ')'.
    bool expect_value = true;
    while (true) {
      const Token& t = Consume(Context::kValues);
      Tok kind = Kind(t, Context::kValues);
      if (kind == Tok::kIdentifier && expect_value) {
        values->push_back(t.literal);
        expect_value = false;
      } else if (kind == Tok::kComma) {
        if (expect_value) values->push_back("");
        expect_value = true;
      } else if (kind == Tok::kClosedPar) {
        if (expect_value) values->push_back("");
        return true;
      } else if (!expect_value) {
        *err = absl::StrCat("found '", t.literal, "', expected: ',' or ')'");
        return false;
      } else {
        *err = absl::StrCat("found '", t.literal, "', expected: ',', or identifier");
        return false;
      }
    }
  }

  bool ParseExactValue(std::vector<std::string>* values, std::string* err) {
    Tok next = Kind(Lookahead(Context::kValues), Context::kValues);
    if (next == Tok::kEnd || next == Tok::kComma) {
      values->push_back("");  // "k=" selects the empty value
      return true;
    }
    const Token& t = Consume(Context::kValues);
    if (Kind(t, Context::kValues) != Tok::kIdentifier) {
      *err = absl::StrCat("found '", t.literal, "', expected: identifier");
      return false;
    }
    values->push_back(t.literal);
    return true;
  }

  // labels.NewRequirement's checks, aggregated as field.ErrorList prints them.
  static bool ValidateValues(const Requirement& r, std::string* err) {
    std::vector<std::string> errs;
    for (size_t i = 0; i < r.values.size(); ++i) {
      const std::string& v = r.values[i];
      if ((r.op == Op::kGreaterThan || r.op == Op::kLessThan)) {
        int64_t unused;
        if (!ParseInt64(v, &unused)) {
          errs.push_back(absl::StrCat("values[", i, "]: Invalid value: ", base::GoQuote(v),
                                      ": for 'Gt', 'Lt' operators, the value must be an integer"));
        }
      }
      if (auto msgs = IsValidLabelValue(v); !msgs.empty()) {
        errs.push_back(absl::StrCat("values[", i, "][", r.key, "]: Invalid value: ", base::GoQuote(v),
                                    ": ", absl::StrJoin(msgs, "; ")));
      }
    }
    if (errs.empty()) return true;
    *err = errs.size() == 1 ? errs[0] : absl::StrCat("[", absl::StrJoin(errs, ", "), "]");
    return false;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

bool RequirementMatches(const Requirement& r, const store::StringMap& labels) {
  auto it = labels.find(r.key);
  bool has = it != labels.end();
  auto contains = [&r](const std::string& v) {
    return std::binary_search(r.values.begin(), r.values.end(), v);
  };
  switch (r.op) {
    case Op::kEquals:
    case Op::kIn:
      return has && contains(it->second);
    case Op::kNotEquals:
    case Op::kNotIn:
      return !has || !contains(it->second);
    case Op::kExists:
      return has;
    case Op::kDoesNotExist:
      return !has;
    case Op::kGreaterThan:
    case Op::kLessThan: {
      int64_t have = 0;
      int64_t want = 0;
      if (!has || r.values.size() != 1 || !ParseInt64(it->second, &have) ||
          !ParseInt64(r.values[0], &want)) {
        return false;
      }
      return r.op == Op::kGreaterThan ? have > want : have < want;
    }
  }
  return false;
}

// ---- field selectors (fields/selector.go) ----

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && IsWhitespace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsWhitespace(s.back())) s.remove_suffix(1);
  return s;
}

// Splits on commas that a backslash does not escape.
std::vector<std::string_view> SplitTerms(std::string_view s) {
  std::vector<std::string_view> terms;
  size_t start = 0;
  bool escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (escaped) {
      escaped = false;
    } else if (s[i] == '\\') {
      escaped = true;
    } else if (s[i] == ',') {
      terms.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.push_back(s.substr(start));
  return terms;
}

// Finds the first unescaped operator; "!=" and "==" are tried before "=".
bool SplitTerm(std::string_view term, std::string_view* lhs, std::string_view* op,
               std::string_view* rhs) {
  bool escaped = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (escaped) {
      escaped = false;
      continue;
    }
    if (term[i] == '\\') {
      escaped = true;
      continue;
    }
    for (std::string_view candidate : {"!=", "==", "="}) {
      if (term.substr(i, candidate.size()) == candidate) {
        *lhs = term.substr(0, i);
        *op = candidate;
        *rhs = term.substr(i + candidate.size());
        return true;
      }
    }
  }
  return false;
}

// fields.UnescapeValue: '\\', '\,' and '\=' are the only escapes, and ',' or '='
// must be escaped.
absl::StatusOr<std::string> UnescapeValue(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\') {
      if (i + 1 == s.size() || (s[i + 1] != '\\' && s[i + 1] != ',' && s[i + 1] != '=')) {
        return store::BadRequestError(absl::StrCat(
            "invalid field selector: invalid escape sequence: ", base::Av(s.substr(i, 2))));
      }
      out.push_back(s[++i]);
    } else if (c == ',' || c == '=') {
      return store::BadRequestError(
          absl::StrCat("invalid field selector: unescaped character: ", std::string(1, c)));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(std::string_view text) {
  Parser parser(text);
  auto result = parser.Run();
  if (auto* err = std::get_if<std::string>(&result)) return store::BadRequestError(*err);
  LabelSelector selector;
  selector.requirements_ = std::get<std::vector<Requirement>>(std::move(result));
  return selector;
}

bool LabelSelector::Matches(const store::StringMap& labels) const {
  return std::all_of(requirements_.begin(), requirements_.end(),
                     [&labels](const Requirement& r) { return RequirementMatches(r, labels); });
}

absl::StatusOr<FieldSelector> FieldSelector::Parse(
    std::string_view text, const std::vector<std::string>& supported_fields) {
  FieldSelector selector;
  for (std::string_view raw : SplitTerms(text)) {
    std::string_view term = TrimSpace(raw);
    if (term.empty()) continue;
    std::string_view lhs, op, rhs;
    if (!SplitTerm(term, &lhs, &op, &rhs)) {
      return store::BadRequestError(absl::StrCat("invalid selector: '", base::Av(text),
                                                 "'; can't understand '", base::Av(term), "'"));
    }
    auto value = UnescapeValue(TrimSpace(rhs));
    if (!value.ok()) return value.status();
    std::string field(TrimSpace(lhs));
    if (std::find(supported_fields.begin(), supported_fields.end(), field) ==
        supported_fields.end()) {
      std::vector<std::string> quoted;
      for (const auto& f : supported_fields) quoted.push_back(base::GoQuote(f));
      return store::BadRequestError(absl::StrCat(base::GoQuote(field),
                                                 " is not a known field selector: only ",
                                                 absl::StrJoin(quoted, ", ")));
    }
    selector.terms_.push_back({std::move(field), op == "!=", *std::move(value)});
  }
  return selector;
}

bool FieldSelector::Matches(
    const std::function<std::optional<std::string>(std::string_view field)>& get) const {
  for (const auto& term : terms_) {
    std::string have = get(term.field).value_or("");
    if ((have == term.value) == term.negated) return false;
  }
  return true;
}

std::optional<std::string> FieldSelector::ExactName() const {
  for (const auto& term : terms_) {
    if (term.field == "metadata.name" && !term.negated) return term.value;
  }
  return std::nullopt;
}

}  // namespace poolcoord::handlers
