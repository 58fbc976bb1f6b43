// LogitsSource's out-of-line destructor, UniformSource, CallbackSource and the two combinators,
// GuidanceSource and ContrastiveSource (include/lockstep/logits_source.h).
#include "lockstep/logits_source.h"

#include <cmath>
#include <limits>

#include "automata/token/mask_words.h"
#include "grammar/base/hash_mix.h"

namespace lockstep {
namespace {

// A 32-bit integer finaliser (xorshift-multiply); cheap enough to run once per logit.
inline std::uint32_t Mix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  h ^= h >> 16;
  return h;
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using mask_words::Allowed;

}  // namespace

LogitsSource::~LogitsSource() = default;

UniformSource::UniformSource(std::int32_t width, std::uint64_t seed)
    : width_(width < 0 ? 0 : width), seed_(seed) {}

void UniformSource::Logits(std::span<const TokenId> context, std::span<float> out) {
  if (out.size() != static_cast<std::size_t>(width_)) return;
  const std::uint64_t last = context.empty() ? ~0ull : static_cast<std::uint64_t>(context.back());
  const std::uint64_t key64 =
      SplitMix64(SplitMix64(seed_ ^ (context.size() * 0xA24BAED4963EE407ull)) ^ last);
  const std::uint32_t key = static_cast<std::uint32_t>(key64 ^ (key64 >> 32));
  constexpr float kScale = 8.0f / 16777216.0f;  // 24 random bits -> [0, 8)
  for (std::int32_t i = 0; i < width_; ++i) {
    const std::uint32_t h = Mix32(key ^ (static_cast<std::uint32_t>(i) * 0x9E3779B9u));
    out[i] = static_cast<float>(h >> 8) * kScale;
  }
}

void CallbackSource::Logits(std::span<const TokenId> context, std::span<float> out) {
  if (fn_ == nullptr || out.size() != static_cast<std::size_t>(width_)) return;
  fn_(user_, context.data(), context.size(), out.data(), width_);
}

GuidanceSource::GuidanceSource(LogitsSource& model, std::size_t prompt_length,
                               std::vector<TokenId> negative_prompt, float gamma)
    : model_(model),
      prompt_length_(prompt_length),
      negative_(std::move(negative_prompt)),
      gamma_(gamma),
      zu_(static_cast<std::size_t>(model.width())) {}

void GuidanceSource::MaskedLogits(std::span<const TokenId> context, const std::uint32_t* mask,
                                  std::span<float> out) {
  const std::int32_t width = model_.width();
  if (out.size() != static_cast<std::size_t>(width)) return;
  model_.MaskedLogits(context, mask, out);  // z_c
  if (gamma_ == 1.0f) return;
  uncond_.assign(negative_.begin(), negative_.end());
  if (context.size() > prompt_length_) {
    uncond_.insert(uncond_.end(), context.begin() + static_cast<std::ptrdiff_t>(prompt_length_),
                   context.end());
  }
  model_.MaskedLogits(uncond_, mask, zu_);
  const float g1 = gamma_ - 1.0f;
  for (std::int32_t i = 0; i < width; ++i) {
    const float zc = out[i];
    const float zu = zu_[i];
    if (!std::isfinite(zc) || !std::isfinite(zu)) {
      out[i] = kNegInf;
    } else {
      out[i] = zc + g1 * (zc - zu);
    }
  }
}

ContrastiveSource::ContrastiveSource(LogitsSource& strong, LogitsSource& weak, float alpha,
                                     float beta)
    : strong_(strong),
      weak_(weak),
      alpha_(alpha),
      beta_(beta),
      zw_(static_cast<std::size_t>(strong.width())) {}

void ContrastiveSource::MaskedLogits(std::span<const TokenId> context, const std::uint32_t* mask,
                                     std::span<float> out) {
  const std::int32_t width = strong_.width();
  if (out.size() != static_cast<std::size_t>(width) || weak_.width() != width) return;
  strong_.MaskedLogits(context, mask, out);
  if (beta_ > 0.0f) {
    // Plausibility against the best allowed token: p_i >= beta * p_max <=> z_i >= z_max + log beta.
    float best = kNegInf;
    for (std::int32_t i = 0; i < width; ++i) {
      if (Allowed(mask, i) && out[i] > best) best = out[i];
    }
    const float cut = best + std::log(beta_);
    for (std::int32_t i = 0; i < width; ++i) {
      if (!(out[i] >= cut)) out[i] = kNegInf;
    }
  }
  if (alpha_ == 0.0f) return;
  weak_.MaskedLogits(context, mask, zw_);
  for (std::int32_t i = 0; i < width; ++i) {
    if (out[i] == kNegInf) continue;
    const float w = zw_[i];
    // A weak logit of -inf would give an infinite bonus: such a token keeps z_strong instead.
    if (std::isfinite(w)) out[i] -= alpha_ * w;
  }
}

}  // namespace lockstep
