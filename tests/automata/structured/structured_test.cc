// Triggered constraints on the real vocabularies of each format's family: exactness of
// the fast mask against brute force along walks that cross triggers and end markers (triggers
// split across tokens included), generated outputs checked by an independent parse and the
// schema validator, and the errors for bad formats, tools and markers.
#include "lockstep/structured.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/schema/json_schema.h"
#include "lockstep/decoding.h"
#include "lockstep/logits_source.h"
#include "lockstep/matcher.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const Vocabulary> Vocab(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const Vocabulary>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  VocabularyOptions vo;
  if (name == "qwen2.5") vo.logits_width = 151936;
  auto v = Vocabulary::Load(name, vo);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return cache[name] = *v;
}

// Formats of the tests, beside the bundled ones: the free text bounded and under a regex (each
// segment at most 48 bytes, no digits nor braces), on a single trigger and on per-tool triggers
// (up to three calls, so the free text between calls is exercised too).
const std::map<std::string, std::string>& InlineFormats() {
  static const std::map<std::string, std::string> m = {
      {"qwen-bounded", R"({"name": "qwen-bounded", "free_text": {"max_bytes": 48,
          "regex": "[^0-9{}]*"}, "trigger": {"text": "<tool_call>"},
          "end": {"text": "</tool_call>"}, "max_calls": 3})"},
      {"function-multi", R"({"name": "function-multi", "trigger": {"text_template":
          "<function={name}>"}, "end": {"text": "</function>"}, "min_calls": 1, "max_calls": 3})"},
      {"function-bounded", R"({"name": "function-bounded", "free_text": {"max_bytes": 48,
          "regex": "[^0-9{}]*"}, "trigger": {"text_template": "<function={name}>"},
          "end": {"text": "</function>"}, "min_calls": 1, "max_calls": 3,
          "tools": ["book_flight", "get_weather"]})"},
  };
  return m;
}

std::string VocabOf(const std::string& format) {
  if (format == "llama3" || format.rfind("function", 0) == 0 || format == "llama3-function")
    return "llama3";
  if (format == "mistral") return "mistral";
  return "qwen2.5";
}

// The bundled tool-call schemas hold {name, arguments}; the tools are their arguments schemas.
std::vector<ToolSpec> Tools() {
  std::vector<ToolSpec> out;
  for (const char* name : {"get_weather", "book_flight"}) {
    ojson j = ojson::parse(
        testing::ReadFile(testing::SourceDataDir() + "/tools/" + name + ".json"));
    out.push_back({name, j["properties"]["arguments"].dump(), "", ""});
  }
  return out;
}

std::shared_ptr<const schema::Schema> ToolSchema(const ToolSpec& t) {
  auto s = schema::Schema::Load(t.schema_json);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

struct Compiled {
  StructuredFormat format;
  std::shared_ptr<const Vocabulary> vocab;
  std::shared_ptr<const CompiledGrammar> grammar;
};

Compiled CompileFormat(const std::string& name) {
  Compiled c;
  auto it = InlineFormats().find(name);
  auto f = it != InlineFormats().end() ? ParseFormat(it->second, name) : LoadFormat(name);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  c.format = *f;
  c.vocab = Vocab(VocabOf(name));
  GrammarCompiler compiler(c.vocab);
  auto tools = Tools();
  auto g = CompileStructured(compiler, c.format, tools);
  EXPECT_TRUE(g.ok()) << name << ": " << g.status().ToString();
  if (g.ok()) c.grammar = *g;
  return c;
}

// ---- targets: valid outputs, as text pieces and special tokens -------------------------------

struct Piece {
  TokenId special = kNoToken;  // a special token, else `text`
  std::string text;
};

TokenId SpecialId(const StructuredMarker& m, const Vocabulary& v) {
  for (const auto& n : m.special) {
    TokenId id = v.FindToken(n);
    if (id != kNoToken) return id;
  }
  return kNoToken;
}

void AddMarker(std::vector<Piece>& out, const StructuredMarker& m, const Vocabulary& v) {
  if (m.kind == StructuredMarker::Kind::kText) out.push_back({kNoToken, m.text});
  if (m.kind == StructuredMarker::Kind::kSpecial) out.push_back({SpecialId(m, v), ""});
}

const char* kWords[] = {"Sure", " let", " me", " check", " the", " weather", ".", " a < b",
                        " <tool", " [TOOL", " <", " [", "!", "\n", " x<", "]", " tool_call>",
                        " CALLS]", "<think", " ok"};

std::string Words(std::mt19937_64& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += kWords[rng() % std::size(kWords)];
  return s;
}

struct Call {
  std::string name, arguments;
};

Call RandomCall(std::mt19937_64& rng) {
  static const char* kWeather[] = {
      R"({"location": "Paris", "unit": "celsius"})", R"({"location":"New York","days":3})",
      R"({"location": "Tokyo", "unit": "fahrenheit", "days": 14})"};
  static const char* kFlight[] = {
      R"({"origin": "JFK", "destination": "LHR", "departure_date": "2025-03-01", "passengers": 2})",
      R"({"origin":"CDG","destination":"NRT","departure_date":"2024-12-31","passengers":1,"cabin":"business","max_price":999.5})"};
  if (rng() % 2) return {"get_weather", kWeather[rng() % std::size(kWeather)]};
  return {"book_flight", kFlight[rng() % std::size(kFlight)]};
}

std::string CallJson(std::mt19937_64& rng, const std::string& key) {
  Call c = RandomCall(rng);
  if (c.name == "get_weather")
    return R"({"name": "get_weather", ")" + key + "\": " + c.arguments + "}";
  return R"({"name":"book_flight",")" + key + "\":" + c.arguments + "}";
}

