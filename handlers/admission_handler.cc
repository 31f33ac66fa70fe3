#include "handlers/admission_handler.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "election/admission_rules.h"
#include "handlers/status_mapping.h"
#include "rapidjson/error/en.h"
#include "rapidjson/reader.h"
#include "store/api_error.h"
#include "base/microtime.h"
#include "store/object_codec.h"

namespace poolcoord::handlers {

namespace {

constexpr char kV1[] = "admission.k8s.io/v1";
constexpr char kV1beta1[] = "admission.k8s.io/v1beta1";
constexpr char kLeaseGroup[] = "coordination.k8s.io";
// store::CheckJsonNesting's default: arrays and objects nest at most this deep.
constexpr int kMaxNesting = 512;
constexpr unsigned kReviewParseFlags = rapidjson::kParseInsituFlag;
static_assert((kReviewParseFlags & ~rapidjson::kParseInsituFlag) == rapidjson::kParseDefaultFlags,
              "the grammar must stay RapidJSON's default one (what the DOM parse accepted)");

// ------------------------------------------------------------------ decoding
//
// The review is read in one pass over a per-thread copy of the body, and only
// the fields the rules read are kept, as views into that copy: managedFields,
// labels, owner references and the like cost a scan, no allocation.
//
// Two readers feed the same handler (ReviewHandler). FastReader takes what
// kube-apiserver sends: compact JSON, integers, strings whose escapes sit where
// nothing is read. Anything else (an error, a fraction or exponent, a long
// integer, an escape in a string the rules might read, a surrogate escape,
// nesting past the limit) makes it give up, and RapidJSON's SAX reader, in situ,
// reads the body again from the start: it has the last word on every byte, with
// the grammar, error messages and offsets of the DOM parse it replaced. So
// FastReader must accept only what RapidJSON accepts and report the same values,
// never more (the fuzz target compares every answer with the DOM decoder's).
//
// Each kept field follows the DOM reading it replaces: the first member with a
// name wins (rapidjson's FindMember), whatever its type; a later duplicate is
// skipped, as are members of a value that is not an object.

enum class Type : uint8_t { kAbsent, kNull, kString, kObject, kArray, kOther };

struct Field {
  Type type = Type::kAbsent;
  std::string_view str;  // when kString: into the scratch copy of the body

  // The string; "" when absent, null or not a string (StringOr of the DOM code).
  absl::string_view StringOr() const {
    return type == Type::kString ? absl::string_view(str.data(), str.size()) : absl::string_view();
  }
  bool NullOrAbsent() const { return type == Type::kAbsent || type == Type::kNull; }
};

struct LeaseFields {  // request.object [0], request.oldObject [1]
  Field value;
  Field api_version, kind;  // the object's own apiVersion/kind
  Field metadata, name, ns, annotations, delegate;
  Field spec, holder, renew_time;
};

struct ReviewFields {
  Field root;
  Field api_version, kind, request;
  Field uid, req_kind, kind_group, kind_kind, ns, operation, name, user_info, username,
      user_uid, groups;
  absl::InlinedVector<std::string_view, 4> group_values;  // string elements of userInfo.groups
  LeaseFields lease[2];
};

// Where a value sits, for the members it may have that the rules read.
enum class Ctx : uint8_t {
  kSkip,  // nothing below is read
  kDoc,
  kRequest,
  kRequestKind,
  kLease,
  kMeta,
  kAnnotations,
  kSpec,
  kUserInfo,
  kGroups,  // an array: its string elements are kept
};

class ReviewHandler {
 public:
  explicit ReviewHandler(ReviewFields& f) : f_(f) {
    stack_[0] = Frame{Ctx::kSkip, 0, 0};
    target_ = &f_.root;
    next_ = Frame{Ctx::kDoc, 0, 0};
  }

  // True when nothing read at this point depends on a string's content (no key
  // compared, no value kept): FastReader may skip escapes there undecoded.
  bool SkipsStrings() const { return top_->ctx == Ctx::kSkip && target_ == nullptr; }

