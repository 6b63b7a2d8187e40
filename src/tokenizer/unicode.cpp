// UTF-8, Unicode character classes (utf8proc) and GPT-2's byte-level alphabet.
#include <utf8proc.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "pert/tokenizer.hpp"
#include "tokenizer/internal.hpp"

namespace pert {

namespace tokenizer {

size_t utf8_char_len(std::string_view s, size_t i) {
  const unsigned char c = s[i];
  const size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? (c >= 0xc2 ? 2 : 0) : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  const unsigned char c1 = n > 1 ? s[i + 1] : 0;
  if (n == 3 && ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0))) return 0;  // overlong, surrogate
  if (n == 4 && ((c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90))) return 0;  // overlong, > U+10FFFF
  return n;
}

char32_t utf8_decode(std::string_view s, size_t& i) {
  const unsigned char c = s[i];
  if (c < 0x80) return char32_t(s[i++]);
  const size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
  char32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  i += n;
  return cp;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xc0 | (c >> 6));
    out += char(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += char(0xe0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3f));
    out += char(0x80 | (c & 0x3f));
  } else {
    out += char(0xf0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3f));
    out += char(0x80 | ((c >> 6) & 0x3f));
    out += char(0x80 | (c & 0x3f));
  }
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = utf8_char_len(s, i)) {
      out.append(s, i, n);
      i += n;
      continue;
    }
    // The maximal subpart: a lead byte and the continuation bytes that could still follow it.
    const unsigned char c = s[i];
    size_t n = 1;
    const size_t want = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 1;
    for (; n < want && i + n < s.size(); ++n) {
      const unsigned char b = s[i + n];
      const unsigned char lo = n == 1 && c == 0xe0 ? 0xa0 : n == 1 && c == 0xf0 ? 0x90 : 0x80;
      const unsigned char hi = n == 1 && c == 0xed ? 0x9f : n == 1 && c == 0xf4 ? 0x8f : 0xbf;
      if (b < lo || b > hi) break;
    }
    out += "\xef\xbf\xbd";
    i += n;
  }
  return out;
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
         c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool is_numeric(char32_t c) {
  const auto cat = utf8proc_category(utf8proc_int32_t(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_word_char(char32_t c) {
  const auto cat = utf8proc_category(utf8proc_int32_t(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_ME) || cat == UTF8PROC_CATEGORY_ND ||
         cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_PC || c == 0x200c || c == 0x200d;
}

std::string unicode_normalize(std::string_view s, NormalForm form) {
  int options = UTF8PROC_STABLE;
  if (form == NormalForm::NFC || form == NormalForm::NFKC) options |= UTF8PROC_COMPOSE;
  if (form == NormalForm::NFD || form == NormalForm::NFKD) options |= UTF8PROC_DECOMPOSE;
  if (form == NormalForm::NFKC || form == NormalForm::NFKD) options |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()),
                                          &out, utf8proc_option_t(options));
  if (n < 0) throw Error(std::string("tokenizer: Unicode normalization failed: ") + utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), size_t(n));
  std::free(out);
  return result;
}

std::string unicode_lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char32_t c = utf8_decode(s, i);
    if (c == 0x130) {  // İ: the one unconditional full lowercase mapping of two characters
      out += "i\xcc\x87";
      continue;
    }
    utf8_append(out, char32_t(utf8proc_tolower(utf8proc_int32_t(c))));
  }
  return out;
}

namespace {
struct ByteAlphabet {
  std::array<std::string, 256> to_char;
  std::array<int, 324> to_byte;  // the alphabet's characters are all below U+0144
  ByteAlphabet() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      const char32_t c = printable ? char32_t(b) : char32_t(256 + extra++);
      utf8_append(to_char[size_t(b)], c);
      to_byte[c] = b;
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}
}  // namespace

const std::string& byte_to_char(unsigned char b) { return alphabet().to_char[b]; }
int char_to_byte(char32_t c) { return c < 324 ? alphabet().to_byte[c] : -1; }

}  // namespace tokenizer

bool valid_utf8(std::string_view s, size_t* bad_at) {
  for (size_t i = 0; i < s.size();) {
    // Eight ASCII bytes at a time: a text of 100 MB is checked in tens of milliseconds.
    uint64_t word;
    if (i + 8 <= s.size() && (std::memcpy(&word, s.data() + i, 8), (word & 0x8080808080808080ull) == 0)) {
      i += 8;
      continue;
    }
    const size_t n = tokenizer::utf8_char_len(s, i);
    if (n == 0) {
      if (bad_at) *bad_at = i;
      return false;
    }
    i += n;
  }
  return true;
}

}  // namespace pert
