// Triggered constraints (lockstep/structured.h): format files, tools files, the structured-section
// grammar built as IR around a JSON Schema body, and an independent parser of generated calls.
// This file's external interface is LoadFormat, ParseFormat, ParseTools, CompileStructured,
// ParseToolCalls and ToolCallsJson; nlohmann exceptions stay inside it.
#include "lockstep/structured.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>

#include "automata/regex/regex_compiler.h"
#include "automata/cfg/cfg_grammar.h"
#include "automata/regex/dfa_builder.h"
#include "automata/schema/ir_nodes.h"
#include "automata/schema/schema_compile.h"
#include "grammar/base/text_place.h"
#include "grammar/ir/grammar_ir.h"
#include "grammar/schema/json_schema.h"

namespace lockstep {
namespace {

using grammar::Expr;
using grammar::ExprId;
using grammar::ExprKind;
using grammar::RuleId;
using ojson = nlohmann::ordered_json;

const char* const kBundled[] = {"qwen", "hermes", "llama3", "llama3-function", "mistral",
                                 "think-json"};

// ---- format files ----------------------------------------------------------------------------

constexpr std::int64_t kMaxFreeTextBytes = 100000;

Status FormatError(std::string_view origin, const std::string& pointer, const std::string& msg) {
  return Status(StatusCode::kInvalidGrammar, "format: " + msg,
                std::string(origin) + "#" + pointer);
}

Result<StructuredMarker> ParseMarker(const ojson& j, std::string_view origin,
                                     const std::string& ptr, bool allow_template = false) {
  StructuredMarker m;
  if (j.is_null()) return m;
  if (!j.is_object() || j.size() != 1)
    return FormatError(origin, ptr,
                       "a marker is null, {\"text\": \"...\"} or {\"special\": name | [names]}");
  if (j.contains("text_template")) {
    if (!allow_template)
      return FormatError(origin, ptr + "/text_template", "only a trigger can be a template");
    const ojson& t = j["text_template"];
    const std::string text = t.is_string() ? t.get<std::string>() : std::string();
    const std::size_t at = text.find("{name}");
    if (at == std::string::npos || text.find("{name}", at + 1) != std::string::npos)
      return FormatError(origin, ptr + "/text_template",
                         "a trigger template is a string holding \"{name}\" once");
    m.kind = StructuredMarker::Kind::kTemplate;
    m.text = text;
    return m;
  }
  if (j.contains("text")) {
    if (!j["text"].is_string() || j["text"].get<std::string>().empty())
      return FormatError(origin, ptr + "/text", "marker text must be a non-empty string");
    m.kind = StructuredMarker::Kind::kText;
    m.text = j["text"].get<std::string>();
    return m;
  }
  if (j.contains("special")) {
    const ojson& s = j["special"];
    m.kind = StructuredMarker::Kind::kSpecial;
    if (s.is_string()) {
      m.special.push_back(s.get<std::string>());
    } else if (s.is_array() && !s.empty()) {
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (!s[i].is_string())
          return FormatError(origin, ptr + "/special/" + std::to_string(i),
                             "special token names are strings");
        m.special.push_back(s[i].get<std::string>());
      }
    } else {
      return FormatError(origin, ptr + "/special", "special: a name or a non-empty list of names");
    }
    for (const auto& n : m.special)
      if (n.empty()) return FormatError(origin, ptr + "/special", "empty special token name");
    return m;
  }
  return FormatError(origin, ptr, "a marker has one key, \"text\" or \"special\"");
}

Result<std::int32_t> ParseCount(const ojson& j, std::string_view origin, const std::string& ptr) {
  if (!j.is_number_integer() || j.get<long long>() < 0 || j.get<long long>() > 1000)
    return FormatError(origin, ptr, "must be an integer in [0, 1000]");
  return static_cast<std::int32_t>(j.get<long long>());
}

Result<StructuredFormat> ParseFormatJson(const ojson& j, std::string_view origin) {
  if (!j.is_object()) return FormatError(origin, "", "a format is a JSON object");
  static const std::set<std::string> kKeys = {"name",      "source",        "notes",
                                              "reasoning", "free_text",     "trigger",
                                              "end",       "body",          "arguments_key",
                                              "min_calls", "max_calls",     "tools"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kKeys.count(it.key()))
      return FormatError(origin, "/" + it.key(), "unknown key '" + it.key() + "'");
  StructuredFormat f;
  f.origin = std::string(origin);
  if (!j.contains("name") || !j["name"].is_string())
    return FormatError(origin, "/name", "\"name\" (a string) is required");
  f.name = j["name"].get<std::string>();
  if (j.contains("source")) {
    if (!j["source"].is_string()) return FormatError(origin, "/source", "must be a string");
    f.source = j["source"].get<std::string>();
  }
  if (j.contains("reasoning") && !j["reasoning"].is_null()) {
    const ojson& r = j["reasoning"];
    if (!r.is_object()) return FormatError(origin, "/reasoning", "must be an object or null");
    for (auto it = r.begin(); it != r.end(); ++it)
      if (it.key() != "start" && it.key() != "end" && it.key() != "required")
        return FormatError(origin, "/reasoning/" + it.key(), "unknown key '" + it.key() + "'");
    f.reasoning = true;
    if (r.contains("start")) {
      LOCKSTEP_ASSIGN_OR_RETURN(f.reasoning_start,
                                ParseMarker(r["start"], origin, "/reasoning/start"));
    }
    if (!r.contains("end"))
      return FormatError(origin, "/reasoning/end", "a reasoning section needs an end marker");
    LOCKSTEP_ASSIGN_OR_RETURN(f.reasoning_end, ParseMarker(r["end"], origin, "/reasoning/end"));
    if (f.reasoning_end.none())
      return FormatError(origin, "/reasoning/end", "a reasoning section needs an end marker");
    if (r.contains("required")) {
      if (!r["required"].is_boolean())
        return FormatError(origin, "/reasoning/required", "must be a boolean");
      f.reasoning_required = r["required"].get<bool>();
    }
    if (f.reasoning_start.none()) f.reasoning_required = true;
  }
  if (j.contains("free_text")) {
    const ojson& ft = j["free_text"];
    if (ft.is_boolean()) {
      f.free_text = ft.get<bool>();
    } else if (ft.is_object()) {
      f.free_text = true;
      for (auto it = ft.begin(); it != ft.end(); ++it)
        if (it.key() != "max_bytes" && it.key() != "regex")
          return FormatError(origin, "/free_text/" + it.key(), "unknown key '" + it.key() + "'");
      if (ft.contains("max_bytes")) {
        const ojson& n = ft["max_bytes"];
        if (!n.is_number_integer() || n.get<long long>() < 1 ||
            n.get<long long>() > kMaxFreeTextBytes)
          return FormatError(origin, "/free_text/max_bytes",
                             "must be an integer in [1, " + std::to_string(kMaxFreeTextBytes) + "]");
        f.free_text_max_bytes = static_cast<std::int32_t>(n.get<long long>());
      }
      if (ft.contains("regex")) {
        if (!ft["regex"].is_string())
          return FormatError(origin, "/free_text/regex", "must be a string (a regex)");
        f.free_text_regex = ft["regex"].get<std::string>();
        auto r = CompileRegexToDfa(f.free_text_regex);
        if (!r.ok())
          return FormatError(origin, "/free_text/regex",
                             "bad regex: " + r.status().message() +
                                 (r.status().location().empty()
                                      ? std::string()
                                      : " (at " + r.status().location() + ")"));
      }
    } else {
      return FormatError(origin, "/free_text",
                         "a boolean or {\"max_bytes\": N, \"regex\": \"...\"}");
    }
  }
  if (j.contains("trigger")) {
    LOCKSTEP_ASSIGN_OR_RETURN(f.trigger, ParseMarker(j["trigger"], origin, "/trigger", true));
  }
  const bool per_tool = f.trigger.kind == StructuredMarker::Kind::kTemplate;
  if (per_tool) f.body = StructuredBody::kArguments;
  if (j.contains("end")) {
    LOCKSTEP_ASSIGN_OR_RETURN(f.end, ParseMarker(j["end"], origin, "/end"));
  }
  if (f.free_text && f.trigger.none())
    return FormatError(origin, "/trigger", "free text needs a trigger to end it");
  if (j.contains("body")) {
    if (j["body"] == "name_field") {
      f.body = StructuredBody::kNameField;
    } else if (j["body"] == "array") {
      f.body = StructuredBody::kArray;
    } else if (j["body"] == "arguments") {
      f.body = StructuredBody::kArguments;
    } else {
      return FormatError(origin, "/body", "body is \"name_field\", \"array\" or \"arguments\"");
    }
    if (per_tool != (f.body == StructuredBody::kArguments))
      return FormatError(origin, "/body",
                         "a trigger template (the trigger names the tool) goes with body "
                         "\"arguments\", and only with it");
  }
  if (j.contains("tools")) {
    const ojson& t = j["tools"];
    if (!t.is_array() || t.empty())
      return FormatError(origin, "/tools", "a non-empty array of tool names");
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_string() || t[i].get<std::string>().empty())
        return FormatError(origin, "/tools/" + std::to_string(i), "a tool name (a string)");
      f.tools.push_back(t[i].get<std::string>());
    }
  }
  if (j.contains("arguments_key")) {
    if (!j["arguments_key"].is_string() || j["arguments_key"].get<std::string>().empty() ||
        j["arguments_key"] == "name")
      return FormatError(origin, "/arguments_key", "a non-empty string other than \"name\"");
    f.arguments_key = j["arguments_key"].get<std::string>();
  }
  if (j.contains("min_calls")) {
    LOCKSTEP_ASSIGN_OR_RETURN(f.min_calls, ParseCount(j["min_calls"], origin, "/min_calls"));
  }
  if (j.contains("max_calls")) {
    LOCKSTEP_ASSIGN_OR_RETURN(f.max_calls, ParseCount(j["max_calls"], origin, "/max_calls"));
  }
  if (f.max_calls < 1) return FormatError(origin, "/max_calls", "max_calls must be at least 1");
  if (f.min_calls > f.max_calls)
    return FormatError(origin, "/min_calls", "min_calls exceeds max_calls");
  if (f.end.none() && f.free_text && f.max_calls > 1 && f.body != StructuredBody::kArray)
    return FormatError(origin, "/end", "without an end marker only one call can follow free text");
  return f;
}