  bool Null() { return Scalar(Type::kNull); }
  bool Bool(bool) { return Scalar(Type::kOther); }
  bool Int(int) { return Scalar(Type::kOther); }
  bool Uint(unsigned) { return Scalar(Type::kOther); }
  bool Int64(int64_t) { return Scalar(Type::kOther); }
  bool Uint64(uint64_t) { return Scalar(Type::kOther); }
  bool Double(double) { return Scalar(Type::kOther); }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return Scalar(Type::kOther); }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    if (top_->ctx == Ctx::kGroups) {
      f_.group_values.emplace_back(s, n);
      return true;
    }
    if (Field* f = Take()) {
      f->type = Type::kString;
      f->str = std::string_view(s, n);
    }
    return true;
  }
  bool StartObject() {
    Field* f = Take();
    if (f) f->type = Type::kObject;
    return Push(f && next_.ctx != Ctx::kGroups ? next_ : Frame{Ctx::kSkip, 0, 0});
  }
  bool EndObject(rapidjson::SizeType) {
    --top_;
    return true;
  }
  bool StartArray() {
    Field* f = Take();
    if (f) f->type = Type::kArray;
    return Push(f && next_.ctx == Ctx::kGroups ? next_ : Frame{Ctx::kSkip, 0, 0});
  }
  bool EndArray(rapidjson::SizeType) {
    --top_;
    return true;
  }

  bool Key(const char* s, rapidjson::SizeType n, bool) {
    target_ = nullptr;
    const std::string_view k(s, n);
    Frame& fr = *top_;
    const int i = fr.lease;
    switch (fr.ctx) {
      case Ctx::kDoc:
        if (k == "apiVersion") return Want(fr, 0, &f_.api_version);
        if (k == "kind") return Want(fr, 1, &f_.kind);
        if (k == "request") return Want(fr, 2, &f_.request, Ctx::kRequest);
        break;
      case Ctx::kRequest:
        if (k == "uid") return Want(fr, 0, &f_.uid);
        if (k == "kind") return Want(fr, 1, &f_.req_kind, Ctx::kRequestKind);
        if (k == "namespace") return Want(fr, 2, &f_.ns);
        if (k == "operation") return Want(fr, 3, &f_.operation);
        if (k == "name") return Want(fr, 4, &f_.name);
        if (k == "object") return Want(fr, 5, &f_.lease[0].value, Ctx::kLease, 0);
        if (k == "oldObject") return Want(fr, 6, &f_.lease[1].value, Ctx::kLease, 1);
        if (k == "userInfo") return Want(fr, 7, &f_.user_info, Ctx::kUserInfo);
        break;
      case Ctx::kRequestKind:
        if (k == "group") return Want(fr, 0, &f_.kind_group);
        if (k == "kind") return Want(fr, 1, &f_.kind_kind);
        break;
      case Ctx::kLease:
        if (k == "metadata") return Want(fr, 0, &f_.lease[i].metadata, Ctx::kMeta, i);
        if (k == "spec") return Want(fr, 1, &f_.lease[i].spec, Ctx::kSpec, i);
        if (k == "apiVersion") return Want(fr, 2, &f_.lease[i].api_version);
        if (k == "kind") return Want(fr, 3, &f_.lease[i].kind);
        break;
      case Ctx::kMeta:
        if (k == "name") return Want(fr, 0, &f_.lease[i].name);
        if (k == "namespace") return Want(fr, 1, &f_.lease[i].ns);
        if (k == "annotations") return Want(fr, 2, &f_.lease[i].annotations, Ctx::kAnnotations, i);
        break;
      case Ctx::kAnnotations:
        if (k == election::kDelegateAnnotation) return Want(fr, 0, &f_.lease[i].delegate);
        break;
      case Ctx::kSpec:
        if (k == "holderIdentity") return Want(fr, 0, &f_.lease[i].holder);
        if (k == "renewTime") return Want(fr, 1, &f_.lease[i].renew_time);
        break;
      case Ctx::kUserInfo:
        if (k == "username") return Want(fr, 0, &f_.username);
        if (k == "uid") return Want(fr, 1, &f_.user_uid);
        if (k == "groups") return Want(fr, 2, &f_.groups, Ctx::kGroups);
        break;
      case Ctx::kSkip:
      case Ctx::kGroups:
        break;
    }
    return true;
  }

