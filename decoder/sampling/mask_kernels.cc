// Scalar and AVX2 mask kernels behind one dispatch table (see mask_kernels.h). The AVX2 versions
// carry __attribute__((target("avx2,popcnt"))) so this file compiles for baseline x86-64; the
// table is chosen at first use from __builtin_cpu_supports. The exp and block sums use the same
// float operations in the same order in both versions (no FMA, no reassociation), so they agree
// bit for bit.
#include "decoder/sampling/mask_kernels.h"

#include <atomic>
#include <cstring>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOCKSTEP_X86 1
#endif

namespace lockstep::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using mask_words::Allowed;

inline std::uint32_t TailMask(std::int32_t width) {
  return width % 32 == 0 ? ~0u : (1u << (width % 32)) - 1;
}

// ---- Shared scalar pieces (also used for the tails of the AVX2 loops).

constexpr float kExpLow = -87.0f;  // below: flushed to 0 (e^-87 ~ 1.6e-38, still normal)
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;  // ln 2 split in two (Cody-Waite), hi exact in float
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: (t + m) - m rounds t to nearest even
// Taylor coefficients of e^r, enough for |r| <= ln2 / 2 at float precision.
constexpr float kC2 = 0.5f, kC3 = 1.0f / 6, kC4 = 1.0f / 24, kC5 = 1.0f / 120, kC6 = 1.0f / 720;

inline float ExpScalar(float x) {
  const bool flush = !(x >= kExpLow);
  const float xc = flush ? kExpLow : x;
  const float t = xc * kLog2e;
  const float n = (t + kRoundMagic) - kRoundMagic;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kC6;
  p = p * r + kC5;
  p = p * r + kC4;
  p = p * r + kC3;
  p = p * r + kC2;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return flush ? 0.0f : p * scale;
}

// Pieces of the tail bound of CollectCandidates: t = (x - shift) * kTail + bias is
// (u + 127 + margin) * 2^23, whose truncation read as float bits is 2^floor(u') * (1 + frac(u'))
// >= 2^u' (the chord of 2^f on [0, 1] lies above it); clamped below at 2^23 (FLT_MIN), so tiny
// and -inf entries count as FLT_MIN and no denormal is formed.
constexpr float kTwo23 = 8388608.0f;
constexpr float kTailMargin = 0.01f;  // in log2 units: covers the rounding of t
struct TailParams {
  float k, bias;
};
inline TailParams MakeTailParams(float scale) {
  return {scale * kLog2e * kTwo23, (127.0f + kTailMargin) * kTwo23};
}
inline float TailTerm(float x, float shift, TailParams tp) {
  float t = (x - shift) * tp.k + tp.bias;
  t = t > kTwo23 ? t : kTwo23;  // also maps -inf (and NaN) to the floor
  const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(t));
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
// The float lane sums are exact to about n * 2^-24 relatively; 16k terms per lane at most for
// Llama-3 widths, 1% covers widths up to ~1.6M per lane.
inline double WidenTailBound(double sum, std::int32_t width) {
  return sum * 1.01 + static_cast<double>(width) * std::numeric_limits<float>::min();
}