// The end of the JSON object starting at or after `p` (brackets counted outside strings).
std::size_t JsonEnd(const std::string& s, std::size_t p) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = s.find('{', p); i < s.size(); ++i) {
    if (in_string) {
      if (s[i] == '\\') {
        ++i;
      } else if (s[i] == '"') {
        in_string = false;
      }
    } else if (s[i] == '"') {
      in_string = true;
    } else if (s[i] == '{' || s[i] == '[') {
      ++depth;
    } else if ((s[i] == '}' || s[i] == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return s.size();
}

// A per-tool trigger: the template with the tool's name.
std::string TriggerFor(const StructuredMarker& m, const std::string& tool) {
  std::string w = m.text;
  w.replace(w.find("{name}"), 6, tool);
  return w;
}

std::vector<Piece> Target(const StructuredFormat& f, const Vocabulary& v, std::mt19937_64& rng) {
  std::vector<Piece> out;
  if (f.reasoning) {
    AddMarker(out, f.reasoning_start, v);
    out.push_back({kNoToken, Words(rng, 3 + rng() % 4)});
    AddMarker(out, f.reasoning_end, v);
    out.push_back({kNoToken, "\n\n"});
  }
  if (f.free_text) out.push_back({kNoToken, Words(rng, 1 + rng() % 5)});
  const int sections = f.body == StructuredBody::kArray || f.end.none()
                           ? 1
                           : 1 + static_cast<int>(rng() % f.max_calls);
  for (int i = 0; i < sections; ++i) {
    std::string body;
    if (f.body == StructuredBody::kArguments) {
      Call c = RandomCall(rng);
      out.push_back({kNoToken, TriggerFor(f.trigger, c.name)});
      body = c.arguments;
    } else if (f.body == StructuredBody::kArray) {
      AddMarker(out, f.trigger, v);
      body = " [" + CallJson(rng, f.arguments_key);
      if (rng() % 2) body += ", " + CallJson(rng, f.arguments_key);
      body += "]";
    } else {
      AddMarker(out, f.trigger, v);
      body = std::string("\n").append(CallJson(rng, f.arguments_key)).append("\n");
    }
    out.push_back({kNoToken, body});
    AddMarker(out, f.end, v);
    if (f.free_text && !f.end.none()) out.push_back({kNoToken, Words(rng, rng() % 3)});
  }
  // Merge adjacent text pieces, so tokens can span the boundaries between them.
  std::vector<Piece> merged;
  for (auto& p : out) {
    if (p.special == kNoToken && p.text.empty()) continue;
    if (p.special == kNoToken && !merged.empty() && merged.back().special == kNoToken) {
      merged.back().text += p.text;
    } else {
      merged.push_back(p);
    }
  }
  return merged;
}

// ---- exactness -------------------------------------------------------------------------------

struct WalkReport {
  long steps = 0, mismatches = 0, completed = 0, spanning = 0, random_steps = 0;
  std::string first;
};

void Compare(Matcher& m, const Vocabulary& vocab, testing::Mask& fast, testing::Mask& slow,
             const std::string& text, WalkReport& r) {
  m.FillNextTokenBitmask(fast);
  slow = testing::BruteForceMaskFor(m, fast);
  ++r.steps;
  for (std::size_t w = 0; w < fast.size(); ++w) {
    std::uint32_t diff = fast[w] ^ slow[w];
    if (!diff) continue;
    r.mismatches += __builtin_popcount(diff);
    if (r.first.empty()) {
      TokenId id = static_cast<TokenId>(w * 32 + __builtin_ctz(diff));
      r.first = (fast[w] & (1u << (id & 31)) ? "over" : "under") + std::string("-allowed id ") +
                std::to_string(id) + " '" +
                (id < vocab.size() ? std::string(vocab.TokenBytes(id)) : "?") + "' after '" +
                text + "'";
    }
  }
}

// Follows valid targets with random tokenisations (any allowed token that is a prefix of the
// rest of the target), so triggers and end markers are crossed at random splits; now and then
// leaves the target for a few random allowed tokens. Every step compares fast and brute force.
WalkReport Walks(const Compiled& c, long max_steps, std::uint64_t seed) {
  WalkReport r;
  const Vocabulary& vocab = *c.vocab;
  std::mt19937_64 rng(seed);
  Matcher m(c.grammar);
  testing::Mask fast(BitmaskWords(vocab.logits_width())), slow;
  std::string marker =
      c.format.trigger.kind == StructuredMarker::Kind::kText ? c.format.trigger.text
      : c.format.trigger.kind == StructuredMarker::Kind::kTemplate
          ? c.format.trigger.text.substr(0, c.format.trigger.text.find("{name}"))
          : (c.format.reasoning ? c.format.reasoning_end.text : "");
  while (r.steps < max_steps) {
    m.Reset();
    std::vector<Piece> target = Target(c.format, vocab, rng);
    std::string text;
    std::size_t piece = 0, off = 0;
    bool ok = true;
    while (ok && piece < target.size() && r.steps < max_steps) {
      Compare(m, vocab, fast, slow, text, r);
      const Piece& p = target[piece];
      if (p.special != kNoToken) {
        ok = m.AcceptToken(p.special);
        EXPECT_TRUE(ok) << "special token rejected after '" << text << "'";
        ++piece;
        off = 0;
        continue;
      }
      std::string_view rest = std::string_view(p.text).substr(off);
      std::vector<TokenId> cands;
      for (TokenId id : testing::AllowedIds(slow)) {
        if (id >= vocab.size() || vocab.IsSpecial(id)) continue;
        std::string_view b = vocab.TokenBytes(id);
        if (!b.empty() && rest.substr(0, b.size()) == b) cands.push_back(id);
      }
      if (cands.empty()) {
        ADD_FAILURE() << c.format.name << ": the target is rejected after '" << text << "'";
        ok = false;
        break;
      }
      // Prefer long tokens half the time: they are the ones spanning boundaries.
      TokenId pick = cands[rng() % cands.size()];
      if (rng() % 2) {
        for (TokenId id : cands)
          if (vocab.TokenBytes(id).size() > vocab.TokenBytes(pick).size()) pick = id;
      }
      std::string_view b = vocab.TokenBytes(pick);
      if (!marker.empty()) {
        std::size_t at = p.text.find(marker, off > 0 ? off - 1 : 0);
        if (at != std::string::npos && at > off && at < off + b.size()) ++r.spanning;
        if (at != std::string::npos && at >= off && at < off + b.size() &&
            at + marker.size() > off + b.size())
          ++r.spanning;
      }
      ok = m.AcceptToken(pick);
      EXPECT_TRUE(ok);
      text += b;
      off += b.size();
      if (off == p.text.size()) {
        ++piece;
        off = 0;
      }
      // Leave the target for a few random tokens now and then.
      if (rng() % 200 == 0) {
        for (int k = 0; k < 4 && r.steps < max_steps; ++k) {
          Compare(m, vocab, fast, slow, text, r);
          auto allowed = testing::AllowedIds(slow);
          if (allowed.empty()) break;
          TokenId id = allowed[rng() % allowed.size()];
          if (!m.AcceptToken(id) || m.IsTerminated()) break;
          ++r.random_steps;
          text += vocab.TokenBytes(id);
        }
        ok = false;
      }
    }
    if (ok && piece == target.size() && r.steps < max_steps) {
      Compare(m, vocab, fast, slow, text, r);
      EXPECT_TRUE(m.CanEnd()) << c.format.name << ": cannot end after '" << text << "'";
      EXPECT_TRUE(m.AcceptToken(vocab.eos()));
      ++r.completed;
    }
  }
  return r;
}

class StructuredExactness : public ::testing::TestWithParam<std::string> {};

TEST_P(StructuredExactness, FastMaskEqualsBruteForce) {
  Compiled c = CompileFormat(GetParam());
  ASSERT_NE(c.grammar, nullptr);
  // The formats of this slice on Llama-3's 128k vocabulary: fewer steps (brute force is slow).
  const bool later = GetParam().find("function") != std::string::npos ||
                     GetParam().find("bounded") != std::string::npos;
  const long steps = static_cast<long>((later ? 250 : 400) * testing::TestScale());
  WalkReport r = Walks(c, steps, 7 + GetParam().size());
  std::printf("%-10s steps %ld completed %ld random %ld spanning-trigger tokens %ld\n",
              GetParam().c_str(), r.steps, r.completed, r.random_steps, r.spanning);
  EXPECT_EQ(r.mismatches, 0) << r.first;
  // At the sanitizer build's reduced scale a walk may not reach the end of an output: the masks
  // are still compared at every step.
  if (steps >= 200) {
    EXPECT_GT(r.completed, 0);
  }
  if (c.format.trigger.kind != StructuredMarker::Kind::kSpecial && !c.format.trigger.none() &&
      steps >= 100) {
    EXPECT_GT(r.spanning, 0) << "no token split the trigger";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, StructuredExactness,
                         ::testing::Values("qwen", "llama3", "mistral", "think-json",
                                           "llama3-function", "qwen-bounded", "function-bounded"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// ---- generation ------------------------------------------------------------------------------

// Seeded random logits steered towards the format's markers, closing punctuation and EOS, so
// that short runs contain calls and end.
class SteeringSource final : public LogitsSource {
 public:
  SteeringSource(const Compiled& c, std::uint64_t seed)
      : c_(c), base_(c.vocab->logits_width(), seed) {
    const Vocabulary& v = *c.vocab;
    for (const StructuredMarker* m : {&c.format.trigger, &c.format.end, &c.format.reasoning_end}) {
      if (m->kind == StructuredMarker::Kind::kText) texts_.push_back(m->text);
      if (m->kind == StructuredMarker::Kind::kTemplate)
        for (const char* t : {"get_weather", "book_flight"}) texts_.push_back(TriggerFor(*m, t));
      if (m->kind == StructuredMarker::Kind::kSpecial) specials_.push_back(SpecialId(*m, v));
    }
    closer_.resize(v.size());
    for (TokenId id = 0; id < v.size(); ++id) {
      std::string_view b = v.TokenBytes(id);
      closer_[id] = !b.empty() && b.find_first_not_of("\"}],") == std::string_view::npos;
    }
  }
  std::int32_t width() const override { return base_.width(); }
  void Logits(std::span<const TokenId> context, std::span<float> out) override {
    base_.Logits(context, out);
    const Vocabulary& v = *c_.vocab;
    std::string text;
    for (TokenId t : context) text += v.TokenBytes(t);
    const bool late = context.size() > 6;
    // What would continue (or start) each text marker at the end of the text.
    std::vector<std::string_view> rests;
    for (const auto& w : texts_) {
      for (std::size_t k = std::min(w.size() - 1, text.size()); k + 1 > 0; --k) {
        if (text.compare(text.size() - k, k, w, 0, k) == 0) {
          rests.push_back(std::string_view(w).substr(k));
          break;
        }
      }
    }
    for (TokenId id = 0; id < v.size(); ++id) {
      std::string_view b = v.TokenBytes(id);
      if (b.empty()) continue;
      float bonus = closer_[id] ? 6.0f : 0.0f;
      if (late) {
        for (std::string_view rest : rests) {
          if (b[0] == rest[0] &&
              (rest.substr(0, b.size()) == b || b.substr(0, rest.size()) == rest))
            bonus = 14;
        }
      }
      out[id] += bonus;
    }
    if (late)
      for (TokenId s : specials_)
        if (s != kNoToken) out[s] += 14;
    if (context.size() > 30)
      for (TokenId e : v.eos_ids()) out[e] += 16;
  }

 private:
  const Compiled& c_;
  UniformSource base_;
  std::vector<std::string> texts_;
  std::vector<TokenId> specials_;
  std::vector<bool> closer_;  // tokens of closing punctuation only
};

class StructuredGeneration : public ::testing::TestWithParam<std::string> {};

TEST_P(StructuredGeneration, CallsParseAndValidate) {
  Compiled c = CompileFormat(GetParam());
  ASSERT_NE(c.grammar, nullptr);
  const auto tools = Tools();
  std::map<std::string, schema::Validator> validators;
  for (const auto& t : tools) {
    schema::ValidateOptions vo;
    vo.format_assertion = true;
    auto v = schema::Validator::Create(ToolSchema(t), vo);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    validators.emplace(t.name, *v);
  }
  int calls = 0, finished = 0;
  const int runs = testing::TestScale() < 1 ? 3 : 6;  // seeded: the first runs are the same at every scale
  for (int i = 0; i < runs; ++i) {
    SteeringSource src(c, 100 + i);
    Matcher m(c.grammar);
    GenerateOptions go;
    go.max_tokens = 300;
    go.sampler.seed = 1 + i;
    auto r = Generate(src, m, {}, go);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (r->finish != FinishReason::kEos) continue;
    ++finished;
    auto parsed = ParseToolCalls(c.format, *c.vocab, r->tokens, tools);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << r->text;
    const std::string prefix = c.format.trigger.text.substr(0, c.format.trigger.text.find('{'));
    std::size_t prefixes = 0;
    for (std::size_t at = r->text.find(prefix); !prefix.empty() && at != std::string::npos;
         at = r->text.find(prefix, at + 1))
      ++prefixes;
    if (c.format.trigger.kind == StructuredMarker::Kind::kTemplate &&
        prefixes == parsed->size()) {
      // Without the tools the name is read from the template (exact when the free text holds no
      // look-alike "<function=other>"); the same calls.
      auto bare = ParseToolCalls(c.format, *c.vocab, r->tokens);
      ASSERT_TRUE(bare.ok()) << bare.status().ToString();
      ASSERT_EQ(bare->size(), parsed->size());
      for (std::size_t k = 0; k < bare->size(); ++k)
        EXPECT_EQ((*bare)[k].name, (*parsed)[k].name);
    }
    if (c.format.free_text_max_bytes >= 0 &&
        c.format.trigger.kind == StructuredMarker::Kind::kTemplate) {
      // Every free-text segment within the bound and the regex (no digits nor braces).
      std::size_t pos = 0;
      auto check = [&](std::string_view seg) {
        EXPECT_LE(seg.size(), static_cast<std::size_t>(c.format.free_text_max_bytes)) << seg;
        EXPECT_EQ(seg.find_first_of("0123456789{}"), std::string_view::npos) << seg;
      };
      for (const ParsedCall& call : *parsed) {
        const std::string trig = TriggerFor(c.format.trigger, call.name);
        const std::size_t t = r->text.find(trig, pos);
        ASSERT_NE(t, std::string::npos);
        check(std::string_view(r->text).substr(pos, t - pos));
        pos = JsonEnd(r->text, t + trig.size());
        pos = r->text.find(c.format.end.text, pos) + c.format.end.text.size();
      }
      check(std::string_view(r->text).substr(pos));
    }
    for (const ParsedCall& call : *parsed) {
      ++calls;
      ASSERT_TRUE(validators.count(call.name)) << "unknown tool " << call.name;
      auto args = nlohmann::json::parse(call.arguments_json, nullptr, false);
      ASSERT_FALSE(args.is_discarded()) << call.arguments_json;
      auto ok = validators.at(call.name).Validate(args);
      ASSERT_TRUE(ok.ok() && *ok) << call.name << " " << call.arguments_json;
    }
    // The markers sit where the format puts them.
    if (c.format.trigger.kind == StructuredMarker::Kind::kSpecial) {
      long triggers = std::count(r->tokens.begin(), r->tokens.end(),
                                 SpecialId(c.format.trigger, *c.vocab));
      EXPECT_EQ(triggers, static_cast<long>(parsed->size()));
    }
    if (i == 0) std::printf("%s: %s\n", GetParam().c_str(), r->text.c_str());
  }
  std::printf("%-10s runs %d finished %d calls %d\n", GetParam().c_str(), runs, finished, calls);
  EXPECT_GT(finished, 0);
  EXPECT_GT(calls, 0);
}

INSTANTIATE_TEST_SUITE_P(Formats, StructuredGeneration,
                         ::testing::Values("qwen", "hermes", "llama3", "mistral", "think-json",
                                           "llama3-function", "function-multi",
                                           "function-bounded"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// ---- errors ----------------------------------------------------------------------------------

TEST(StructuredErrors, UnknownFormatListsKnownOnes) {
  auto f = LoadFormat("chatml");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("qwen"), std::string::npos);
  EXPECT_NE(f.status().message().find("think-json"), std::string::npos);
}

TEST(StructuredErrors, MalformedFormats) {
  auto bad_json = ParseFormat("{\n  \"name\": \"x\",\n  \"trigger\": {\"text\": }\n}", "f.json");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().code(), StatusCode::kInvalidGrammar);
  EXPECT_EQ(bad_json.status().location().rfind("f.json:3:", 0), 0u)
      << bad_json.status().location();
  auto unknown_key = ParseFormat(R"({"name": "x", "trigger": {"text": "<a>"}, "triger": 1})", "f");
  ASSERT_FALSE(unknown_key.ok());
  EXPECT_EQ(unknown_key.status().location(), "f#/triger");
  auto bad_marker = ParseFormat(R"({"name": "x", "trigger": {"special": 3}})", "f");
  ASSERT_FALSE(bad_marker.ok());
  EXPECT_EQ(bad_marker.status().location(), "f#/trigger/special");
  auto no_trigger = ParseFormat(R"({"name": "x", "free_text": true})", "f");
  ASSERT_FALSE(no_trigger.ok());
  EXPECT_EQ(no_trigger.status().location(), "f#/trigger");
  auto counts = ParseFormat(R"({"name": "x", "trigger": {"text": "<a>"}, "max_calls": 0})", "f");
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().location(), "f#/max_calls");
}

TEST(StructuredErrors, SpecialTokenMissingFromVocabulary) {
  // Llama-3's markers on the Qwen2.5 vocabulary: neither name exists there.
  auto f = LoadFormat("llama3");
  ASSERT_TRUE(f.ok());
  GrammarCompiler compiler(Vocab("qwen2.5"));
  auto g = CompileStructured(compiler, *f, Tools());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("<|python_tag|>"), std::string::npos)
      << g.status().ToString();
  EXPECT_NE(g.status().message().find("never appear"), std::string::npos);
}

TEST(StructuredErrors, BadTools) {
  auto f = LoadFormat("qwen");
  ASSERT_TRUE(f.ok());
  GrammarCompiler compiler(Vocab("qwen2.5"));
  std::vector<ToolSpec> dup = {{"a", "{}", "", ""}, {"a", "{}", "", ""}};
  auto g1 = CompileStructured(compiler, *f, dup);
  ASSERT_FALSE(g1.ok());
  EXPECT_NE(g1.status().message().find("duplicate tool name 'a'"), std::string::npos);
  std::vector<ToolSpec> empty = {{"", "{}", "", ""}};
  EXPECT_FALSE(CompileStructured(compiler, *f, empty).ok());
  EXPECT_FALSE(CompileStructured(compiler, *f, std::span<const ToolSpec>{}).ok());
  std::vector<ToolSpec> bad = {
      {"weather", R"({"type": "object", "properties": {"x": {"type": "strin"}}})", "", ""}};
  auto g2 = CompileStructured(compiler, *f, bad);
  ASSERT_FALSE(g2.ok());
  EXPECT_NE(g2.status().message().find("tool 'weather'"), std::string::npos)
      << g2.status().ToString();
  EXPECT_NE(g2.status().location().find("/properties/x"), std::string::npos)
      << g2.status().ToString();

  auto t1 = ParseTools(R"([{"name": "a", "parameters": {}}, {"name": "a", "parameters": {}}])");
  ASSERT_FALSE(t1.ok());
  EXPECT_EQ(t1.status().location(), "/1/name");
  auto t2 = ParseTools(R"([{"type": "function", "function": {"name": "", "parameters": {}}}])");
  ASSERT_FALSE(t2.ok());
  EXPECT_EQ(t2.status().location(), "/0/function/name");
  auto t3 = ParseTools(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
          {"name": "g", "schema": {"type": "integer"}}])");
  ASSERT_TRUE(t3.ok()) << t3.status().ToString();
  ASSERT_EQ(t3->size(), 2u);
  EXPECT_EQ((*t3)[0].name, "f");
  EXPECT_EQ((*t3)[1].schema_json, R"({"type":"integer"})");
}

TEST(StructuredParse, UnknownToolNameAndMalformedOutputs) {
  auto f = LoadFormat("qwen");
  ASSERT_TRUE(f.ok());
  auto vocab = Vocab("qwen2.5");
  auto parse = [&](const std::string& s) {
    auto ids = vocab->Encode(s);
    EXPECT_TRUE(ids.ok());
    return ParseToolCalls(*f, *vocab, *ids);
  };
  auto ok = parse("Hi <tool_call>\n{\"name\": \"x\", \"arguments\": {\"s\": \"</tool_call>\"}}\n"
                  "</tool_call> bye");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].name, "x");
  EXPECT_EQ((*ok)[0].arguments_json, R"({"s":"</tool_call>"})");
  EXPECT_FALSE(parse("<tool_call>{\"name\": \"x\"}</tool_call>").ok());
  EXPECT_FALSE(parse("<tool_call>{\"name\": \"x\", \"arguments\": {}}").ok());
  // The grammar never lets a text trigger into free text, so the parse is unambiguous.
  Compiled c = CompileFormat("qwen");
  Matcher m(c.grammar);
  EXPECT_TRUE(m.AcceptString("Hi <tool"));
  EXPECT_FALSE(m.AcceptString("_call> x"));
}