// ---- grammar construction --------------------------------------------------------------------

// Strings that do not contain `w` (KMP automaton; every live state accepting). Minimal: from
// state j the shortest string to the dead state is w[j..], distinct for each j.
std::shared_ptr<const ByteDfa> NotContaining(std::string_view w) {
  const std::size_t m = w.size();
  std::vector<std::size_t> fail(m, 0);
  for (std::size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && w[i] != w[k]) k = fail[k - 1];
    if (w[i] == w[k]) ++k;
    fail[i] = k;
  }
  auto dfa = std::make_shared<ByteDfa>();
  std::array<int, 256> cls{};
  int num_classes = 1;  // class 0: bytes not in w
  for (unsigned char c : w)
    if (cls[c] == 0) cls[c] = num_classes++;
  for (int b = 0; b < 256; ++b) dfa->byte_class[b] = static_cast<std::uint8_t>(cls[b]);
  dfa->num_states = static_cast<std::int32_t>(m + 1);
  dfa->num_classes = num_classes;
  dfa->next.assign(static_cast<std::size_t>(dfa->num_states) * num_classes, ByteDfa::kDead);
  std::vector<int> rep(num_classes, -1);  // a byte of each class
  for (int b = 255; b >= 0; --b) rep[cls[b]] = b;
  for (std::size_t j = 0; j < m; ++j) {
    for (int c = 0; c < num_classes; ++c) {
      if (rep[c] < 0) continue;
      const char ch = static_cast<char>(rep[c]);
      std::size_t k = j;
      while (k > 0 && w[k] != ch) k = fail[k - 1];
      if (w[k] == ch) ++k;
      dfa->next[(j + 1) * num_classes + c] =
          k == m ? ByteDfa::kDead : static_cast<StateId>(k + 1);
    }
  }
  dfa->start = 1;
  dfa->accept_begin = 1;
  return dfa;
}

std::shared_ptr<const ByteDfa> AnyBytes() {
  auto dfa = std::make_shared<ByteDfa>();
  dfa->num_states = 2;
  dfa->num_classes = 1;
  dfa->next = {ByteDfa::kDead, 1};
  dfa->start = 1;
  dfa->accept_begin = 1;
  return dfa;
}

