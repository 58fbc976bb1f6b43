// TokenTrie: every token's byte string in one flat, depth-first array, so a byte automaton can
// be run over the whole vocabulary at once: a dead byte skips the node's subtree with one jump.
// Built once per vocabulary (by GrammarCompiler) and shared read-only by every compiled grammar.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockstep/types.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

class TokenTrie {
 public:
  struct Node {
    std::uint32_t subtree_end;  // index of the first node after this node's subtree
    std::uint32_t token_begin;  // this node's tokens: tokens_[token_begin, next node's token_begin)
    std::uint16_t depth;        // 1 for children of the (implicit) root
    std::uint8_t byte;
  };

  // Indexes every token with non-empty bytes (kNormal and kByte); special, unused and padding
  // ids are left out: they emit no text and the matcher handles them by id.
  explicit TokenTrie(const Vocabulary& vocab);

  std::span<const Node> nodes() const { return nodes_; }
  // Token ids whose bytes end at node `i`.
  std::span<const TokenId> TokensAt(std::uint32_t i) const {
    return {tokens_.data() + nodes_[i].token_begin,
            tokens_.data() + nodes_[i + 1].token_begin};
  }
  // Token ids whose bytes end in the subtree of node `i` (at node i or below it).
  std::span<const TokenId> TokensUnder(std::uint32_t i) const {
    return {tokens_.data() + nodes_[i].token_begin,
            tokens_.data() + nodes_[nodes_[i].subtree_end].token_begin};
  }
  std::int32_t max_depth() const { return max_depth_; }
  // The text tokens with a comma followed by two quotes, which may complete a second string
  // item of a list (CfgGrammar::FilterUniqueItems); `opening` those that also have a `[` (a
  // list may open inside them); `comma`: every text token with a comma. Found once per
  // vocabulary, on first use. For lists of objects (an item completes at its closing brace):
  // `brace`, every text token with a `}`; `brace_pairs`, those with a `}`, then a `{`, then a
  // `}` (a token that may complete two items).
  struct CommaQuoteTokens {
    std::vector<TokenId> opening, other, comma;
    std::vector<TokenId> brace, brace_pairs;
    // Every text token with a `{` (an object item may open in them).
    std::vector<TokenId> open_brace;
    // Tokens with a `]` (an array item may end in them), and tokens in which a comma or an
    // opening bracket is followed, after blanks, by the start of a literal (`,t`, `, nul`,
    // `,false`, `, true,`): an item of any type there may have only `true`, `false` or `null`
    // left to finish with.
    std::vector<TokenId> bracket, literal_after;
  };
  const CommaQuoteTokens& CommaQuotes(const Vocabulary& vocab) const;
  std::size_t num_nodes() const { return nodes_.size() - 1; }  // minus the sentinel
  std::span<const TokenId> tokens() const { return tokens_; }
  // The first child of node `parent` (kRoot: of the root) whose byte is above `after` and set in
  // the 256-bit set `allowed`, or `none`. For walks whose automaton allows a few bytes out of
  // many children: a jump instead of a scan.
  static constexpr std::uint32_t kRoot = 0xFFFFFFFFu;
  std::uint32_t NextChild(std::uint32_t parent, const std::uint64_t* allowed, int after,
                          std::uint32_t none) const;
  // The children of node `parent` (kRoot: of the root), in byte order.
  std::span<const std::uint32_t> Children(std::uint32_t parent) const {
    const std::uint32_t p = parent == kRoot ? static_cast<std::uint32_t>(num_nodes()) : parent;
    return {kids_.data() + kids_begin_[p], kids_.data() + kids_begin_[p + 1]};
  }
  // Byte classes a subtree's bytes may all lie in: bit k of BelowIn(i) is set when every byte of
  // every node below node i (not node i's own byte) is in class k. A walk at a state that goes
  // back to itself on every byte of class k accepts such a subtree whole (a number's digits after
  // its first digit, a run of hex digits) instead of stepping its nodes.
  enum SubtreeClass : std::uint8_t {
    kDigits,        // 0-9
    kHexDigits,     // 0-9 A-F a-f
    kLowerLetters,  // a-z
    kLetters,       // A-Z a-z
    kAlnum,         // 0-9 A-Z a-z
    kWordChars,     // 0-9 A-Z a-z _
    kPrintable,     // 0x20-0x7E but `"` and `\`: a JSON string's raw ASCII
    kWhitespace,    // tab, line feed, carriage return, space: JSON's blanks
    kNumSubtreeClasses
  };
  static_assert(kNumSubtreeClasses <= 8, "BelowIn is one byte");
  static bool InSubtreeClass(int k, std::uint8_t b);
  // The bytes of class k, in increasing order.
  static std::span<const std::uint8_t> SubtreeClassBytes(int k);
  std::uint8_t BelowIn(std::uint32_t i) const { return below_in_[i]; }
  // The most bytes below node i on one path (0: a leaf), at most 255.
  std::uint8_t HeightBelow(std::uint32_t i) const { return height_below_[i]; }
  std::uint32_t NumChildren(std::uint32_t parent) const {
    const std::uint32_t p = parent == kRoot ? static_cast<std::uint32_t>(num_nodes()) : parent;
    return kids_begin_[p + 1] - kids_begin_[p];
  }

