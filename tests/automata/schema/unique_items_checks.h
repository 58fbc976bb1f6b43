// What the uniqueItems tests check, shared by schema_unique_items_test and
// schema_unique_closed_test: whole texts against the validator, masks against brute force along
// texts, and the tokens in and out of the mask after a prefix.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "util/grammar_walk.h"

namespace lockstep::schema::unique_checks {

inline bool Valid(const std::string& schema_text, const std::string& instance) {
  auto schema = Schema::Load(schema_text);
  EXPECT_TRUE(schema.ok());
  auto v = Validator::Create(*schema, {});
  EXPECT_TRUE(v.ok());
  auto r = v->Validate(nlohmann::json::parse(instance));
  EXPECT_TRUE(r.ok());
  return *r;
}

inline bool Allowed(const std::vector<std::uint32_t>& mask, TokenId id) {
  return ((mask[id >> 5] >> (id & 31)) & 1) != 0;
}

inline std::vector<TokenId> Encode(const char* vocab, const std::string& text) {
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  auto ids = testing::CompilerFor(vocab).vocabulary().Encode(text, eo);
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<TokenId>{};
}

// The ids on which two masks differ, with their text ("+" in `a` only, "-" in `b` only).
inline std::string Differences(const char* vocab, const testing::Mask& a, const testing::Mask& b) {
  std::string out;
  for (std::size_t w = 0; w < a.size() && w < b.size(); ++w) {
    for (int bit = 0; bit < 32; ++bit) {
      const bool x = ((a[w] >> bit) & 1) != 0, y = ((b[w] >> bit) & 1) != 0;
      if (x == y) continue;
      const TokenId id = static_cast<TokenId>(w * 32 + static_cast<std::size_t>(bit));
      out += std::string(x ? " +'" : " -'") +
             std::string(testing::CompilerFor(vocab).vocabulary().TokenBytes(id)) + "'";
    }
  }
  return out;
}

// Every text is taken whole (and may end there) exactly when the validator accepts it, for each
// schema of `cases`, on Llama-3 and Qwen2.5.
inline void ExpectAgreementWithTheValidator(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& cases) {
  for (const char* vocab : {"llama3", "qwen2.5"}) {
    for (const auto& [schema, texts] : cases) {
      auto g = testing::CompilerFor(vocab).CompileSchema(schema);
      EXPECT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
      if (!g.ok()) continue;
      for (const std::string& text : texts) {
        Matcher m(*g);
        const bool taken = m.AcceptString(text) && m.CanEnd();
        EXPECT_EQ(taken, Valid(schema, text)) << vocab << ": " << text << "\n  schema: " << schema;
      }
    }
  }
}

// At every token of `texts` (valid instances of `schema`) on `vocab`, the mask equals the
// brute-force one; returns how many masks were compared.
inline long MasksEqualBruteForceAlong(const std::shared_ptr<const CompiledGrammar>& g,
                                      const std::string& schema,
                                      const std::vector<std::string>& texts, const char* vocab) {
  const int width = testing::CompilerFor(vocab).vocabulary().logits_width();
  long checked = 0;
  for (const std::string& text : texts) {
    EXPECT_TRUE(Valid(schema, text)) << text;
    Matcher m(g);
    testing::Mask fast(BitmaskWords(width));
    for (TokenId id : Encode(vocab, text)) {
      m.FillNextTokenBitmask(fast);
      const testing::Mask slow = testing::BruteForceMaskFor(m, fast);
      EXPECT_EQ(fast, slow) << vocab << ": at a token of " << text << ":"
                            << Differences(vocab, fast, slow);
      ++checked;
      if (!m.AcceptToken(id)) {
        ADD_FAILURE() << vocab << ": " << text;
        break;
      }
    }
    EXPECT_TRUE(m.CanEnd()) << text;
  }
  return checked;
}

// After `prefix`: the mask equals the brute-force one; `out` (when it is one token) is out of
// it and AcceptToken refuses it, and the text with `out` is refused whole; `in` (when it is one
// token) is in it.
inline void ExpectOutAndIn(const std::shared_ptr<const CompiledGrammar>& g, const char* vocab,
                           const std::string& prefix, const std::string& out,
                           const std::string& in) {
  const int width = testing::CompilerFor(vocab).vocabulary().logits_width();
  Matcher m(g);
  ASSERT_TRUE(m.AcceptString(prefix)) << prefix;
  testing::Mask mask(BitmaskWords(width));
  m.FillNextTokenBitmask(mask);
  const testing::Mask slow = testing::BruteForceMask(m);
  EXPECT_EQ(mask, slow) << vocab << ": " << prefix << ":" << Differences(vocab, mask, slow);
  const std::vector<TokenId> out_ids = Encode(vocab, out), in_ids = Encode(vocab, in);
  if (out_ids.size() == 1) {
    EXPECT_FALSE(Allowed(mask, out_ids[0])) << vocab << ": " << prefix << " + " << out;
    EXPECT_FALSE(m.AcceptToken(out_ids[0])) << vocab << ": " << prefix << " + " << out;
  }
  if (in_ids.size() == 1) {
    EXPECT_TRUE(Allowed(mask, in_ids[0])) << vocab << ": " << prefix << " + " << in;
  }
  Matcher whole(g);
  EXPECT_FALSE(whole.AcceptString(prefix + out)) << vocab << ": " << prefix << out;
}

}  // namespace lockstep::schema::unique_checks