// Free text: the strings that contain none of `words` (an Aho-Corasick automaton), fully match
// `regex` (if given) and have at most `max_bytes` bytes (if >= 0), as one product automaton of
// (Aho-Corasick node, regex state, length) built breadth-first and minimised. Exact; its size is
// about (sum of |word|) x |regex| x (max_bytes + 1) before minimisation, within `max_states`.
Result<std::shared_ptr<const ByteDfa>> FreeTextDfa(const std::vector<std::string>& words,
                                                   const ByteDfa* regex, std::int32_t max_bytes,
                                                   std::int32_t max_states) {
  // Trie with full goto function; bad[n]: the text read so far ends with a word.
  std::vector<std::array<std::int32_t, 256>> go(1);
  go[0].fill(-1);
  std::vector<std::uint8_t> bad(1, 0);
  std::array<bool, 256> in_word{};
  for (const std::string& w : words) {
    std::int32_t n = 0;
    for (unsigned char c : w) {
      in_word[c] = true;
      if (go[n][c] < 0) {
        go[n][c] = static_cast<std::int32_t>(go.size());
        go.emplace_back();
        go.back().fill(-1);
        bad.push_back(0);
      }
      n = go[n][c];
    }
    bad[n] = 1;
  }
  {
    std::vector<std::int32_t> fail(go.size(), 0), queue;
    for (int c = 0; c < 256; ++c) {
      if (go[0][c] < 0) {
        go[0][c] = 0;
      } else {
        queue.push_back(go[0][c]);
      }
    }
    for (std::size_t qi = 0; qi < queue.size(); ++qi) {
      const std::int32_t n = queue[qi];
      bad[n] = bad[n] | bad[fail[n]];
      for (int c = 0; c < 256; ++c) {
        const std::int32_t t = go[n][c];
        if (t < 0) {
          go[n][c] = go[fail[n]][c];
        } else {
          fail[t] = go[fail[n]][c];
          queue.push_back(t);
        }
      }
    }
  }
  // Byte classes: bytes of the words stay apart; the others follow the regex's classes.
  SubsetDfa d;
  std::map<std::pair<int, int>, int> class_of;
  std::vector<int> rep;
  for (int b = 0; b < 256; ++b) {
    std::pair<int, int> key{regex ? regex->byte_class[b] : 0, in_word[b] ? b : -1};
    auto [it, fresh] = class_of.emplace(key, static_cast<int>(rep.size()));
    if (fresh) rep.push_back(b);
    d.byte_class[b] = static_cast<std::uint8_t>(it->second);
  }
  if (rep.size() > 256) return Status(StatusCode::kInternal, "free text: too many byte classes");
  d.num_classes = static_cast<std::int32_t>(rep.size());
  const std::int64_t nr = regex ? regex->num_states : 1;
  const std::int64_t nl = max_bytes >= 0 ? max_bytes + 1 : 1;
  auto key = [&](std::int64_t a, std::int64_t r, std::int64_t l) { return (a * nr + r) * nl + l; };
  std::unordered_map<std::int64_t, StateId> id;
  std::vector<std::array<std::int64_t, 3>> states(1);  // 0: dead
  auto intern = [&](std::int64_t a, std::int64_t r, std::int64_t l) -> StateId {
    if (bad[a] || (regex && r == ByteDfa::kDead) || (max_bytes >= 0 && l > max_bytes)) return 0;
    auto [it, fresh] = id.emplace(key(a, r, l), static_cast<StateId>(states.size()));
    if (fresh) states.push_back({a, r, l});
    return it->second;
  };
  d.start = intern(0, regex ? regex->start : 0, 0);
  for (std::size_t s = 1; s < states.size(); ++s) {
    if (static_cast<std::int64_t>(states.size()) > max_states)
      return Status(StatusCode::kResourceLimit,
                    "free text automaton exceeds max_dfa_states (" + std::to_string(max_states) +
                        "); lower free_text max_bytes");
    const auto [a, r, l] = states[s];
    for (int c = 0; c < d.num_classes; ++c) {
      const int b = rep[c];
      const StateId t = intern(go[a][b], regex ? regex->Step(static_cast<StateId>(r), b) : 0,
                               max_bytes >= 0 ? l + 1 : 0);
      d.next.push_back(t);
    }
  }
  d.num_states = static_cast<std::int32_t>(states.size());
  d.next.insert(d.next.begin(), d.num_classes, 0);  // the dead state's row
  d.accepting.assign(d.num_states, 0);
  for (std::size_t s = 1; s < states.size(); ++s)
    d.accepting[s] = !regex || regex->IsAccepting(static_cast<StateId>(states[s][1]));
  ByteDfa out = MinimizeDfa(d);
  if (out.start == ByteDfa::kDead)
    return Status(StatusCode::kInvalidArgument,
                  "free text: no text (within max_bytes) matches the free_text regex without "
                  "containing a trigger");
  return std::make_shared<const ByteDfa>(std::move(out));
}

// The special token a marker names in `vocab` (the first of its names present).
Result<TokenId> ResolveSpecial(const StructuredMarker& m, const Vocabulary& vocab,
                               std::string_view role) {
  for (const auto& n : m.special) {
    TokenId id = vocab.FindToken(n);
    if (id != kNoToken && vocab.IsSpecial(id)) return id;
  }
  std::string names;
  for (const auto& n : m.special) names += (names.empty() ? "'" : ", '") + n + "'";
  return Status(StatusCode::kInvalidArgument,
                std::string(role) + ": special token " + names +
                    " is not a special token of this vocabulary; the marker can never appear",
                std::string(role));
}

class Builder {
 public:
  Builder(const Vocabulary& vocab, grammar::Grammar& g) : vocab_(vocab), g_(g) {}

  ExprId Add(Expr e) { return g_.Add(std::move(e)); }
  ExprId Seq(std::vector<ExprId> xs) {
    return Add(schema::ListNode(ExprKind::kSequence, std::move(xs)));
  }
  ExprId Repeat(ExprId x, std::int32_t lo, std::int32_t hi) {
    return Add(schema::RepeatNode(x, lo, hi));
  }
  ExprId Dfa(std::shared_ptr<const ByteDfa> d) { return Add(schema::ByteDfaNode(std::move(d))); }
  ExprId Ref(RuleId r) { return Add(schema::RuleRefNode(r)); }
  Result<ExprId> Marker(const StructuredMarker& m, std::string_view role) {
    Expr e;
    if (m.kind == StructuredMarker::Kind::kText) {
      LOCKSTEP_RETURN_IF_ERROR(CheckText(m.text, role));
      e.kind = ExprKind::kLiteral;
      e.text = m.text;
    } else if (m.kind == StructuredMarker::Kind::kSpecial) {
      LOCKSTEP_ASSIGN_OR_RETURN(TokenId id, ResolveSpecial(m, vocab_, role));
      e.kind = ExprKind::kSpecialToken;
      e.token_id = id;
      e.text = std::string(vocab_.TokenText(id));
    } else {
      e.kind = ExprKind::kEmpty;
    }
    return Add(std::move(e));
  }
  // Text the marker `m` ends: never containing a text marker; any bytes before a special one.
  ExprId TextUntil(const StructuredMarker& m) {
    return Dfa(m.kind == StructuredMarker::Kind::kText ? NotContaining(m.text) : AnyBytes());
  }
  // Appends `in`'s rules and expressions; returns its root's new id.
  RuleId Splice(const grammar::Grammar& in, const std::string& prefix) {
    const ExprId eoff = static_cast<ExprId>(g_.exprs.size());
    const RuleId roff = static_cast<RuleId>(g_.rules.size());
    for (Expr e : in.exprs) {
      for (auto& c : e.children) c += eoff;
      if (e.kind == ExprKind::kRuleRef) e.rule += roff;
      g_.exprs.push_back(std::move(e));
    }
    for (grammar::Rule r : in.rules) {
      r.name = prefix + r.name;
      r.body += eoff;
      g_.rules.push_back(std::move(r));
    }
    return in.root + roff;
  }