inline float ReduceLanes(const float* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// The scalar loops over [from, end): the whole array in the scalar versions, the entries past the
// last full vector (or word) in the AVX2 ones, so that both compute the same thing.

// ExpBlocks within the block that starts at `begin`; entry i adds to lane (i - begin) % 8.
inline void ExpRange(float* x, const std::uint32_t* mask, std::int32_t begin, std::int32_t from,
                     std::int32_t end, float shift, float scale, float (&lanes)[8]) {
  for (std::int32_t i = from; i < end; ++i) {
    const float e = Allowed(mask, i) ? ExpScalar((x[i] - shift) * scale) : 0.0f;
    x[i] = e;
    lanes[(i - begin) & 7] += e;
  }
}
// ThresholdBlocks likewise.
inline void ThresholdRange(float* p, std::int32_t begin, std::int32_t from, std::int32_t end,
                           float tau, float (&lanes)[8]) {
  for (std::int32_t i = from; i < end; ++i) {
    const float v = p[i] >= tau ? p[i] : 0.0f;
    p[i] = v;
    lanes[(i - begin) & 7] += v;
  }
}
// The scalar block sums: fill(begin, end, lanes) leaves a block's eight lane sums in `lanes`;
// block_sums[b] = their fixed-order sum. Returns the total, added in block order in double.
template <typename Fill>
inline double SumBlocks(std::int32_t width, float* block_sums, Fill&& fill) {
  double total = 0;
  for (std::int32_t b = 0, begin = 0; begin < width; ++b, begin += kBlockSize) {
    const std::int32_t end = begin + kBlockSize < width ? begin + kBlockSize : width;
    float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    fill(begin, end, lanes);
    block_sums[b] = ReduceLanes(lanes);
    total += block_sums[b];
  }
  return total;
}
// CollectInRange: appends to out[*m...].
inline void InRange(const float* p, std::int32_t from, std::int32_t n, float lo, float hi,
                    float* out, std::int32_t* m) {
  for (std::int32_t i = from; i < n; ++i) {
    if (p[i] >= lo && p[i] < hi) out[(*m)++] = p[i];
  }
}
// CollectCandidates: appends the candidates to ids/vals[*m...] and the tail terms to lane i % 8;
// false as soon as there would be more than `limit` candidates.
inline bool CandidatesInRange(const float* x, const std::uint32_t* mask, std::int32_t from,
                              std::int32_t width, float lo, float shift, TailParams tp,
                              std::int32_t limit, TokenId* ids, float* vals, std::int32_t* m,
                              float (&lanes)[8]) {
  for (std::int32_t i = from; i < width; ++i) {
    if (x[i] >= lo && Allowed(mask, i)) {
      if (*m == limit) return false;
      ids[*m] = i;
      vals[(*m)++] = x[i];
    } else if (!(x[i] >= lo) && Allowed(mask, i)) {
      lanes[i & 7] += TailTerm(x[i], shift, tp);
    }
  }
  return true;
}
// ForEachAbove.
inline void AboveInRange(const float* x, const std::uint32_t* mask, std::int32_t from,
                         std::int32_t width, const float* threshold, AboveVisitor visit,
                         void* ctx) {
  for (std::int32_t i = from; i < width; ++i) {
    if (Allowed(mask, i) && x[i] > *threshold) visit(ctx, i, x[i]);
  }
}
// FirstSetBit over the words [w, words) of a mask of `width` bits.
inline TokenId FirstSetBitFrom(const std::uint32_t* mask, std::int32_t w, std::int32_t words,
                               std::int32_t width) {
  for (; w < words; ++w) {
    std::uint32_t bits = mask[w];
    if (w == words - 1) bits &= TailMask(width);
    if (bits != 0) return w * 32 + __builtin_ctz(bits);
  }
  return kNoToken;
}

// ---- Scalar reference.

void ApplyMaskScalar(float* logits, const std::uint32_t* mask, std::int32_t width) {
  for (std::int32_t base = 0; base < width; base += 32) {
    const std::uint32_t bits = mask[base >> 5];
    if (bits == ~0u) continue;
    const std::int32_t n = width - base < 32 ? width - base : 32;
    for (std::int32_t j = 0; j < n; ++j) {
      logits[base + j] = ((bits >> j) & 1u) ? logits[base + j] : kNegInf;
    }
  }
}

// Popcount, AndInto and OrInto are the shared word kernels (automata/token/mask_words.h).

TokenId FirstSetBitScalar(const std::uint32_t* mask, std::int32_t width) {
  return FirstSetBitFrom(mask, 0, static_cast<std::int32_t>(BitmaskWords(width)), width);
}

TokenId FirstAllowed(const std::uint32_t* mask, std::int32_t width);

TokenId MaskedArgmaxScalar(const float* logits, const std::uint32_t* mask, std::int32_t width) {
  float best = kNegInf;
  TokenId best_id = kNoToken;
  for (std::int32_t i = 0; i < width; ++i) {
    if (Allowed(mask, i) && logits[i] > best) {
      best = logits[i];
      best_id = i;
    }
  }
  return best_id != kNoToken ? best_id : FirstAllowed(mask, width);
}

float MaskedMaxScalar(const float* logits, const std::uint32_t* mask, std::int32_t width) {
  float best = kNegInf;
  for (std::int32_t i = 0; i < width; ++i) {
    if (Allowed(mask, i) && logits[i] > best) best = logits[i];
  }
  return best;
}

double ExpBlocksScalar(float* x, const std::uint32_t* mask, std::int32_t width, float shift,
                       float scale, float* block_sums) {
  return SumBlocks(width, block_sums, [&](std::int32_t begin, std::int32_t end, float (&lanes)[8]) {
    ExpRange(x, mask, begin, begin, end, shift, scale, lanes);
  });
}

double ThresholdBlocksScalar(float* p, std::int32_t width, float tau, float* block_sums) {
  return SumBlocks(width, block_sums, [&](std::int32_t begin, std::int32_t end, float (&lanes)[8]) {
    ThresholdRange(p, begin, begin, end, tau, lanes);
  });
}

std::int32_t CollectInRangeScalar(const float* p, std::int32_t n, float lo, float hi, float* out) {
  std::int32_t m = 0;
  InRange(p, 0, n, lo, hi, out, &m);
  return m;
}

std::int32_t CollectCandidatesScalar(const float* x, const std::uint32_t* mask, std::int32_t width,
                                     float lo, float shift, float scale, std::int32_t limit,
                                     TokenId* ids, float* vals, double* tail_bound) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int32_t m = 0;
  if (!CandidatesInRange(x, mask, 0, width, lo, shift, MakeTailParams(scale), limit, ids, vals, &m,
                         lanes)) {
    return -1;
  }
  *tail_bound = WidenTailBound(ReduceLanes(lanes), width);
  return m;
}