// ---- per-tool triggers, bounded and regex free text ------------------------------------------

TEST(StructuredPerTool, TriggerChoosesTheTool) {
  Compiled c = CompileFormat("llama3-function");
  ASSERT_NE(c.grammar, nullptr);
  EXPECT_EQ(c.format.body, StructuredBody::kArguments);
  Matcher m(c.grammar);
  // Free text may hold a trigger-like text for no tool, never a tool's trigger.
  EXPECT_TRUE(m.AcceptString("Hi <function=nope> <function=get_weathe"));
  EXPECT_TRUE(m.AcceptString("r>{\"location\": \"Oslo\"}</function>"));
  EXPECT_TRUE(m.CanEnd());
  m.Reset();
  EXPECT_TRUE(m.AcceptString("<function=get_weather>{"));
  EXPECT_FALSE(m.AcceptString("\"origin\""));  // book_flight's argument, not get_weather's
  m.Reset();
  EXPECT_FALSE(m.AcceptString("<function=get_weather>{\"name\""));

  auto parse = [&](const std::string& s, std::span<const ToolSpec> tools) {
    auto ids = c.vocab->Encode(s);
    EXPECT_TRUE(ids.ok());
    return ParseToolCalls(c.format, *c.vocab, *ids, tools);
  };
  const auto tools = Tools();
  const std::string out =
      "Let me see. <function=nope> <function=book_flight>{\"origin\": \"JFK\", \"note\": "
      "\"</function>\"}</function>";
  for (bool with_tools : {true, false}) {
    auto calls = parse(out, with_tools ? std::span<const ToolSpec>(tools)
                                       : std::span<const ToolSpec>());
    // Without the tools, "<function=nope>" reads as a call of "nope" (then bad: no JSON).
    if (!with_tools) {
      EXPECT_FALSE(calls.ok());
      continue;
    }
    ASSERT_TRUE(calls.ok()) << calls.status().ToString();
    ASSERT_EQ(calls->size(), 1u);
    EXPECT_EQ((*calls)[0].name, "book_flight");
    EXPECT_EQ((*calls)[0].arguments_json, R"({"origin":"JFK","note":"</function>"})");
  }
  auto bare = parse("<function=get_weather> {\"location\": \"Rome\"} </function> ok", {});
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  ASSERT_EQ(bare->size(), 1u);
  EXPECT_EQ((*bare)[0].name, "get_weather");
  EXPECT_FALSE(parse("<function=get_weather>{\"location\": \"Rome\"}", tools).ok());
}

