// Unicode helpers for the vocabulary layer: UTF-8 decoding, the character classes the
// pre-tokenizer regexes ask about (\p{L}, \p{N}, \p{M}, \s, ...) from ICU's tables, and NFC.
// Used by the pre-tokenizers and the tokenizer loaders in automata/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "grammar/base/utf8.h"

namespace lockstep::vocab {

// Character class bits of one code point.
enum CharClass : std::uint8_t {
  kClassLetter = 1 << 0,  // \p{L}
  kClassNumber = 1 << 1,  // \p{N}
  kClassSpace = 1 << 2,   // \s (Unicode White_Space)
  kClassMark = 1 << 3,    // \p{M}
  kClassUpper = 1 << 4,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k's "upper" set)
  kClassLower = 1 << 5,   // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k's "lower" set)
  kClassCrLf = 1 << 6,    // \r or \n
};

std::uint8_t ClassOf(char32_t c);

// Decodes one UTF-8 sequence at s[i] (i < s.size()); returns its length (1..4) and sets *c,
// or returns 0 when the bytes there are not well-formed UTF-8 (overlong, surrogate, truncated).
int DecodeUtf8(std::string_view s, std::size_t i, char32_t* c);
// Byte offset of the first ill-formed sequence, or npos when `s` is valid UTF-8.
std::size_t FindInvalidUtf8(std::string_view s);
using ::lockstep::AppendUtf8;

// NFC of valid UTF-8 `s` into *out; returns false on an ICU error.
bool NormalizeNfc(std::string_view s, std::string* out);

// The GPT-2 bytes-to-unicode table: byte -> code point, and its inverse (-1 for none).
char32_t ByteToUnicode(std::uint8_t b);
int UnicodeToByte(char32_t c);
// Maps a byte-level token string back to bytes; false if a character is outside the table.
bool DecodeByteLevel(std::string_view text, std::string* out);
// Maps a SentencePiece-style token string to bytes: every "\xE2\x96\x81" (U+2581, the
// Metaspace word boundary) becomes ' ', everything else is kept.
void MetaspaceToBytes(std::string_view text, std::string* out);

// Fast non-cryptographic hash of a byte string (for the flat hash maps).
std::uint64_t HashBytes(const char* p, std::size_t n);

}  // namespace lockstep::vocab
