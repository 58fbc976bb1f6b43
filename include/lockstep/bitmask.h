// TokenBitmask: an owned token bitmask in the shared layout (uint32 words, token i allowed iff
// bit i % 32 of word i / 32 is set), 64-byte aligned and padded with zero words to whole 512-bit
// blocks, so SIMD kernels and GPU hosts can read it with no tail handling. For the matcher (which
// fills it), the sampler (which applies it) and hosts that hand words() to their own kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include "lockstep/types.h"

namespace lockstep {

class TokenBitmask {
 public:
  static constexpr std::size_t kAlignment = 64;

  TokenBitmask() = default;
  // All bits clear. `width` is the logits width (>= 0).
  explicit TokenBitmask(std::int32_t width)
      : width_(width < 0 ? 0 : width), num_padded_(PaddedBitmaskWords(width_)) {
    if (num_padded_ > 0) {
      words_ = static_cast<std::uint32_t*>(
          ::operator new(num_padded_ * sizeof(std::uint32_t), std::align_val_t(kAlignment)));
      std::memset(words_, 0, num_padded_ * sizeof(std::uint32_t));
    }
  }
  TokenBitmask(const TokenBitmask& other) : TokenBitmask(other.width_) {
    if (num_padded_ > 0) std::memcpy(words_, other.words_, num_padded_ * sizeof(std::uint32_t));
  }
  TokenBitmask(TokenBitmask&& other) noexcept
      : width_(std::exchange(other.width_, 0)),
        num_padded_(std::exchange(other.num_padded_, 0)),
        words_(std::exchange(other.words_, nullptr)) {}
  TokenBitmask& operator=(TokenBitmask other) noexcept {
    swap(other);
    return *this;
  }
  ~TokenBitmask() {
    if (words_ != nullptr) ::operator delete(words_, std::align_val_t(kAlignment));
  }
  void swap(TokenBitmask& other) noexcept {
    std::swap(width_, other.width_);
    std::swap(num_padded_, other.num_padded_);
    std::swap(words_, other.words_);
  }

  std::int32_t width() const { return width_; }
  // ceil(width / 32): the words a consumer reads.
  std::size_t num_words() const { return BitmaskWords(width_); }
  // num_words() rounded up to 16 (one 512-bit block); the extra words are always zero.
  std::size_t num_padded_words() const { return num_padded_; }
  std::uint32_t* words() { return words_; }
  const std::uint32_t* words() const { return words_; }
  std::span<std::uint32_t> span() { return {words_, num_words()}; }
  std::span<const std::uint32_t> span() const { return {words_, num_words()}; }

  // Ids outside [0, width) are ignored by Set/Clear and never allowed by Test.
  void Set(TokenId id) {
    if (InRange(id)) words_[id >> 5] |= 1u << (id & 31);
  }
  void Clear(TokenId id) {
    if (InRange(id)) words_[id >> 5] &= ~(1u << (id & 31));
  }
  bool Test(TokenId id) const { return InRange(id) && ((words_[id >> 5] >> (id & 31)) & 1u); }
  // Clears every bit (padding included).
  void Clear() {
    if (num_padded_ > 0) std::memset(words_, 0, num_padded_ * sizeof(std::uint32_t));
  }
  // Sets bits [0, width) and keeps the tail and padding bits clear.
  void Fill() {
    const std::size_t n = num_words();
    if (n == 0) return;
    std::memset(words_, 0xFF, n * sizeof(std::uint32_t));
    if (width_ % 32 != 0) words_[n - 1] = (1u << (width_ % 32)) - 1;
  }

 private:
  bool InRange(TokenId id) const { return id >= 0 && id < width_; }

  std::int32_t width_ = 0;
  std::size_t num_padded_ = 0;
  std::uint32_t* words_ = nullptr;
};

}  // namespace lockstep