 private:
  // A text marker can appear only if every byte of it is some token's.
  Status CheckText(const std::string& text, std::string_view role) {
    if (emitted_.empty()) {
      emitted_.assign(256, false);
      for (TokenId t = 0; t < vocab_.size(); ++t)
        for (unsigned char c : vocab_.TokenBytes(t)) emitted_[c] = true;
    }
    for (unsigned char c : text) {
      if (!emitted_[c])
        return Status(StatusCode::kInvalidArgument,
                      std::string(role) + " '" + text + "' can never appear: no token emits byte " +
                          std::to_string(c),
                      std::string(role));
    }
    return Status::Ok();
  }

  const Vocabulary& vocab_;
  grammar::Grammar& g_;
  std::vector<bool> emitted_;
};

std::string ToolOrigin(const ToolSpec& t) { return "tool '" + t.name + "'"; }

// The body's JSON Schema text: one call object (anyOf by name), or an array of them.
Result<std::string> BodySchema(const StructuredFormat& f, std::span<const ToolSpec> tools) {
  ojson alts = ojson::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const ToolSpec& t = tools[i];
    ojson s = ojson::parse(t.schema_json, nullptr, false);
    if (s.is_discarded() || !(s.is_object() || s.is_boolean()))
      return Status(StatusCode::kInvalidSchema,
                    ToolOrigin(t) + ": the arguments schema is not a JSON object", "/");
    if (s.is_object()) {
      s.erase("$schema");
      // Own resource, so that its "#/$defs/..." references resolve inside it.
      if ((s.contains("$defs") || s.contains("definitions")) && !s.contains("$id"))
        s["$id"] = "urn:lockstep:tool:" + std::to_string(i);
    }
    ojson call = {{"type", "object"},
                  {"properties", {{"name", {{"const", t.name}}}, {f.arguments_key, s}}},
                  {"required", ojson::array({"name", f.arguments_key})},
                  {"additionalProperties", false}};
    alts.push_back(std::move(call));
  }
  ojson body = alts.size() == 1 ? alts[0] : ojson{{"anyOf", alts}};
  if (f.body == StructuredBody::kArray) {
    body = ojson{{"type", "array"},
                 {"items", body},
                 {"minItems", 1},
                 {"maxItems", f.max_calls}};
  }
  return body.dump();
}

Result<schema::SchemaGrammar> CompileBody(std::string_view text, const CompileOptions& options,
                                          const CompileDeadline& deadline) {
  auto s = schema::Schema::Load(text, schema::WithDefaultDraft(options.schema_default_draft));
  if (!s.ok()) return s.status();
  return schema::CompileSchemaToGrammar(**s, schema::SchemaOptionsFrom(options, text, deadline));
}

}  // namespace

std::vector<std::string> BundledFormatNames() { return {std::begin(kBundled), std::end(kBundled)}; }

Result<StructuredFormat> ParseFormat(std::string_view json_text, std::string_view origin) {
  try {
    ojson j = ojson::parse(json_text.begin(), json_text.end());
    return ParseFormatJson(j, origin);
  } catch (const ojson::parse_error& e) {
    std::size_t at = e.byte > 0 ? e.byte - 1 : 0;
    return Status(StatusCode::kInvalidGrammar, std::string("format is not valid JSON: ") + e.what(),
                  std::string(origin) + ":" + LineColumn(json_text, at));
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidGrammar, std::string("format: ") + e.what(),
                  std::string(origin));
  }
}

Result<StructuredFormat> LoadFormat(std::string_view name_or_path) {
  std::string path(name_or_path);
  const bool bundled =
      std::find(std::begin(kBundled), std::end(kBundled), name_or_path) != std::end(kBundled);
  if (bundled) {
    path = DataDirectory() + "/formats/" + path + ".json";
  } else if (path.find('/') == std::string::npos && path.find(".json") == std::string::npos) {
    std::string known;
    for (const char* k : kBundled) known += (known.empty() ? "" : ", ") + std::string(k);
    return Status(StatusCode::kInvalidArgument,
                  "unknown format '" + path + "' (known: " + known + "; or a path to a .json file)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, "cannot read format file", path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseFormat(text, path);
}

Result<std::vector<ToolSpec>> ParseTools(std::string_view json_text) {
  try {
    ojson j = ojson::parse(json_text.begin(), json_text.end(), nullptr, false);
    if (j.is_discarded())
      return Status(StatusCode::kInvalidArgument, "tools file is not valid JSON", "/");
    if (j.is_object()) j = ojson::array({j});
    if (!j.is_array() || j.empty())
      return Status(StatusCode::kInvalidArgument, "tools: a non-empty JSON array of tools", "/");
    std::vector<ToolSpec> out;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < j.size(); ++i) {
      const std::string ptr = "/" + std::to_string(i);
      const ojson* t = &j[i];
      if (!t->is_object())
        return Status(StatusCode::kInvalidArgument, "tools: each tool is an object", ptr);
      std::string tptr = ptr;
      if (t->contains("function") && (*t)["function"].is_object()) {
        t = &(*t)["function"];
        tptr += "/function";
      }
      if (!t->contains("name") || !(*t)["name"].is_string() ||
          (*t)["name"].get<std::string>().empty())
        return Status(StatusCode::kInvalidArgument, "tools: a tool needs a non-empty \"name\"",
                      tptr + "/name");
      ToolSpec spec;
      spec.name = (*t)["name"].get<std::string>();
      if (!seen.insert(spec.name).second)
        return Status(StatusCode::kInvalidArgument, "tools: duplicate tool name '" + spec.name + "'",
                      tptr + "/name");
      if (t->contains("grammar")) {
        if (!(*t)["grammar"].is_string() || (*t)["grammar"].get<std::string>().empty())
          return Status(StatusCode::kInvalidArgument,
                        "tools: the grammar of '" + spec.name + "' is not a non-empty string",
                        tptr + "/grammar");
        spec.grammar = (*t)["grammar"].get<std::string>();
        out.push_back(std::move(spec));
        continue;
      }
      const ojson* schema = nullptr;
      for (const char* key : {"parameters", "schema", "arguments"}) {
        if (t->contains(key)) {
          schema = &(*t)[key];
          spec.origin = tptr + "/" + key;
          break;
        }
      }
      if (schema == nullptr) {
        spec.schema_json = "{\"type\":\"object\"}";
      } else if (!schema->is_object()) {
        return Status(StatusCode::kInvalidArgument,
                      "tools: the schema of '" + spec.name + "' is not a JSON object", tptr);
      } else {
        spec.schema_json = schema->dump();
      }
      out.push_back(std::move(spec));
    }
    return out;
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidArgument, std::string("tools: ") + e.what(), "/");
  }
}