void ForEachAboveScalar(const float* x, const std::uint32_t* mask, std::int32_t width,
                        const float* threshold, AboveVisitor visit, void* ctx) {
  AboveInRange(x, mask, 0, width, threshold, visit, ctx);
}

// ---- AVX2.
#ifdef LOCKSTEP_X86
#define LOCKSTEP_AVX2 __attribute__((target("avx2,popcnt")))

// Lane j of the result has bit (8 * chunk + j) of `word` in its sign bit (for blendv).
LOCKSTEP_AVX2 inline __m256 LaneSigns(__m256i word, int chunk) {
  const __m256i shifts = _mm256_sub_epi32(_mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24),
                                          _mm256_set1_epi32(8 * chunk));
  return _mm256_castsi256_ps(_mm256_sllv_epi32(word, shifts));
}

// Bit j of the result: x[j] compared with `v` by kCmp (a _CMP_* predicate), for the 32 floats
// under one mask word.
template <int kCmp>
LOCKSTEP_AVX2 inline std::uint32_t CompareWord(const float* x, __m256 v) {
  std::uint32_t bits = 0;
  for (int c = 0; c < 4; ++c) {
    const __m256 r = _mm256_cmp_ps(_mm256_loadu_ps(x + 8 * c), v, kCmp);
    bits |= static_cast<std::uint32_t>(_mm256_movemask_ps(r)) << (8 * c);
  }
  return bits;
}

LOCKSTEP_AVX2 inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

LOCKSTEP_AVX2 inline __m256 Exp8(__m256 x) {
  const __m256 low = _mm256_set1_ps(kExpLow);
  const __m256 flush = _mm256_cmp_ps(x, low, _CMP_NGE_UQ);  // !(x >= low), NaN included
  const __m256 xc = _mm256_blendv_ps(x, low, flush);
  const __m256 magic = _mm256_set1_ps(kRoundMagic);
  const __m256 t = _mm256_mul_ps(xc, _mm256_set1_ps(kLog2e));
  const __m256 n = _mm256_sub_ps(_mm256_add_ps(t, magic), magic);
  __m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
  __m256 p = _mm256_set1_ps(kC6);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kC5));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kC4));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kC3));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kC2));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  return _mm256_andnot_ps(flush, e);
}

LOCKSTEP_AVX2 void ApplyMaskAvx2(float* logits, const std::uint32_t* mask, std::int32_t width) {
  const __m256 neg_inf = _mm256_set1_ps(kNegInf);
  const std::int32_t full = width / 32;
  for (std::int32_t w = 0; w < full; ++w) {
    const std::uint32_t bits = mask[w];
    if (bits == ~0u) continue;
    float* x = logits + w * 32;
    if (bits == 0) {
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(x + 8 * c, neg_inf);
      continue;
    }
    const __m256i word = _mm256_set1_epi32(static_cast<int>(bits));
    for (int c = 0; c < 4; ++c) {
      const __m256 v = _mm256_loadu_ps(x + 8 * c);
      _mm256_storeu_ps(x + 8 * c, _mm256_blendv_ps(neg_inf, v, LaneSigns(word, c)));
    }
  }
  for (std::int32_t i = full * 32; i < width; ++i) {
    if (!Allowed(mask, i)) logits[i] = kNegInf;
  }
}

