// The limits a grammar's mask fill works within, on the real Llama-3 vocabulary: a grammar with
// hundreds of rules still fills from its cached positions (no walk of the whole trie per fill),
// masks stay exact up to and past the nesting limit (where cached positions would be wrong and
// the fill must walk the real parser), and position keys of a mutually recursive grammar, whose
// hashing would otherwise grow exponentially, stay bounded while the masks stay exact.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_grammar_peer.h"
#include "automata/cfg/earley.h"
#include "automata/cfg/position_key.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

std::shared_ptr<const Vocabulary> Llama3() {
  static auto v = *Vocabulary::Load("llama3");
  return v;
}

const GrammarCompiler& Compiler() {
  static GrammarCompiler compiler(Llama3());
  return compiler;
}

std::vector<TokenId> Encode(const std::string& text) {
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  return *Llama3()->Encode(text, eo);
}

// Steps through `text` token by token; before every token (and at the end) the matcher's mask
// must equal CfgGrammar::FullWalkMask of the same parser state (no position, no cache: one walk
// of the whole trie by the full Earley parser). Stops early where the text is refused (past a
// limit) when `may_stop`. Returns the number of fills that walked the whole trie themselves.
int CompareAlong(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text,
                 bool may_stop = false) {
  const CfgGrammar& cfg = *CfgOf(*g);
  Matcher m(g);
  EarleyParser parser(&cfg.program(), cfg.max_depth());
  parser.InitRoot();
  std::vector<std::uint32_t> fast(cfg.mask_words()), full(cfg.mask_words());
  const std::vector<TokenId> ids = Encode(text);
  int full_walks = 0;
  for (std::size_t k = 0; k <= ids.size(); ++k) {
    m.FillNextTokenBitmask(fast);
    full_walks += Matcher::LastFillTrace().full_walks;
    cfg.FullWalkMask(parser, full);
    EXPECT_EQ(fast, full) << "mask before token " << k << " of " << text;
    if (k == ids.size()) break;
    const std::string_view bytes = Llama3()->TokenBytes(ids[k]);
    const bool in = (full[ids[k] >> 5] >> (ids[k] & 31)) & 1;
    if (!in && may_stop) break;
    EXPECT_TRUE(m.AcceptToken(ids[k])) << "token " << k << " of " << text;
    for (unsigned char b : bytes) EXPECT_TRUE(parser.StepByte(b));
  }
  return full_walks;
}

// 300 optional properties, each an object of its own: a rule each, and a member list lowered
// as rules that choose the next member (after member i, a rule for the members after it, and a
// tree of blocks of members past 32 of them).
std::string HundredsOfProperties(int n, bool recursive) {
  std::ostringstream schema;
  schema << R"({"type": "object", "additionalProperties": false, "properties": {)";
  for (int i = 0; i < n; ++i) {
    schema << (i > 0 ? ", " : "") << "\"p" << i << R"(": {"type": "object", "properties": {"x)"
           << i << R"(": {"type": "integer"}}, "required": ["x)" << i
           << R"("], "additionalProperties": false})";
  }
  if (recursive) schema << R"(, "self": {"$ref": "#"})";
  schema << "}}";
  return schema.str();
}

TEST(FillLimits, AGrammarWithHundredsOfRulesFillsFromItsPositions) {
  // The nesting headroom a fill needs is none for a grammar without recursion whose deepest
  // nesting is within the limit (it can never meet the limit). With headroom counted as the
  // chain of rules predicted without a byte (here the member chain, 300 long) per token byte,
  // every fill walked the whole trie (30 ms each on Kubernetes schemas). After a comma the set
  // holds a kernel per later member (~300): their cached positions' union, not a walk. And the
  // parse of one byte stays linear in the members: completing the chain of member rules, or
  // leaving a set where each member rule was predicted, once scanned the whole set per rule,
  // and went over the per-byte item budget, refusing valid text.
  const int n = 300;
  auto g = Compiler().CompileSchema(HundredsOfProperties(n, /*recursive=*/false));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_GE((*g)->Stats().rules, n);
  const std::string last = std::to_string(n - 1);
  EXPECT_EQ(CompareAlong(*g, "{\"p7\": {\"x7\": 12}, \"p" + last + "\": {\"x" + last + "\": -3}}"),
            0);
  EXPECT_EQ(CompareAlong(*g, "{\"p0\": {\"x0\": 1},\"p1\": {\"x1\": 2},  \"p2\": {\"x2\": 3}}"), 0);
}

