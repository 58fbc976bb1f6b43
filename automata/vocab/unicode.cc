// Unicode helpers for the vocabulary layer (see unicode.h): ICU-backed character classes, NFC,
// UTF-8 decoding and the GPT-2 byte-level table.
#include "automata/vocab/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <array>
#include <cstring>

namespace lockstep::vocab {
namespace {

std::uint8_t ComputeClass(char32_t c) {
  std::uint8_t k = 0;
  if (c == '\r' || c == '\n') k |= kClassCrLf;
  if (u_isUWhiteSpace(static_cast<UChar32>(c))) k |= kClassSpace;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER:
    case U_TITLECASE_LETTER:
      k |= kClassLetter | kClassUpper;
      break;
    case U_LOWERCASE_LETTER:
      k |= kClassLetter | kClassLower;
      break;
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      k |= kClassLetter | kClassUpper | kClassLower;
      break;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      k |= kClassMark | kClassUpper | kClassLower;
      break;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      k |= kClassNumber;
      break;
    default:
      break;
  }
  return k;
}

struct AsciiTable {
  std::array<std::uint8_t, 128> cls;
  AsciiTable() {
    for (int i = 0; i < 128; ++i) cls[i] = ComputeClass(static_cast<char32_t>(i));
  }
};
const AsciiTable& Ascii() {
  static const AsciiTable table;
  return table;
}

struct ByteTables {
  std::array<char32_t, 256> to_unicode{};
  std::array<std::int16_t, 512> to_byte{};  // every mapped code point is < 0x144
  ByteTables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_unicode[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      to_byte[to_unicode[b]] = static_cast<std::int16_t>(b);
    }
  }
};
const ByteTables& Bytes() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

std::uint8_t ClassOf(char32_t c) {
  if (c < 128) return Ascii().cls[c];
  return ComputeClass(c);
}

int DecodeUtf8(std::string_view s, std::size_t i, char32_t* c) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  unsigned char b0 = p[i];
  if (b0 < 0x80) {
    *c = b0;
    return 1;
  }
  auto cont = [&](std::size_t k) { return i + k < n && (p[i + k] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (!cont(1)) return 0;
    *c = ((b0 & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu);
    return 2;
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    char32_t v = ((b0 & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3Fu);
    if (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *c = v;
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    char32_t v = ((b0 & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) | ((p[i + 2] & 0x3Fu) << 6) |
                 (p[i + 3] & 0x3Fu);
    if (v < 0x10000 || v > 0x10FFFF) return 0;
    *c = v;
    return 4;
  }
  return 0;
}

std::size_t FindInvalidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    char32_t c;
    int len = DecodeUtf8(s, i, &c);
    if (len == 0) return i;
    i += static_cast<std::size_t>(len);
  }
  return std::string_view::npos;
}


bool NormalizeNfc(std::string_view s, std::string* out) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return false;
  icu::StringPiece piece(s.data(), static_cast<std::int32_t>(s.size()));
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
    out->assign(s);
    return true;
  }
  status = U_ZERO_ERROR;
  out->clear();
  icu::StringByteSink<std::string> sink(out);
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  return U_SUCCESS(status);
}

char32_t ByteToUnicode(std::uint8_t b) { return Bytes().to_unicode[b]; }

int UnicodeToByte(char32_t c) { return c < 512 ? Bytes().to_byte[c] : -1; }

bool DecodeByteLevel(std::string_view text, std::string* out) {
  out->clear();
  std::size_t i = 0;
  while (i < text.size()) {
    char32_t c;
    int len = DecodeUtf8(text, i, &c);
    if (len == 0) return false;
    int b = UnicodeToByte(c);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
    i += static_cast<std::size_t>(len);
  }
  return true;
}

void MetaspaceToBytes(std::string_view text, std::string* out) {
  out->clear();
  out->reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i + 2 < text.size() && text.compare(i, 3, "\xE2\x96\x81") == 0) {
      out->push_back(' ');
      i += 2;
    } else {
      out->push_back(text[i]);
    }
  }
}

std::uint64_t HashBytes(const char* p, std::size_t n) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = 0x243F6A8885A308D3ull ^ (n * kMul);
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  std::uint64_t v = 0;
  std::memcpy(&v, p, n);
  h = (h ^ v) * kMul;
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

}  // namespace lockstep::vocab