// dst[i] |= src[i] (kOr) or dst[i] &= src[i], eight words at a time.
template <bool kOr>
LOCKSTEP_AVX2 inline void CombineIntoAvx2(std::uint32_t* dst, const std::uint32_t* src,
                                          std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i r = kOr ? _mm256_or_si256(a, b) : _mm256_and_si256(a, b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), r);
  }
  for (; i < n; ++i) dst[i] = kOr ? dst[i] | src[i] : dst[i] & src[i];
}

LOCKSTEP_AVX2 void AndIntoAvx2(std::uint32_t* dst, const std::uint32_t* src, std::size_t n) {
  CombineIntoAvx2<false>(dst, src, n);
}
LOCKSTEP_AVX2 void OrIntoAvx2(std::uint32_t* dst, const std::uint32_t* src, std::size_t n) {
  CombineIntoAvx2<true>(dst, src, n);
}

LOCKSTEP_AVX2 TokenId FirstSetBitAvx2(const std::uint32_t* mask, std::int32_t width) {
  const std::int32_t words = static_cast<std::int32_t>(BitmaskWords(width));
  std::int32_t w = 0;
  for (; w + 8 < words; w += 8) {  // leaves the last word (tail bits) to the scalar loop
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask + w));
    if (!_mm256_testz_si256(v, v)) break;
  }
  return FirstSetBitFrom(mask, w, words, width);
}

LOCKSTEP_AVX2 float MaskedMaxAvx2(const float* logits, const std::uint32_t* mask,
                                  std::int32_t width) {
  // One accumulator per 8-lane chunk of a word: four independent max chains.
  const __m256 neg_inf = _mm256_set1_ps(kNegInf);
  __m256 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
  const std::int32_t full = width / 32;
  for (std::int32_t w = 0; w < full; ++w) {
    const std::uint32_t bits = mask == nullptr ? ~0u : mask[w];
    if (bits == 0) continue;
    const float* x = logits + w * 32;
    if (bits == ~0u) {
      // Operand order: max_ps returns its second operand when one is NaN, so NaN is dropped.
      for (int c = 0; c < 4; ++c) best[c] = _mm256_max_ps(_mm256_loadu_ps(x + 8 * c), best[c]);
      continue;
    }
    const __m256i word = _mm256_set1_epi32(static_cast<int>(bits));
    for (int c = 0; c < 4; ++c) {
      const __m256 v = _mm256_blendv_ps(neg_inf, _mm256_loadu_ps(x + 8 * c), LaneSigns(word, c));
      best[c] = _mm256_max_ps(v, best[c]);
    }
  }
  float result = HorizontalMax(
      _mm256_max_ps(_mm256_max_ps(best[0], best[1]), _mm256_max_ps(best[2], best[3])));
  for (std::int32_t i = full * 32; i < width; ++i) {
    if (Allowed(mask, i) && logits[i] > result) result = logits[i];
  }
  return result;
}

// The lowest allowed id whose logit equals `value`, or kNoToken.
LOCKSTEP_AVX2 TokenId FindFirstEqualAvx2(const float* logits, const std::uint32_t* mask,
                                         std::int32_t width, float value) {
  const __m256 v = _mm256_set1_ps(value);
  const std::int32_t full = width / 32;
  for (std::int32_t w = 0; w < full; ++w) {
    const std::uint32_t bits = mask == nullptr ? ~0u : mask[w];
    if (bits == 0) continue;
    const std::uint32_t eq = CompareWord<_CMP_EQ_OQ>(logits + w * 32, v) & bits;
    if (eq != 0) return w * 32 + __builtin_ctz(eq);
  }
  for (std::int32_t i = full * 32; i < width; ++i) {
    if (Allowed(mask, i) && logits[i] == value) return i;
  }
  return kNoToken;
}

LOCKSTEP_AVX2 TokenId MaskedArgmaxAvx2(const float* logits, const std::uint32_t* mask,
                                       std::int32_t width) {
  // Two passes (max, then the first allowed id holding it) beat one pass carrying indices: the
  // max pass has four independent chains and the search usually stops early.
  const float max = MaskedMaxAvx2(logits, mask, width);
  if (!(max > kNegInf)) return FirstAllowed(mask, width);
  const TokenId id = FindFirstEqualAvx2(logits, mask, width, max);
  return id != kNoToken ? id : FirstAllowed(mask, width);
}