TEST(FillLimits, ARecursiveGrammarWithHundredsOfRulesKeepsExactMasks) {
  // The same with a property back to the root: recursion, so the headroom is counted: the rules
  // predicted without a byte (the choice of the next member: a chain of 300 rules before it
  // became a tree of blocks, about 20 now) per byte, so that only tokens long enough to pass
  // the nesting limit are checked against the parse; the fills come from the positions (they
  // walked the whole trie over the parser before, 10-15 ms each on recursive real-world
  // schemas), within the per-byte item budget.
  auto g = Compiler().CompileSchema(HundredsOfProperties(300, /*recursive=*/true));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(CompareAlong(*g, R"({"p7": {"x7": 12}, "self": {"p299": {"x299": -3}, "self": {}}})"),
            0);
}

TEST(FillLimits, TailsAreCheckedOncePerCompletionNotOncePerCount) {
  // Inside a string of maxLength 1000 every token is a new count of its counter, so a new parse
  // state, but the same counter position (until the count nears the maximum), whose tails (a quote, then a comma and the next keys)
  // the parse after the string accepts alike at every count: they are checked at the first
  // count and taken as checked at the others. The masks stay exact all along.
  auto g = Compiler().CompileSchema(R"({"type": "object", "properties": {
      "note": {"type": "string", "maxLength": 1000}, "n": {"type": "integer"},
      "ok": {"type": "boolean"}, "tag": {"enum": ["a", "b"]}}, "additionalProperties": false})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::string note;
  for (int i = 0; i < 40; ++i) note += " w" + std::to_string(i % 10);
  // Every mask against a full walk of the parse: along the whole note at full scale, along its
  // first 10 words at a reduced one (each full walk takes about a second under the sanitizers).
  const std::string compared = testing::TestScale() < 1 ? note.substr(0, 10 * 3) : note;
  const std::string text = "{\"note\": \"" + compared + "\", \"ok\": true}";
  EXPECT_EQ(CompareAlong(*g, text), 0);
  // Again on a fresh grammar (its own caches), counting what each fill inside the string did.
  auto fresh = Compiler().CompileSchema(R"({"type": "object", "properties": {
      "note": {"type": "string", "maxLength": 1001}, "n": {"type": "integer"},
      "ok": {"type": "boolean"}, "tag": {"enum": ["a", "b"]}}, "additionalProperties": false})");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  Matcher m(*fresh);
  ASSERT_TRUE(m.AcceptString("{\"note\": \""));
  std::vector<std::uint32_t> mask(CfgOf(**fresh)->mask_words());
  int checked = 0, reused = 0;
  for (const TokenId id : Encode(note)) {
    ASSERT_TRUE(m.AcceptToken(id));
    m.FillNextTokenBitmask(mask);
    checked += Matcher::LastFillTrace().tail_nodes > 0;
    reused += Matcher::LastFillTrace().tails_reused > 0;
  }
  EXPECT_LE(checked, 2);
  EXPECT_GE(reused, 30);
}