namespace {

// What CompileStructured's steps share: the tools the format uses, how a call names its tool,
// each tool's body compiled alone and the text triggers.
struct SectionParts {
  std::vector<ToolSpec> used;
  bool per_tool = false;      // a trigger template: one text trigger per tool
  bool sole_grammar = false;  // one trigger, and the only tool has a grammar body
  std::vector<grammar::Grammar> alone;
  std::vector<std::string> words;  // the text triggers, which free text never contains
};

Status CheckToolNames(std::span<const ToolSpec> tools) {
  if (tools.empty()) return Status(StatusCode::kInvalidArgument, "no tools given");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    if (tools[i].name.empty())
      return Status(StatusCode::kInvalidArgument, "tool " + std::to_string(i) + " has no name");
    if (!seen.insert(tools[i].name).second)
      return Status(StatusCode::kInvalidArgument, "duplicate tool name '" + tools[i].name + "'");
  }
  return Status::Ok();
}

// The tools the format allows (all by default), in the format's order.
Result<std::vector<ToolSpec>> UsedTools(const StructuredFormat& f,
                                        std::span<const ToolSpec> tools) {
  std::vector<ToolSpec> used;
  if (f.tools.empty()) {
    used.assign(tools.begin(), tools.end());
    return used;
  }
  std::set<std::string> taken;
  for (std::size_t i = 0; i < f.tools.size(); ++i) {
    auto it = std::find_if(tools.begin(), tools.end(),
                           [&](const ToolSpec& t) { return t.name == f.tools[i]; });
    if (it == tools.end())
      return Status(StatusCode::kInvalidArgument,
                    "unknown tool name '" + f.tools[i] + "': format '" + f.name +
                        "' allows it but the tools do not define it",
                    f.origin + "#/tools/" + std::to_string(i));
    if (taken.insert(it->name).second) used.push_back(*it);
  }
  return used;
}

// A JSON Pointer inside tool `t`'s schema, under the tool's origin when it has one.
std::string InTool(const ToolSpec& t, const std::string& pointer) {
  if (t.origin.empty() || !(pointer.empty() || pointer[0] == '/')) return pointer;
  return t.origin + pointer;
}

// Each used tool's body alone: its grammar parsed, or its schema compiled alone so that an error
// points into the tool's own schema; a lenient schema's relaxed keywords go to `warnings`.
Result<std::vector<grammar::Grammar>> BodiesAlone(const StructuredFormat& f, const SectionParts& p,
                                                  const CompileOptions& options,
                                                  const CompileDeadline& deadline,
                                                  std::vector<std::string>* warnings) {
  std::vector<grammar::Grammar> alone;
  for (const ToolSpec& t : p.used) {
    if (!t.grammar.empty()) {
      // A grammar body is read back up to the end marker, so it needs one; and the trigger must
      // say which tool it is: a per-tool trigger, or one trigger and this as the only tool
      // (e.g. Llama-3.1's <|python_tag|> code <|eom_id|>).
      if ((!p.per_tool && !p.sole_grammar) || f.end.none() || f.trigger.none())
        return Status(StatusCode::kInvalidArgument,
                      "tool '" + t.name +
                          "' has a grammar body: the format needs a trigger "
                          "that names the tool (a template, or one trigger and this the only tool) "
                          "and an end marker",
                      f.origin + "#/trigger");
      grammar::GrammarParseOptions po;
      po.max_repeat = options.max_repeat;
      auto ir = grammar::ParseGrammar(t.grammar, grammar::GrammarSyntax::kAuto, po);
      if (!ir.ok()) {
        return Status(ir.status().code(), "tool '" + t.name + "': " + ir.status().message(),
                      ir.status().location());
      }
      alone.push_back(std::move(*ir));
      continue;
    }
    auto one = CompileBody(t.schema_json, options, deadline);
    if (!one.ok()) {
      return Status(one.status().code(), ToolOrigin(t) + ": " + one.status().message(),
                    InTool(t, one.status().location()));
    }
    for (const auto& r : one->relaxed) {
      if (warnings == nullptr) break;
      const std::string at = InTool(t, r.pointer);
      warnings->push_back(t.origin.empty() ? ToolOrigin(t) + ": " + (at.empty() ? "(root)" : at) +
                                                 ": " + r.message
                                           : at + ": " + r.message);
    }
    alone.push_back(std::move(one->grammar));
  }
  return alone;
}

// The text triggers (a template's, one per tool, none containing another; or the one text
// trigger), once the template is checked against the body.
Result<std::vector<std::string>> TriggerWords(const StructuredFormat& f, const SectionParts& p) {
  if (p.per_tool != (f.body == StructuredBody::kArguments))
    return Status(StatusCode::kInvalidArgument,
                  "a trigger template goes with body \"arguments\", and only with it",
                  f.origin + "#/body");
  if (p.per_tool && f.trigger.text.find("{name}") == std::string::npos)
    return Status(StatusCode::kInvalidArgument, "a trigger template holds \"{name}\"",
                  f.origin + "#/trigger/text_template");
  std::vector<std::string> words;
  if (p.per_tool) {
    for (const ToolSpec& t : p.used) {
      std::string w = f.trigger.text;
      w.replace(w.find("{name}"), 6, t.name);
      words.push_back(std::move(w));
    }
    for (std::size_t i = 0; i < words.size(); ++i)
      for (std::size_t k = 0; k < words.size(); ++k)
        if (i != k && words[k].find(words[i]) != std::string::npos)
          return Status(StatusCode::kInvalidArgument,
                        "trigger '" + words[k] + "' contains trigger '" + words[i] +
                            "': the calls would be ambiguous",
                        f.origin + "#/trigger");
  } else if (f.trigger.kind == StructuredMarker::Kind::kText) {
    words.push_back(f.trigger.text);
  }
  return words;
}

