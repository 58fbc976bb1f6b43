// The uncertain tails of a position: the rest of a token after its rule may finish, checked at
// fill time against what follows the rule (docs/grammars.md, "A mask"). A walk lists them as
// (tail bytes, token) pairs in its own order; the position keeps them as a depth-first trie
// (CfgPosition::tails, tail_tokens), built from the pairs sorted by (bytes, token). Internal to
// automata/cfg.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "lockstep/types.h"

namespace lockstep {

using Tail = std::pair<std::string_view, TokenId>;

// Reused between sorts.
struct TailSortBuffers {
  struct Key {
    std::uint64_t prefix;  // the tail's first 8 bytes, big-endian, zero-padded
    std::uint32_t token;
    std::uint32_t index;  // into the tails being sorted
  };
  std::vector<Key> keys, tmp;
  std::vector<Tail> out;
};

// Sorts `tails` by (bytes, token): the order of std::sort over the pairs, several times faster.
void SortTails(std::vector<Tail>& tails, TailSortBuffers& buf);

// Builds tail tries, keeping the last few built from long lists: the same list recurs at every
// position that ends a JSON string value in the same context (888 tails after the closing
// quote on Llama-3), and a list met again gets its trie copied instead of sorted and built.
// A list is matched by its tokens and its tails' bytes, so a trie is never taken for another
// vocabulary's list. Not thread-safe: one per walk scratch (one per thread).
class TailTrieBuilder {
 public:
  // pos.tails, pos.tail_tokens and pos.num_uncertain from `tails` (any order, repeats
  // allowed), which may be left sorted and deduplicated.
  void Build(std::vector<Tail>& tails, CfgPosition& pos);
  // Lists of kMinKept to kMaxKept tails are kept, the last kKept of them (at most a few MB
  // per thread); the others are built every time.
  static constexpr std::size_t kMinKept = 128, kMaxKept = 16384;
  static constexpr std::size_t kKept = 8;
  std::int64_t reused() const { return reused_; }

 private:
  struct Kept {
    std::uint64_t hash = 0;
    std::vector<TokenId> tokens;      // the list as the walk gave it: its tokens,
    std::vector<std::uint32_t> ends;  // where each tail's bytes end in `bytes`,
    std::string bytes;                // and the tails' bytes back to back
    std::vector<CfgPosition::TailNode> tails;
    std::vector<TokenId> tail_tokens;
    std::int32_t num_uncertain = 0;
  };
  std::array<Kept, kKept> kept_;
  std::size_t next_ = 0;
  std::int64_t reused_ = 0;
  TailSortBuffers sort_;
};

}  // namespace lockstep
