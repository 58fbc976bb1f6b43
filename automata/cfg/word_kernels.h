// Word kernels over whole token masks (4,008 words on Llama-3) for the grammar runtime: set,
// OR, count, skip; AVX2 versions picked at run time (word_kernels.cc compiles for baseline
// x86-64). Internal to automata/cfg.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "lockstep/types.h"

namespace lockstep::cfg_words {

// Finished masks (read with memcpy and scalar loads: no alignment needed). Not over-aligned:
// glibc serves an aligned request outside its per-thread cache, and right after a big grammar
// was freed that meant sorting its thousands of free chunks inside a fill (a 60-byte mask took
// 450k cycles, 200 µs, in BM_SchemaPrecomputedWarm's slowest fill). Null when out of memory.
std::uint32_t* AllocWords(std::size_t words);
void FreeWords(std::uint32_t* p);

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

// (Vectorised by the compiler.)
inline void OrWords(std::uint32_t* dst, const std::uint32_t* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] |= src[i];
}

// The number of set bits of w[0, n).
std::size_t CountOnes(const std::uint32_t* w, std::size_t n);

// The first index >= i, in steps of 8 words, where a block holds a word other than `skip`
// (or the last partial block); the caller scans from there word by word.
std::size_t SkipWords(const std::uint32_t* w, std::size_t i, std::size_t n, std::uint32_t skip);

}  // namespace lockstep::cfg_words
