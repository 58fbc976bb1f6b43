// Sampler (include/lockstep/sampler.h): bias -> penalties -> mask -> temperature -> top-k -> top-p
// -> min-p -> draw without a full-vocabulary sort, and SamplerPreset (the one place here that
// parses JSON and catches nlohmann's exceptions). Bias and penalties edit the logits in place and
// touch only the listed ids and the distinct ids of the history window. The rest happens on one
// "probability array": the logits themselves (dense masks) or a compact copy of the candidates
// (sparse masks, or the k survivors of top-k), so a mask that allows few tokens costs about its
// popcount. Exp and the per-block sums are vectorised kernels; top-k is a k-heap fed by a
// vectorised "above threshold" scan; top-p finds its cut with a histogram over the float bits of
// the probabilities and quickselects only the one boundary bucket; min-p is one more threshold,
// folded into top-p's; the draw walks block sums, then one block.
#include "lockstep/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "decoder/sampling/mask_kernels.h"
#include "grammar/base/hash_mix.h"
#include "grammar/base/json_pointer.h"

namespace lockstep {
namespace {

// Buckets of positive floats <= 1 by their top bits (exponent and 4 mantissa bits): monotone in
// the value, about 9% wide.
constexpr int kBucketShift = 19;
constexpr std::int32_t kNumBuckets = (0x3F800000u >> kBucketShift) + 1;
constexpr int kHistograms = 4;
// Top-p cuts with at most this many candidates above the skip bound go straight to the
// quickselect; more go through the histogram first.
constexpr std::int32_t kDirectCutMax = 4096;
// The pruned top-p/min-p path (Sampler::PrunedCut): candidates are the allowed logits within
// kPruneRange * T of the max (probability >= e^-12 ~ 6e-6 of the max's); at most this many, and
// only for arrays at least kPruneMinWidth wide.
constexpr float kPruneRange = 12.0f;
constexpr std::int32_t kPruneMaxCandidates = 4096;
constexpr std::int32_t kPruneMinWidth = 8192;
// Relative slack on masses: covers the float lane sums of ExpBlocks (<= 256 terms per block,
// 2^-24 each) and the double sums of the cut search.
constexpr double kMassSlack = 1e-4;

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
    if (above >= need && gt_end != v) {  // need <= 0 with nothing above: the pivot is the max
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
  std::uint64_t h = SplitMix64(seed ^ 0x6C6F636B73746570ull);  // "lockstep"
  h = SplitMix64(h + sequence_id);
  h = SplitMix64(h ^ (step * 0xD1B54A32D192ED03ull));
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
  counts_.resize(width, 0);
  touched_.resize(width);
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
  // Peaked distributions (the usual case for a language model) leave few entries >= skip: one
  // vectorised compaction pass, then a quickselect on those, beats the histogram's per-entry
  // scatter by far. A strided sample of 1 in 64 entries predicts flat distributions, where the
  // compaction would be wasted.
  std::int32_t sampled = 0;
  for (std::int32_t i = 0; i < n; i += 64) sampled += p[i] >= skip;
  if (sampled * 64 <= 2 * kDirectCutMax) {
    const std::int32_t survivors = kernels::CollectInRange(
        p, n, skip, std::numeric_limits<float>::infinity(), boundary_.data());
    if (survivors <= kDirectCutMax) return CutByMass(boundary_.data(), survivors, target);
  }
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

bool Sampler::PrunedCut(const float* x, const std::uint32_t* mask, std::int32_t width, float max,
                        std::int32_t* n, float* tau) {
  // The full path exponentiates every allowed logit, sums them into `total` and cuts at the
  // largest tau whose kept mass reaches top_p * total. Here only the candidates (x >= lo) are
  // exponentiated; the others get an upper bound of their mass (`tail`), so total lies in
  // [sc, sc + tail] (sc the candidates' sum) up to rounding. The cut is monotone in the target,
  // so if the cuts for both ends of that interval are the same candidate value, and that value
  // is above every non-candidate's probability, the full path would keep exactly the same set
  // with exactly the same values: return it. Otherwise return false and let the full path run.
  const float scale = 1.0f / config_.temperature;
  const float lo = max - kPruneRange * config_.temperature;
  if (!(lo < max)) return false;  // T too small for the float spacing at `max`
  // Flat distributions have far more candidates than the limit: a strided sample of 1 in 64
  // entries predicts that for the price of 2k loads instead of a wasted collection pass.
  std::int32_t sampled = 0;
  for (std::int32_t i = 0; i < width; i += 64) sampled += x[i] >= lo;
  if (sampled * 64 > 2 * kPruneMaxCandidates) return false;
  double tail = 0;
  const std::int32_t nc =
      kernels::CollectCandidates(x, mask, width, lo, max, scale, kPruneMaxCandidates,
                                 cand_ids_.data(), cand_vals_.data(), &tail);
  if (nc <= 0) return false;
  float* p = cand_vals_.data();
  const double sc = kernels::ExpBlocks(p, nullptr, nc, max, scale, block_sums_.data());
  // Every non-candidate has x < lo, so (x - max) * scale <= (lo - max) * scale in float (the
  // operations are monotone), and Exp's relative error is < 1e-6.
  const double floor_p =
      std::exp(static_cast<double>((lo - max) * scale)) * (1 + 1e-5) +
      std::numeric_limits<float>::min();
  const float tau_min =
      config_.min_p > 0 ? config_.min_p * kernels::ExpNonPositive(0.0f) : 0.0f;
  float cut = tau_min;
  if (config_.top_p < 1.0f) {
    const double top_p = std::max(config_.top_p, 0.0f);
    const double need_lo = top_p * sc * (1 - kMassSlack);
    const double need_hi = top_p * (sc + tail) * (1 + kMassSlack);
    std::copy(p, p + nc, boundary_.data());
    const float tau_hi = CutByMass(boundary_.data(), nc, need_lo);  // fewest kept
    if (tau_min >= tau_hi) {
      cut = tau_min;  // min-p cuts at least as high as top-p can
    } else {
      if (!(sc * (1 - kMassSlack) > need_hi)) return false;  // the cut may lie in the tail
      std::copy(p, p + nc, boundary_.data());
      const float tau_lo = CutByMass(boundary_.data(), nc, need_hi);  // most kept
      if (tau_lo != tau_hi) return false;  // the tail's mass could move the cut
      cut = std::max(tau_hi, tau_min);
    }
  }
  if (!(static_cast<double>(cut) > floor_p)) return false;  // a non-candidate could be kept
  *n = nc;
  *tau = cut;
  return true;
}

void Sampler::ApplyBiasAndPenalties(float* x, std::int32_t width,
                                    std::span<const TokenId> history) {
  for (const auto& [id, bias] : config_.logit_bias) {
    if (id >= 0 && id < width) x[id] += bias;
  }
  const float theta = config_.repetition_penalty;
  const bool repetition = theta > 0 && theta != 1.0f;
  const float freq = config_.frequency_penalty, presence = config_.presence_penalty;
  if (history.empty() || !(repetition || freq != 0 || presence != 0)) return;
  const std::size_t window = static_cast<std::size_t>(std::max(config_.repetition_window, 0));
  if (window > 0 && history.size() > window) history = history.last(window);
  // Count the window into counts_ (all zero on entry), remembering each distinct id once; the
  // same ids reset it, so the cost is O(window) whatever the width.
  std::int32_t distinct = 0;
  for (const TokenId t : history) {
    if (t < 0 || t >= width) continue;
    if (counts_[t]++ == 0) touched_[distinct++] = t;
  }
  for (std::int32_t i = 0; i < distinct; ++i) {
    const TokenId t = touched_[i];
    float z = x[t];
    if (repetition) z = z > 0 ? z / theta : z * theta;
    z = z - static_cast<float>(counts_[t]) * freq - presence;
    x[t] = z;
    counts_[t] = 0;
  }
}

Sampler::Draw Sampler::SampleImpl(std::span<float> logits, const std::uint32_t* mask,
                                  std::span<const TokenId> history, std::uint64_t sequence_id,
                                  std::uint64_t step, bool count_candidates, float* probs) {
  Draw d;
  const std::int32_t width = static_cast<std::int32_t>(logits.size());
  if (probs != nullptr) std::fill(probs, probs + std::max(width, 0), 0.0f);
  if (width <= 0) return d;
  Reserve(width);
  float* x = logits.data();
  ApplyBiasAndPenalties(x, width, history);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr float kPosInf = std::numeric_limits<float>::infinity();
  if (!(config_.temperature > 0) || config_.top_k == 1) {
    d.token = kernels::MaskedArgmax(x, mask, width);
    d.num_candidates = d.token == kNoToken ? 0 : 1;
    if (probs != nullptr && d.token != kNoToken) probs[d.token] = 1.0f;
    return d;
  }
  const std::int32_t allowed =
      mask == nullptr ? width : static_cast<std::int32_t>(kernels::CountAllowed(mask, width));
  if (allowed == 0) return d;

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
    if (probs != nullptr && d.token != kNoToken) probs[d.token] = 1.0f;
    return d;
  }

  // Top-p and min-p are both "keep p >= threshold" on the same array: min-p's threshold is
  // relative to p_max, which top-p always keeps, so applying the larger threshold once is the
  // same as applying them in turn.
  float tau = 0.0f;
  double total = 0;
  if (!compact && (config_.top_p < 1.0f || config_.min_p > 0) && n >= kPruneMinWidth &&
      PrunedCut(x, mask, width, max, &n, &tau)) {
    // The candidates, exponentiated, with the full path's cut (tau > 0 below).
    compact = true;
    p = cand_vals_.data();
    p_mask = nullptr;
    d.num_candidates = n;
  } else {
    total = kernels::ExpBlocks(p, p_mask, n, max, 1.0f / config_.temperature, block_sums_.data());
    if (config_.top_p < 1.0f) {
      // top_p <= 0 keeps only the most likely token(s).
      const double target = static_cast<double>(std::max(config_.top_p, 0.0f)) * total;
      tau = TopPThreshold(p, n, total, target);
    }
    if (config_.min_p > 0) {
      // The max candidate became Exp(0), the largest probability before renormalising.
      tau = std::max(tau, config_.min_p * kernels::ExpNonPositive(0.0f));
    }
  }
  if (tau > 0) {
    total = kernels::ThresholdBlocks(p, n, tau, block_sums_.data());
    if (count_candidates) {
      std::int32_t kept = 0;
      for (std::int32_t i = 0; i < n; ++i) kept += p[i] > 0;
      d.num_candidates = kept;
    }
  }
  if (probs != nullptr) {
    for (std::int32_t i = 0; i < n; ++i) {
      if (p[i] > 0) {
        probs[compact ? cand_ids_[i] : i] = static_cast<float>(static_cast<double>(p[i]) / total);
      }
    }
    return d;
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
  return SampleImpl(logits, mask, {}, sequence_id, step, false, nullptr).token;
}

TokenId Sampler::Sample(std::span<float> logits, const std::uint32_t* mask,
                        std::span<const TokenId> history, std::uint64_t sequence_id,
                        std::uint64_t step) {
  return SampleImpl(logits, mask, history, sequence_id, step, false, nullptr).token;
}

SampleResult Sampler::SampleDetailed(std::span<const float> logits, const std::uint32_t* mask,
                                     std::uint64_t sequence_id, std::uint64_t step) {
  return SampleDetailed(logits, mask, {}, sequence_id, step);
}

SampleResult Sampler::SampleDetailed(std::span<const float> logits, const std::uint32_t* mask,
                                     std::span<const TokenId> history, std::uint64_t sequence_id,
                                     std::uint64_t step) {
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
  const Draw d = SampleImpl(std::span<float>(copy_.data(), width), mask, history, sequence_id, step,
                            true, nullptr);
  r.token = d.token;
  r.logprob = d.logprob;
  r.num_candidates = d.num_candidates;
  if (d.token != kNoToken && std::isfinite(max)) {
    r.masked_logprob = static_cast<float>(static_cast<double>(logits[d.token]) - max - std::log(z));
  }
  return r;
}

std::int32_t Sampler::Distribution(std::span<const float> logits, const std::uint32_t* mask,
                                   std::span<const TokenId> history, std::span<float> probs) {
  const std::int32_t width = static_cast<std::int32_t>(logits.size());
  if (width <= 0 || probs.size() != logits.size()) return 0;
  if (copy_.size() < static_cast<std::size_t>(width)) copy_.resize(width);
  std::memcpy(copy_.data(), logits.data(), sizeof(float) * width);
  return SampleImpl(std::span<float>(copy_.data(), width), mask, history, 0, 0, true, probs.data())
      .num_candidates;
}

std::vector<StageDistribution> Sampler::Trace(std::span<const float> logits,
                                              const std::uint32_t* mask,
                                              std::span<const TokenId> history) {
  const std::int32_t width = static_cast<std::int32_t>(logits.size());
  const SamplerConfig full = config_;
  // Stage s runs Distribution() with the stages up to s switched on, the rest off.
  SamplerConfig c;
  c.seed = full.seed;
  c.repetition_window = full.repetition_window;
  std::vector<StageDistribution> out;
  auto run = [&](const char* name, bool enabled, const std::uint32_t* m, bool truncation) {
    config_ = c;
    StageDistribution st;
    st.name = name;
    st.enabled = enabled;
    st.probs.assign(static_cast<std::size_t>(std::max(width, 0)), 0.0f);
    if (width > 0) Distribution(logits, m, history, st.probs);
    if (truncation && !out.empty()) {
      const std::vector<float>& prev = out.back().probs;
      double kept = 0;
      float smallest = std::numeric_limits<float>::infinity();
      bool dropped = false;
      for (std::int32_t i = 0; i < width; ++i) {
        if (st.probs[i] > 0) {
          kept += prev[i];
          smallest = std::min(smallest, prev[i]);
        } else if (prev[i] > 0) {
          dropped = true;
        }
      }
      st.kept_mass = kept;
      st.cutoff = dropped ? smallest : 0.0f;
    }
    out.push_back(std::move(st));
  };
  const bool has_history = !history.empty();
  run("logits", true, nullptr, false);
  c.logit_bias = full.logit_bias;
  run("logit_bias", !full.logit_bias.empty(), nullptr, false);
  c.repetition_penalty = full.repetition_penalty;
  run("repetition",
      has_history && full.repetition_penalty > 0 && full.repetition_penalty != 1.0f, nullptr,
      false);
  c.frequency_penalty = full.frequency_penalty;
  c.presence_penalty = full.presence_penalty;
  run("frequency_presence",
      has_history && (full.frequency_penalty != 0 || full.presence_penalty != 0), nullptr, false);
  run("mask", mask != nullptr, mask, false);
  c.temperature = full.temperature;
  run("temperature", full.temperature != 1.0f, mask, false);
  c.top_k = full.top_k;
  run("top_k", full.top_k > 0, mask, true);
  c.top_p = full.top_p;
  run("top_p", full.top_p < 1.0f, mask, true);
  c.min_p = full.min_p;
  run("min_p", full.min_p > 0, mask, true);
  run("final", true, mask, false);
  config_ = full;
  return out;
}

TokenLogprobs Sampler::Logprobs(std::span<const float> logits, const std::uint32_t* mask,
                                std::span<const TokenId> history, TokenId token,
                                std::int32_t top_n) {
  TokenLogprobs r;
  const std::int32_t width = static_cast<std::int32_t>(logits.size());
  if (width <= 0 || token < 0 || token >= width) return r;
  Reserve(width);
  if (copy_.size() < static_cast<std::size_t>(width)) copy_.resize(width);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // log-sum-exp at T 1 of the raw logits (mask null), then of the allowed ones.
  auto log_softmax = [&](const std::uint32_t* m, float* max_out) {
    std::memcpy(copy_.data(), logits.data(), sizeof(float) * width);
    const float max = kernels::MaskedMax(copy_.data(), m, width);
    *max_out = max;
    if (!std::isfinite(max)) return 0.0;
    return std::log(kernels::ExpBlocks(copy_.data(), m, width, max, 1.0f, block_sums_.data()));
  };
  float raw_max = 0;
  const double raw_lse = log_softmax(nullptr, &raw_max);
  r.raw_logprob = std::isfinite(raw_max)
                      ? static_cast<float>(static_cast<double>(logits[token]) - raw_max - raw_lse)
                      : kNegInf;
  float max = 0;
  const double lse = log_softmax(mask, &max);
  const bool allowed = mask_words::Allowed(mask, token);
  r.constrained_logprob =
      allowed && std::isfinite(max)
          ? static_cast<float>(static_cast<double>(logits[token]) - max - lse)
          : kNegInf;
  // Entropy: copy_ holds e^(z - max) for the allowed ids; H = lse - sum p (z - max).
  if (std::isfinite(max)) {
    const double z = std::exp(lse);
    double expected = 0;
    for (std::int32_t i = 0; i < width; ++i) {
      if (copy_[i] > 0) expected += static_cast<double>(copy_[i]) / z * (logits[i] - max);
    }
    r.entropy = static_cast<float>(std::max(0.0, lse - expected));
  }
  if (top_n > 0 && std::isfinite(max)) {
    const std::int32_t k = SelectTopK(logits.data(), mask, width, top_n);
    std::vector<HeapEntry> best(k);
    for (std::int32_t i = 0; i < k; ++i) best[i] = {cand_vals_[i], cand_ids_[i]};
    std::sort(best.begin(), best.end(), Better);
    for (const auto& [value, id] : best) {
      r.top.emplace_back(id, static_cast<float>(static_cast<double>(value) - max - lse));
    }
  }
  std::vector<float> probs(width);
  Distribution(logits, mask, history, probs);
  r.sampled_logprob = probs[token] > 0 ? std::log(probs[token]) : kNegInf;
  return r;
}

// ---- Presets.

namespace {

Status PresetError(std::string message, std::string pointer) {
  return Status(StatusCode::kInvalidArgument, std::move(message), std::move(pointer));
}

// `v` as a finite number in [lo, hi], or an error at `at`.
Status ReadNumber(const nlohmann::json& v, const std::string& at, double lo, double hi,
                  double* out) {
  if (!v.is_number()) return PresetError("expected a number", at);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return PresetError(
        "number out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", at);
  }
  *out = d;
  return Status::Ok();
}

Status ReadInteger(const nlohmann::json& v, const std::string& at, std::int64_t lo, std::int64_t hi,
                   std::int64_t* out) {
  if (!v.is_number_integer()) return PresetError("expected an integer", at);
  if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)
                             : (v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)) {
    return PresetError("integer out of range", at);
  }
  *out = v.get<std::int64_t>();
  return Status::Ok();
}

constexpr double kMaxFloat = std::numeric_limits<float>::max();

// The preset fields that are one number: the key, the range and where it goes.
struct NumberField {
  const char* key;
  double lo, hi;
  float SamplerConfig::*member;
};
constexpr NumberField kNumberFields[] = {
    {"temperature", 0, kMaxFloat, &SamplerConfig::temperature},
    {"top_p", 0, 1, &SamplerConfig::top_p},
    {"min_p", 0, 1, &SamplerConfig::min_p},
    {"repetition_penalty", 1e-6, kMaxFloat, &SamplerConfig::repetition_penalty},
    {"frequency_penalty", -kMaxFloat, kMaxFloat, &SamplerConfig::frequency_penalty},
    {"presence_penalty", -kMaxFloat, kMaxFloat, &SamplerConfig::presence_penalty},
};
// The fields that are one integer in [0, INT32_MAX].
struct IntegerField {
  const char* key;
  std::int32_t SamplerConfig::*member;
};
constexpr IntegerField kIntegerFields[] = {
    {"top_k", &SamplerConfig::top_k},
    {"repetition_window", &SamplerConfig::repetition_window},
};

// Reads `v` into the number or integer field named `key`; nullopt when `key` names neither.
std::optional<Status> ReadScalarField(const std::string& key, const nlohmann::json& v,
                                      const std::string& where, SamplerConfig* c) {
  for (const NumberField& f : kNumberFields) {
    if (key != f.key) continue;
    double d = 0;
    LOCKSTEP_RETURN_IF_ERROR(ReadNumber(v, where, f.lo, f.hi, &d));
    c->*f.member = static_cast<float>(d);
    return Status::Ok();
  }
  for (const IntegerField& f : kIntegerFields) {
    if (key != f.key) continue;
    std::int64_t i = 0;
    LOCKSTEP_RETURN_IF_ERROR(
        ReadInteger(v, where, 0, std::numeric_limits<std::int32_t>::max(), &i));
    c->*f.member = static_cast<std::int32_t>(i);
    return Status::Ok();
  }
  return std::nullopt;
}

Status ReadPreset(const nlohmann::json& obj, const std::string& at, SamplerConfig* c) {
  if (!obj.is_object()) return PresetError("a preset must be an object", at);
  for (const auto& [key, v] : obj.items()) {
    const std::string where = at + JsonPointerSegment(key);
    if (std::optional<Status> read = ReadScalarField(key, v, where, c)) {
      LOCKSTEP_RETURN_IF_ERROR(*read);
    } else if (key == "description") {
      if (!v.is_string()) return PresetError("expected a string", where);
    } else if (key == "seed") {
      if (!v.is_number_unsigned()) return PresetError("expected a non-negative integer", where);
      c->seed = v.get<std::uint64_t>();
    } else if (key == "logit_bias") {
      if (!v.is_object()) return PresetError("expected an object of token id -> bias", where);
      for (const auto& [id_text, bias] : v.items()) {
        const std::string bias_at = where + JsonPointerSegment(id_text);
        std::int64_t id = 0;
        bool digits = !id_text.empty() && id_text.size() <= 10;
        for (char ch : id_text) {
          digits = digits && ch >= '0' && ch <= '9';
          if (digits) id = id * 10 + (ch - '0');
        }
        if (!digits || id > std::numeric_limits<TokenId>::max()) {
          return PresetError("a logit_bias key must be a decimal token id", bias_at);
        }
        double d = 0;
        LOCKSTEP_RETURN_IF_ERROR(ReadNumber(bias, bias_at, -kMaxFloat, kMaxFloat, &d));
        c->logit_bias.emplace_back(static_cast<TokenId>(id), static_cast<float>(d));
      }
    } else {
      return PresetError("unknown sampler field '" + key + "'", where);
    }
  }
  return Status::Ok();
}

Result<SamplerConfig> SamplerPresetImpl(std::string_view name, std::string_view text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts from 1; locations count from 0.
    return PresetError(std::string("malformed presets file: ") + e.what(),
                       "offset " + std::to_string(e.byte > 0 ? e.byte - 1 : 0));
  }
  if (!doc.is_object()) return PresetError("the presets file must be a JSON object", "");
  const auto presets = doc.find("presets");
  if (presets == doc.end() || !presets->is_object()) {
    return PresetError("the presets file needs an object \"presets\"", "/presets");
  }
  const auto it = presets->find(std::string(name));
  if (it == presets->end()) {
    std::string known;
    for (const auto& [key, unused] : presets->items()) {
      (void)unused;
      known += (known.empty() ? "" : ", ") + key;
    }
    return PresetError("unknown sampler preset '" + std::string(name) + "' (known: " + known + ")",
                       "/presets" + JsonPointerSegment(name));
  }
  SamplerConfig config;
  LOCKSTEP_RETURN_IF_ERROR(ReadPreset(*it, "/presets" + JsonPointerSegment(name), &config));
  return config;
}

}  // namespace

Result<SamplerConfig> SamplerPreset(std::string_view name, std::string_view presets_json) {
  try {
    return SamplerPresetImpl(name, presets_json);
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kInternal, std::string("presets: ") + e.what());
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "presets: out of memory");
  }
}

}  // namespace lockstep