 private:
  struct Frame {  // trivial: the stack below is not cleared per review
    Ctx ctx;
    uint8_t lease;  // for kLease, kMeta, kAnnotations, kSpec: 0 object, 1 oldObject
    uint16_t seen;  // members already met (first wins)
  };

  // The next value is `field` (and, when an object, read as `ctx`), unless a
  // member of this name came before.
  bool Want(Frame& fr, int bit, Field* field, Ctx ctx = Ctx::kSkip, int lease = 0) {
    const uint16_t mask = static_cast<uint16_t>(1u << bit);
    if (fr.seen & mask) return true;
    fr.seen |= mask;
    target_ = field;
    next_ = Frame{ctx, static_cast<uint8_t>(lease), 0};
    return true;
  }
  Field* Take() {
    Field* f = target_;
    target_ = nullptr;
    return f;
  }
  bool Scalar(Type t) {
    if (Field* f = Take()) f->type = t;
    return true;
  }
  bool Push(Frame fr) {
    if (top_ - stack_ >= kMaxNesting) return false;  // stops the parse: too deep
    *++top_ = fr;
    return true;
  }

  ReviewFields& f_;
  Field* target_ = nullptr;  // the field the next value fills, if any
  Frame next_{Ctx::kSkip, 0, 0};
  // stack_[0] stands for "outside the root value"; one frame per open container.
  Frame stack_[kMaxNesting + 1];
  Frame* top_ = stack_;
};

// The body copied, NUL-terminated and padded with NULs so that FastReader's
// 16-byte loads never leave it; per thread, so its capacity is reused from one
// review to the next. RapidJSON's in-situ reader writes decoded strings into it.
class Scratch {
 public:
  explicit Scratch(std::string_view body) : buf_(Buffer()) {
    buf_.clear();
    buf_.reserve(body.size() + kPad);
    buf_.append(body.data(), body.size());
    buf_.append(kPad, '\0');
  }
  ~Scratch() {
    if (buf_.capacity() > kKeepBytes) std::string().swap(buf_);  // after a huge review
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* data() { return buf_.data(); }

 private:
  static constexpr size_t kPad = 16;
  static constexpr size_t kKeepBytes = 256 * 1024;
  static std::string& Buffer() {
    thread_local std::string buf;
    return buf;
  }
  std::string& buf_;
};

// The fast path (see "decoding" above). Reads from a Scratch: NUL-terminated,
// with 16 more NULs after it, so a 16-byte load from any byte up to the NUL is
// inside the buffer. It never writes.
class FastReader {
 public:
  FastReader(const char* text, ReviewHandler& handler) : p_(text), begin_(text), h_(handler) {}

  // True when the text is one JSON value, then whitespace, then a NUL (the end,
  // or a NUL byte in the body: RapidJSON stops there too), all of it handled;
  // *end = the NUL's offset. False: RapidJSON must read it.
  bool Parse(size_t* end) {
    SkipSpace();
    if (!Value()) return false;
    SkipSpace();
    if (*p_ != '\0') return false;
    *end = static_cast<size_t>(p_ - begin_);
    return true;
  }

 private:
  static bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  void SkipSpace() {
    while (IsSpace(*p_)) ++p_;
  }