TEST(StructuredPerTool, FormatToolsRestrictTheChoice) {
  auto f = ParseFormat(R"({"name": "one", "trigger": {"text_template": "[{name}]"},
      "end": {"text": "[/]"}, "tools": ["get_weather"]})", "one.json");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto vocab = Vocab("llama3");
  GrammarCompiler compiler(vocab);
  auto g = CompileStructured(compiler, *f, Tools());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  EXPECT_TRUE(m.AcceptString("x [book_flight] y [get_weather]{\"location\": \"Rome\"}[/]"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(StructuredFreeText, BoundAndRegex) {
  Compiled c = CompileFormat("qwen-bounded");
  ASSERT_NE(c.grammar, nullptr);
  EXPECT_EQ(c.format.free_text_max_bytes, 48);
  Matcher m(c.grammar);
  EXPECT_TRUE(m.AcceptString(std::string(48, 'a')));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.AcceptString("a"));
  m.Reset();
  EXPECT_FALSE(m.AcceptString("room 101"));  // a digit
  m.Reset();
  // The bound counts each segment apart; the body is not free text (digits allowed there).
  const std::string call =
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\", "
      "\"days\": 3}}</tool_call>";
  EXPECT_TRUE(m.AcceptString(std::string(40, 'b') + call + std::string(48, 'c') + call));
  EXPECT_TRUE(m.CanEnd());
}

TEST(StructuredErrors, PerToolAndFreeTextErrors) {
  auto vocab = Vocab("llama3");
  GrammarCompiler compiler(vocab);
  const auto tools = Tools();
  // A tool name the tools file does not define.
  auto unknown = ParseFormat(R"({"name": "u", "trigger": {"text_template": "<function={name}>"},
      "end": {"text": "</function>"}, "tools": ["get_weather", "get_time"]})", "u.json");
  ASSERT_TRUE(unknown.ok()) << unknown.status().ToString();
  auto g = CompileStructured(compiler, *unknown, tools);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("unknown tool name 'get_time'"), std::string::npos)
      << g.status().ToString();
  EXPECT_EQ(g.status().location(), "u.json#/tools/1");
  // Malformed keys, each at its pointer.
  const std::pair<const char*, const char*> bad[] = {
      {R"({"name": "x", "trigger": {"text": "<a>"}, "free_text": {"regex": "[a-"}})",
       "f#/free_text/regex"},
      {R"({"name": "x", "trigger": {"text": "<a>"}, "free_text": {"max_bytes": 0}})",
       "f#/free_text/max_bytes"},
      {R"({"name": "x", "trigger": {"text": "<a>"}, "free_text": {"max_bytes": 100001}})",
       "f#/free_text/max_bytes"},
      {R"({"name": "x", "trigger": {"text": "<a>"}, "free_text": {"min_bytes": 1}})",
       "f#/free_text/min_bytes"},
      {R"({"name": "x", "trigger": {"text_template": "<function>"}})", "f#/trigger/text_template"},
      {R"({"name": "x", "trigger": {"text_template": "<{name}{name}>"}})",
       "f#/trigger/text_template"},
      {R"({"name": "x", "trigger": {"text_template": "<{name}>"}, "body": "name_field"})",
       "f#/body"},
      {R"({"name": "x", "trigger": {"text": "<a>"}, "body": "arguments"})", "f#/body"},
      {R"({"name": "x", "trigger": {"text": "<a>"}, "end": {"text_template": "</{name}>"}})",
       "f#/end/text_template"},
      {R"({"name": "x", "trigger": {"text": "<a>"}, "tools": []})", "f#/tools"},
      {R"({"name": "x", "trigger": {"text": "<a>"}, "tools": ["a", 3]})", "f#/tools/1"},
  };
  for (const auto& [text, where] : bad) {
    auto f = ParseFormat(text, "f");
    ASSERT_FALSE(f.ok()) << text;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidGrammar) << text;
    EXPECT_EQ(f.status().location(), where) << text << ": " << f.status().ToString();
  }
  // A regex no trigger-free text matches; a bound over the state budget; nested triggers.
  auto empty = ParseFormat(R"({"name": "x", "trigger": {"text": "<a>"},
      "free_text": {"regex": "x<a>"}})", "e.json");
  ASSERT_TRUE(empty.ok());
  auto ge = CompileStructured(compiler, *empty, tools);
  ASSERT_FALSE(ge.ok());
  EXPECT_EQ(ge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ge.status().location(), "e.json#/free_text");
  auto big = ParseFormat(R"({"name": "x", "trigger": {"text": "<tool_call>"},
      "free_text": {"max_bytes": 100000}})", "b.json");
  ASSERT_TRUE(big.ok());
  CompileOptions small;
  small.max_dfa_states = 5000;
  auto gb = CompileStructured(compiler, *big, tools, small);
  ASSERT_FALSE(gb.ok());
  EXPECT_EQ(gb.status().code(), StatusCode::kResourceLimit);
  EXPECT_NE(gb.status().message().find("max_bytes"), std::string::npos);
  auto nested = ParseFormat(R"({"name": "x", "trigger": {"text_template": "{name}:"},
      "end": {"text": ";"}})", "n.json");
  ASSERT_TRUE(nested.ok());
  std::vector<ToolSpec> nt = {{"f", "{}", "", ""}, {"ff", "{}", "", ""}};
  auto gn = CompileStructured(compiler, *nested, nt);
  ASSERT_FALSE(gn.ok());
  EXPECT_NE(gn.status().message().find("contains trigger 'f:'"), std::string::npos)
      << gn.status().ToString();
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

