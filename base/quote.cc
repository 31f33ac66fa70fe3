#include "base/quote.h"

#include <cstdint>

namespace poolcoord::base {
namespace {

constexpr char kHex[] = "0123456789abcdef";

uint32_t DecodeRune(std::string_view s, size_t i, size_t len) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  if (len == 1) return byte(i);
  uint32_t cp = byte(i) & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (byte(i + k) & 0x3F);
  return cp;
}

// Runes unicode.IsPrint rejects among those we can tell without tables.
bool GoPrintable(uint32_t r) {
  if (r < 0x20 || r == 0x7F) return false;
  if (r >= 0x80 && r <= 0x9F) return false;      // C1 controls
  if (r == 0xAD) return false;                   // soft hyphen (Cf)
  if (r >= 0x200B && r <= 0x200F) return false;  // zero-width, marks (Cf)
  if (r >= 0x2028 && r <= 0x202E) return false;  // separators, embeddings
  if (r >= 0x2060 && r <= 0x206F) return false;  // invisible operators (Cf)
  if (r == 0xFEFF) return false;                 // BOM (Cf)
  if (r >= 0xE000 && r <= 0xF8FF) return false;  // private use (Co)
  if (r >= 0xF0000) return false;                // supplementary private use
  return true;
}

void AppendHexEscape(std::string* out, char kind, uint32_t v, int digits) {
  out->push_back('\\');
  out->push_back(kind);
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
    out->push_back(kHex[(v >> shift) & 0xF]);
}

}  // namespace

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  const uint32_t cp = DecodeRune(s, i, len);
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

std::string GoQuote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8SequenceLength(s, i);
    if (len == 0) {
      AppendHexEscape(&out, 'x', static_cast<unsigned char>(s[i]), 2);
      ++i;
      continue;
    }
    const uint32_t r = DecodeRune(s, i, len);
    switch (r) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\v':
        out += "\\v";
        break;
      default:
        if (GoPrintable(r)) {
          out.append(s.substr(i, len));
        } else if (r < 0x80) {
          AppendHexEscape(&out, 'x', r, 2);
        } else if (r <= 0xFFFF) {
          AppendHexEscape(&out, 'u', r, 4);
        } else {
          AppendHexEscape(&out, 'U', r, 8);
        }
    }
    i += len;
  }
  out.push_back('"');
  return out;
}

std::string ToValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8SequenceLength(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace poolcoord::base