TEST(FillLimits, MasksStayExactUpToAndPastTheNestingLimit) {
  // Right recursion one level per space, with a low limit: a cached position would allow the
  // vocabulary's long runs of spaces that the parser must refuse near the limit, so the fill
  // has to see the limit coming.
  CompileOptions options;
  options.max_nesting_depth = 48;
  auto g = Compiler().CompileGrammar(R"(root ::= " " root | "[" (root ("," root)*)? "]" | "x")",
                                     options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (int spaces : {1, 7, 20, 40, 47, 60}) {
    CompareAlong(*g, std::string(spaces, ' ') + "x", /*may_stop=*/true);
  }
  CompareAlong(*g, "[[[x],[ [x]]],  x]");
}

TEST(FillLimits, MutuallyRecursiveRulesAreKeyedOnceAndExactly) {
  // Every rule calls every rule: the 40 rules are one component of the rule graph. Its rules are
  // hashed together, each state once (a key described each rule again under every stack of
  // callers, which grew exponentially and ran into the keyer's budget: states past it had no
  // key). Every state gets a key, whichever state is asked first, and the masks stay exact.
  const int n = 40;
  std::ostringstream text;
  text << "root ::= r0 [ ]{0,64}\n";
  for (int i = 0; i < n; ++i) {
    text << "r" << i << " ::= \"a" << i << "\"";
    for (int j = 0; j < n; ++j) text << " | \"(\" r" << j << " \")\"";
    text << "\n";
  }
  auto g = Compiler().CompileGrammar(text.str());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const CfgGrammar& cfg = *CfgOf(**g);
  const CfgProgram& program = cfg.program();
  const std::array<std::uint64_t, 4> follow = {1, 2, 3, 4};
  PositionKeyer forward(&program), backward(&program);
  std::vector<std::optional<PositionKey>> keys(program.num_states);
  for (StateId s = 0; s < program.num_states; ++s) keys[s] = forward.Key(s, follow);
  EXPECT_LE(forward.work(), program.num_states) << "a state was hashed more than once";
  for (StateId s = program.num_states - 1; s >= 0; --s) {
    const std::optional<PositionKey> k = backward.Key(s, follow);
    ASSERT_TRUE(k.has_value()) << "state " << s << " has no key";
    ASSERT_TRUE(keys[s].has_value()) << "state " << s << " has no key";
    EXPECT_TRUE(*k == *keys[s]) << "state " << s << "'s key depends on the state asked first";
  }
  for (StateId s = 0; s < program.num_states; ++s) (void)CfgGrammarPeer(cfg).KeyOfState(s);
  CompareAlong(*g, "(((((a3)))))  ");
  CompareAlong(*g, "((a39))");
}

// Two grammars whose mutually recursive rules differ in one rule only: the positions inside the
// rule they have alike (after "(" in `a`) differ, because what `b` matches differs. Each
// grammar, compiled after the other, keeps its own masks.
TEST(FillLimits, MutuallyRecursiveRulesThatDifferGetOtherKeys) {
  const char* one = "root ::= a{1,3}\na ::= \"x\" | \"(\" b \")\"\nb ::= \"y\" | \"[\" a \"]\"";
  const char* two = "root ::= a{1,3}\na ::= \"x\" | \"(\" b \")\"\nb ::= \"y\"? | \"[\" a \"]\"";
  for (const auto& order : {std::pair{one, two}, std::pair{two, one}}) {
    auto first = Compiler().CompileGrammar(order.first);
    auto second = Compiler().CompileGrammar(order.second);
    ASSERT_TRUE(first.ok() && second.ok());
    for (const auto& g : {*first, *second}) CompareAlong(g, "x([(y)])([");
    // `()` is a token of Llama-3 and valid after "x" only where b matches empty.
    const TokenId parens = (*first)->vocabulary().FindToken("()");
    ASSERT_NE(parens, kNoToken);
    ASSERT_EQ((*first)->vocabulary().TokenBytes(parens), "()");
    for (const auto& g : {*first, *second}) {
      Matcher m(g);
      ASSERT_TRUE(m.AcceptString("x(["));
      std::vector<std::uint32_t> mask(CfgOf(*g)->mask_words());
      ASSERT_TRUE(m.FillNextTokenBitmask(mask));
      const bool empty_b = (g == *first) == (order.first == two);
      EXPECT_EQ((mask[parens >> 5] >> (parens & 31)) & 1, empty_b ? 1u : 0u) << order.first;
    }
  }
}

// The JSON string body's view of the trie is built with the compiler: the first string value a
// new compiler's grammar meets fills from it (no whole-trie walk to build it then), and its
// masks stay exact.
TEST(FillLimits, AStringBodyViewIsReadyWithTheCompiler) {
  GrammarCompiler fresh(Llama3());
  CompileOptions o;
  o.background_positions = false;
  auto g = fresh.CompileSchema(
      R"({"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}})",
      o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  ASSERT_TRUE(m.AcceptString(R"({"city":"Par)"));
  std::vector<std::uint32_t> mask(CfgOf(**g)->mask_words());
  m.FillNextTokenBitmask(mask);
  EXPECT_EQ(Matcher::LastFillTrace().regions_built, 0);
  EXPECT_GT(Matcher::LastFillTrace().region_walks + Matcher::LastFillTrace().positions_shared, 0)
      << "the string body's position came neither from the view nor from the store";
  CompareAlong(*g, R"({"city": "Paris \"Nord\"", "n": 12})");
}

