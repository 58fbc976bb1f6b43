// Word kernels over token bitmasks (token i allowed iff bit i % 32 of word i / 32 is set), the one
// set shared by the grammar runtime (automata/cfg, through its word_kernels.h), the regex masks
// (token_dfa.cc), the token trie's views and the decoder (mask_kernels, the decoding loops, the
// logits sources): bit tests and sets, walks over the set bits, OR/AND of word arrays, popcount
// and skipping runs of equal words. They sit in automata/ because automata builds the masks and
// the decoder may include automata, never the other way round (docs/architecture.md).
//
// The bit operations and the OR/AND loops are inline: they run in the innermost loops of mask
// fills and samplers. The popcount and the skip also have AVX2 versions, compiled with a
// per-function target attribute (mask_words.cc compiles for baseline x86-64) and picked at run
// time when the CPU has AVX2 and POPCNT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "lockstep/types.h"

namespace lockstep::mask_words {

// Bit `i` of `words`.
inline bool TestBit(const std::uint32_t* words, std::int32_t i) {
  return ((words[i >> 5] >> (i & 31)) & 1u) != 0;
}
// The same for a mask that may be null (null: every id is allowed).
inline bool Allowed(const std::uint32_t* mask, std::int32_t i) {
  return mask == nullptr || TestBit(mask, i);
}

inline void SetBit(std::span<std::uint32_t> out, TokenId id) {
  out[static_cast<std::size_t>(id) >> 5] |= 1u << (id & 31);
}
// SetBit, appending id to `added` (if given) when its bit was clear.
inline void SetBitRecording(std::span<std::uint32_t> out, TokenId id, std::vector<TokenId>* added) {
  std::uint32_t& w = out[static_cast<std::size_t>(id) >> 5];
  const std::uint32_t bit = 1u << (id & 31);
  if (added != nullptr && (w & bit) == 0) added->push_back(id);
  w |= bit;
}

// The set bits of one 64-bit word, inline and without the POPCNT instruction (std::popcount is a
// libgcc call in a baseline x86-64 build): for a few words per state in the grammar runtime.
inline int CountOnes64(std::uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<int>((x * 0x0101010101010101ull) >> 56);
}

// dst[i] |= src[i] / dst[i] &= src[i] for i in [0, n). (Vectorised by the compiler.)
inline void OrWords(std::uint32_t* dst, const std::uint32_t* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] |= src[i];
}
inline void AndWords(std::uint32_t* dst, const std::uint32_t* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] &= src[i];
}

// Calls fn(TokenId) for every set bit of `mask` below `width`, in increasing order. Zero words
// cost one compare each, so a sparse mask costs about a popcount.
template <typename Fn>
inline void ForEachSetBit(const std::uint32_t* mask, std::int32_t width, Fn&& fn) {
  if (width <= 0) return;
  const std::int32_t full = width / 32;
  for (std::int32_t w = 0; w < full; ++w) {
    std::uint32_t bits = mask[w];
    while (bits != 0) {
      fn(static_cast<TokenId>(w * 32 + __builtin_ctz(bits)));
      bits &= bits - 1;
    }
  }
  if (width % 32 != 0) {
    std::uint32_t bits = mask[full] & ((1u << (width % 32)) - 1);
    while (bits != 0) {
      fn(static_cast<TokenId>(full * 32 + __builtin_ctz(bits)));
      bits &= bits - 1;
    }
  }
}

// The number of set bits of w[0, n): CountOnesAvx2 when the CPU has it, else CountOnesScalar.
std::size_t CountOnes(const std::uint32_t* w, std::size_t n);
std::size_t CountOnesScalar(const std::uint32_t* w, std::size_t n);

// The first index >= i, in steps of 8 words, where a block holds a word other than `skip`
// (or the last partial block); the caller scans from there word by word.
std::size_t SkipWords(const std::uint32_t* w, std::size_t i, std::size_t n, std::uint32_t skip);

// AVX2 and POPCNT, checked once.
bool CpuHasAvx2();

#if defined(__x86_64__) || defined(__i386__)
// CountOnes with AVX2 and POPCNT; only when CpuHasAvx2().
std::size_t CountOnesAvx2(const std::uint32_t* w, std::size_t n);
#endif

}  // namespace lockstep::mask_words