  bool Value() {
    switch (*p_) {
      case '{':
        return Object();
      case '[':
        return Array();
      case '"': {
        std::string_view s;
        return String(&s) && h_.String(s.data(), static_cast<rapidjson::SizeType>(s.size()), false);
      }
      case 't':
        return Literal("true", 4) && h_.Bool(true);
      case 'f':
        return Literal("false", 5) && h_.Bool(false);
      case 'n':
        return Literal("null", 4) && h_.Null();
      default:
        return Number();
    }
  }

  bool Literal(const char* word, size_t n) {
    if (std::memcmp(p_, word, n) != 0) return false;  // reads at most 5 bytes: padded
    p_ += n;
    return true;
  }

  // -?(0|[1-9][0-9]{0,17}): an integer RapidJSON keeps as one (no double, so no
  // "number too big"). Fractions, exponents and longer integers: RapidJSON's.
  bool Number() {
    const char* q = p_;
    if (*q == '-') ++q;
    if (*q == '0') {
      ++q;
    } else if (*q >= '1' && *q <= '9') {
      const char* digits = q;
      while (IsDigit(*q)) ++q;
      if (q - digits > 18) return false;
    } else {
      return false;
    }
    if (*q == '.' || *q == 'e' || *q == 'E') return false;
    p_ = q;
    return h_.Int64(0);  // the handler keeps no number
  }

  // At the opening quote. *out: the raw bytes between the quotes, which are
  // the string itself when it has no escape; escapes are accepted only where
  // the handler skips strings (their bytes are then never looked at).
  bool String(std::string_view* out) {
    const char* start = ++p_;
    for (;;) {
#if defined(__SSE2__)
      // The next byte that is '"', '\\' or below 0x20 (NUL included), 16 at a time.
      const __m128i quote = _mm_set1_epi8('"');
      const __m128i backslash = _mm_set1_epi8('\\');
      const __m128i control = _mm_set1_epi8(0x1F);
      for (;;) {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
        const __m128i hit =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(s, quote), _mm_cmpeq_epi8(s, backslash)),
                         _mm_cmpeq_epi8(_mm_max_epu8(s, control), control));  // s <= 0x1F
        const int mask = _mm_movemask_epi8(hit);
        if (mask != 0) {
          p_ += __builtin_ctz(static_cast<unsigned>(mask));
          break;
        }
        p_ += 16;
      }
#else
      while (*p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
#endif
      if (*p_ == '"') {
        *out = std::string_view(start, static_cast<size_t>(p_ - start));
        ++p_;
        return true;
      }
      if (*p_ != '\\') return false;  // a control byte or NUL: an error
      if (!h_.SkipsStrings()) return false;  // the escape must be decoded: RapidJSON's
      ++p_;
      switch (*p_) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          ++p_;
          break;
        case 'u': {
          int code = 0;
          for (int i = 1; i <= 4; ++i) {
            const int h = HexValue(p_[i]);  // stops at the NUL: never past the padding
            if (h < 0) return false;
            code = code * 16 + h;
          }
          // A high surrogate must be followed by a low one: RapidJSON checks that.
          if (code >= 0xD800 && code <= 0xDBFF) return false;
          p_ += 5;
          break;
        }
        default:
          return false;
      }
    }
  }

  // The comma-separated items of an object or array, from its opening bracket
  // through `close`, each read by `item`.
  template <typename Item>
  bool Items(char close, Item item) {
    ++p_;
    SkipSpace();
    if (*p_ == close) {
      ++p_;
      return true;
    }
    for (;;) {
      if (!item()) return false;
      SkipSpace();
      if (*p_ == ',') {
        ++p_;
        SkipSpace();
        continue;
      }
      if (*p_ != close) return false;
      ++p_;
      return true;
    }
  }

  bool Object() {
    if (!h_.StartObject()) return false;  // deeper than kMaxNesting
    return Items('}', [this] {
             if (*p_ != '"') return false;
             std::string_view key;
             if (!String(&key)) return false;
             h_.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()), false);
             SkipSpace();
             if (*p_ != ':') return false;
             ++p_;
             SkipSpace();
             return Value();
           }) &&
           h_.EndObject(0);
  }

  bool Array() {
    if (!h_.StartArray()) return false;
    return Items(']', [this] { return Value(); }) && h_.EndArray(0);
  }

  const char* p_;
  const char* const begin_;
  ReviewHandler& h_;
};

