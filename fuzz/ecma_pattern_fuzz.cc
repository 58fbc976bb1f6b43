// libFuzzer target for the ECMAScript pattern checker (grammar/regex/ecma_pattern.h), which reads
// untrusted text twice: the validator's `format: regex` and the parser's check of generated
// strings. Any byte string: no crash, no hang, and the invariants the generator relies on hold:
// a text IsEcmaPattern accepts passes Step at every code point (viability is a prefix property),
// a dead checker stays dead and never completes, and SomeStepIn agrees with Step on the next
// code point of the text and on a small range around it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/regex/ecma_pattern.h"

namespace {

// The code points of well-formed UTF-8 `s`, or false.
bool Decode(std::string_view s, std::vector<char32_t>* out) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
    if (len == 0 || i + len > s.size() || b > 0xF4) return false;
    char32_t c = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto x = static_cast<unsigned char>(s[i + k]);
      if ((x & 0xC0) != 0x80) return false;
      c = c << 6 | (x & 0x3F);
    }
    static constexpr char32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kLeast[len] || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) return false;
    out->push_back(c);
    i += len;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = lockstep::IsEcmaPattern(text);
  std::vector<char32_t> cps;
  if (!Decode(text, &cps)) {
    if (valid) std::abort();  // (ill-formed UTF-8 is never a pattern)
    return 0;
  }
  lockstep::EcmaPatternChecker check;
  bool alive = true;
  for (const char32_t c : cps) {
    if (alive) {
      const bool some = check.SomeStepIn(c, c);
      const bool near = check.SomeStepIn(c > 8 ? c - 8 : 0, c + 8);
      lockstep::EcmaPatternChecker copy = check;
      const bool step = copy.Step(c);
      if (some != step || (step && !near)) std::abort();
    }
    const bool step = check.Step(c);
    if (!alive && step) std::abort();  // (dead stays dead)
    if (alive && !step && valid) std::abort();  // (a valid text's prefixes are all viable)
    alive = alive && step;
  }
  if (check.Complete() != valid) std::abort();
  std::string key;
  check.AppendLocalKey(&key);
  return 0;
}