// A tool whose body is a grammar (arithmetic after <function=calc>) beside a schema tool, under
// per-tool triggers: outputs followed with random tokenisations give the brute-force mask at
// every step, are accepted to EOS, and read back with the body's text as the arguments.
TEST(StructuredGrammarTool, MasksEqualBruteForceAndCallsReadBack) {
  auto vocab = Vocab("llama3");
  GrammarCompiler compiler(vocab);
  auto format = LoadFormat("llama3-function");
  ASSERT_TRUE(format.ok()) << format.status().ToString();
  auto tools = ParseTools(R"([{"name": "calc", "grammar": "root ::= num (\"+\" num)*\nnum ::= [0-9]{1,4}"},
      {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}}])");
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();
  ASSERT_TRUE((*tools)[0].schema_json.empty());
  auto g = CompileStructured(compiler, *format, *tools);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::vector<std::string> outputs = {
      "Adding them: <function=calc>12+7+300</function>",
      "<function=calc>5</function>",
      "First the sum <function=calc>1+22</function>",
      "Weather: <function=get_weather>{\"city\": \"Oslo\"}</function>",
  };
  std::mt19937_64 rng(5);
  long steps = 0;
  testing::Mask fast(BitmaskWords(vocab->logits_width())), slow;
  const int rounds = std::max(1, static_cast<int>(3 * testing::TestScale()));
  for (int round = 0; round < rounds; ++round) {
    for (const std::string& out : outputs) {
      Matcher m(*g);
      std::vector<TokenId> ids;
      std::size_t off = 0;
      while (off < out.size()) {
        m.FillNextTokenBitmask(fast);
        slow = testing::BruteForceMaskFor(m, fast);
        ++steps;
        ASSERT_EQ(fast, slow) << "after '" << out.substr(0, off) << "'";
        std::vector<TokenId> cands;
        for (TokenId id : testing::AllowedIds(slow)) {
          if (id >= vocab->size() || vocab->IsSpecial(id)) continue;
          std::string_view b = vocab->TokenBytes(id);
          if (!b.empty() && std::string_view(out).substr(off, b.size()) == b) cands.push_back(id);
        }
        ASSERT_FALSE(cands.empty()) << "rejected after '" << out.substr(0, off) << "'";
        const TokenId pick = cands[rng() % cands.size()];
        ASSERT_TRUE(m.AcceptToken(pick));
        ids.push_back(pick);
        off += vocab->TokenBytes(pick).size();
      }
      m.FillNextTokenBitmask(fast);
      slow = testing::BruteForceMaskFor(m, fast);
      ASSERT_EQ(fast, slow) << "at the end of '" << out << "'";
      ASSERT_TRUE(m.AcceptToken(vocab->eos())) << out;
      auto calls = ParseToolCalls(*format, *vocab, ids, *tools);
      ASSERT_TRUE(calls.ok()) << calls.status().ToString();
      ASSERT_EQ(calls->size(), 1u) << out;
      const std::size_t open = out.find("<function=") + 10;
      const std::size_t close = out.find('>', open);
      EXPECT_EQ((*calls)[0].name, out.substr(open, close - open));
      const std::string body = out.substr(close + 1, out.find("</function>") - close - 1);
      if ((*calls)[0].name == "calc") {
        EXPECT_EQ(nlohmann::json::parse((*calls)[0].arguments_json).get<std::string>(), body);
      } else {
        EXPECT_EQ(nlohmann::json::parse((*calls)[0].arguments_json), nlohmann::json::parse(body));
      }
    }
  }
  EXPECT_GT(steps, 20);
  // Not in the grammar: a letter inside the calc body, a call without its end marker.
  Matcher m(*g);
  EXPECT_TRUE(m.AcceptString("<function=calc>1"));
  EXPECT_FALSE(m.AcceptString("a"));
  EXPECT_FALSE(m.AcceptToken(vocab->eos()));
}