// Reads the review in scratch into *f: FastReader, else RapidJSON (which may
// rewrite scratch in place). *consumed: the offset where the JSON text ended.
rapidjson::ParseResult ReadReview(char* scratch, ReviewFields* f, size_t* consumed) {
  // The DOM parse read through rapidjson's EncodedInputStream<UTF8<>, MemoryStream>,
  // which skips a UTF-8 byte order mark, loosely: an EF, then a BB, then a BF,
  // each only if there. Offsets still count from the body's first byte.
  size_t bom = 0;
  if (static_cast<unsigned char>(scratch[bom]) == 0xEF) ++bom;
  if (static_cast<unsigned char>(scratch[bom]) == 0xBB) ++bom;
  if (static_cast<unsigned char>(scratch[bom]) == 0xBF) ++bom;
  char* const text = scratch + bom;
  {
    ReviewHandler handler(*f);
    if (FastReader(text, handler).Parse(consumed)) {
      *consumed += bom;
      return rapidjson::ParseResult();
    }
  }
  *f = ReviewFields();
  ReviewHandler handler(*f);
  rapidjson::InsituStringStream in(text);
  rapidjson::Reader reader;
  const rapidjson::ParseResult result = reader.Parse<kReviewParseFlags>(in, handler);
  *consumed = bom + in.Tell();
  return result.IsError() ? rapidjson::ParseResult(result.Code(), bom + result.Offset()) : result;
}

// A decoding problem inside a review that has a uid: answered as a review.
std::optional<std::string> DecodeLease(const LeaseFields& l, const char* where,
                                       election::AdmissionLease& out) {
  if (l.value.NullOrAbsent()) return std::nullopt;
  if (l.value.type != Type::kObject) return absl::StrCat(where, " is not an object");
  out.present = true;
  if (l.delegate.type != Type::kAbsent) {
    if (l.delegate.type != Type::kString) {
      return absl::StrCat(where, ".metadata.annotations[", election::kDelegateAnnotation,
                          "] is not a string");
    }
    out.delegate_annotation.emplace(l.delegate.str);
  }
  if (!l.holder.NullOrAbsent()) {
    if (l.holder.type != Type::kString) {
      return absl::StrCat(where, ".spec.holderIdentity is not a string");
    }
    out.holder_identity.emplace(l.holder.str);
  }
  if (!l.renew_time.NullOrAbsent()) {
    if (l.renew_time.type == Type::kString) {
      auto us = base::ParseMicroTime(l.renew_time.str);
      if (us.ok()) {
        out.renew_time_us = *us;
      } else {
        out.renew_time_invalid = true;
      }
    } else {
      out.renew_time_invalid = true;
    }
  }
  return std::nullopt;
}

// ------------------------------------------------------------------ answering

