// Triggered constraints (lockstep/structured.h): format files, tools files, the structured-section
// grammar built as IR around a JSON Schema body, and an independent parser of generated calls.
// This file's external interface is LoadFormat, ParseFormat, ParseTools, CompileStructured and
// ParseToolCalls; nlohmann exceptions stay inside it.
#include "lockstep/structured.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "automata/byte_dfa.h"
#include "automata/schema_compile.h"
#include "grammar/grammar_ir.h"
#include "grammar/json_schema.h"

namespace lockstep {
namespace {

using grammar::Expr;
using grammar::ExprId;
using grammar::ExprKind;
using grammar::RuleId;
using ojson = nlohmann::ordered_json;

const char* const kBundled[] = {"qwen", "hermes", "llama3", "mistral", "think-json"};

std::string LineCol(std::string_view text, std::size_t byte) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// ---- format files ----------------------------------------------------------------------------

Status FormatError(std::string_view origin, const std::string& pointer, const std::string& msg) {
  return Status(StatusCode::kInvalidGrammar, "format: " + msg,
                std::string(origin) + "#" + pointer);
}

Result<StructuredMarker> ParseMarker(const ojson& j, std::string_view origin,
                                     const std::string& ptr) {
  StructuredMarker m;
  if (j.is_null()) return m;
  if (!j.is_object() || j.size() != 1)
    return FormatError(origin, ptr,
                       "a marker is null, {\"text\": \"...\"} or {\"special\": name | [names]}");
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
                                              "min_calls", "max_calls"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kKeys.count(it.key()))
      return FormatError(origin, "/" + it.key(), "unknown key '" + it.key() + "'");
  StructuredFormat f;
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
    if (!j["free_text"].is_boolean()) return FormatError(origin, "/free_text", "must be a boolean");
    f.free_text = j["free_text"].get<bool>();
  }
  if (j.contains("trigger")) {
    LOCKSTEP_ASSIGN_OR_RETURN(f.trigger, ParseMarker(j["trigger"], origin, "/trigger"));
  }
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
    } else {
      return FormatError(origin, "/body", "body is \"name_field\" or \"array\"");
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
  if (f.end.none() && f.free_text && f.max_calls > 1 && f.body == StructuredBody::kNameField)
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
    Expr e;
    e.kind = ExprKind::kSequence;
    e.children = std::move(xs);
    return Add(std::move(e));
  }
  ExprId Repeat(ExprId x, std::int32_t lo, std::int32_t hi) {
    Expr e;
    e.kind = ExprKind::kRepeat;
    e.children = {x};
    e.min = lo;
    e.max = hi;
    return Add(std::move(e));
  }
  ExprId Dfa(std::shared_ptr<const ByteDfa> d) {
    Expr e;
    e.kind = ExprKind::kByteDfa;
    e.dfa = std::move(d);
    return Add(std::move(e));
  }
  ExprId Ref(RuleId r) {
    Expr e;
    e.kind = ExprKind::kRuleRef;
    e.rule = r;
    return Add(std::move(e));
  }
  Result<ExprId> Marker(const StructuredMarker& m, std::string_view role) {
    Expr e;
    if (m.kind == StructuredMarker::Kind::kText) {
      LOCKSTEP_RETURN_IF_ERROR(CheckText(m.text, role));
      e.kind = ExprKind::kLiteral;
      e.text = m.text;
    } else if (m.kind == StructuredMarker::Kind::kSpecial) {
      LOCKSTEP_ASSIGN_OR_RETURN(TokenId id, ResolveSpecial(m, vocab_, role));
      e.kind = ExprKind::kSpecialToken;
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

Result<schema::SchemaGrammar> CompileBody(std::string_view text, const CompileOptions& options) {
  auto s = schema::Schema::Load(text);
  if (!s.ok()) return s.status();
  schema::SchemaCompileOptions so = schema::SchemaOptionsFrom(options);
  so.property_order =
      std::make_shared<const schema::PropertyOrder>(schema::PropertyOrderOf(text));
  return schema::CompileSchemaToGrammar(**s, so);
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
                  std::string(origin) + ":" + LineCol(json_text, at));
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
      const ojson* schema = nullptr;
      for (const char* key : {"parameters", "schema", "arguments"}) {
        if (t->contains(key)) {
          schema = &(*t)[key];
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

Result<std::shared_ptr<const CompiledGrammar>> CompileStructured(const GrammarCompiler& compiler,
                                                                 const StructuredFormat& f,
                                                                 std::span<const ToolSpec> tools,
                                                                 const CompileOptions& options) {
  try {
    if (tools.empty()) return Status(StatusCode::kInvalidArgument, "no tools given");
    std::set<std::string> seen;
    for (std::size_t i = 0; i < tools.size(); ++i) {
      if (tools[i].name.empty())
        return Status(StatusCode::kInvalidArgument, "tool " + std::to_string(i) + " has no name");
      if (!seen.insert(tools[i].name).second)
        return Status(StatusCode::kInvalidArgument, "duplicate tool name '" + tools[i].name + "'");
      // Compiled alone first, so that an error points into the tool's own schema.
      auto one = CompileBody(tools[i].schema_json, options);
      if (!one.ok()) {
        return Status(one.status().code(), ToolOrigin(tools[i]) + ": " + one.status().message(),
                      one.status().location());
      }
    }
    LOCKSTEP_ASSIGN_OR_RETURN(std::string body_text, BodySchema(f, tools));
    LOCKSTEP_ASSIGN_OR_RETURN(schema::SchemaGrammar body, CompileBody(body_text, options));

    grammar::Grammar g;
    g.rules.push_back({"root", -1, {}});
    g.root = 0;
    Builder b(compiler.vocabulary(), g);
    const RuleId body_root = b.Splice(body.grammar, "call_");
    std::vector<ExprId> root;
    if (f.reasoning) {
      LOCKSTEP_ASSIGN_OR_RETURN(ExprId start, b.Marker(f.reasoning_start, "reasoning start"));
      LOCKSTEP_ASSIGN_OR_RETURN(ExprId end, b.Marker(f.reasoning_end, "reasoning end"));
      ExprId r = b.Seq({start, b.TextUntil(f.reasoning_end), end});
      root.push_back(f.reasoning_required ? r : b.Repeat(r, 0, 1));
    }
    LOCKSTEP_ASSIGN_OR_RETURN(ExprId trig, b.Marker(f.trigger, "trigger"));
    LOCKSTEP_ASSIGN_OR_RETURN(ExprId end, b.Marker(f.end, "end marker"));
    ExprId call = b.Seq({trig, b.Ref(body_root), end});
    // An array body holds every call of the turn behind one trigger.
    const bool one_section = f.body == StructuredBody::kArray || f.end.none();
    const std::int32_t lo = one_section ? std::min(f.min_calls, 1) : f.min_calls;
    const std::int32_t hi = one_section ? 1 : f.max_calls;
    if (f.free_text) {
      root.push_back(b.TextUntil(f.trigger));
      ExprId item = f.end.none() ? call : b.Seq({call, b.TextUntil(f.trigger)});
      root.push_back(b.Repeat(item, lo, hi));
    } else {
      root.push_back(b.Repeat(call, lo, hi));
    }
    g.rules[0].body = b.Seq(std::move(root));
    CompileOptions lowered = options;
    if (lowered.max_unrolled_states <= 0) lowered.max_unrolled_states = 256;
    return compiler.CompileGrammarIr(g, lowered);
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
  CallParser(const StructuredFormat& f, std::vector<std::int32_t> syms)
      : f_(f), s_(std::move(syms)) {}

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
      std::size_t t;
      if (f_.free_text) {
        t = Find(trig, pos);
        LOCKSTEP_RETURN_IF_ERROR(NoSpecials(pos, t, "free text"));
        if (t == s_.size()) break;
      } else {
        if (pos == s_.size()) break;
        t = pos;
        if (!At(trig, t)) return Error(t, "expected the trigger");
      }
      if (++sections > max_sections) return Error(t, "more calls than the format allows");
      std::size_t b = SkipWs(t + trig.size());
      LOCKSTEP_ASSIGN_OR_RETURN(std::size_t e, JsonExtent(b));
      std::string text(s_.begin() + b, s_.begin() + e);
      ojson j = ojson::parse(text, nullptr, false);
      if (j.is_discarded()) return Error(b, "a call body is not JSON");
      if (f_.body == StructuredBody::kArray) {
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
};

}  // namespace

Result<std::vector<ParsedCall>> ParseToolCalls(const StructuredFormat& format,
                                               const Vocabulary& vocab,
                                               std::span<const TokenId> tokens) {
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
  try {
    CallParser p(format, std::move(syms));
    return p.Run(vocab);
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidArgument, std::string("tool calls: ") + e.what());
  }
}

}  // namespace lockstep