  // A byte automaton region run over the whole vocabulary once and kept: the tokens that stay
  // inside the region from its state 0, and the others from the byte where they leave it.
  // `table[q * 256 + b]` is the region state after byte b from region state q, or kRegionDead
  // (the token dies there) or kRegionExit (it leaves the region: the caller walks the rest).
  // Grammar positions whose automaton has the same region share one view: string bodies, for
  // instance, are the same region in every JSON schema compiled for this vocabulary.
  static constexpr std::int16_t kRegionDead = -1;
  static constexpr std::int16_t kRegionExit = -2;
  struct RegionView {
    std::vector<std::uint32_t> inside_bits;  // PaddedBitmaskWords(max token id + 1) words
    std::int32_t inside_count = 0;
    // Tokens leaving the region, grouped by the region state q they leave from; each group is a
    // depth-first trie (nodes[begin, end)) of the token suffixes from the leaving byte on (depth
    // 1 = that byte). Node token ranges index `tokens`; offsets[t]: where tokens[t]'s suffix
    // starts in its bytes.
    struct Group {
      std::int32_t q;
      std::uint32_t begin, end;
    };
    std::vector<Group> groups;
    std::vector<Node> nodes;  // sentinel at the end
    std::vector<TokenId> tokens;
    std::vector<std::uint16_t> offsets;
    std::int64_t exit_tokens = 0;
  };
  // Thread-safe; the view lives as long as the trie. Null past the cache budget (1,024 views)
  // or when more than a quarter of the tokens leave the region (nothing to share). `built`, if
  // given, is set when this call built the view (a pass over every token: 0.5-0.8 ms on
  // Llama-3 at the median, since most tokens are told by their byte sets).
  const RegionView* Region(const std::vector<std::int16_t>& table, bool* built = nullptr) const;
  // The view of `table` if it was built, else null (nothing is built).
  const RegionView* BuiltRegion(const std::vector<std::int16_t>& table) const;
  // A table in run form: per state, its row as the maximal runs of one entry, each an (entry,
  // last byte) pair, the state's last run ending at byte 255. A JSON string body's 27 states
  // are a few hundred entries, where the table is 6,912: a grammar computes the form from its
  // byte classes without writing the table (CfgGrammar::RegionBuilder), and the trie finds the
  // view by it, building the table only for a form it has not met (then Region).
  static std::vector<std::int16_t> TableOfRuns(std::span<const std::int16_t> runs);
  const RegionView* RegionOfRuns(const std::vector<std::int16_t>& runs, bool* built = nullptr) const;
  const RegionView* BuiltRegionOfRuns(const std::vector<std::int16_t>& runs) const;
  // A counted unit run over the whole vocabulary once and kept: for a counter rule whose body is
  // a plain byte unit that cannot go on once it has finished (one character of a JSON string:
  // a byte, a UTF-8 sequence or an escape), how many units each token takes. `unit` lists the
  // unit's states (state 0 its start): 256 entries per state, the state after each byte or
  // kRegionDead, then one entry per state, 1 where the unit is finished (such a state has no
  // bytes out). Run from state 0 unit after unit, a token
  //   - ends inside: it needs `need` more repetitions of room (the units it finishes, plus one
  //     if it stops within a unit);
  //   - leaves between two units, `units` units in, on a byte no unit starts with: the counter
  //     may finish there and the rest is a tail for what follows (tokens leaving before a
  //     whole unit are not kept: the counter finishes on no byte);
  //   - or dies within a unit.
  struct CountedView {
    std::vector<std::uint32_t> inside_bits;  // every token that ends inside, whatever its need
    std::int32_t inside_count = 0;
    std::vector<TokenId> by_need;  // those tokens, the most units needed first
    std::vector<std::uint16_t> need;
    struct Exit {
      TokenId id;
      std::uint16_t units;   // whole units before it leaves
      std::uint16_t offset;  // where it leaves, in its bytes
      std::uint8_t byte;     // the byte it leaves on (bytes[offset])
    };
    std::vector<Exit> exits;  // by units
  };
  // Thread-safe; the view lives as long as the trie. Null past the cache budget (256 views).
  const CountedView* Counted(const std::vector<std::int16_t>& unit) const;
  std::size_t num_tokens() const { return tokens_.size(); }
  // Every token of the trie, the longest first, with their lengths in bytes (built on first use;
  // thread-safe).
  struct ByLength {
    std::vector<TokenId> ids;
    std::vector<std::uint16_t> lengths;
  };
  const ByLength& LongestFirst() const;
  // One object of type T attached to this trie, made on first use and living as long as it
  // (the CFG runtime keeps the positions shared by the grammars of the vocabulary there).
  // Thread-safe; a trie holds one attached type.
  template <class T>
  T& Attached() const {
    std::lock_guard<std::mutex> lock(attached_mu_);
    if (!attached_) attached_ = std::make_shared<T>();
    return *static_cast<T*>(attached_.get());
  }
  std::size_t MemoryBytes() const {
    return nodes_.capacity() * sizeof(Node) + tokens_.capacity() * sizeof(TokenId) +
           (kids_begin_.capacity() + kids_.capacity()) * sizeof(std::uint32_t) +
           kid_bytes_.capacity() + below_in_.capacity() + height_below_.capacity() + byte_sets_.ascii.capacity() * 16 +
           byte_sets_.high.capacity() + byte_sets_.text.capacity() +
           byte_sets_.begin.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::vector<Node> nodes_;  // depth-first; a sentinel node at the end holds tokens_.size()
  std::vector<TokenId> tokens_;
  std::int32_t max_depth_ = 0;
  std::vector<std::uint32_t> kids_begin_;  // per node, then the root, then the end
  std::vector<std::uint32_t> kids_;
  std::vector<std::uint8_t> kid_bytes_;
  std::vector<std::uint8_t> below_in_;  // per node: BelowIn
  std::vector<std::uint8_t> height_below_;  // per node: HeightBelow

  struct TableHash {
    std::size_t operator()(const std::vector<std::int16_t>& v) const;
  };
  mutable std::once_flag by_length_once_;
  mutable ByLength by_length_;
  // Per token of the trie, in the trie's order (entry k for tokens_[k]): the set of its bytes
  // under 0x80, whether it has bytes from 0x80 on (1: they are whole, well-formed UTF-8
  // sequences; 2: not), and its bytes, all tokens' back to back
  // (built with the trie: about 3 MB and 3 ms for Llama-3). Region and counted views take most
  // tokens from their sets, two words each, and run the others' bytes from `text` in order
  // rather than from the vocabulary by id.
  struct ByteSets {
    std::vector<std::array<std::uint64_t, 2>> ascii;
    std::vector<std::uint8_t> high;
    std::string text;
    std::vector<std::uint32_t> begin;  // token k's bytes: text[begin[k], begin[k + 1])
    // Token k's bytes are all ASCII bytes of `set`.
    bool Within(std::size_t k, const std::array<std::uint64_t, 2>& set) const {
      return !high[k] && (ascii[k][0] & ~set[0]) == 0 && (ascii[k][1] & ~set[1]) == 0;
    }
    // Token k's bytes are ASCII bytes of `set` and whole well-formed UTF-8 sequences.
    bool WithinUtf8(std::size_t k, const std::array<std::uint64_t, 2>& set) const {
      return high[k] <= 1 && (ascii[k][0] & ~set[0]) == 0 && (ascii[k][1] & ~set[1]) == 0;
    }
    std::string_view Bytes(std::size_t k) const {
      return {text.data() + begin[k], begin[k + 1] - begin[k]};
    }
  };
  ByteSets byte_sets_;
  mutable std::mutex attached_mu_;
  mutable std::shared_ptr<void> attached_;
  mutable std::mutex region_mu_;
  mutable std::unordered_map<std::vector<std::int16_t>, std::unique_ptr<RegionView>, TableHash>
      regions_;
  // Run forms met, with regions_' answer for their table (null: no view, nothing to share).
  mutable std::unordered_map<std::vector<std::int16_t>, const RegionView*, TableHash> region_runs_;
  mutable std::unordered_map<std::vector<std::int16_t>, std::unique_ptr<CountedView>, TableHash>
      counted_;
  mutable std::once_flag comma_quotes_once_;
  mutable CommaQuoteTokens comma_quotes_;
};

}  // namespace lockstep
