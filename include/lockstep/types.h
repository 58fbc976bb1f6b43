// Basic id types shared by every layer. Ids are int32 indices into flat arrays, never pointers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep {

using TokenId = std::int32_t;  // index into a Vocabulary; also a logits row
using StateId = std::int32_t;  // index into an automaton's state table

inline constexpr TokenId kNoToken = -1;

// Words of a token bitmask for a logits width of `width`: ceil(width / 32).
constexpr std::size_t BitmaskWords(std::int64_t width) {
  return static_cast<std::size_t>((width + 31) / 32);
}
// Owned bitmask buffers are padded to whole 512-bit blocks (16 words) of zero bits.
constexpr std::size_t PaddedBitmaskWords(std::int64_t width) {
  return (BitmaskWords(width) + 15) / 16 * 16;
}

}  // namespace lockstep
