// Word kernels over whole token masks (word_kernels.h).
#include "automata/cfg/word_kernels.h"

#include <bit>
#include <cstring>
#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lockstep::cfg_words {
namespace {

// Word kernels over whole masks (4,008 words on Llama-3), with AVX2 versions picked at run time
// (this file compiles for baseline x86-64).
#if defined(__x86_64__)
#define LOCKSTEP_CFG_AVX2 __attribute__((target("avx2,popcnt")))

LOCKSTEP_CFG_AVX2 std::size_t CountOnesAvx2(const std::uint32_t* w, std::size_t n) {
  std::uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x[4];
    std::memcpy(x, w + i, sizeof x);
    c0 += static_cast<std::uint64_t>(__builtin_popcountll(x[0]));
    c1 += static_cast<std::uint64_t>(__builtin_popcountll(x[1]));
    c2 += static_cast<std::uint64_t>(__builtin_popcountll(x[2]));
    c3 += static_cast<std::uint64_t>(__builtin_popcountll(x[3]));
  }
  for (; i < n; ++i) c0 += static_cast<std::uint64_t>(__builtin_popcount(w[i]));
  return static_cast<std::size_t>(c0 + c1 + c2 + c3);
}

LOCKSTEP_CFG_AVX2 std::size_t SkipWordsAvx2(const std::uint32_t* w, std::size_t i, std::size_t n,
                                            std::uint32_t skip) {
  const __m256i s = _mm256_set1_epi32(static_cast<int>(skip));
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(v, s)) != -1) return i;
  }
  return i;
}

bool HasAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  return avx2;
}
#endif

}  // namespace

std::uint32_t* AllocWords(std::size_t words) {
  void* p = ::operator new(words * sizeof(std::uint32_t), std::nothrow);
  return static_cast<std::uint32_t*>(p);
}
void FreeWords(std::uint32_t* p) { ::operator delete(p); }

std::size_t CountOnes(const std::uint32_t* w, std::size_t n) {
#if defined(__x86_64__)
  if (HasAvx2()) return CountOnesAvx2(w, n);
#endif
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += static_cast<std::size_t>(std::popcount(w[i]));
  return c;
}

std::size_t SkipWords(const std::uint32_t* w, std::size_t i, std::size_t n, std::uint32_t skip) {
#if defined(__x86_64__)
  if (HasAvx2()) return SkipWordsAvx2(w, i, n, skip);
#endif
  for (; i + 8 <= n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) {
      if (w[i + j] != skip) return i;
    }
  }
  return i;
}

}  // namespace lockstep::cfg_words