// The bound on hashing for keys is the fill's, not each key's: a fill that walks dozens of new
// positions at once (after `{` of an object of 60 optional members, each a definition of its
// own) asks a key for each, and hashed some 6,700 states at 256 a key (1.4 ms of a 2 ms
// per-mask budget). Every fill after the first hashes at most kForegroundKeyWork states, the
// first that plus its root's kFirstFillKeyWork; the hashing left over is spread over later
// fills, and the masks stay exact.
TEST(FillLimits, AFillHashesForKeysWithinOneBound) {
  std::ostringstream schema, text;
  schema << R"({"type": "object", "$defs": {)";
  constexpr int kMembers = 60;
  for (int i = 0; i < kMembers; ++i) {
    schema << (i > 0 ? ", " : "") << "\"d" << i << R"(": {"type": "object", "properties": {"a)"
           << i << R"(": {"type": "string"}, "b)" << i << R"(": {"type": "integer"}, "c)" << i
           << R"(": {"enum": ["x)" << i << R"(", "y)" << i << R"("]}}})";
  }
  schema << R"(}, "properties": {)";
  for (int i = 0; i < kMembers; ++i) {
    schema << (i > 0 ? ", " : "") << "\"p" << i << R"(": {"$ref": "#/$defs/d)" << i << "\"}";
  }
  schema << "}}";
  text << "{";
  for (int i = 0; i < kMembers; i += 7) {
    text << (i > 0 ? "," : "") << "\"p" << i << R"(":{"a)" << i << R"(":"v","b)" << i << "\":" << i
         << "}";
  }
  text << "}";
  GrammarCompiler fresh(Llama3());
  CompileOptions o;
  o.background_positions = false;
  auto g = fresh.CompileSchema(schema.str(), o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  std::vector<std::uint32_t> mask(CfgOf(**g)->mask_words());
  const std::vector<TokenId> ids = Encode(text.str());
  std::int64_t later = 0;
  for (std::size_t k = 0; k <= ids.size(); ++k) {
    m.FillNextTokenBitmask(mask);
    const std::int64_t hashed = Matcher::LastFillTrace().key_states;
    const std::int64_t bound = CfgGrammarPeer::kForegroundKeyWork +
                               (k == 0 ? CfgGrammarPeer::kFirstFillKeyWork : 0);
    EXPECT_LE(hashed, bound) << "fill before token " << k;
    if (k > 0) later += hashed;
    if (k == ids.size()) break;
    ASSERT_TRUE(m.AcceptToken(ids[k])) << "token " << k;
  }
  EXPECT_GT(later, CfgGrammarPeer::kForegroundKeyWork)
      << "the object's members should need more hashing than one fill's bound";
  EXPECT_EQ(CompareAlong(*g, text.str()), 0);
}

// A grammar's positions are looked up in the vocabulary's store by keys that hash its rules.
// The first fill hashes them (it has a prefill's time), so that the second, which has to fit
// between two decoding steps, looks its position up without hashing; and the second grammar of
// the same shape finds that position in the store.
TEST(FillLimits, TheFirstFillKeysTheGrammarForTheFills) {
  GrammarCompiler fresh(Llama3());
  CompileOptions o;
  o.background_positions = false;
  auto tool = [&](const std::string& name) {
    return fresh.CompileSchema(
        R"({"type": "object", "properties": {")" + name +
            R"(": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
               "days": {"type": "integer", "minimum": 1}}, "required": [")" + name + R"("]})",
        o);
  };
  auto first = tool("city");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<std::uint32_t> mask(CfgOf(**first)->mask_words());
  Matcher m(*first);
  m.FillNextTokenBitmask(mask);
  EXPECT_GT(Matcher::LastFillTrace().key_states, 0) << "the first fill keyed nothing";
  ASSERT_TRUE(m.AcceptString("{"));
  m.FillNextTokenBitmask(mask);
  EXPECT_EQ(Matcher::LastFillTrace().key_states, 0) << "the second fill hashed rules";
  EXPECT_GT(Matcher::LastFillTrace().positions_walked, 0);
  // Another grammar whose object after `{` reads the same: its second fill is the first's.
  auto second = tool("city");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  Matcher m2(*second);
  m2.FillNextTokenBitmask(mask);
  ASSERT_TRUE(m2.AcceptString("{"));
  m2.FillNextTokenBitmask(mask);
  EXPECT_EQ(Matcher::LastFillTrace().key_states, 0);
  EXPECT_EQ(Matcher::LastFillTrace().positions_walked, 0);
  EXPECT_GT(Matcher::LastFillTrace().positions_shared, 0);
  CompareAlong(*second, R"({"city": "Paris", "unit": "celsius", "days": 3})");
}

}  // namespace
}  // namespace lockstep
