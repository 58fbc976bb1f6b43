// The flat token trie holds exactly the vocabulary's text tokens, each under the path that
// spells its bytes, with subtree jumps that skip exactly the node's descendants.
#include "automata/token/token_trie.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep/vocabulary.h"

namespace lockstep {
namespace {

void CheckTrie(const std::string& name) {
  auto vocab = Vocabulary::Load(name);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  TokenTrie trie(**vocab);
  std::vector<int> seen((*vocab)->size(), 0);
  std::string path;
  auto nodes = trie.nodes();
  for (std::uint32_t i = 0; i < trie.num_nodes(); ++i) {
    const auto& n = nodes[i];
    ASSERT_GE(n.depth, 1);
    ASSERT_LE(n.depth, path.size() + 1) << "node " << i << " skips a level";
    path.resize(n.depth - 1);
    path.push_back(static_cast<char>(n.byte));
    // The subtree of i is the following run of nodes deeper than i.
    std::uint32_t j = i + 1;
    while (j < trie.num_nodes() && nodes[j].depth > n.depth) ++j;
    ASSERT_EQ(n.subtree_end, j) << "node " << i;
    for (TokenId id : trie.TokensAt(i)) {
      ASSERT_EQ((*vocab)->TokenBytes(id), path) << "token " << id;
      ++seen[id];
    }
  }
  std::size_t text_tokens = 0;
  for (TokenId id = 0; id < (*vocab)->size(); ++id) {
    bool text = ((*vocab)->Kind(id) == TokenKind::kNormal || (*vocab)->Kind(id) == TokenKind::kByte) &&
                !(*vocab)->TokenBytes(id).empty();
    EXPECT_EQ(seen[id], text ? 1 : 0) << name << " token " << id;
    text_tokens += text;
  }
  EXPECT_EQ(trie.num_tokens(), text_tokens);
  EXPECT_GT(text_tokens, static_cast<std::size_t>((*vocab)->size()) * 9 / 10);
}

TEST(TokenTrieTest, Llama3HoldsEveryTextTokenOnce) { CheckTrie("llama3"); }
TEST(TokenTrieTest, MistralSharesNodesForDuplicateBytes) { CheckTrie("mistral"); }
TEST(TokenTrieTest, Gpt2) { CheckTrie("gpt2"); }

}  // namespace
}  // namespace lockstep
