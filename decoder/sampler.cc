// Sampler (include/lockstep/sampler.h): mask -> temperature -> top-k -> top-p -> draw without a
// full-vocabulary sort. The work happens on one "probability array": the logits themselves
// (dense masks) or a compact copy of the candidates (sparse masks, or the k survivors of top-k),
// so a mask that allows few tokens costs about its popcount. Exp and the per-block sums are
// vectorised kernels; top-k is a k-heap fed by a vectorised "above threshold" scan; top-p finds
// its cut with a histogram over the float bits of the probabilities and sorts only the one
// boundary bucket; the draw walks block sums, then one block.
#include "lockstep/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "decoder/mask_kernels.h"

namespace lockstep {
namespace {

// Buckets of positive floats <= 1 by their top bits (exponent and 4 mantissa bits): monotone in
// the value, about 9% wide.
constexpr int kBucketShift = 19;
constexpr std::int32_t kNumBuckets = (0x3F800000u >> kBucketShift) + 1;
constexpr int kHistograms = 4;

inline std::uint32_t FloatBits(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

inline float FloatFromBits(std::uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

inline std::uint64_t Mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

using HeapEntry = std::pair<float, TokenId>;  // (value, id)
// "a is better than b": larger value, then lower id. With it std heaps keep the worst in front.
inline bool Better(const HeapEntry& a, const HeapEntry& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

struct TopKState {
  HeapEntry* heap;
  std::int32_t size;
  std::int32_t k;
  float threshold;
};

void TopKVisit(void* ctx, TokenId id, float value) {
  auto* s = static_cast<TopKState*>(ctx);
  if (s->size < s->k) {
    s->heap[s->size++] = {value, id};
    std::push_heap(s->heap, s->heap + s->size, Better);
    if (s->size == s->k) s->threshold = s->heap[0].first;
    return;
  }
  // value > threshold (strictly): ids arrive in increasing order, so on ties the lower id stays.
  std::pop_heap(s->heap, s->heap + s->size, Better);
  s->heap[s->size - 1] = {value, id};
  std::push_heap(s->heap, s->heap + s->size, Better);
  s->threshold = s->heap[0].first;
}

// Index of the draw: the first i whose running sum (in index order) exceeds u * total.
std::int32_t DrawIndex(const float* p, std::int32_t n, const float* block_sums, double total,
                       double u) {
  const double target = u * total;
  double cum = 0;
  const std::int32_t blocks = kernels::NumBlocks(n);
  for (std::int32_t b = 0; b < blocks; ++b) {
    if (cum + block_sums[b] > target) {
      const std::int32_t begin = b * kernels::kBlockSize;
      const std::int32_t end = std::min(n, begin + kernels::kBlockSize);
      std::int32_t last = -1;
      for (std::int32_t i = begin; i < end; ++i) {
        if (p[i] > 0) {
          cum += p[i];
          last = i;
          if (cum > target) return i;
        }
      }
      if (last >= 0) return last;  // rounding: the block sum was a hair larger
    }
    cum += block_sums[b];
  }
  for (std::int32_t i = n - 1; i >= 0; --i) {  // rounding: u * total a hair above the sum
    if (p[i] > 0) return i;
  }
  return -1;
}

// The value at which a walk over v (largest first) first reaches `need`: the same answer as
// sorting v descending and accumulating, in expected O(m). Ties at the cut are all kept. Reorders
// v.
float CutByMass(float* v, std::int32_t m, double need) {
  float fallback = 0.0f;  // the smallest value seen: keep everything if rounding leaves `need`
  while (m > 0) {
    if (m <= 16) {
      std::sort(v, v + m, std::greater<float>());
      for (std::int32_t j = 0; j < m; ++j) {
        need -= v[j];
        if (need <= 0) return v[j];
      }
      return v[m - 1];
    }
    // Median of three as pivot.
    float a = v[0], b = v[m / 2], c = v[m - 1];
    if (a > b) std::swap(a, b);
    if (b > c) std::swap(b, c);
    if (a > b) std::swap(a, b);
    const float pivot = b;
    float* gt_end = std::partition(v, v + m, [pivot](float x) { return x > pivot; });
    float* eq_end = std::partition(gt_end, v + m, [pivot](float x) { return x == pivot; });
    double above = 0;
    for (float* x = v; x != gt_end; ++x) above += *x;
    if (above >= need) {
      m = static_cast<std::int32_t>(gt_end - v);
      continue;
    }
    need -= above;
    const double ties = static_cast<double>(eq_end - gt_end) * pivot;
    if (ties >= need) return pivot;
    need -= ties;
    fallback = pivot;
    const std::int32_t rest = static_cast<std::int32_t>((v + m) - eq_end);
    v = eq_end;
    m = rest;
  }
  return fallback;
}

}  // namespace

double CounterUniform(std::uint64_t seed, std::uint64_t sequence_id, std::uint64_t step) {
  std::uint64_t h = Mix64(seed ^ 0x6C6F636B73746570ull);  // "lockstep"
  h = Mix64(h + sequence_id);
  h = Mix64(h ^ (step * 0xD1B54A32D192ED03ull));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

Sampler::Sampler(const SamplerConfig& config, std::int32_t width_hint) : config_(config) {
  bucket_mass_.resize(kHistograms * kNumBuckets);
  Reserve(width_hint);
}

void Sampler::Reserve(std::int32_t width) {
  if (width <= capacity_) return;
  capacity_ = width;
  cand_ids_.resize(width);
  cand_vals_.resize(width);
  boundary_.resize(width);
  block_sums_.resize(kernels::NumBlocks(width));
  if (config_.top_k > 0) heap_.resize(std::min(config_.top_k, width));
}

std::int32_t Sampler::SelectTopK(const float* logits, const std::uint32_t* mask, std::int32_t width,
                                 std::int32_t k) {
  k = std::min(k, width);
  if (heap_.size() < static_cast<std::size_t>(k)) heap_.resize(k);  // set-up: once per k
  HeapEntry* heap = heap_.data();
  TopKState state{heap, 0, k, -std::numeric_limits<float>::infinity()};
  kernels::ForEachAbove(logits, mask, width, &state.threshold, TopKVisit, &state);
  for (std::int32_t i = 0; i < state.size; ++i) {
    cand_ids_[i] = heap[i].second;
    cand_vals_[i] = heap[i].first;
  }
  return state.size;
}

float Sampler::TopPThreshold(const float* p, std::int32_t n, double total, double target) {
  // Entries below `skip` cannot reach the cut: even all n of them hold less than the mass top-p
  // drops, (1 - top_p) * total. For peaked distributions this skips almost everything; it also
  // bounds the buckets to the octaves in [skip, 1], which keeps the tables in L1.
  const float skip = std::max(static_cast<float>((total - target) / static_cast<double>(n)),
                              std::numeric_limits<float>::min());
  const std::uint32_t skip_bits = FloatBits(skip);
  const std::uint32_t base = skip_bits >> kBucketShift;
  const std::uint32_t top = FloatBits(1.0f) >> kBucketShift;
  const std::int32_t buckets = static_cast<std::int32_t>(top - std::min(top, base)) + 1;
  // Branch-free (a skipped entry adds 0 to bucket 0: a data-dependent branch here mispredicts
  // about half the time on flat distributions), with kHistograms interleaved tables so runs of
  // one bucket do not serialise on store-to-load forwarding.
  double* mass = bucket_mass_.data();
  std::fill(mass, mass + kHistograms * buckets, 0.0);
  std::int32_t i = 0;
  for (; i + kHistograms <= n; i += kHistograms) {
    for (int j = 0; j < kHistograms; ++j) {
      // p >= 0, so the float order is the order of the bits; integer masks keep GCC from
      // turning the selects back into branches.
      const std::uint32_t vb = FloatBits(p[i + j]);
      const std::uint32_t keep = 0u - static_cast<std::uint32_t>(vb >= skip_bits);
      const std::uint32_t b = ((vb >> kBucketShift) - base) & keep;
      mass[j * buckets + b] += FloatFromBits(vb & keep);
    }
  }
  for (; i < n; ++i) {
    if (p[i] >= skip) mass[(FloatBits(p[i]) >> kBucketShift) - base] += p[i];
  }
  double cum = 0;
  std::int32_t boundary = -1;
  for (std::int32_t b = buckets - 1; b >= 0; --b) {
    double m = 0;
    for (int j = 0; j < kHistograms; ++j) m += mass[j * buckets + b];
    if (m > 0 && cum + m >= target) {
      boundary = b;
      break;
    }
    cum += m;
  }
  if (boundary < 0) return 0.0f;  // rounding: the whole mass is needed
  // Find the cut inside the boundary bucket by a mass-weighted quickselect (expected linear;
  // a bucket of a flat distribution can hold most of the vocabulary, too many to sort).
  float lo, hi;
  const std::uint32_t lo_bits = (base + static_cast<std::uint32_t>(boundary)) << kBucketShift;
  const std::uint32_t hi_bits = (base + static_cast<std::uint32_t>(boundary) + 1) << kBucketShift;
  std::memcpy(&lo, &lo_bits, sizeof lo);
  std::memcpy(&hi, &hi_bits, sizeof hi);
  const std::int32_t m = kernels::CollectInRange(p, n, std::max(lo, skip), hi, boundary_.data());
  return CutByMass(boundary_.data(), m, target - cum);
}

Sampler::Draw Sampler::SampleImpl(std::span<float> logits, const std::uint32_t* mask,
                                  std::uint64_t sequence_id, std::uint64_t step,
                                  bool count_candidates) {
  Draw d;
  const std::int32_t width = static_cast<std::int32_t>(logits.size());
  if (width <= 0) return d;
  float* x = logits.data();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr float kPosInf = std::numeric_limits<float>::infinity();
  if (!(config_.temperature > 0) || config_.top_k == 1) {
    d.token = kernels::MaskedArgmax(x, mask, width);
    d.num_candidates = d.token == kNoToken ? 0 : 1;
    return d;
  }
  const std::int32_t allowed =
      mask == nullptr ? width : static_cast<std::int32_t>(kernels::CountAllowed(mask, width));
  if (allowed == 0) return d;
  Reserve(width);

  // Pick the probability array: compact candidates or the logits in place. Neither choice
  // writes to `logits` yet, so the degenerate case below can still read them.
  float* p = x;
  const std::uint32_t* p_mask = mask;
  std::int32_t n = width;
  bool compact = false;
  d.num_candidates = allowed;
  if (config_.top_k > 0 && config_.top_k < allowed) {
    n = SelectTopK(x, mask, width, config_.top_k);
    compact = true;
  } else if (mask != nullptr && static_cast<std::int64_t>(allowed) * 4 <= width) {
    n = 0;
    TokenId* ids = cand_ids_.data();
    float* vals = cand_vals_.data();
    kernels::ForEachSetBit(mask, width, [&](TokenId id) {
      ids[n] = id;
      vals[n] = x[id];
      ++n;
    });
    compact = true;
  }
  if (compact) {
    p = cand_vals_.data();
    p_mask = nullptr;
    d.num_candidates = n;
  }
  // The max of the candidates is the max of the allowed logits (top-k keeps the best).
  const float max = n > 0 ? kernels::MaskedMax(p, p_mask, n) : kNegInf;
  if (!(max > kNegInf) || max == kPosInf) {
    // Degenerate: every allowed logit is -inf, or one is +inf. Greedy is the only sane answer.
    d.token = kernels::MaskedArgmax(x, mask, width);
    d.num_candidates = 1;
    return d;
  }

  double total =
      kernels::ExpBlocks(p, p_mask, n, max, 1.0f / config_.temperature, block_sums_.data());
  if (config_.top_p < 1.0f) {
    // top_p <= 0 keeps only the most likely token(s).
    const double target = static_cast<double>(std::max(config_.top_p, 0.0f)) * total;
    const float tau = TopPThreshold(p, n, total, target);
    if (tau > 0) {
      total = kernels::ThresholdBlocks(p, n, tau, block_sums_.data());
      if (count_candidates) {
        std::int32_t kept = 0;
        for (std::int32_t i = 0; i < n; ++i) kept += p[i] > 0;
        d.num_candidates = kept;
      }
    }
  }
  const double u = CounterUniform(config_.seed, sequence_id, step);
  const std::int32_t index = DrawIndex(p, n, block_sums_.data(), total, u);
  if (index < 0) {  // unreachable with finite logits: p[argmax] == 1
    d.token = kernels::MaskedArgmax(x, mask, width);
    return d;
  }
  d.token = compact ? cand_ids_[index] : index;
  d.logprob = static_cast<float>(std::log(static_cast<double>(p[index]) / total));
  return d;
}

TokenId Sampler::Sample(std::span<float> logits, const std::uint32_t* mask,
                        std::uint64_t sequence_id, std::uint64_t step) {
  return SampleImpl(logits, mask, sequence_id, step, false).token;
}

SampleResult Sampler::SampleDetailed(std::span<const float> logits, const std::uint32_t* mask,
                                     std::uint64_t sequence_id, std::uint64_t step) {
  SampleResult r;
  const std::int32_t width = static_cast<std::int32_t>(logits.size());
  if (width <= 0) return r;
  Reserve(width);
  if (copy_.size() < static_cast<std::size_t>(width)) copy_.resize(width);
  // log-sum-exp of the masked logits at T = 1, on a copy.
  std::memcpy(copy_.data(), logits.data(), sizeof(float) * width);
  const float max = kernels::MaskedMax(copy_.data(), mask, width);
  const double z = kernels::ExpBlocks(copy_.data(), mask, width, max, 1.0f, block_sums_.data());
  std::memcpy(copy_.data(), logits.data(), sizeof(float) * width);
  const Draw d = SampleImpl(std::span<float>(copy_.data(), width), mask, sequence_id, step, true);
  r.token = d.token;
  r.logprob = d.logprob;
  r.num_candidates = d.num_candidates;
  if (d.token != kNoToken && std::isfinite(max)) {
    r.masked_logprob = static_cast<float>(static_cast<double>(logits[d.token]) - max - std::log(z));
  }
  return r;
}

}  // namespace lockstep
