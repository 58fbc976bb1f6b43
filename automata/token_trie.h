// TokenTrie: every token's byte string in one flat, depth-first array, so a byte automaton can
// be run over the whole vocabulary at once: a dead byte skips the node's subtree with one jump.
// Built once per vocabulary (by GrammarCompiler) and shared read-only by every compiled grammar.
#pragma once

#include <cstdint>
#include <span>
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
  std::int32_t max_depth() const { return max_depth_; }
  std::size_t num_nodes() const { return nodes_.size() - 1; }  // minus the sentinel
  std::size_t num_tokens() const { return tokens_.size(); }
  std::size_t MemoryBytes() const {
    return nodes_.capacity() * sizeof(Node) + tokens_.capacity() * sizeof(TokenId);
  }

 private:
  std::vector<Node> nodes_;  // depth-first; a sentinel node at the end holds tokens_.size()
  std::vector<TokenId> tokens_;
  std::int32_t max_depth_ = 0;
};

}  // namespace lockstep