// One call: the trigger, the body, the end marker (`trig` and `end` built by the caller; with a
// template, each tool's own trigger before its body).
Result<ExprId> CallExpr(Builder& b, const StructuredFormat& f, const SectionParts& p, ExprId trig,
                        ExprId end, const CompileOptions& options,
                        const CompileDeadline& deadline) {
  if (p.per_tool) {
    std::vector<ExprId> calls;
    for (std::size_t i = 0; i < p.used.size(); ++i) {
      StructuredMarker m;
      m.kind = StructuredMarker::Kind::kText;
      m.text = p.words[i];
      LOCKSTEP_ASSIGN_OR_RETURN(ExprId t, b.Marker(m, "trigger"));
      std::string prefix = "t";  // (not "t" + ...: a false -Wrestrict in GCC 12's operator+)
      prefix += std::to_string(i) + "_";
      const RuleId body_root = b.Splice(p.alone[i], prefix);
      calls.push_back(b.Seq({t, b.Ref(body_root), end}));
    }
    return b.Add(schema::ListNode(ExprKind::kChoice, std::move(calls)));
  }
  if (p.sole_grammar) {
    const RuleId body_root = b.Splice(p.alone[0], "t0_");
    return b.Seq({trig, b.Ref(body_root), end});
  }
  LOCKSTEP_ASSIGN_OR_RETURN(std::string body_text, BodySchema(f, p.used));
  LOCKSTEP_ASSIGN_OR_RETURN(schema::SchemaGrammar body, CompileBody(body_text, options, deadline));
  const RuleId body_root = b.Splice(body.grammar, "call_");
  return b.Seq({trig, b.Ref(body_root), end});
}

// The free text between calls: never containing a text trigger, within the format's regex and
// byte limit.
Result<std::shared_ptr<const ByteDfa>> FreeTextAutomaton(const StructuredFormat& f,
                                                         const std::vector<std::string>& words,
                                                         const CompileOptions& options,
                                                         const CompileDeadline& deadline) {
  if (f.free_text_regex.empty() && f.free_text_max_bytes < 0 && words.size() <= 1) {
    return words.empty() ? AnyBytes() : NotContaining(words[0]);
  }
  RegexCompileOptions ro;
  ro.max_dfa_states = options.max_dfa_states;
  ro.max_nfa_states = options.max_nfa_states;
  ro.max_repeat = options.max_repeat;
  ro.deadline = deadline;
  std::optional<ByteDfa> regex;
  if (!f.free_text_regex.empty()) {
    auto r = CompileRegexToDfa(f.free_text_regex, ro);
    if (!r.ok())
      return Status(r.status().code(), "free_text regex: " + r.status().message(),
                    f.origin + "#/free_text/regex");
    regex = std::move(*r);
  }
  auto d =
      FreeTextDfa(words, regex ? &*regex : nullptr, f.free_text_max_bytes, options.max_dfa_states);
  if (!d.ok()) return Status(d.status().code(), d.status().message(), f.origin + "#/free_text");
  return *d;
}

// The structured section as IR: [reasoning] then the calls, between free text when the format
// has it.
Result<grammar::Grammar> SectionGrammar(const Vocabulary& vocab, const StructuredFormat& f,
                                        const SectionParts& p, const CompileOptions& options,
                                        const CompileDeadline& deadline) {
  grammar::Grammar g;
  g.rules.push_back({"root", -1, {}});
  g.root = 0;
  Builder b(vocab, g);
  std::vector<ExprId> root;
  if (f.reasoning) {
    LOCKSTEP_ASSIGN_OR_RETURN(ExprId start, b.Marker(f.reasoning_start, "reasoning start"));
    LOCKSTEP_ASSIGN_OR_RETURN(ExprId end, b.Marker(f.reasoning_end, "reasoning end"));
    ExprId r = b.Seq({start, b.TextUntil(f.reasoning_end), end});
    root.push_back(f.reasoning_required ? r : b.Repeat(r, 0, 1));
  }
  std::shared_ptr<const ByteDfa> free;
  if (f.free_text) {
    LOCKSTEP_ASSIGN_OR_RETURN(free, FreeTextAutomaton(f, p.words, options, deadline));
    root.push_back(b.Dfa(free));
  }
  if (f.max_calls == 0) {  // free text alone (a request's tool_choice "none")
    if (!f.free_text)
      return Status(StatusCode::kInvalidArgument, "no calls and no free text: nothing to generate",
                    f.origin + "#/max_calls");
    g.rules[0].body = b.Seq(std::move(root));
    return g;
  }
  ExprId trig = -1;
  if (!p.per_tool) {
    LOCKSTEP_ASSIGN_OR_RETURN(trig, b.Marker(f.trigger, "trigger"));
  }
  LOCKSTEP_ASSIGN_OR_RETURN(ExprId end, b.Marker(f.end, "end marker"));
  LOCKSTEP_ASSIGN_OR_RETURN(ExprId call, CallExpr(b, f, p, trig, end, options, deadline));
  // An array body holds every call of the turn behind one trigger.
  const bool one_section = f.body == StructuredBody::kArray || f.end.none();
  const std::int32_t lo = one_section ? std::min(f.min_calls, 1) : f.min_calls;
  const std::int32_t hi = one_section ? 1 : f.max_calls;
  if (f.free_text) {
    ExprId item = f.end.none() ? call : b.Seq({call, b.Dfa(free)});
    root.push_back(b.Repeat(item, lo, hi));
  } else {
    root.push_back(b.Repeat(call, lo, hi));
  }
  g.rules[0].body = b.Seq(std::move(root));
  return g;
}

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> CompileStructured(const GrammarCompiler& compiler,
                                                                 const StructuredFormat& f,
                                                                 std::span<const ToolSpec> tools,
                                                                 const CompileOptions& options,
                                                                 std::vector<std::string>* warnings) {
  // One deadline for the tools' schemas, the free text and the lowering.
  const CompileDeadline deadline(options.compile_timeout_ms, options.cancel);
  try {
    LOCKSTEP_RETURN_IF_ERROR(CheckToolNames(tools));
    SectionParts p;
    LOCKSTEP_ASSIGN_OR_RETURN(p.used, UsedTools(f, tools));
    p.per_tool = f.trigger.kind == StructuredMarker::Kind::kTemplate;
    p.sole_grammar = !p.per_tool && p.used.size() == 1 && !p.used[0].grammar.empty();
    if (f.max_calls > 0) {
      LOCKSTEP_ASSIGN_OR_RETURN(p.alone, BodiesAlone(f, p, options, deadline, warnings));
    }
    LOCKSTEP_ASSIGN_OR_RETURN(p.words, TriggerWords(f, p));
    LOCKSTEP_ASSIGN_OR_RETURN(grammar::Grammar g,
                              SectionGrammar(compiler.vocabulary(), f, p, options, deadline));
    CompileOptions lowered = options;
    if (lowered.max_unrolled_states <= 0) lowered.max_unrolled_states = 256;
    // As in GrammarCompiler::CompileSchema: a tool schema's counts are native counter rules, not
    // held to max_repeat; the format's own grammar and regex text were, by their parsers.
    lowered.max_repeat = std::numeric_limits<std::int32_t>::max();
    return CompileGrammarIrUnder(compiler, g, lowered, deadline);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory compiling the structured format");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("structured format: ") + e.what());
  }
}

