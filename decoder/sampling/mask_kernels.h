// Token-bitmask kernels for the decoder's hot path: apply a mask to logits, count, combine and
// walk masks, the fused masked max/argmax, and the exp/threshold block passes the Sampler draws
// from. For the Matcher, the Sampler and hosts that hold a bitmask in the shared layout (uint32
// words, token i allowed iff bit i % 32 of word i / 32 is set).
//
// Each kernel has a scalar reference and an AVX2 version compiled with a per-function target
// attribute, so the rest of the build stays baseline x86-64; the best one the CPU supports is
// picked once, at first use. ForceIsa() pins a version (tests compare them). Masks passed with a
// `width` need ceil(width / 32) readable words; bits at or beyond `width` are ignored. None of
// these functions allocate or throw.
#pragma once

#include <cstddef>
#include <cstdint>

#include "automata/token/mask_words.h"
#include "lockstep/types.h"

namespace lockstep::kernels {

enum class Isa { kAuto, kScalar, kAvx2 };

// Pins the kernels to `isa` (kAuto: the best the CPU supports). Returns false, and changes
// nothing, if the CPU lacks `isa`. Meant for tests and benchmarks; not thread-safe against
// concurrent kernel calls that expect one version.
bool ForceIsa(Isa isa);
// The version in use (never kAuto).
Isa ActiveIsa();
bool CpuHasAvx2();
const char* IsaName(Isa isa);

// logits[i] = -inf for every i in [0, width) whose bit is clear.
void ApplyMask(float* logits, const std::uint32_t* mask, std::int32_t width);
// Set bits in words[0, num_words).
std::size_t Popcount(const std::uint32_t* words, std::size_t num_words);
// Allowed ids in [0, width).
std::size_t CountAllowed(const std::uint32_t* mask, std::int32_t width);
// dst[i] &= src[i] / dst[i] |= src[i] for i in [0, num_words).
void AndInto(std::uint32_t* dst, const std::uint32_t* src, std::size_t num_words);
void OrInto(std::uint32_t* dst, const std::uint32_t* src, std::size_t num_words);
// Lowest allowed id in [0, width), or kNoToken.
TokenId FirstSetBit(const std::uint32_t* mask, std::int32_t width);

// Calls fn(TokenId) for every allowed id in [0, width), in increasing order: the shared word
// kernel (automata/token/mask_words.h), inline.
using mask_words::ForEachSetBit;

// `mask` may be null in the functions below: every id is then allowed.
//
// The allowed id with the largest logit, ties to the lowest id; if every allowed logit is -inf
// (or NaN), the lowest allowed id; kNoToken if nothing is allowed. Logits should be NaN-free.
TokenId MaskedArgmax(const float* logits, const std::uint32_t* mask, std::int32_t width);
// The largest allowed logit; -inf if nothing is allowed.
float MaskedMax(const float* logits, const std::uint32_t* mask, std::int32_t width);

// ---- Sampler passes. The array is cut into blocks of kBlockSize entries; both versions sum a
// block in the same order (eight lanes, then a fixed tree), so their results are bit-identical.
inline constexpr std::int32_t kBlockSize = 256;
constexpr std::int32_t NumBlocks(std::int32_t width) {
  return (width + kBlockSize - 1) / kBlockSize;
}

// x[i] = allowed ? Exp((x[i] - shift) * scale) : 0, for x[i] - shift <= 0 and scale >= 0 (results
// below about e^-87 are flushed to 0); block_sums[b] = sum of block b. Returns the sum of the block
// sums, added in block order in double.
double ExpBlocks(float* x, const std::uint32_t* mask, std::int32_t width, float shift, float scale,
                 float* block_sums);
// p[i] = p[i] >= tau ? p[i] : 0; block_sums as in ExpBlocks. Returns the total.
double ThresholdBlocks(float* p, std::int32_t width, float tau, float* block_sums);
// Copies to out, in index order, every p[i] with lo <= p[i] < hi; returns how many.
std::int32_t CollectInRange(const float* p, std::int32_t n, float lo, float hi, float* out);
// The exponential used by ExpBlocks (scalar form), exposed for tests: relative error < 1e-6 on
// [-87, 0].
float ExpNonPositive(float x);

// The candidate pass of the pruned top-p/min-p path. Copies, in index order, every allowed id
// with x[id] >= lo to ids/vals and returns how many; returns -1 as soon as there would be more
// than `limit`. Also writes to *tail_bound an upper bound of the sum over every other id of
// e^((x[id] - shift) * scale) over the allowed ids below lo (for x <= shift, scale >= 0): per
// entry 2^floor(u) * (1 + frac(u)) >= 2^u with u = (x - shift) * scale * log2(e) plus a margin,
// summed in eight float lanes in a fixed order (so both versions agree bit for bit), then
// widened for the float rounding of the sum.
std::int32_t CollectCandidates(const float* x, const std::uint32_t* mask, std::int32_t width,
                               float lo, float shift, float scale, std::int32_t limit,
                               TokenId* ids, float* vals, double* tail_bound);

// Calls visit(ctx, id, x[id]) for every allowed id, in increasing order, whose value is greater
// than *threshold at the time it is reached; the visitor may raise *threshold (top-k selection).
using AboveVisitor = void (*)(void* ctx, TokenId id, float value);
void ForEachAbove(const float* x, const std::uint32_t* mask, std::int32_t width,
                  const float* threshold, AboveVisitor visit, void* ctx);

}  // namespace lockstep::kernels