LOCKSTEP_AVX2 double ExpBlocksAvx2(float* x, const std::uint32_t* mask, std::int32_t width,
                                   float shift, float scale, float* block_sums) {
  const __m256 vshift = _mm256_set1_ps(shift);
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256 zero = _mm256_setzero_ps();
  double total = 0;
  for (std::int32_t b = 0, begin = 0; begin < width; ++b, begin += kBlockSize) {
    const std::int32_t end = begin + kBlockSize < width ? begin + kBlockSize : width;
    __m256 acc = zero;
    std::int32_t i = begin;
    for (; i + 8 <= end; i += 8) {
      const std::uint32_t byte = mask == nullptr ? 0xFFu : (mask[i >> 5] >> (i & 31)) & 0xFFu;
      if (byte == 0) {
        _mm256_storeu_ps(x + i, zero);
        continue;
      }
      __m256 e = Exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift), vscale));
      if (byte != 0xFFu) {
        // Lane j keeps bit j of `byte`: shift it to the sign bit.
        const __m256i lanes = _mm256_sllv_epi32(_mm256_set1_epi32(static_cast<int>(byte)),
                                                _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24));
        e = _mm256_blendv_ps(zero, e, _mm256_castsi256_ps(lanes));
      }
      _mm256_storeu_ps(x + i, e);
      acc = _mm256_add_ps(acc, e);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    ExpRange(x, mask, begin, i, end, shift, scale, lanes);
    block_sums[b] = ReduceLanes(lanes);
    total += block_sums[b];
  }
  return total;
}

LOCKSTEP_AVX2 double ThresholdBlocksAvx2(float* p, std::int32_t width, float tau,
                                         float* block_sums) {
  const __m256 vtau = _mm256_set1_ps(tau);
  double total = 0;
  for (std::int32_t b = 0, begin = 0; begin < width; ++b, begin += kBlockSize) {
    const std::int32_t end = begin + kBlockSize < width ? begin + kBlockSize : width;
    __m256 acc = _mm256_setzero_ps();
    std::int32_t i = begin;
    for (; i + 8 <= end; i += 8) {
      const __m256 v = _mm256_loadu_ps(p + i);
      const __m256 kept = _mm256_and_ps(v, _mm256_cmp_ps(v, vtau, _CMP_GE_OQ));
      _mm256_storeu_ps(p + i, kept);
      acc = _mm256_add_ps(acc, kept);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    ThresholdRange(p, begin, i, end, tau, lanes);
    block_sums[b] = ReduceLanes(lanes);
    total += block_sums[b];
  }
  return total;
}

LOCKSTEP_AVX2 std::int32_t CollectInRangeAvx2(const float* p, std::int32_t n, float lo, float hi,
                                              float* out) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  std::int32_t m = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(p + i);
    const __m256 in =
        _mm256_and_ps(_mm256_cmp_ps(v, vlo, _CMP_GE_OQ), _mm256_cmp_ps(v, vhi, _CMP_LT_OQ));
    std::uint32_t bits = static_cast<std::uint32_t>(_mm256_movemask_ps(in));
    while (bits != 0) {
      out[m++] = p[i + __builtin_ctz(bits)];
      bits &= bits - 1;
    }
  }
  InRange(p, i, n, lo, hi, out, &m);
  return m;
}