// One trigger (a special token) and one tool whose body is a grammar: Llama-3.1's
// <|python_tag|> code <|eom_id|>. Masks equal brute force along random tokenisations of text and
// body; the call reads back as the tool with the body's text.
TEST(StructuredGrammarTool, SoleGrammarToolBehindASpecialTrigger) {
  auto vocab = Vocab("llama3");
  GrammarCompiler compiler(vocab);
  auto format = LoadFormat("llama3");
  ASSERT_TRUE(format.ok()) << format.status().ToString();
  auto tools = ParseTools(
      R"([{"name": "python", "grammar": "root ::= \"print(\" num (\"+\" num)* \")\"\nnum ::= [0-9]{1,3}"}])");
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();
  auto g = CompileStructured(compiler, *format, *tools);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const TokenId tag = SpecialId(format->trigger, *vocab);
  const TokenId eom = SpecialId(format->end, *vocab);
  ASSERT_NE(tag, kNoToken);
  ASSERT_NE(eom, kNoToken);
  std::mt19937_64 rng(9);
  testing::Mask fast(BitmaskWords(vocab->logits_width())), slow;
  for (const std::string body : {"print(1+22)", "print(7)", "print(100+2+35)"}) {
    Matcher m(*g);
    std::vector<TokenId> ids;
    auto follow = [&](const std::string& text) {
      std::size_t off = 0;
      while (off < text.size()) {
        m.FillNextTokenBitmask(fast);
        slow = testing::BruteForceMaskFor(m, fast);
        ASSERT_EQ(fast, slow) << "after '" << text.substr(0, off) << "'";
        std::vector<TokenId> cands;
        for (TokenId id : testing::AllowedIds(slow)) {
          if (id >= vocab->size() || vocab->IsSpecial(id)) continue;
          std::string_view b = vocab->TokenBytes(id);
          if (!b.empty() && std::string_view(text).substr(off, b.size()) == b) cands.push_back(id);
        }
        ASSERT_FALSE(cands.empty()) << "rejected after '" << text.substr(0, off) << "'";
        const TokenId pick = cands[rng() % cands.size()];
        ASSERT_TRUE(m.AcceptToken(pick));
        ids.push_back(pick);
        off += vocab->TokenBytes(pick).size();
      }
    };
    follow("Let me compute that. ");
    m.FillNextTokenBitmask(fast);
    EXPECT_TRUE((fast[tag >> 5] >> (tag & 31)) & 1);
    ASSERT_TRUE(m.AcceptToken(tag));
    ids.push_back(tag);
    follow(body);
    m.FillNextTokenBitmask(fast);
    slow = testing::BruteForceMaskFor(m, fast);
    ASSERT_EQ(fast, slow) << "before the end marker";
    ASSERT_TRUE(m.AcceptToken(eom));
    ids.push_back(eom);
    ASSERT_TRUE(m.AcceptToken(vocab->eos()));
    auto calls = ParseToolCalls(*format, *vocab, ids, *tools);
    ASSERT_TRUE(calls.ok()) << calls.status().ToString();
    ASSERT_EQ(calls->size(), 1u);
    EXPECT_EQ((*calls)[0].name, "python");
    EXPECT_EQ(nlohmann::json::parse((*calls)[0].arguments_json).get<std::string>(), body);
  }
  // Not a sentence of the body's grammar.
  Matcher m(*g);
  ASSERT_TRUE(m.AcceptToken(tag));
  EXPECT_TRUE(m.AcceptString("print(1"));
  EXPECT_FALSE(m.AcceptString("x"));
  EXPECT_FALSE(m.AcceptToken(eom));
}

