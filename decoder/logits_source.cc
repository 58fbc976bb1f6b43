// LogitsSource's out-of-line destructor and UniformSource (include/lockstep/logits_source.h).
#include "lockstep/logits_source.h"

namespace lockstep {
namespace {

inline std::uint64_t Mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A 32-bit integer finaliser (xorshift-multiply); cheap enough to run once per logit.
inline std::uint32_t Mix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  h ^= h >> 16;
  return h;
}

}  // namespace

LogitsSource::~LogitsSource() = default;

UniformSource::UniformSource(std::int32_t width, std::uint64_t seed)
    : width_(width < 0 ? 0 : width), seed_(seed) {}

void UniformSource::Logits(std::span<const TokenId> context, std::span<float> out) {
  if (out.size() != static_cast<std::size_t>(width_)) return;
  const std::uint64_t last = context.empty() ? ~0ull : static_cast<std::uint64_t>(context.back());
  const std::uint64_t key64 = Mix64(Mix64(seed_ ^ (context.size() * 0xA24BAED4963EE407ull)) ^ last);
  const std::uint32_t key = static_cast<std::uint32_t>(key64 ^ (key64 >> 32));
  constexpr float kScale = 8.0f / 16777216.0f;  // 24 random bits -> [0, 8)
  for (std::int32_t i = 0; i < width_; ++i) {
    const std::uint32_t h = Mix32(key ^ (static_cast<std::uint32_t>(i) * 0x9E3779B9u));
    out[i] = static_cast<float>(h >> 8) * kScale;
  }
}

}  // namespace lockstep