LOCKSTEP_AVX2 std::int32_t CollectCandidatesAvx2(const float* x, const std::uint32_t* mask,
                                                 std::int32_t width, float lo, float shift,
                                                 float scale, std::int32_t limit, TokenId* ids,
                                                 float* vals, double* tail_bound) {
  const TailParams tp = MakeTailParams(scale);
  const __m256 vlo = _mm256_set1_ps(lo), vshift = _mm256_set1_ps(shift);
  const __m256 vk = _mm256_set1_ps(tp.k), vbias = _mm256_set1_ps(tp.bias);
  const __m256 vfloor = _mm256_set1_ps(kTwo23);
  __m256 acc = _mm256_setzero_ps();
  std::int32_t m = 0;
  const std::int32_t full = width / 32;
  for (std::int32_t w = 0; w < full; ++w) {
    const std::uint32_t bits = mask == nullptr ? ~0u : mask[w];
    if (bits == 0) continue;
    const float* v = x + w * 32;
    const __m256i word = _mm256_set1_epi32(static_cast<int>(bits));
    std::uint32_t above = 0;
    for (int c = 0; c < 4; ++c) {
      const __m256 xv = _mm256_loadu_ps(v + 8 * c);
      const __m256 ge = _mm256_cmp_ps(xv, vlo, _CMP_GE_OQ);
      above |= static_cast<std::uint32_t>(_mm256_movemask_ps(ge)) << (8 * c);
      __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(xv, vshift), vk), vbias);
      // max(t, floor) returns the floor for t = -inf or NaN, like the scalar select.
      t = _mm256_max_ps(t, vfloor);
      __m256 term = _mm256_andnot_ps(ge, _mm256_castsi256_ps(_mm256_cvttps_epi32(t)));
      if (bits != ~0u) term = _mm256_blendv_ps(_mm256_setzero_ps(), term, LaneSigns(word, c));
      acc = _mm256_add_ps(acc, term);
    }
    std::uint32_t cand = bits & above;
    if (cand == 0) continue;
    if (m + __builtin_popcount(cand) > limit) return -1;
    while (cand != 0) {
      const TokenId id = w * 32 + __builtin_ctz(cand);
      ids[m] = id;
      vals[m++] = x[id];
      cand &= cand - 1;
    }
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  if (!CandidatesInRange(x, mask, full * 32, width, lo, shift, tp, limit, ids, vals, &m, lanes)) {
    return -1;
  }
  *tail_bound = WidenTailBound(ReduceLanes(lanes), width);
  return m;
}

LOCKSTEP_AVX2 void ForEachAboveAvx2(const float* x, const std::uint32_t* mask, std::int32_t width,
                                    const float* threshold, AboveVisitor visit, void* ctx) {
  const std::int32_t full = width / 32;
  for (std::int32_t w = 0; w < full; ++w) {
    std::uint32_t bits = mask == nullptr ? ~0u : mask[w];
    if (bits == 0) continue;
    bits &= CompareWord<_CMP_GT_OQ>(x + w * 32, _mm256_set1_ps(*threshold));
    while (bits != 0) {
      const TokenId id = w * 32 + __builtin_ctz(bits);
      if (x[id] > *threshold) visit(ctx, id, x[id]);  // the visitor may have raised it
      bits &= bits - 1;
    }
  }
  AboveInRange(x, mask, full * 32, width, threshold, visit, ctx);
}
#endif  // LOCKSTEP_X86

TokenId FirstAllowed(const std::uint32_t* mask, std::int32_t width) {
  if (width <= 0) return kNoToken;
  return mask == nullptr ? 0 : FirstSetBitScalar(mask, width);
}

// ---- Dispatch.

struct Table {
  Isa isa;
  void (*apply_mask)(float*, const std::uint32_t*, std::int32_t);
  std::size_t (*popcount)(const std::uint32_t*, std::size_t);
  void (*and_into)(std::uint32_t*, const std::uint32_t*, std::size_t);
  void (*or_into)(std::uint32_t*, const std::uint32_t*, std::size_t);
  TokenId (*first_set_bit)(const std::uint32_t*, std::int32_t);
  TokenId (*masked_argmax)(const float*, const std::uint32_t*, std::int32_t);
  float (*masked_max)(const float*, const std::uint32_t*, std::int32_t);
  double (*exp_blocks)(float*, const std::uint32_t*, std::int32_t, float, float, float*);
  double (*threshold_blocks)(float*, std::int32_t, float, float*);
  std::int32_t (*collect_in_range)(const float*, std::int32_t, float, float, float*);
  void (*for_each_above)(const float*, const std::uint32_t*, std::int32_t, const float*,
                         AboveVisitor, void*);
  std::int32_t (*collect_candidates)(const float*, const std::uint32_t*, std::int32_t, float,
                                     float, float, std::int32_t, TokenId*, float*, double*);
};

constexpr Table kScalarTable = {
    Isa::kScalar,          ApplyMaskScalar,       mask_words::CountOnesScalar,
    mask_words::AndWords,  mask_words::OrWords,   FirstSetBitScalar,
    MaskedArgmaxScalar,    MaskedMaxScalar,       ExpBlocksScalar,
    ThresholdBlocksScalar, CollectInRangeScalar,  ForEachAboveScalar,
    CollectCandidatesScalar,
};
#ifdef LOCKSTEP_X86
constexpr Table kAvx2Table = {
    Isa::kAvx2,    ApplyMaskAvx2,       mask_words::CountOnesAvx2, AndIntoAvx2,
    OrIntoAvx2,    FirstSetBitAvx2,     MaskedArgmaxAvx2,          MaskedMaxAvx2,
    ExpBlocksAvx2, ThresholdBlocksAvx2, CollectInRangeAvx2,        ForEachAboveAvx2,
    CollectCandidatesAvx2,
};
#endif