TEST(StructuredGrammarTool, Errors) {
  auto vocab = Vocab("llama3");
  GrammarCompiler compiler(vocab);
  auto qwen = LoadFormat("qwen");
  auto func = LoadFormat("llama3-function");
  ASSERT_TRUE(qwen.ok() && func.ok());
  auto tools = ParseTools(R"([{"name": "calc", "grammar": "root ::= [0-9]+"}])");
  ASSERT_TRUE(tools.ok());
  // A grammar body needs the trigger to name the tool: a template, or the only tool.
  EXPECT_TRUE(CompileStructured(compiler, *qwen, *tools).ok());
  auto two = ParseTools(R"([{"name": "calc", "grammar": "root ::= [0-9]+"},
      {"name": "w", "parameters": {"type": "object"}}])");
  ASSERT_TRUE(two.ok());
  auto g = CompileStructured(compiler, *qwen, *two);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("grammar body"), std::string::npos) << g.status().ToString();
  // A grammar that does not parse names the tool and its line:column.
  auto bad = ParseTools(R"([{"name": "calc", "grammar": "root ::= [0-9"}])");
  ASSERT_TRUE(bad.ok());
  g = CompileStructured(compiler, *func, *bad);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'calc'"), std::string::npos) << g.status().ToString();
  EXPECT_FALSE(g.status().location().empty()) << g.status().ToString();
  // An empty grammar string is a tools-file error at its pointer.
  auto empty = ParseTools(R"([{"name": "calc", "grammar": ""}])");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().location(), "/0/grammar");
}

}  // namespace
}  // namespace lockstep
