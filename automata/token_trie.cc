// Builds the flat depth-first token trie from the vocabulary's sorted byte strings: each token
// adds the nodes past its longest common prefix with the previous one.
#include "automata/token_trie.h"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace lockstep {

TokenTrie::TokenTrie(const Vocabulary& vocab) {
  std::vector<TokenId> ids;
  ids.reserve(vocab.size());
  for (TokenId id = 0; id < vocab.size(); ++id) {
    TokenKind kind = vocab.Kind(id);
    if ((kind == TokenKind::kNormal || kind == TokenKind::kByte) && !vocab.TokenBytes(id).empty()) {
      ids.push_back(id);
    }
  }
  std::stable_sort(ids.begin(), ids.end(), [&](TokenId a, TokenId b) {
    return vocab.TokenBytes(a) < vocab.TokenBytes(b);
  });

  // path[d] = index of the node at depth d+1 on the current root-to-leaf path.
  std::vector<std::uint32_t> path;
  std::string_view prev;
  nodes_.reserve(ids.size() * 3);
  tokens_.reserve(ids.size());
  for (TokenId id : ids) {
    std::string_view bytes = vocab.TokenBytes(id);
    std::size_t common = 0;
    while (common < prev.size() && common < bytes.size() && prev[common] == bytes[common]) {
      ++common;
    }
    // Nodes deeper than the common prefix are finished: their subtree ends here.
    for (std::size_t d = common; d < path.size(); ++d) nodes_[path[d]].subtree_end = nodes_.size();
    path.resize(common);
    for (std::size_t d = common; d < bytes.size(); ++d) {
      path.push_back(static_cast<std::uint32_t>(nodes_.size()));
      nodes_.push_back(Node{0, static_cast<std::uint32_t>(tokens_.size()),
                            static_cast<std::uint16_t>(d + 1),
                            static_cast<std::uint8_t>(bytes[d])});
    }
    // Identical byte strings (e.g. SentencePiece "▁" and <0x20>) share the node; a token always
    // ends at the last node added, whose token range is still open.
    tokens_.push_back(id);
    max_depth_ = std::max<std::int32_t>(max_depth_, static_cast<std::int32_t>(bytes.size()));
    prev = bytes;
  }
  for (std::uint32_t idx : path) nodes_[idx].subtree_end = nodes_.size();
  nodes_.push_back(Node{static_cast<std::uint32_t>(nodes_.size() + 1),
                        static_cast<std::uint32_t>(tokens_.size()), 0, 0});
}

}  // namespace lockstep