std::atomic<const Table*> g_table{nullptr};

const Table* BestTable() {
#ifdef LOCKSTEP_X86
  if (CpuHasAvx2()) return &kAvx2Table;
#endif
  return &kScalarTable;
}

inline const Table& Kernels() {
  const Table* t = g_table.load(std::memory_order_acquire);
  if (t == nullptr) {
    t = BestTable();
    g_table.store(t, std::memory_order_release);
  }
  return *t;
}

}  // namespace

bool CpuHasAvx2() { return mask_words::CpuHasAvx2(); }

bool ForceIsa(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      g_table.store(BestTable(), std::memory_order_release);
      return true;
    case Isa::kScalar:
      g_table.store(&kScalarTable, std::memory_order_release);
      return true;
    case Isa::kAvx2:
#ifdef LOCKSTEP_X86
      if (!CpuHasAvx2()) return false;
      g_table.store(&kAvx2Table, std::memory_order_release);
      return true;
#else
      return false;
#endif
  }
  return false;
}

Isa ActiveIsa() { return Kernels().isa; }

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      return "auto";
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
  }
  return "?";
}

void ApplyMask(float* logits, const std::uint32_t* mask, std::int32_t width) {
  if (width > 0) Kernels().apply_mask(logits, mask, width);
}
std::size_t Popcount(const std::uint32_t* words, std::size_t num_words) {
  return Kernels().popcount(words, num_words);
}
std::size_t CountAllowed(const std::uint32_t* mask, std::int32_t width) {
  if (width <= 0) return 0;
  const std::size_t full = static_cast<std::size_t>(width / 32);
  std::size_t n = Kernels().popcount(mask, full);
  if (width % 32 != 0)
    n += static_cast<std::size_t>(__builtin_popcount(mask[full] & TailMask(width)));
  return n;
}
void AndInto(std::uint32_t* dst, const std::uint32_t* src, std::size_t num_words) {
  Kernels().and_into(dst, src, num_words);
}
void OrInto(std::uint32_t* dst, const std::uint32_t* src, std::size_t num_words) {
  Kernels().or_into(dst, src, num_words);
}
TokenId FirstSetBit(const std::uint32_t* mask, std::int32_t width) {
  return width > 0 ? Kernels().first_set_bit(mask, width) : kNoToken;
}
TokenId MaskedArgmax(const float* logits, const std::uint32_t* mask, std::int32_t width) {
  return width > 0 ? Kernels().masked_argmax(logits, mask, width) : kNoToken;
}
float MaskedMax(const float* logits, const std::uint32_t* mask, std::int32_t width) {
  return width > 0 ? Kernels().masked_max(logits, mask, width) : kNegInf;
}
double ExpBlocks(float* x, const std::uint32_t* mask, std::int32_t width, float shift, float scale,
                 float* block_sums) {
  return width > 0 ? Kernels().exp_blocks(x, mask, width, shift, scale, block_sums) : 0.0;
}
double ThresholdBlocks(float* p, std::int32_t width, float tau, float* block_sums) {
  return width > 0 ? Kernels().threshold_blocks(p, width, tau, block_sums) : 0.0;
}
std::int32_t CollectInRange(const float* p, std::int32_t n, float lo, float hi, float* out) {
  return n > 0 ? Kernels().collect_in_range(p, n, lo, hi, out) : 0;
}
float ExpNonPositive(float x) { return ExpScalar(x); }
std::int32_t CollectCandidates(const float* x, const std::uint32_t* mask, std::int32_t width,
                               float lo, float shift, float scale, std::int32_t limit,
                               TokenId* ids, float* vals, double* tail_bound) {
  *tail_bound = 0;
  return width > 0 ? Kernels().collect_candidates(x, mask, width, lo, shift, scale, limit, ids,
                                                  vals, tail_bound)
                   : 0;
}
void ForEachAbove(const float* x, const std::uint32_t* mask, std::int32_t width,
                  const float* threshold, AboveVisitor visit, void* ctx) {
  if (width > 0) Kernels().for_each_above(x, mask, width, threshold, visit, ctx);
}

}  // namespace lockstep::kernels