// ---- the independent parser ------------------------------------------------------------------

namespace {

constexpr std::int32_t kSpecialBase = 256;

bool IsWs(std::int32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class CallParser {
 public:
  CallParser(const StructuredFormat& f, std::vector<std::int32_t> syms,
             std::vector<std::string> names)
      : f_(f), s_(std::move(syms)), names_(std::move(names)) {}

  Result<std::vector<std::int32_t>> MarkerSyms(const StructuredMarker& m, const Vocabulary& vocab,
                                               std::string_view role) {
    std::vector<std::int32_t> out;
    if (m.kind == StructuredMarker::Kind::kText) {
      for (unsigned char c : m.text) out.push_back(c);
    } else if (m.kind == StructuredMarker::Kind::kSpecial) {
      LOCKSTEP_ASSIGN_OR_RETURN(TokenId id, ResolveSpecial(m, vocab, role));
      out.push_back(kSpecialBase + id);
    }
    return out;
  }

  Status Error(std::size_t at, const std::string& msg) const {
    return Status(StatusCode::kInvalidArgument, "tool calls: " + msg,
                  "byte " + std::to_string(at));
  }

  std::size_t Find(const std::vector<std::int32_t>& w, std::size_t from) const {
    if (w.empty()) return from;
    auto it = std::search(s_.begin() + static_cast<std::ptrdiff_t>(from), s_.end(), w.begin(),
                          w.end());
    return static_cast<std::size_t>(it - s_.begin());
  }
  bool At(const std::vector<std::int32_t>& w, std::size_t pos) const {
    return pos + w.size() <= s_.size() && std::equal(w.begin(), w.end(), s_.begin() + pos);
  }
  Status NoSpecials(std::size_t from, std::size_t to, const char* what) const {
    for (std::size_t i = from; i < to; ++i)
      if (s_[i] >= kSpecialBase) return Error(i, std::string("a special token inside ") + what);
    return Status::Ok();
  }
  std::size_t SkipWs(std::size_t p) const {
    while (p < s_.size() && IsWs(s_[p])) ++p;
    return p;
  }
  // The end of the JSON object or array starting at `p` (brackets counted outside strings).
  Result<std::size_t> JsonExtent(std::size_t p) const {
    if (p >= s_.size() || (s_[p] != '{' && s_[p] != '['))
      return Error(p, "expected a JSON object or array");
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = p; i < s_.size(); ++i) {
      const std::int32_t c = s_[i];
      if (c >= kSpecialBase) return Error(i, "a special token inside a call body");
      if (in_string) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return Error(s_.size(), "unterminated call body");
  }

  // The next trigger at or after `from` (s_.size() if none); `len` its length and, per tool,
  // `name` the tool it names: one of names_, or without names what the template's "{name}"
  // matched (up to the first occurrence of the text after it).
  std::size_t NextTrigger(const std::vector<std::int32_t>& trig, std::size_t from,
                          std::size_t* len, std::string* name) const {
    if (f_.trigger.kind != StructuredMarker::Kind::kTemplate) {
      *len = trig.size();
      return Find(trig, from);
    }
    const std::string& tmpl = f_.trigger.text;
    const std::size_t at = tmpl.find("{name}");
    std::vector<std::int32_t> pre(tmpl.begin(), tmpl.begin() + at),
        post(tmpl.begin() + at + 6, tmpl.end());
    for (auto* v : {&pre, &post})
      for (auto& c : *v) c = static_cast<unsigned char>(c);
    if (!names_.empty()) {
      std::size_t best = s_.size();
      for (const std::string& n : names_) {
        std::vector<std::int32_t> w = pre;
        for (unsigned char c : n) w.push_back(c);
        w.insert(w.end(), post.begin(), post.end());
        const std::size_t p = Find(w, from);
        if (p < best || (p == best && p < s_.size() && w.size() > *len)) {
          best = p;
          *len = w.size();
          *name = n;
        }
      }
      return best;
    }
    for (std::size_t p = Find(pre, from); p < s_.size(); p = Find(pre, p + 1)) {
      const std::size_t n0 = p + pre.size();
      std::size_t n1 = post.empty() ? n0 : Find(post, n0);
      if (post.empty()) {
        while (n1 < s_.size() && s_[n1] < kSpecialBase &&
               (std::isalnum(s_[n1]) || s_[n1] == '_' || s_[n1] == '-' || s_[n1] == '.'))
          ++n1;
      }
      if (n1 >= s_.size() || n1 == n0) continue;
      bool plain = true;
      for (std::size_t i = n0; i < n1; ++i) plain = plain && s_[i] < kSpecialBase;
      if (!plain) continue;
      *name = std::string(s_.begin() + n0, s_.begin() + n1);
      *len = n1 + post.size() - p;
      return p;
    }
    return s_.size();
  }

  // The end of the JSON value starting at `p`: an object or array, else a string or a scalar.
  Result<std::size_t> ValueExtent(std::size_t p) const {
    if (p < s_.size() && s_[p] == '"') {
      for (std::size_t i = p + 1; i < s_.size(); ++i) {
        if (s_[i] >= kSpecialBase) break;
        if (s_[i] == '\\') {
          ++i;
        } else if (s_[i] == '"') {
          return i + 1;
        }
      }
      return Error(p, "unterminated string");
    }
    if (p < s_.size() && s_[p] != '{' && s_[p] != '[') {
      std::size_t i = p;
      while (i < s_.size() && s_[i] < kSpecialBase && (std::isalnum(s_[i]) || s_[i] == '-' ||
                                                        s_[i] == '+' || s_[i] == '.'))
        ++i;
      if (i == p) return Error(p, "expected a JSON value");
      return i;
    }
    return JsonExtent(p);
  }

  Status AddCall(const ojson& obj, std::size_t at, std::vector<ParsedCall>& out) const {
    if (!obj.is_object() || !obj.contains("name") || !obj["name"].is_string() ||
        !obj.contains(f_.arguments_key))
      return Error(at, "a call is an object with \"name\" and \"" + f_.arguments_key + "\"");
    out.push_back({obj["name"].get<std::string>(), obj[f_.arguments_key].dump()});
    return Status::Ok();
  }

  Result<std::vector<ParsedCall>> Run(const Vocabulary& vocab) {
    LOCKSTEP_ASSIGN_OR_RETURN(auto rstart, MarkerSyms(f_.reasoning_start, vocab, "reasoning start"));
    LOCKSTEP_ASSIGN_OR_RETURN(auto rend, MarkerSyms(f_.reasoning_end, vocab, "reasoning end"));
    LOCKSTEP_ASSIGN_OR_RETURN(auto trig, MarkerSyms(f_.trigger, vocab, "trigger"));
    LOCKSTEP_ASSIGN_OR_RETURN(auto end, MarkerSyms(f_.end, vocab, "end marker"));
    std::size_t pos = 0;
    if (f_.reasoning) {
      // Optional reasoning that never closes was free text that began like it.
      const std::size_t e = At(rstart, 0) ? Find(rend, rstart.size()) : s_.size();
      if (e < s_.size()) {
        LOCKSTEP_RETURN_IF_ERROR(NoSpecials(rstart.size(), e, "the reasoning"));
        pos = e + rend.size();
      } else if (f_.reasoning_required) {
        return Error(0, "the reasoning section is missing or not closed");
      }
    }
    std::vector<ParsedCall> calls;
    std::int32_t sections = 0;
    const bool one_section = f_.body == StructuredBody::kArray || f_.end.none();
    const std::int32_t max_sections = one_section ? 1 : f_.max_calls;
    while (true) {
      std::size_t t, tlen = 0;
      std::string tool;
      if (f_.free_text) {
        t = NextTrigger(trig, pos, &tlen, &tool);
        LOCKSTEP_RETURN_IF_ERROR(NoSpecials(pos, t, "free text"));
        if (t == s_.size()) break;
      } else {
        if (pos == s_.size()) break;
        t = NextTrigger(trig, pos, &tlen, &tool);
        if (t != pos) return Error(pos, "expected the trigger");
      }
      if (++sections > max_sections) return Error(t, "more calls than the format allows");
      if (f_.trigger.kind != StructuredMarker::Kind::kTemplate && sole_grammar_tool_) {
        tool = *grammar_tools_.begin();
      }
      if ((f_.body == StructuredBody::kArguments || sole_grammar_tool_) &&
          grammar_tools_.count(tool) != 0) {
        // A grammar body: its text, up to the first end marker.
        const std::size_t b = t + tlen;
        const std::size_t e = Find(end, b);
        if (end.empty() || e == s_.size()) return Error(b, "a call body without its end marker");
        LOCKSTEP_RETURN_IF_ERROR(NoSpecials(b, e, "a call body"));
        std::string text;
        for (std::size_t i = b; i < e; ++i) text.push_back(static_cast<char>(s_[i]));
        calls.push_back({tool, ojson(text).dump(-1, ' ', false,
                                                nlohmann::json::error_handler_t::replace)});
        pos = e + end.size();
        continue;
      }
      std::size_t b = SkipWs(t + tlen);
      LOCKSTEP_ASSIGN_OR_RETURN(std::size_t e, f_.body == StructuredBody::kArguments
                                                   ? ValueExtent(b)
                                                   : JsonExtent(b));
      std::string text(s_.begin() + b, s_.begin() + e);
      ojson j = ojson::parse(text, nullptr, false);
      if (j.is_discarded()) return Error(b, "a call body is not JSON");
      if (f_.body == StructuredBody::kArguments) {
        calls.push_back({tool, j.dump()});
      } else if (f_.body == StructuredBody::kArray) {
        if (!j.is_array() || j.empty()) return Error(b, "expected a non-empty array of calls");
        for (const auto& c : j) LOCKSTEP_RETURN_IF_ERROR(AddCall(c, b, calls));
      } else {
        LOCKSTEP_RETURN_IF_ERROR(AddCall(j, b, calls));
      }
      pos = SkipWs(e);
      if (f_.end.none()) {
        if (pos != s_.size()) return Error(pos, "text after the last call");
        break;
      }
      if (!At(end, pos)) return Error(pos, "expected the end marker");
      pos += end.size();
    }
    if (static_cast<std::int32_t>(calls.size()) < f_.min_calls)
      return Error(s_.size(), "fewer calls than the format requires");
    if (static_cast<std::int32_t>(calls.size()) > f_.max_calls)
      return Error(s_.size(), "more calls than the format allows");
    return calls;
  }

 private:
  const StructuredFormat& f_;
  std::vector<std::int32_t> s_;
  std::vector<std::string> names_;  // per-tool triggers: the tools' names (may be empty)

 public:
  std::set<std::string> grammar_tools_;  // tools whose body is a grammar (read as text)
  bool sole_grammar_tool_ = false;       // one trigger, and one tool: a grammar one
};

}  // namespace

std::string ToolCallsJson(std::span<const ParsedCall> calls) {
  ojson arr = ojson::array();
  for (const ParsedCall& c : calls) {
    ojson args = ojson::parse(c.arguments_json, nullptr, false);
    if (args.is_discarded()) args = c.arguments_json;
    arr.push_back({{"name", c.name}, {"arguments", std::move(args)}});
  }
  return arr.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

Result<std::vector<ParsedCall>> ParseToolCalls(const StructuredFormat& format,
                                               const Vocabulary& vocab,
                                               std::span<const TokenId> tokens,
                                               std::span<const ToolSpec> tools) {
  if (format.max_calls == 0) return std::vector<ParsedCall>{};  // no calls (tool_choice none)
  std::vector<std::int32_t> syms;
  for (TokenId t : tokens) {
    if (t < 0 || t >= vocab.size())
      return Status(StatusCode::kInvalidArgument, "token id out of range", std::to_string(t));
    if (vocab.IsSpecial(t)) {
      syms.push_back(kSpecialBase + t);
    } else {
      for (unsigned char c : vocab.TokenBytes(t)) syms.push_back(c);
    }
  }
  if (format.trigger.kind == StructuredMarker::Kind::kTemplate &&
      format.trigger.text.find("{name}") == std::string::npos)
    return Status(StatusCode::kInvalidArgument, "a trigger template holds \"{name}\"");
  try {
    std::vector<std::string> names = format.tools;
    if (names.empty())
      for (const ToolSpec& t : tools) names.push_back(t.name);
    CallParser p(format, std::move(syms), std::move(names));
    for (const ToolSpec& t : tools) {
      if (!t.grammar.empty()) p.grammar_tools_.insert(t.name);
    }
    p.sole_grammar_tool_ = format.trigger.kind != StructuredMarker::Kind::kTemplate &&
                           tools.size() == 1 && !tools[0].grammar.empty();
    return p.Run(vocab);
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidArgument, std::string("tool calls: ") + e.what());
  }
}

}  // namespace lockstep