// JSON string as RapidJSON's Writer writes it (its escapes, upper-case hex, other
// bytes as they are), appended to `out`.
void AppendJsonString(std::string& out, absl::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out.push_back('"');
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    char esc;
    if (c >= 0x20) {
      if (c != '"' && c != '\\') continue;
      esc = static_cast<char>(c);
    } else {
      switch (c) {
        case '\b': esc = 'b'; break;
        case '\t': esc = 't'; break;
        case '\n': esc = 'n'; break;
        case '\f': esc = 'f'; break;
        case '\r': esc = 'r'; break;
        default: esc = 'u'; break;
      }
    }
    out.append(s.data() + run, i - run);
    run = i + 1;
    out.push_back('\\');
    out.push_back(esc);
    if (esc == 'u') {
      const char hex[4] = {'0', '0', kHex[c >> 4], kHex[c & 0xF]};
      out.append(hex, 4);
    }
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

// The AdmissionReview answer, written into one buffer sized for it up front
// (strings that need escapes, rare, grow it once).
Response ReviewResponse(absl::string_view api_version, absl::string_view uid, bool allowed,
                        int code, absl::string_view reason, absl::string_view message,
                        const std::vector<std::string>& warnings) {
  size_t size = 160 + api_version.size() + uid.size() + reason.size() + message.size();
  for (const auto& warning : warnings) size += warning.size() + 3;
  std::string out;
  out.reserve(size);
  out.append("{\"apiVersion\":");
  AppendJsonString(out, api_version);
  out.append(",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
  AppendJsonString(out, uid);
  if (allowed) {
    out.append(",\"allowed\":true");
  } else {
    out.append(",\"allowed\":false,\"status\":{\"metadata\":{},\"status\":\"Failure\",\"message\":");
    AppendJsonString(out, message);
    out.append(",\"reason\":");
    AppendJsonString(out, reason);
    out.append(",\"code\":");
    absl::StrAppend(&out, code);
    out.push_back('}');
  }
  if (!warnings.empty()) {
    out.append(",\"warnings\":[");
    for (size_t i = 0; i < warnings.size(); ++i) {
      if (i) out.push_back(',');
      AppendJsonString(out, warnings[i]);
    }
    out.push_back(']');
  }
  out.append("}}");
  Response resp;
  resp.status = 200;
  resp.SetHeader("Content-Type", "application/json");
  resp.body = std::move(out);
  return resp;
}

Response Allowed(absl::string_view api_version, absl::string_view uid,
                 const std::vector<std::string>& warnings = {}) {
  return ReviewResponse(api_version, uid, true, 200, "", "", warnings);
}

Response Denied(absl::string_view api_version, absl::string_view uid, absl::string_view message) {
  return ReviewResponse(api_version, uid, false, 403, "Forbidden", message, {});
}

Response BadReview(absl::string_view api_version, absl::string_view uid, absl::string_view message) {
  return ReviewResponse(api_version, uid, false, 400, "BadRequest",
                        absl::StrCat("malformed AdmissionReview: ", message), {});
}

// Group of an apiVersion "group/version" ("" for the core group "v1").
absl::string_view GroupOf(absl::string_view api_version) {
  auto slash = api_version.find('/');
  return slash == absl::string_view::npos ? absl::string_view() : api_version.substr(0, slash);
}

}  // namespace

Response ServeAdmissionReview(const Request& req, const AdmissionOptions& opts) {
  if (req.method != "POST") {
    return ErrorResponse(store::MethodNotAllowedError(absl::StrCat(
        req.method, " is not supported on ", kAdmissionPath, ": send an AdmissionReview with POST")));
  }
  if (req.body.size() > kMaxAdmissionReviewBytes) {
    return ErrorResponse(store::RequestEntityTooLargeError(absl::StrCat(
        "AdmissionReview of ", req.body.size(), " bytes exceeds the limit of ",
        kMaxAdmissionReviewBytes, " bytes")));
  }
  Scratch scratch(req.body);
  ReviewFields f;
  size_t consumed = 0;
  const rapidjson::ParseResult parsed = ReadReview(scratch.data(), &f, &consumed);
  // What was rejected before the parse (nesting deeper than the limit, anywhere in
  // the body, even past a NUL that ends the JSON) is still rejected first, with
  // the same message; a clean parse that read the whole body cannot hit it.
  if (parsed.IsError() || consumed != req.body.size()) {
    if (absl::Status nesting = store::CheckJsonNesting(req.body, kMaxNesting); !nesting.ok()) {
      return ErrorResponse(nesting);
    }
  }
  if (parsed.IsError()) {
    return ErrorResponse(store::BadRequestError(absl::StrCat(
        "malformed AdmissionReview: ", rapidjson::GetParseError_En(parsed.Code()),
        " at offset ", parsed.Offset())));
  }
  if (f.root.type != Type::kObject) {
    return ErrorResponse(store::BadRequestError("malformed AdmissionReview: not a JSON object"));
  }
  const absl::string_view api_version = f.api_version.StringOr();
  if (api_version != kV1 && api_version != kV1beta1) {
    return ErrorResponse(store::BadRequestError(absl::StrCat(
        "unsupported AdmissionReview apiVersion \"", api_version, "\"; send ", kV1, " or ",
        kV1beta1)));
  }
  if (f.kind.StringOr() != "AdmissionReview") {
    return ErrorResponse(store::BadRequestError(absl::StrCat(
        "malformed AdmissionReview: kind must be AdmissionReview, got \"", f.kind.StringOr(),
        "\"")));
  }
  if (f.request.type != Type::kObject) {
    return ErrorResponse(
        store::BadRequestError("malformed AdmissionReview: request is missing or not an object"));
  }
  const absl::string_view uid = f.uid.StringOr();
  if (uid.empty()) {
    return ErrorResponse(
        store::BadRequestError("malformed AdmissionReview: request.uid is missing or empty"));
  }

  // From here on every answer is a review echoing uid.
  const LeaseFields& object = f.lease[0];
  absl::string_view group, kind;
  if (f.req_kind.type == Type::kObject) {
    group = f.kind_group.StringOr();
    kind = f.kind_kind.StringOr();
  } else {
    group = GroupOf(object.api_version.StringOr());
    kind = object.kind.StringOr();
  }
  absl::string_view ns = f.ns.StringOr();
  if (ns.empty()) ns = object.ns.StringOr();
  if (group != kLeaseGroup || kind != "Lease") {
    return Allowed(api_version, uid,
                   {absl::StrCat("poolcoord checked nothing: ", group.empty() ? "core" : group,
                                 "/", kind, " is not a ", kLeaseGroup, " Lease")});
  }
  if (ns != election::kNodeLeaseNamespace) {
    return Allowed(api_version, uid,
                   {absl::StrCat("poolcoord checked nothing: Lease in namespace \"", ns,
                                 "\" is not in ", election::kNodeLeaseNamespace)});
  }
  const absl::string_view operation = f.operation.StringOr();
  if (operation != "CREATE" && operation != "UPDATE") {
    return Allowed(api_version, uid,
                   {absl::StrCat("poolcoord checked nothing: operation \"", operation,
                                 "\" is neither CREATE nor UPDATE")});
  }

  election::AdmissionAttributes attrs;
  if (auto err = DecodeLease(object, "request.object", attrs.object)) {
    return BadReview(api_version, uid, *err);
  }
  if (auto err = DecodeLease(f.lease[1], "request.oldObject", attrs.old_object)) {
    return BadReview(api_version, uid, *err);
  }
  attrs.operation = std::string(operation);
  attrs.namespace_name = std::string(ns);
  attrs.name = std::string(object.name.StringOr());
  if (attrs.name.empty()) attrs.name = std::string(f.name.StringOr());
  if (f.user_info.type == Type::kObject) {
    attrs.user.username = std::string(f.username.StringOr());
    attrs.user.uid = std::string(f.user_uid.StringOr());
    if (f.groups.type == Type::kArray) {
      attrs.user.groups.reserve(f.group_values.size());
      for (std::string_view g : f.group_values) attrs.user.groups.emplace_back(g);
    }
  }

  if (opts.rules == nullptr || opts.store == nullptr) {
    // Only a wiring mistake gets here; failing closed on annotated writes alone
    // keeps every plain heartbeat flowing.
    if (!attrs.object.delegate_annotation) return Allowed(api_version, uid);
    return Denied(api_version, uid, "poolcoord's lease rules are not configured; retry later");
  }
  election::AdmissionDecision decision =
      election::DecideDelegatedHeartbeat(attrs, *opts.rules, opts.store);
  if (!decision.allowed) return Denied(api_version, uid, decision.message);
  return Allowed(api_version, uid, decision.warnings);
}

}  // namespace poolcoord::handlers
