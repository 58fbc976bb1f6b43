// Builds the flat depth-first token trie from the vocabulary's sorted byte strings: each token
// adds the nodes past its longest common prefix with the previous one.
#include "automata/token_trie.h"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace lockstep {

TokenTrie::TokenTrie(const Vocabulary& vocab) {
  struct Entry {
    std::string_view bytes;
    TokenId id;
  };
  std::vector<Entry> entries;
  entries.reserve(vocab.size());
  for (TokenId id = 0; id < vocab.size(); ++id) {
    TokenKind kind = vocab.Kind(id);
    std::string_view bytes = vocab.TokenBytes(id);
    if ((kind == TokenKind::kNormal || kind == TokenKind::kByte) && !bytes.empty()) {
      entries.push_back({bytes, id});
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    int c = a.bytes.compare(b.bytes);
    return c < 0 || (c == 0 && a.id < b.id);
  });

  // path[d] = index of the node at depth d+1 on the current root-to-leaf path.
  std::vector<std::uint32_t> path;
  std::string_view prev;
  nodes_.reserve(entries.size() * 3);
  tokens_.reserve(entries.size());
  for (const auto& [bytes, id] : entries) {
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
