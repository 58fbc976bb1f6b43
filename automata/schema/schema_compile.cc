// JSON Schema compiler: structure. This file's external interface is CompileSchemaToGrammar and
// RenderInstance (schema_compile.h). Each conjunction of in-place subschemas becomes one grammar
// rule (memoised, so $ref recursion is rule recursion); the model (schema_compile_model.cc)
// expands it into alternatives of merged facts, emitted here per instance type: literals and
// tries for enums, lexical terminals for strings and numbers, counted rule chains for objects
// (commas and min/maxProperties), native counters for arrays.
#include "automata/schema/schema_compile.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <climits>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "automata/cfg/cfg_program.h"
#include "automata/regex/dfa_builder.h"
#include "automata/schema/ir_nodes.h"
#include "automata/schema/schema_compile_internal.h"

namespace lockstep::schema {
namespace {

using namespace internal;  // NOLINT: the compiler's own internals
using grammar::Expr;
using grammar::ExprId;
using grammar::ExprKind;
using grammar::RuleId;

// The intersection of two byte automata, minimal (numbers that are not integers: a number
// terminal times the plain-decimal-with-fraction automaton).
// difference: L(a) minus L(b) instead of the intersection.
Result<ByteDfa> ProductDfa(const ByteDfa& a, const ByteDfa& b, std::int32_t max_states,
                           const CompileDeadline& deadline, bool difference = false) {
  SubsetDfa s;
  std::map<std::pair<int, int>, int> classes;
  std::vector<std::pair<int, int>> class_of;
  for (int c = 0; c < 256; ++c) {
    auto key = std::make_pair(int{a.byte_class[c]}, int{b.byte_class[c]});
    auto [it, added] = classes.emplace(key, static_cast<int>(class_of.size()));
    if (added) class_of.push_back(key);
    s.byte_class[c] = static_cast<std::uint8_t>(it->second);
  }
  s.num_classes = static_cast<std::int32_t>(class_of.size());
  std::map<std::pair<StateId, StateId>, StateId> ids;
  std::vector<std::pair<StateId, StateId>> states = {{ByteDfa::kDead, ByteDfa::kDead}};
  auto id_of = [&](StateId x, StateId y) -> StateId {
    if (x == ByteDfa::kDead || (y == ByteDfa::kDead && !difference)) return 0;
    auto [it, added] = ids.emplace(std::make_pair(x, y), static_cast<StateId>(states.size()));
    if (added) states.emplace_back(x, y);
    return it->second;
  };
  s.start = id_of(a.start, b.start);
  for (std::size_t i = 0; i < states.size(); ++i) {
    if (deadline.Poll()) return deadline.Error("");
    if (static_cast<std::int64_t>(states.size()) > max_states) {
      return Status(StatusCode::kResourceLimit,
                    "number automaton product over max_dfa_states = " + std::to_string(max_states));
    }
    auto [x, y] = states[i];
    bool in_b = y != ByteDfa::kDead && b.IsAccepting(y);
    s.accepting.push_back(i != 0 && a.IsAccepting(x) && (difference ? !in_b : in_b));
    for (auto [cx, cy] : class_of) {
      StateId nx = i == 0 ? ByteDfa::kDead : a.next[x * a.num_classes + cx];
      StateId ny = i == 0 || y == ByteDfa::kDead ? ByteDfa::kDead : b.next[y * b.num_classes + cy];
      s.next.push_back(id_of(nx, ny));
    }
  }
  s.num_states = static_cast<std::int32_t>(states.size());
  if (deadline.PassedNow()) return deadline.Error("");
  return MinimizeDfa(s);
}

class Emitter {
 public:
  Emitter(const Schema& s, const SchemaCompileOptions& o)
      : s_(s), o_(WithLexicalDeadline(o)), value_lexical_(o_.lexical), m_(s, o_) {
    value_lexical_.count_class_patterns = true;
  }

  Result<SchemaGrammar> Run() {
    if (!s_.validation_vocabulary()) {
      return Status(StatusCode::kUnsupported,
                    "the meta-schema leaves out the validation vocabulary", "/$schema");
    }
    LOCKSTEP_RETURN_IF_ERROR(NoReservedKeywords());
    if (o_.whitespace == Whitespace::kFlexible) {
      ws_rule_ = NewRule("ws");
      Expr cls;
      cls.kind = ExprKind::kCharClass;
      cls.ranges = {{U'\t', U'\n'}, {U'\r', U'\r'}, {U' ', U' '}};
      g_.rules[ws_rule_].body = Rep(Add(std::move(cls)), 0, std::max(0, o_.max_whitespace_run));
    }
    RuleId root = NewRule("root");
    g_.root = root;
    auto body = CompileConj({{&s_.root(), 0}}, 0);
    if (!body.ok()) return body.status();
    if (IsNever(*body)) {
      return Status(StatusCode::kUnsatisfiable, "the schema admits no instance", "");
    }
    g_.rules[root].body = Seq({Ws(), *body, Ws()});
    LOCKSTEP_RETURN_IF_ERROR(Budget(""));
    grammar::NormalizeOptions no;
    no.deadline = o_.deadline;
    LOCKSTEP_RETURN_IF_ERROR(grammar::Normalize(g_, no));
    SchemaGrammar out;
    out.grammar = std::move(g_);
    out.relaxed = std::move(m_.relaxed());
    out.checked_at_run_time = std::move(run_time_checks_);
    return out;
  }

 private:
  // The lexical automata (strings, numbers, formats) run under the schema's deadline.
  static SchemaCompileOptions WithLexicalDeadline(SchemaCompileOptions o) {
    o.lexical.deadline = o.deadline;
    return o;
  }

  // Keywords named "$ls:..." are the compiler's own (the subschemas it makes: negations, member
  // witnesses, node references); in a schema they would be read as such, so they are refused.
  // The first in location order is named.
  Status NoReservedKeywords() const {
    std::string first;
    for (const json* n : s_.Nodes()) {
      if (!n->is_object()) continue;
      for (auto& [k, v] : n->items()) {
        if (k.rfind("$ls:", 0) != 0) continue;
        std::string loc = s_.Location(n) + Model::JsonPointerSegmentOf(k);
        if (first.empty() || loc < first) first = loc;
      }
    }
    if (first.empty()) return Status::Ok();
    return Status(StatusCode::kUnsupported,
                  "keywords starting with \"$ls:\" are reserved for the compiler's own subschemas",
                  first);
  }

  // ---- IR builders (every ExprId has one parent; shared parts are rules) ----
  ExprId Add(Expr e) { return g_.Add(std::move(e)); }
  ExprId Never() {
    Expr e;
    e.kind = ExprKind::kCharClass;
    return Add(std::move(e));
  }
  bool IsNever(ExprId id) const {
    const Expr& e = g_.expr(id);
    return e.kind == ExprKind::kCharClass && e.ranges.empty();
  }
  bool IsEmpty(ExprId id) const { return g_.expr(id).kind == ExprKind::kEmpty; }
  ExprId Empty() { return Add(Expr{}); }
  ExprId Lit(std::string t) {
    if (t.empty()) return Empty();
    return Add(LiteralNode(std::move(t)));
  }
  ExprId Ref(RuleId r) { return Add(RuleRefNode(r)); }
  ExprId Seq(std::vector<ExprId> xs) {
    std::vector<ExprId> kept;
    for (ExprId x : xs) {
      if (IsNever(x)) return Never();
      if (!IsEmpty(x)) kept.push_back(x);
    }
    if (kept.empty()) return Empty();
    return OneOrList(ExprKind::kSequence, std::move(kept));
  }
  ExprId Alt(std::vector<ExprId> xs) {
    std::vector<ExprId> kept;
    for (ExprId x : xs)
      if (!IsNever(x)) kept.push_back(x);
    if (kept.empty()) return Never();
    return OneOrList(ExprKind::kChoice, std::move(kept));
  }
  // The only part, or a node of `kind` (sequence, choice) over the parts.
  ExprId OneOrList(ExprKind kind, std::vector<ExprId> parts) {
    if (parts.size() == 1) return parts[0];
    return Add(ListNode(kind, std::move(parts)));
  }
  // max < 0: unbounded.
  ExprId Rep(ExprId x, std::int64_t min, std::int64_t max) {
    if (max >= 0 && min > max) return Never();
    if (max == 0) return Empty();
    if (IsNever(x)) return min == 0 ? Empty() : Never();
    if (min == 1 && max == 1) return x;
    if (min > INT32_MAX - 1 || max > INT32_MAX - 1) {
      if (overflow_.ok()) {
        overflow_ = Status(StatusCode::kResourceLimit, "repetition bound above 2^31", cur_loc_);
      }
      return Never();
    }
    return Add(RepeatNode(x, static_cast<std::int32_t>(min),
                          max < 0 ? Expr::kUnbounded : static_cast<std::int32_t>(max)));
  }
  ExprId Ws() { return ws_rule_ < 0 ? Empty() : Ref(ws_rule_); }
  ExprId Comma() { return Seq({Ws(), Lit(","), Ws()}); }
  RuleId NewRule(std::string name) {
    grammar::Rule r;
    r.name = std::move(name);
    g_.rules.push_back(std::move(r));
    return static_cast<RuleId>(g_.rules.size() - 1);
  }
  // `format: regex`: a JSON string whose value must be an ECMAScript pattern, checked by the
  // parser one character at a time (grammar::Rule::ecma_pattern; its syntax is not context-free).
  // Beside it only minLength: any text the check lets through can go on to a valid pattern, and
  // a valid pattern to a longer one, but a maxLength, a pattern or another format could leave a
  // pattern begun with no way to finish within them. (Beside patterns and formats whose every
  // value is a pattern the caller drops the format instead: ValuesAreEcmaPatterns.)
  Result<ExprId> PatternString(const StringConstraint& sc, const std::string& loc) {
    if (sc.max_length || sc.pattern || !sc.also_patterns.empty() || !sc.not_patterns.empty() ||
        !sc.also_formats.empty() || !sc.not_formats.empty() || !sc.excluded.empty()) {
      return Status(StatusCode::kUnsupported,
                    "format \"regex\" beside maxLength, a pattern, another format or excluded "
                    "values cannot be enforced exactly (the pattern syntax is checked at run "
                    "time, alone), unless every value of the patterns and formats beside it is "
                    "a pattern, as far as an ASCII automaton shows",
                    loc);
    }
    // The string automaton of every value with minLength characters: the canonical spelling
    // (AddStringExpr's), one escape per control character.
    const std::string min = std::to_string(std::max<std::int64_t>(sc.min_length, 0));
    auto dfa = CompileRegexToDfa(
        "\"([^\"\\\\\\x00-\\x1F]|\\\\[\"\\\\bfnrt]|\\\\u00(0[0-7]|0b|0e|0f|1[0-9a-f])){" + min +
        ",}\"");
    if (!dfa.ok()) return WithLoc(dfa.status(), loc);
    Expr x;
    x.kind = ExprKind::kByteDfa;
    x.dfa = std::make_shared<const ByteDfa>(std::move(*dfa));
    const RuleId r = RuleOf(Add(std::move(x)), "rx");
    g_.rules[r].ecma_pattern = true;
    run_time_checks_.push_back(loc);
    return Ref(r);
  }

  RuleId RuleOf(ExprId body, const char* prefix) {
    std::string name(prefix);  // (appended, not `prefix + ...`: GCC 12's -Wrestrict misfires)
    name += std::to_string(g_.rules.size());
    RuleId r = NewRule(std::move(name));
    g_.rules[r].body = body;
    return r;
  }
  Status Budget(const std::string& loc) {
    if (!overflow_.ok()) return overflow_;
    if (static_cast<std::int64_t>(g_.exprs.size()) > o_.max_exprs) {
      return Status(StatusCode::kResourceLimit,
                    "the schema's grammar exceeds the budget of " + std::to_string(o_.max_exprs) +
                        " expressions (CompileOptions::schema_max_exprs, lockstep --max-exprs)",
                    loc);
    }
    return Status::Ok();
  }

  // ---- conjunctions -> rules ----

  // Whether leaf `j` asserts nothing once expanded: each of its keywords is one that Expand has
  // followed (`$ref`, `allOf`, ...: their targets are leaves of their own) or an annotation or
  // identifier. BuildFacts reads none of them, so the conjunction's language does not depend
  // on the leaf.
  static bool InertLeaf(const json& j) {
    static const char* const kInert[] = {
        "$ref",        "$dynamicRef", "$ls:node",  "allOf",       "$schema",       "$id",
        "id",          "$anchor",     "$dynamicAnchor", "$recursiveAnchor", "$comment",
        "$vocabulary", "description", "title",     "default",     "examples",      "deprecated",
        "readOnly",    "writeOnly",   "definitions", "$defs"};
    if (!j.is_object()) return false;
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool inert = false;
      for (const char* k : kInert) inert = inert || it.key() == k;
      if (!inert) return false;
    }
    return true;
  }

  // The language of an expanded conjunction: its leaves (with their skips) as a set, those that
  // assert nothing left out. (Leaf order only picks which pattern is first or which anyOf is
  // split first: the same language.)
  static std::string FlatKey(const Flat& fl) {
    std::vector<Node> leaves;
    leaves.reserve(fl.leaves.size());
    for (const Node& n : fl.leaves) {
      if (!InertLeaf(*n.j)) leaves.push_back(n);
    }
    std::sort(leaves.begin(), leaves.end());
    std::string key;
    key.reserve(leaves.size() * (sizeof(std::uintptr_t) + sizeof(std::uint16_t)));
    for (const Node& n : leaves) {
      auto addr = reinterpret_cast<std::uintptr_t>(n.j);
      key.append(reinterpret_cast<const char*>(&addr), sizeof(addr));
      key.append(reinterpret_cast<const char*>(&n.skip), sizeof(n.skip));
    }
    return key;
  }

  Result<ExprId> CompileConj(Conj c, int depth) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    std::string key;  // field by field: Node has padding bytes
    for (const Node& n : c) {
      auto addr = reinterpret_cast<std::uintptr_t>(n.j);
      key.append(reinterpret_cast<const char*>(&addr), sizeof(addr));
      key.append(reinterpret_cast<const char*>(&n.skip), sizeof(n.skip));
    }
    if (auto it = memo_.find(key); it != memo_.end()) {
      return it->second.never ? Never() : Ref(it->second.rule);
    }
    // Expanded in schema order (not address order), so which of several unsupported keywords
    // is reported does not vary from run to run. (Each location computed once: a comparison
    // that made two strings was most of the time of conjunction-heavy schemas; and only for a
    // conjunction met for the first time: sorting every lookup's locations was a fifth of the
    // compile of JsonSchemaStore's task.json, 3,840 rules.)
    std::vector<std::pair<const std::string*, Node>> by_loc;
    by_loc.reserve(c.size());
    for (const Node& n : c) by_loc.emplace_back(&m_.CachedLoc(n.j), n);
    std::stable_sort(by_loc.begin(), by_loc.end(),
                     [](const auto& a, const auto& b) { return *a.first < *b.first; });
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = by_loc[i].second;
    std::string loc = c.empty() ? "" : *by_loc[0].first;
    if (o_.deadline.Poll()) return o_.deadline.Error(loc);
    if (depth > o_.max_depth) {
      return Status(
          StatusCode::kResourceLimit,
          "subschemas nested deeper than max_depth (" + std::to_string(o_.max_depth) + ")", loc);
    }
    RuleId r = NewRule("s" + std::to_string(g_.rules.size()));
    memo_[key] = {r, false};
    // The empty conjunction is "any value": its rules (and those made for its members and
    // items) are the same in every schema, so lowering may reuse their automata.
    struct MarkShared {
      grammar::Grammar& g;
      std::size_t first;
      bool on;
      ~MarkShared() {
        if (!on) return;
        for (std::size_t i = first; i < g.rules.size(); ++i) g.rules[i].shared = true;
      }
    } mark_shared{g_, static_cast<std::size_t>(r), c.empty()};
    auto fl = m_.Expand(c);
    if (!fl.ok()) return fl.status();
    // Conjunctions whose expansions hold the same leaves, leaves that assert nothing aside, are
    // one language: they share one rule. Without this, 300 properties each written
    // `{"$ref": "#/definitions/field"}` compile the field 300 times (each `$ref` object is a
    // leaf of its own next to the field's), and objects holding them multiply that
    // (Github_ultra o13934: 124,475 rules and 827,822 expressions before normalisation merged
    // them back into 1,004 rules, most of its 0.8 s compile).
    if (!fl->never) {
      std::string flat_key = FlatKey(*fl);
      auto [f, fresh] = flat_memo_.try_emplace(std::move(flat_key), r);
      if (!fresh && f->second != r) {
        const RuleId same = f->second;
        const ExprId done = g_.rules[same].body;  // < 0 while `same` is being compiled
        const bool never = done >= 0 && IsNever(done);
        g_.rules[r].body = Ref(same);  // unreferenced: normalisation drops it
        memo_[key] = {same, never};
        return never ? Never() : Ref(same);
      }
    }
    ExprId body;
    if (fl->never) {
      body = Never();
    } else if (fl->split >= 0) {
      std::vector<ExprId> alts;
      for (const Conj& alt : m_.Alternatives(*fl)) {
        auto e = CompileConj(alt, depth + 1);
        if (!e.ok()) return e;
        alts.push_back(*e);
      }
      body = Alt(std::move(alts));
    } else {
      auto f = m_.BuildFacts(*fl);
      if (!f.ok()) return f.status();
      cur_loc_ = loc;
      auto e = FactsExpr(*f, depth);
      if (!e.ok()) return e;
      body = *e;
    }
    LOCKSTEP_RETURN_IF_ERROR(Budget(loc));
    g_.rules[r].body = body;
    if (IsNever(body)) {
      memo_[key].never = true;
      return Never();
    }
    return Ref(r);
  }

  Result<ExprId> FactsExpr(const Facts& f, int depth) {
    if (f.enum_vals) {
      std::vector<json> vals;
      // The values live in f as long as the scope: their checks are shared.
      Model::CheckScope scope(&m_);
      std::optional<Result<ObjectPlan>> plan;
      for (const json& v : *f.enum_vals) {
        if (v.is_object() && (f.types & kTObject) && !plan) plan.emplace(m_.PlanObject(f));
        if (plan && !plan->ok()) return plan->status();
        auto ok = m_.CheckFacts(f, v, 0, plan ? &**plan : nullptr);
        if (!ok.ok()) return ok.status();
        if (*ok && std::none_of(vals.begin(), vals.end(),
                                [&](const json& x) { return JsonEqual(x, v); })) {
          vals.push_back(v);
        }
      }
      return EnumExpr(vals);
    }
    auto excluded = [&](const json& v) {
      return std::any_of(f.not_in.begin(), f.not_in.end(),
                         [&](const json& x) { return JsonEqual(x, v); });
    };
    std::vector<ExprId> alts;
    if ((f.types & kTNull) && !excluded(json(nullptr))) alts.push_back(Lit("null"));
    if (f.types & kTBool) {
      if (!excluded(json(true))) alts.push_back(Lit("true"));
      if (!excluded(json(false))) alts.push_back(Lit("false"));
    }
    if (f.types & kTString) {
      StringConstraint sc = StringConstraintOf(f);
      for (const json& v : f.not_in)
        if (v.is_string()) sc.excluded.push_back(v.get<std::string>());
      std::optional<Result<ExprId>> pattern_string;
      // `format: regex` first, wherever the merge of formats put it.
      if (auto rx = std::find(sc.also_formats.begin(), sc.also_formats.end(), "regex");
          sc.format && rx != sc.also_formats.end()) {
        std::swap(*rx, *sc.format);
      }
      if (sc.format && *sc.format == "regex") {
        const std::string& loc = f.str_loc.empty() ? cur_loc_ : f.str_loc;
        auto drop_format = [&sc] {
          sc.format.reset();
          if (!sc.also_formats.empty()) {
            sc.format = sc.also_formats.front();
            sc.also_formats.erase(sc.also_formats.begin());
          }
        };
        // Beside a pattern or format whose every value is a pattern, the format asserts
        // nothing more: the string is theirs (o21780's time spans, `^(-?\d+\.)?\d+...$`).
        if (sc.pattern || !sc.also_patterns.empty() || !sc.also_formats.empty()) {
          auto implied = ValuesAreEcmaPatterns(sc, o_.lexical);
          if (!implied.ok()) return WithLoc(implied.status(), loc);
          if (implied->value_or(false)) drop_format();
        }
        if (sc.format && *sc.format == "regex") {
          pattern_string = PatternString(sc, loc);
          if (!pattern_string->ok() && m_.Relax(pattern_string->status())) {
            drop_format();  // (lenient: the string without the format, a superset)
            pattern_string.reset();
          }
        }
      }
      if (pattern_string) {
        if (!pattern_string->ok()) return pattern_string->status();
        alts.push_back(**pattern_string);
      } else if (!sc.max_length || *sc.max_length >= sc.min_length) {
        auto e = AddStringExpr(&g_, sc, value_lexical_);
        if (!e.ok() && e.status().code() == StatusCode::kResourceLimit && sc.max_length &&
            *sc.max_length <= std::numeric_limits<std::int32_t>::max() &&
            !o_.lexical.deadline.PassedNow()) {
          // maxLength times a pattern's or a format's automaton past the state budget: the
          // string without maxLength, its characters counted by the parser at run time.
          StringConstraint uncounted = sc;
          uncounted.max_length.reset();
          auto body = AddStringExpr(&g_, uncounted, o_.lexical);
          if (body.ok() && g_.expr(*body).kind == ExprKind::kByteDfa) {
            const RuleId counted = RuleOf(*body, "sl");
            g_.rules[counted].max_chars = static_cast<std::int32_t>(*sc.max_length);
            run_time_checks_.push_back(f.str_loc.empty() ? cur_loc_ : f.str_loc);
            e = Ref(counted);
          } else if (o_.lexical.count_at_run_time_from > 0 &&
                     *sc.max_length >= o_.lexical.count_at_run_time_from) {
            // (Refused for count_at_run_time_from, perhaps: the product, if it fits.)
            LexicalOptions product = o_.lexical;
            product.count_at_run_time_from = 0;
            e = AddStringExpr(&g_, sc, product);
          }
        }
        if (e.ok()) {
          alts.push_back(*e);
        } else if (e.status().code() != StatusCode::kUnsatisfiable) {
          return WithLoc(e.status(), f.str_loc.empty() ? cur_loc_ : f.str_loc);
        }
      }
    }
    if (f.types & kTNumber) {
      auto e = NumberExpr(f);
      if (!e.ok()) return e;
      // A number value is a rule of its own, called where it is used (grammar::Rule::called):
      // its positions are then the rule's, the same in every grammar with that number, and a
      // member's value position is composed from them (`"price":` then a number) instead of
      // walked anew in each grammar.
      if (g_.expr(*e).kind != ExprKind::kRuleRef && !IsNever(*e)) {
        const RuleId r = RuleOf(*e, "n");
        g_.rules[r].called = true;
        e = Ref(r);
      }
      alts.push_back(*e);
    }
    if (f.types & kTObject) {
      auto e = ObjectExpr(f, depth);
      if (!e.ok()) return e;
      alts.push_back(*e);
    }
    if (f.types & kTArray) {
      auto e = ArrayExpr(f, depth);
      if (!e.ok()) return e;
      alts.push_back(*e);
    }
    return Alt(std::move(alts));
  }

  // The keyword's JSON Pointer as the location. A lexical error located inside the keyword's
  // value (a regex "offset N") keeps that as part of the message.
  static Status WithLoc(const Status& st, const std::string& loc) {
    if (!st.location().empty() && st.location()[0] == '/') return st;
    if (st.location().empty()) return Status(st.code(), st.message(), loc);
    return Status(st.code(), st.message() + " (at " + st.location() + " in the value)", loc);
  }

  // ---- enums ----

  ExprId ValueExpr(const json& v) {
    if (!v.is_object() && !v.is_array()) return Lit(RenderScalar(v));
    if (ws_rule_ < 0) return Lit(RenderPlain(v, -1, 0));
    std::vector<ExprId> parts = {Lit(v.is_object() ? "{" : "[")};
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      parts.push_back(first ? Ws() : Comma());
      first = false;
      if (v.is_object()) {
        parts.push_back(Lit(RenderJsonString(it.key())));
        parts.push_back(Ws());
        parts.push_back(Lit(":"));
        parts.push_back(Ws());
      }
      parts.push_back(ValueExpr(*it));
    }
    parts.push_back(Ws());
    parts.push_back(Lit(v.is_object() ? "}" : "]"));
    return Seq(std::move(parts));
  }

  ExprId EnumExpr(const std::vector<json>& vals) {
    bool scalars = std::none_of(vals.begin(), vals.end(),
                                [](const json& v) { return v.is_object() || v.is_array(); });
    if (!scalars || vals.size() < 4) {
      std::vector<ExprId> alts;
      for (const json& v : vals) alts.push_back(ValueExpr(v));
      return Alt(std::move(alts));
    }
    std::vector<std::string> texts;
    for (const json& v : vals) texts.push_back(RenderScalar(v));
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    return Trie(texts, 0, texts.size(), 0);
  }

  // Strings [lo, hi) share their first `at` bytes; a radix trie cut at code point boundaries.
  ExprId Trie(const std::vector<std::string>& t, std::size_t lo, std::size_t hi, std::size_t at) {
    if (hi - lo == 1) return Lit(t[lo].substr(at));
    const std::string& a = t[lo];
    const std::string& b = t[hi - 1];
    std::size_t end = at;
    while (end < a.size() && end < b.size() && a[end] == b[end]) ++end;
    while (end > at && end < a.size() && (static_cast<unsigned char>(a[end]) & 0xC0) == 0x80) --end;
    std::vector<ExprId> alts;
    std::size_t i = lo;
    if (t[i].size() == end) alts.push_back(Empty()), ++i;
    while (i < hi) {
      auto cp_len = [&](const std::string& s) {
        auto c = static_cast<unsigned char>(s[end]);
        return std::size_t{c < 0x80 ? 1u : c < 0xE0 ? 2u : c < 0xF0 ? 3u : 4u};
      };
      std::string head = t[i].substr(end, cp_len(t[i]));
      std::size_t j = i + 1;
      while (j < hi && t[j].compare(end, head.size(), head) == 0) ++j;
      alts.push_back(Trie(t, i, j, end));
      i = j;
    }
    return Seq({Lit(a.substr(at, end - at)), Alt(std::move(alts))});
  }

  // ---- numbers ----

  Result<ExprId> NumberExpr(const Facts& f) {
    std::string loc = f.num_loc.empty() ? cur_loc_ : f.num_loc;
    // Numbers that must not be integers (e.g. not: {type: integer}): under the formatting policy
    // exactly the plain decimals with a nonzero last fraction digit.
    const bool fraction_only = !(f.types & kTInt);
    bool integer = !(f.types & kTFrac);
    std::vector<json> cuts;
    for (const json& v : f.not_in) {
      if (!v.is_number()) continue;
      if (std::none_of(cuts.begin(), cuts.end(), [&](const json& x) { return JsonEqual(x, v); }))
        cuts.push_back(v);
    }
    std::sort(cuts.begin(), cuts.end(),
              [](const json& a, const json& b) { return CompareNumbers(a, b) < 0; });
    std::vector<ExprId> alts;
    std::optional<json> lo = f.min;
    bool lo_excl = f.min_excl;
    auto interval = [&](const std::optional<json>& l, bool lx, const std::optional<json>& h,
                        bool hx) -> Status {
      NumberConstraint c;
      c.integer = integer;
      if (l) c.minimum = DecimalBound{l->dump(), lx};
      if (h) c.maximum = DecimalBound{h->dump(), hx};
      if (f.multiple_of) c.multiple_of = f.multiple_of->dump();
      for (const json& m : f.not_multiples) c.not_multiples.push_back(m.dump());
      auto e = AddNumberExpr(&g_, c, o_.lexical);
      if (e.ok() && fraction_only) {
        auto frac = FractionOnly(*e);
        if (!frac.ok()) {
          Status st = WithLoc(frac.status(), loc);
          if (!m_.Relax(st)) return st;
        } else {
          e = *frac;
        }
      }
      if (e.ok()) {
        alts.push_back(*e);
      } else if (e.status().code() != StatusCode::kUnsatisfiable) {
        return WithLoc(e.status(), loc);
      }
      return Status::Ok();
    };
    for (const json& cut : cuts) {
      if (lo && CompareNumbers(cut, *lo) < 0) continue;
      if (f.max && CompareNumbers(cut, *f.max) > 0) continue;
      LOCKSTEP_RETURN_IF_ERROR(interval(lo, lo_excl, cut, true));
      lo = cut;
      lo_excl = true;
    }
    LOCKSTEP_RETURN_IF_ERROR(interval(lo, lo_excl, f.max, f.max_excl));
    return Alt(std::move(alts));
  }

  Result<ExprId> FractionOnly(ExprId number) {
    static const ByteDfa* kFraction = [] {
      auto d = CompileRegexToDfa("-?(0|[1-9][0-9]*)\\.[0-9]*[1-9]");
      return new ByteDfa(std::move(*d));
    }();
    // Draft-04: 1.0 is no integer either, so any fraction will do.
    static const ByteDfa* kAnyFraction = [] {
      auto d = CompileRegexToDfa("-?(0|[1-9][0-9]*)\\.[0-9]+");
      return new ByteDfa(std::move(*d));
    }();
    const ByteDfa& fraction = m_.schema().float_integers() ? *kFraction : *kAnyFraction;
    const Expr& e = g_.expr(number);
    ByteDfa dfa;
    if (e.kind == ExprKind::kByteDfa && e.dfa) {
      dfa = *e.dfa;
    } else if (e.kind == ExprKind::kLexeme) {
      auto d = CompileRegexToDfa(e.text);
      if (!d.ok()) return d.status();
      dfa = std::move(*d);
    } else {
      return Status(StatusCode::kUnsupported,
                    "numbers that must not be integers: this number terminal is not one automaton");
    }
    auto p = ProductDfa(dfa, fraction, o_.lexical.max_dfa_states, o_.deadline);
    if (!p.ok()) return p.status();
    if (p->start == ByteDfa::kDead) return Never();
    Expr out;
    out.kind = ExprKind::kByteDfa;
    out.dfa = std::make_shared<const ByteDfa>(std::move(*p));
    return Add(std::move(out));
  }

  // The string tokens `c` admits, as one automaton (key classes of patternProperties and of
  // witness members).
  Result<ByteDfa> KeyDfa(const StringConstraint& c) {
    if (!c.pattern && c.also_patterns.empty() && !c.format && c.excluded.empty() &&
        c.also_formats.empty() && c.not_formats.empty() && c.not_patterns.empty()) {
      // Every string token under canonical escaping (RenderJsonString), of min_length to
      // max_length code points.
      if (c.max_length && *c.max_length < c.min_length) return ByteDfa{};
      std::string count = "*";
      if (c.max_length || c.min_length > 0) {
        count = "{" + std::to_string(c.min_length) + "," +
                (c.max_length ? std::to_string(*c.max_length) : std::string()) + "}";
      }
      return CompileRegexToDfa(
          "\"([^\"\\\\\\x00-\\x1F]|\\\\[\"\\\\bfnrt]|\\\\u00(0[0-7]|0b|0e|0f|1[0-9a-f]))" + count +
          "\"");
    }
    grammar::Grammar scratch;
    auto id = AddStringExpr(&scratch, c, o_.lexical);
    if (!id.ok()) {
      if (id.status().code() == StatusCode::kUnsatisfiable) return ByteDfa{};
      return id.status();
    }
    const Expr& e = scratch.expr(*id);
    if (e.kind == ExprKind::kByteDfa && e.dfa) return *e.dfa;
    if (e.kind == ExprKind::kLexeme) return CompileRegexToDfa(e.text);
    return Status(StatusCode::kUnsupported,
                  "this key terminal is not one automaton, so its key classes (patternProperties, "
                  "negated additionalProperties / propertyNames) cannot be built");
  }

  // The kinds of extra members when patternProperties apply: one per class of keys (the set of
  // patterns a key matches), each with the conjunction its values take. Only the classes some key
  // falls in: found depth first, each pattern in or out, an empty intersection pruning its
  // subtree, so patterns that cannot match together (distinct literal prefixes, the usual case)
  // make n + 1 classes rather than 2^n.
  struct ExtraKind {
    ByteDfa keys;
    Conj conj;
  };
  static constexpr std::size_t kMaxPatterns = 64;
  static constexpr std::size_t kMaxPatternClasses = 64;
  Status PatternKinds(const ObjectPlan& plan, std::vector<ExtraKind>* kinds) {
    const std::size_t n = plan.patterns.size();
    if (n > kMaxPatterns) {
      return Status(StatusCode::kUnsupported,
                    "more than " + std::to_string(kMaxPatterns) +
                        " patternProperties on one object",
                    plan.loc);
    }
    auto base = KeyDfa(plan.extra_key);
    if (!base.ok()) return WithLoc(base.status(), plan.loc);
    std::vector<ByteDfa> pats;
    for (const auto& [pat, sub] : plan.patterns) {
      StringConstraint sc;
      sc.pattern = pat;
      auto d = KeyDfa(sc);
      if (!d.ok()) return WithLoc(d.status(), plan.loc + Model::JsonPointerSegmentOf(pat));
      pats.push_back(std::move(*d));
    }
    // Explicit stack: (next pattern, keys so far, patterns matched).
    struct Node {
      std::size_t t;
      ByteDfa keys;
      std::uint64_t mask;
    };
    std::vector<Node> stack;
    stack.push_back({0, std::move(*base), 0});
    while (!stack.empty()) {
      Node node = std::move(stack.back());
      stack.pop_back();
      if (node.keys.start == ByteDfa::kDead) continue;
      if (node.t == n) {
        // Per group: the patterns it matches, or the group's rest.
        std::uint64_t group_matched = 0;
        for (std::size_t t = 0; t < n; ++t)
          if (node.mask >> t & 1) group_matched |= std::uint64_t{1} << plan.pattern_group[t];
        bool allowed = true;
        for (std::size_t g = 0; g < plan.groups.size(); ++g)
          allowed &= (group_matched >> g & 1) != 0 || plan.groups[g].rest_allowed;
        if (!allowed) continue;
        if (kinds->size() == kMaxPatternClasses) {
          return Status(StatusCode::kResourceLimit,
                        "patternProperties whose patterns overlap make more than " +
                            std::to_string(kMaxPatternClasses) +
                            " key classes (sets of patterns one key matches together)",
                        plan.loc);
        }
        Conj c = plan.extra_conj;
        for (std::size_t t = 0; t < n; ++t)
          if (node.mask >> t & 1) c.push_back({plan.patterns[t].second, 0});
        for (std::size_t g = 0; g < plan.groups.size(); ++g)
          if ((group_matched >> g & 1) == 0 && plan.groups[g].rest)
            c.push_back({plan.groups[g].rest, 0});
        kinds->push_back({std::move(node.keys), std::move(c)});
        continue;
      }
      if (o_.deadline.Poll()) return o_.deadline.Error(plan.loc);
      // "Out" first on the stack, so the classes come out with the patterns matched first.
      for (bool in : {false, true}) {
        auto d = ProductDfa(node.keys, pats[node.t], o_.lexical.max_dfa_states, o_.deadline, !in);
        if (!d.ok()) return WithLoc(d.status(), plan.loc);
        stack.push_back({node.t + 1, std::move(*d), in ? node.mask | std::uint64_t{1} << node.t
                                                       : node.mask});
      }
    }
    return Status::Ok();
  }

  // One member "KEY : VALUE" of each kind whose value can hold, as alternatives.
  Result<ExprId> KindMembers(const std::vector<ExtraKind>& kinds, const Conj& also, int depth) {
    std::vector<ExprId> alts;
    for (const ExtraKind& k : kinds) {
      Conj c = k.conj;
      c.insert(c.end(), also.begin(), also.end());
      auto v = CompileConj(c, depth + 1);
      if (!v.ok()) return v.status();
      if (IsNever(*v)) continue;
      Expr key;
      key.kind = ExprKind::kByteDfa;
      key.dfa = std::make_shared<const ByteDfa>(k.keys);
      alts.push_back(Seq({Add(std::move(key)), Ws(), Lit(":"), Ws(), *v}));
    }
    return Alt(std::move(alts));
  }

  // Objects under $ls:someMember (negated additionalProperties, patternProperties,
  // propertyNames): which witnesses a member can be, by subsets of the object's requirements.
  struct Witnesses {
    std::size_t n = 0;  // requirements; states are the subsets met so far
    std::vector<std::vector<ByteDfa>> keys;  // per requirement: its key class, as a union
  };
  Status PlanWitnesses(const Facts& f, Witnesses* w) {
    w->n = f.some_members.size();
    // The member chain carries the subset of requirements met: 2^n states.
    const auto limit = static_cast<std::size_t>(std::clamp(o_.max_some_member_requirements, 0, 16));
    if (w->n > limit) {
      return Status(StatusCode::kResourceLimit,
                    std::to_string(w->n) +
                        " 'some member breaks it' requirements on one object (negated "
                        "additionalProperties / patternProperties / propertyNames) make 2^" +
                        std::to_string(w->n) +
                        " member chains, past max_some_member_requirements (" +
                        std::to_string(o_.max_some_member_requirements) +
                        "; raise it, with schema_max_exprs)",
                    cur_loc_);
    }
    for (const json* some : f.some_members) {
      auto classes = m_.WitnessKeyClasses(*some);
      if (!classes.ok()) return classes.status();
      std::vector<ByteDfa> dfas;
      for (const StringConstraint& sc : *classes) {
        auto d = KeyDfa(sc);
        if (!d.ok()) return WithLoc(d.status(), m_.Loc(some));
        if (d->start != ByteDfa::kDead) dfas.push_back(std::move(*d));
      }
      w->keys.push_back(std::move(dfas));
    }
    return Status::Ok();
  }
  Conj WitnessValues(const Facts& f, std::size_t subset) const {
    Conj c;
    for (std::size_t t = 0; t < f.some_members.size(); ++t)
      if (subset & (std::size_t{1} << t)) c.push_back(Model::WitnessConj(*f.some_members[t])[0]);
    return c;
  }
  // The extra kinds whose keys are in every class of `subset` (keys intersected).
  Status WitnessKinds(const std::vector<ExtraKind>& kinds, const Witnesses& w, std::size_t subset,
                      std::vector<ExtraKind>* out) {
    std::vector<ExtraKind> cur = kinds;
    for (std::size_t t = 0; t < w.n; ++t) {
      if (!(subset & (std::size_t{1} << t))) continue;
      std::vector<ExtraKind> next;
      for (const ExtraKind& k : cur) {
        for (const ByteDfa& d : w.keys[t]) {
          auto x = ProductDfa(k.keys, d, o_.lexical.max_dfa_states, o_.deadline, false);
          if (!x.ok()) return WithLoc(x.status(), cur_loc_);
          if (x->start != ByteDfa::kDead) next.push_back({std::move(*x), k.conj});
        }
      }
      if (next.size() > 64) {
        return Status(StatusCode::kResourceLimit,
                      "more than 64 key classes for the members that break a negated "
                      "additionalProperties / patternProperties / propertyNames",
                      cur_loc_);
      }
      cur = std::move(next);
    }
    *out = std::move(cur);
    return Status::Ok();
  }

  // ---- objects ----

  // A declared member of an object: variants[s] is the member as the witness of the
  // requirements in subset s (0: none).
  struct M {
    std::vector<std::pair<std::size_t, RuleId>> variants;
    bool required;
  };

  // Objects in any member order (SchemaCompileOptions::any_member_order): one rule per state
  // (U, c, w) reachable from the empty object, U the set of declared members written so far, c
  // the members written (saturated at `cap`), w the subset of "some member" requirements met.
  // Its alternatives: a separator, then a declared member not in U or an extra member, then
  // the state after it; or the end, when every required member is in U, c reaches
  // minProperties and every requirement is met. Each declared key at most once, in any order:
  // exact, and up to 2^n states for n declared members, so n is bounded
  // (SchemaCompileOptions::any_order_max_properties; the expression budget and the deadline
  // bound the rest).
  // Errors are located at the first `properties` of the object's subschemas.
  Result<ExprId> AnyOrderObject(const std::vector<M>& members, const std::vector<RuleId>& extra,
                                const Facts& f, std::int64_t cap) {
    std::string loc = cur_loc_;
    for (const json* j : f.obj) {
      if (j->is_object() && j->contains("properties")) {
        loc = m_.KwLoc(j, "properties");
        break;
      }
    }
    const std::size_t n = members.size();
    const auto limit = static_cast<std::size_t>(std::clamp(o_.any_order_max_properties, 0, 63));
    if (n > limit) {
      return Status(StatusCode::kResourceLimit,
                    "member_order any: " + std::to_string(n) +
                        " properties on one object make 2^" + std::to_string(n) +
                        " sets of members written, past any_order_max_properties (" +
                        std::to_string(limit) +
                        "; raise it, or compile this schema in declared order)",
                    loc);
    }
    const std::int64_t min_p = f.min_props;
    const std::optional<std::int64_t> max_p = f.max_props;
    const std::size_t subsets = extra.size(), full = subsets - 1;
    std::uint64_t required = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (members[j].required) required |= std::uint64_t{1} << j;
    struct State {
      std::uint64_t used;
      std::int64_t c;
      std::size_t w;
      bool operator==(const State& o) const { return used == o.used && c == o.c && w == o.w; }
    };
    struct StateHash {
      std::size_t operator()(const State& s) const {
        return std::hash<std::uint64_t>()(s.used * 1000003u ^
                                          static_cast<std::uint64_t>(s.c) << 40 ^ s.w << 52);
      }
    };
    std::unordered_map<State, RuleId, StateHash> rule_of;
    std::vector<std::pair<State, RuleId>> todo;
    auto ref = [&](const State& s) {
      auto [it, fresh] = rule_of.try_emplace(s, -1);
      if (fresh) {
        std::string name = "a";  // (not "a" + ...: GCC 12 warns, wrongly, of overlapping memcpy)
        name += std::to_string(g_.rules.size());
        it->second = NewRule(name);
        todo.emplace_back(s, it->second);
      }
      return Ref(it->second);
    };
    const ExprId start = ref({0, 0, 0});
    while (!todo.empty()) {
      const auto [s, rule_of_s] = todo.back();
      todo.pop_back();
      std::vector<ExprId> alts;
      if (!(max_p && s.c >= *max_p)) {
        const std::int64_t c2 = std::min(s.c + 1, cap);
        for (std::size_t j = 0; j < n; ++j) {
          if (s.used >> j & 1) continue;
          for (const auto& [v, rule] : members[j].variants) {
            if ((v & s.w) != 0) continue;
            alts.push_back(Seq({s.c > 0 ? Comma() : Ws(), Ref(rule),
                                ref({s.used | std::uint64_t{1} << j, c2, s.w | v})}));
          }
        }
        for (std::size_t v = 0; v < subsets; ++v) {
          if (extra[v] < 0 || (v & s.w) != 0) continue;
          alts.push_back(
              Seq({s.c > 0 ? Comma() : Ws(), Ref(extra[v]), ref({s.used, c2, s.w | v})}));
        }
      }
      if ((s.used & required) == required && s.c >= min_p && s.w == full)
        alts.push_back(Empty());
      g_.rules[rule_of_s].body = Alt(std::move(alts));
      LOCKSTEP_RETURN_IF_ERROR(Budget(loc));
      if (o_.deadline.Poll()) return o_.deadline.Error(loc);
    }
    return Seq({Lit("{"), start, Ws(), Lit("}")});
  }

  Result<ExprId> ObjectExpr(const Facts& f, int depth) {
    auto plan = m_.PlanObject(f);
    if (!plan.ok()) return plan.status();
    if (plan->never) return Never();
    Witnesses wit;
    LOCKSTEP_RETURN_IF_ERROR(PlanWitnesses(f, &wit));
    const std::size_t subsets = std::size_t{1} << wit.n, full = subsets - 1;
    std::vector<M> members;
    for (const Member& m : plan->members) {
      if (m.forbidden) continue;
      M out{{}, m.required};
      std::size_t classes = 0;  // the requirements whose key class holds m.key
      for (std::size_t t = 0; t < wit.n; ++t) {
        auto in = m_.KeyInClass(*f.some_members[t], m.key);
        if (!in.ok()) return in.status();
        if (*in) classes |= std::size_t{1} << t;
      }
      for (std::size_t s = 0; s < subsets; ++s) {
        if ((s & ~classes) != 0) continue;
        Conj c = m.conj;
        Conj wv = WitnessValues(f, s);
        c.insert(c.end(), wv.begin(), wv.end());
        auto v = CompileConj(c, depth + 1);
        if (!v.ok()) return v;
        if (IsNever(*v)) continue;
        ExprId e = Seq({Lit(RenderJsonString(m.key)), Ws(), Lit(":"), Ws(), *v});
        out.variants.emplace_back(s, RuleOf(e, "m"));
      }
      if (out.variants.empty() || out.variants[0].first != 0) {
        if (m.required) return Never();
        if (out.variants.empty()) continue;
      }
      members.push_back(std::move(out));
    }
    // extra[s]: one extra member as the witness of subset s (extra[0]: any extra member).
    std::vector<RuleId> extra(subsets, -1);
    if (plan->extras) {
      std::vector<ExtraKind> kinds;
      Status st = plan->patterns.empty() ? Status::Ok() : PatternKinds(*plan, &kinds);
      if (!st.ok() && !m_.Relax(st)) return st;
      if (!st.ok()) kinds.clear();
      ExprId x = Never();
      if (!plan->patterns.empty() && st.ok()) {
        LOCKSTEP_ASSIGN_OR_RETURN(x, KindMembers(kinds, {}, depth));
      } else {
        // Relaxed patterns: any value.
        auto v = CompileConj(st.ok() ? plan->extra_conj : Conj{}, depth + 1);
        if (!v.ok()) return v;
        if (!IsNever(*v)) {
          auto k = AddStringExpr(&g_, plan->extra_key, o_.lexical);
          if (k.ok()) {
            x = Seq({*k, Ws(), Lit(":"), Ws(), *v});
          } else if (k.status().code() != StatusCode::kUnsatisfiable) {
            return WithLoc(k.status(), cur_loc_);
          }
        }
        if (wit.n > 0 && !IsNever(x)) {
          auto keys = KeyDfa(plan->extra_key);
          if (!keys.ok()) return WithLoc(keys.status(), cur_loc_);
          kinds = {{std::move(*keys), st.ok() ? plan->extra_conj : Conj{}}};
        }
      }
      if (!IsNever(x)) extra[0] = RuleOf(x, "x");
      for (std::size_t s = 1; s < subsets && extra[0] >= 0; ++s) {
        std::vector<ExtraKind> ws;
        LOCKSTEP_RETURN_IF_ERROR(WitnessKinds(kinds, wit, s, &ws));
        LOCKSTEP_ASSIGN_OR_RETURN(ExprId wx, KindMembers(ws, WitnessValues(f, s), depth));
        if (!IsNever(wx)) extra[s] = RuleOf(wx, "x");
      }
    }
    const std::int64_t min_p = f.min_props;
    const std::optional<std::int64_t> max_p = f.max_props;
    if (max_p && *max_p < min_p) return Never();
    const std::int64_t cap = max_p ? *max_p : std::max<std::int64_t>(min_p, 1);
    const auto n = static_cast<std::int64_t>(members.size());
    if ((n + 1) * (std::min(n, cap) + 1) * static_cast<std::int64_t>(subsets) > 400000) {
      return Status(StatusCode::kResourceLimit,
                    "too many (property, count) states for minProperties/maxProperties", cur_loc_);
    }
    auto tail = [&](std::int64_t c) -> ExprId {
      std::int64_t rmin = std::max<std::int64_t>(0, min_p - c);
      std::int64_t rmax = max_p ? *max_p - c : -1;
      if (extra[0] < 0) rmax = 0;
      if (rmax == 0) return rmin > 0 ? Never() : Empty();
      if (c > 0) return Rep(Seq({Comma(), Ref(extra[0])}), rmin, rmax);
      ExprId e = Seq({Ws(), Ref(extra[0]),
                      Rep(Seq({Comma(), Ref(extra[0])}), std::max<std::int64_t>(0, rmin - 1),
                          rmax < 0 ? -1 : rmax - 1)});
      return rmin == 0 ? Alt({Empty(), e}) : e;
    };
    if (o_.any_member_order) {
      auto any = AnyOrderObject(members, extra, f, cap);
      // (Lenient: past the budget, this object takes its members in declared order, a subset
      // of the valid texts, with a warning.)
      if (any.ok() || !m_.Relax(any.status())) return any;
    }
    // The extra members while requirements are still unmet: w is the subset met so far; one
    // rule per (count, w), declared first (they refer to each other).
    std::vector<std::vector<RuleId>> open_tail(cap + 1, std::vector<RuleId>(subsets, -1));
    for (std::int64_t c = 0; c <= cap && wit.n > 0; ++c)
      for (std::size_t w = 0; w < full; ++w) open_tail[c][w] = NewRule("t" + std::to_string(c));
    auto tail_at = [&](std::int64_t c, std::size_t w) -> ExprId {
      return w == full ? tail(c) : Ref(open_tail[c][w]);
    };
    for (std::int64_t c = 0; c <= cap && wit.n > 0; ++c) {
      for (std::size_t w = 0; w < full; ++w) {
        ExprId body = Never();
        if (!(max_p && c >= *max_p)) {
          const std::int64_t c2 = std::min(c + 1, cap);
          std::vector<ExprId> alts;
          for (std::size_t s = 0; s < subsets; ++s) {
            if (extra[s] < 0 || (s & w) != 0) continue;  // (s \ w is a variant too)
            alts.push_back(Seq({c > 0 ? Comma() : Ws(), Ref(extra[s]), tail_at(c2, w | s)}));
          }
          body = Alt(std::move(alts));
        }
        g_.rules[open_tail[c][w]].body = body;
      }
    }
    LOCKSTEP_ASSIGN_OR_RETURN(RuleId first, DeclaredOrderMembers(members, cap, max_p, subsets,
                                                                tail_at));
    return Seq({Lit("{"), Ref(first), Ws(), Lit("}")});
  }

  // The members of an object in declared order, from the start: the rule of position 0 with no
  // member written and no requirement met. tail_at(c, w): the extra members after the last
  // declared one, c members written, requirements w met.
  Result<RuleId> DeclaredOrderMembers(
      const std::vector<M>& members, std::int64_t cap, std::optional<std::int64_t> max_p,
      std::size_t subsets, const std::function<ExprId(std::int64_t, std::size_t)>& tail_at) {
    const auto n = static_cast<std::int64_t>(members.size());
    // state[c][w] of position i: c members emitted so far (saturated at cap), w the subset of
    // requirements met. It is the separator and then the choice of the next member, one of
    // members i.. up to the first required one (rule "d"), or, when members i.. are all
    // optional, the tail. The separator comes first, once: were each skipped member a rule
    // reading its own separator ("member i, or the rules from i + 1"), whitespace before a comma
    // would be read once per member (an object of 130 optional members carried 130 copies of
    // every whitespace byte's parse: 1.8 ms a position). The choice is member i or the choice
    // from i + 1, a chain as long as the run of optional members; past kLinearRun members, a
    // tree: blocks of 4^k members at aligned offsets in the run ("s"), the choice from member i
    // being block [i, i + h) or the choice from i + h, h the largest power of four dividing i's
    // offset in the run that fits in it, so O(log n) deep and O(n) rules. The chain's length is
    // a prediction depth: one as long as a 130-member object made every fill of a recursive
    // grammar count its long tokens' depth against max_nesting_depth (0.4 ms a fill).
    constexpr std::int64_t kLinearRun = 32;
    using Table = std::vector<std::vector<RuleId>>;  // [c][w]
    std::vector<Table> state(n + 1), choice(n + 1);
    std::vector<bool> all_optional(n + 1, true);  // members i.. are all optional
    std::vector<std::int64_t> run_end(n + 1, n - 1), run_start(n + 1, 0);
    for (std::int64_t i = n - 1; i >= 0; --i) {
      all_optional[i] = all_optional[i + 1] && !members[i].required;
      run_end[i] = members[i].required || i == n - 1 ? i : run_end[i + 1];
    }
    for (std::int64_t i = 1; i < n; ++i) {
      run_start[i] = members[i - 1].required ? i : run_start[i - 1];
    }
    // Member x next, then the state after it (c2 members written then). A choice depends on
    // the count only through c2, so counts with one c2 (0 and 1 when cap is 1: the first
    // member or a later one) share their choices.
    auto member = [&](std::int64_t x, std::int64_t c2, std::size_t w) -> ExprId {
      std::vector<ExprId> alts;
      for (const auto& [s, rule] : members[x].variants) {
        if ((s & w) == 0) alts.push_back(Seq({Ref(rule), Ref(state[x + 1][c2][w | s])}));
      }
      return Alt(std::move(alts));
    };
    // Blocks [x, x + h) of members, h a power of 4 (h = 1: the member itself), per (c, w).
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::size_t>, RuleId> blocks;
    auto block = [&](auto&& self, std::int64_t x, std::int64_t h, std::int64_t c,
                     std::size_t w) -> ExprId {  // (c: c2)
      if (h == 1) return member(x, c, w);
      auto f = blocks.find({x, h, c, w});
      if (f != blocks.end()) return Ref(f->second);
      const std::int64_t q = h / 4;
      const ExprId e = Alt({self(self, x, q, c, w), self(self, x + q, q, c, w),
                            self(self, x + 2 * q, q, c, w), self(self, x + 3 * q, q, c, w)});
      const RuleId r = RuleOf(e, "s");
      blocks.emplace(std::make_tuple(x, h, c, w), r);
      return Ref(r);
    };
    // The choice from i: block [i, i + step[i]), then the choice from i + step[i] if in the run.
    std::vector<std::int64_t> step(n + 1, 1);
    for (std::int64_t i = 0; i < n; ++i) {
      if (run_end[i] - run_start[i] + 1 <= kLinearRun) continue;
      const std::int64_t t = i - run_start[i], left = run_end[i] - i + 1;
      while (step[i] * 4 <= left && (t % (step[i] * 4)) == 0) step[i] *= 4;
    }
    // The choices with no member written yet: those the start reaches.
    std::vector<bool> from_start(n + 1, false);
    for (std::int64_t i = 0; n > 0 && i <= run_end[0]; i += step[i]) from_start[i] = true;
    for (std::int64_t i = n; i >= 0; --i) {
      const std::int64_t top = std::min(i, cap);
      choice[i].assign(top + 1, std::vector<RuleId>(subsets, -1));
      const std::int64_t left = run_end[i] - i + 1, h = step[i];
      for (std::int64_t c = 0; c <= top && i < n && !(max_p && c == *max_p); ++c) {
        // (No member written yet: only before the first required one.)
        if (c == 0 && !from_start[i]) continue;
        const std::int64_t c2 = std::min(c + 1, cap);
        if (c > 0 && std::min(c, cap) == c2 && choice[i][c - 1][0] >= 0) {
          choice[i][c] = choice[i][c - 1];  // (same c2)
          continue;
        }
        for (std::size_t w = 0; w < subsets; ++w) {
          std::vector<ExprId> alts = {block(block, i, h, c2, w)};
          if (h < left) alts.push_back(Ref(choice[i + h][c][w]));
          choice[i][c][w] = RuleOf(Alt(std::move(alts)), "d");
        }
      }
      state[i].assign(top + 1, std::vector<RuleId>(subsets, -1));
      for (std::int64_t c = i > 0 ? 1 : 0; c <= top; ++c) {  // (c = 0: the start only)
        for (std::size_t w = 0; w < subsets; ++w) {
          std::vector<ExprId> alts;
          if (choice[i][c][w] >= 0) {
            alts.push_back(Seq({c > 0 ? Comma() : Ws(), Ref(choice[i][c][w])}));
          }
          if (all_optional[i]) alts.push_back(tail_at(c, w));
          state[i][c][w] = RuleOf(Alt(std::move(alts)), "o");
        }
      }
      LOCKSTEP_RETURN_IF_ERROR(Budget(cur_loc_));
    }
    return state[0][0][0];
  }

  // ---- arrays ----

  Result<ExprId> ArrayExpr(const Facts& f, int depth) {
    ArrayPlan plan = m_.PlanArray(f);
    const std::int64_t min_i = f.min_items;
    const std::optional<std::int64_t> max_i = f.max_items;
    if (max_i && *max_i < min_i) return Never();
    if (!f.contains.empty()) {
      const Facts::Contains& c = f.contains[0];
      auto e = f.contains.size() == 1 && plan.prefix.empty() && !f.unique && !max_i &&
                       min_i <= c.min
                   ? ContainsExpr(f, depth)
                   : CountingExpr(f, plan, depth);
      if (e.ok() || !m_.Relax(e.status())) return e;
    }
    if (f.unique && !(max_i && *max_i <= 1)) {
      auto e = UniqueExpr(f, plan);
      if (!e.ok() && e.status().code() == StatusCode::kUnsupported) {
        auto strings = UniqueRuntimeExpr(f, plan, depth);
        if (!strings.ok()) return strings.status();
        if (*strings) return **strings;
      }
      if (e.ok() || !m_.Relax(e.status())) return e;
    }
    auto rest = CompileConj(plan.rest, depth + 1);
    if (!rest.ok()) return rest;
    bool rest_never = IsNever(*rest);
    RuleId r = rest_never ? -1 : RuleOf(*rest, "i");
    auto p = static_cast<std::int64_t>(plan.prefix.size());
    if (max_i) p = std::min(p, *max_i);
    std::int64_t rmin = std::max<std::int64_t>(0, min_i - p);
    std::int64_t rmax = max_i ? *max_i - p : -1;
    if (rest_never) rmax = 0;
    ExprId t;
    if (rmax == 0) {
      t = rmin > 0 ? Never() : Empty();
    } else if (p > 0) {
      t = Rep(Seq({Comma(), Ref(r)}), rmin, rmax);
    } else {
      ExprId e = Seq({Ws(), Ref(r),
                      Rep(Seq({Comma(), Ref(r)}), std::max<std::int64_t>(0, rmin - 1),
                          rmax < 0 ? -1 : rmax - 1)});
      t = rmin == 0 ? Alt({Empty(), e}) : e;
    }
    for (std::int64_t i = p - 1; i >= 0; --i) {
      auto e = CompileConj(plan.prefix[i], depth + 1);
      if (!e.ok()) return e;
      ExprId emit = Seq({i == 0 ? Ws() : Comma(), *e, t});
      t = Alt({emit, i >= min_i ? Empty() : Never()});
    }
    return Seq({Lit("["), t, Ws(), Lit("]")});
  }

  // One contains keyword, no prefixItems, no maxItems and minItems within the contains count:
  // the items before the first match, then the matches with the items between them.
  Result<ExprId> ContainsExpr(const Facts& f, int depth) {
    const std::int64_t a = f.contains[0].min;
    const std::optional<std::int64_t> b = f.contains[0].max;
    if (b && *b < a) return Never();
    Conj yes = m_.ContainsConj(f, 0, false), no = m_.ContainsConj(f, 0, true);
    auto y0 = CompileConj(yes, depth + 1);
    if (!y0.ok()) return y0;
    auto n0 = CompileConj(no, depth + 1);
    if (!n0.ok()) return n0;
    RuleId ry = IsNever(*y0) ? -1 : RuleOf(*y0, "cy");
    RuleId rn = IsNever(*n0) ? -1 : RuleOf(*n0, "cn");
    auto Y = [&] { return ry < 0 ? Never() : Ref(ry); };
    auto N = [&] { return rn < 0 ? Never() : Ref(rn); };
    auto ns = [&] { return Rep(Seq({Comma(), N()}), 0, -1); };
    // Items before the first match: "N , N , ... ,".
    auto npre = [&] { return Alt({Empty(), Seq({Ws(), N(), ns(), Ws(), Lit(",")})}); };
    auto more = [&](std::int64_t lo, std::int64_t hi) {
      return Rep(Seq({Comma(), Y(), ns()}), lo, hi);
    };
    ExprId content;
    if (a >= 1) {
      content = Seq({npre(), Ws(), Y(), ns(), more(a - 1, b ? *b - 1 : -1)});
    } else {
      std::vector<ExprId> alts = {Empty(), Seq({Ws(), N(), ns()})};
      if (!b || *b > 0) alts.push_back(Seq({npre(), Ws(), Y(), ns(), more(0, b ? *b - 1 : -1)}));
      content = Alt(std::move(alts));
    }
    return Seq({Lit("["), content, Ws(), Lit("]")});
  }

  // Several contains keywords, or one next to prefixItems, minItems or maxItems: each item falls
  // in one class by the contains subschemas it satisfies (the items' subschema at its position,
  // with each contains subschema or its negation), and the array is a chain of rules over
  // counters: the items so far (saturated where the bounds stop telling counts apart) and, per
  // keyword, its matches so far (saturated at minContains without a maxContains; past
  // maxContains there is no rule).
  static constexpr std::size_t kMaxContains = 5;
  Result<ExprId> CountingExpr(const Facts& f, const ArrayPlan& plan, int depth) {
    const std::string loc = m_.KwLoc(f.contains[0].owner, "contains");
    if (f.unique) {
      return Status(StatusCode::kUnsupported, "contains together with uniqueItems",
                    f.unique_loc);
    }
    const std::size_t k = f.contains.size();
    if (k > kMaxContains) {
      return Status(StatusCode::kUnsupported,
                    "more than " + std::to_string(kMaxContains) +
                        " contains keywords on one array (2^n item classes)",
                    m_.KwLoc(f.contains[kMaxContains].owner, "contains"));
    }
    for (const Facts::Contains& c : f.contains)
      if (c.max && *c.max < c.min) return Never();
    const std::int64_t min_i = f.min_items;
    const std::optional<std::int64_t> max_i = f.max_items;
    const auto p = static_cast<std::int64_t>(plan.prefix.size());
    // Item counter: 0..cap_t; without maxItems, cap_t stands for "cap_t or more".
    const std::int64_t cap_t = max_i ? *max_i : std::max({min_i, p, std::int64_t{1}});
    std::vector<std::int64_t> cap(k);
    std::int64_t states = cap_t + 1;
    for (std::size_t j = 0; j < k; ++j) {
      cap[j] = f.contains[j].max ? *f.contains[j].max : f.contains[j].min;
      states *= cap[j] + 1;
      if (states > o_.max_exprs) break;
    }
    // Each state is a rule with one alternative per item class (a few expressions each).
    if (states > o_.max_exprs / (4 * (std::int64_t{1} << k))) {
      return Status(StatusCode::kResourceLimit,
                    "counting this array's items for contains, minContains/maxContains and "
                    "minItems/maxItems needs " + std::to_string(states) +
                        " rules, past the budget of " + std::to_string(o_.max_exprs) +
                        " expressions (max_exprs, CompileOptions::schema_max_exprs)",
                    loc);
    }
    // The item classes at each position 0..min(p, cap_t) (the last one is "the rest").
    const std::int64_t positions = std::min(p, cap_t) + 1;
    const std::size_t classes = std::size_t{1} << k;
    std::vector<std::vector<RuleId>> item(positions, std::vector<RuleId>(classes, -1));
    // Per keyword, the node of its subschema and of its negation (ContainsConj's last).
    std::vector<std::array<Conj::value_type, 2>> sides(k);
    for (std::size_t j = 0; j < k; ++j) {
      sides[j] = {m_.ContainsConj(f, j, true).back(), m_.ContainsConj(f, j, false).back()};
    }
    for (std::int64_t i = 0; i < positions; ++i) {
      if (max_i && i >= cap_t) break;  // (no item there)
      for (std::size_t s = 0; s < classes; ++s) {
        Conj c = i < p ? plan.prefix[i] : plan.rest;
        for (std::size_t j = 0; j < k; ++j) c.push_back(sides[j][s >> j & 1]);
        auto e = CompileConj(c, depth + 1);
        if (!e.ok()) return e;
        if (!IsNever(*e)) item[i][s] = RuleOf(*e, "ci");
      }
    }
    // State index: t + (cap_t + 1) * (c_0 + (cap_0 + 1) * (c_1 + ...)).
    std::vector<RuleId> rule(states);
    for (auto& r : rule) r = NewRule("cc" + std::to_string(g_.rules.size()));
    std::vector<std::int64_t> c(k);
    for (std::int64_t idx = 0; idx < states; ++idx) {
      std::int64_t rest = idx;
      const std::int64_t t = rest % (cap_t + 1);
      rest /= cap_t + 1;
      bool done = t >= min_i;
      for (std::size_t j = 0; j < k; ++j) {
        c[j] = rest % (cap[j] + 1);
        rest /= cap[j] + 1;
        if (c[j] < f.contains[j].min) done = false;
      }
      std::vector<ExprId> alts;
      if (done) alts.push_back(Empty());
      if (t < cap_t || !max_i) {
        const std::int64_t t2 = std::min(t + 1, cap_t);
        const auto& here = item[std::min(t, positions - 1)];
        for (std::size_t s = 0; s < classes; ++s) {
          if (here[s] < 0) continue;
          std::int64_t to = 0, scale = cap_t + 1;
          bool dead = false;
          for (std::size_t j = 0; j < k; ++j) {
            std::int64_t cj = c[j] + (s >> j & 1);
            if (cj > cap[j]) {
              if (f.contains[j].max) dead = true;
              cj = cap[j];
            }
            to += scale * cj;
            scale *= cap[j] + 1;
          }
          if (dead) continue;
          alts.push_back(Seq({t == 0 ? Ws() : Comma(), Ref(here[s]), Ref(rule[to + t2])}));
        }
      }
      g_.rules[rule[idx]].body = Alt(std::move(alts));
      if ((idx & 255) == 255) {
        LOCKSTEP_RETURN_IF_ERROR(Budget(loc));
        if (o_.deadline.Poll()) return o_.deadline.Error(loc);
      }
    }
    LOCKSTEP_RETURN_IF_ERROR(Budget(loc));
    return Seq({Lit("["), Ref(rule[0]), Ws(), Lit("]")});
  }

  // uniqueItems over items drawn from a small finite set: one rule per subset of values used so
  // far (its size is the position, which picks the prefixItems subschema).
  Result<ExprId> UniqueExpr(const Facts& f, const ArrayPlan& plan) {
    const char* kWhy =
        "uniqueItems is enforced on items of one kind spelt one way: strings (maxLength "
        "counted at run time), integers, an enum of scalars, alternatives of strings of one "
        "automaton each, objects (open ones checked as they complete, closed ones by a "
        "search for a new way to finish), alternatives of objects and open strings, or items "
        "of any type whose every kind is open but for literals (numbers with no bound or "
        "multipleOf, open strings and objects, arrays with no array keyword, null, booleans), "
        "with minItems at most 1 where the values can run out and minItems and maxItems at "
        "most 1024 apart; or on items drawn from a small finite set (enum, const, boolean, "
        "null; at most 10 values), by the grammar. Bounded numbers, constrained arrays, and "
        "closed objects beside items of any type are not";
    std::vector<json> all;
    std::vector<std::vector<int>> allowed;  // per position (prefix..., rest): indices in `all`
    for (std::size_t i = 0; i <= plan.prefix.size(); ++i) {
      auto vals = m_.FiniteValues(i < plan.prefix.size() ? plan.prefix[i] : plan.rest);
      if (!vals.ok()) return vals.status();
      if (!*vals) return Status(StatusCode::kUnsupported, kWhy, f.unique_loc);
      std::vector<int> idx;
      for (const json& x : **vals) {
        auto it =
            std::find_if(all.begin(), all.end(), [&](const json& y) { return JsonEqual(x, y); });
        if (it == all.end()) it = all.insert(all.end(), x);
        idx.push_back(static_cast<int>(it - all.begin()));
      }
      allowed.push_back(std::move(idx));
      if (all.size() > 10) return Status(StatusCode::kUnsupported, kWhy, f.unique_loc);
    }
    const int k = static_cast<int>(all.size());
    const std::int64_t max_i = std::min<std::int64_t>(f.max_items.value_or(k), k);
    if (f.min_items > max_i) return Never();
    std::vector<RuleId> rules(std::size_t{1} << k);
    for (auto& r : rules) {
      std::string name = "u";  // (not "u" + ...: g++ 12 warns falsely about that one here)
      name += std::to_string(g_.rules.size());
      r = NewRule(std::move(name));
    }
    for (std::size_t s = 0; s < rules.size(); ++s) {
      int count = __builtin_popcount(static_cast<unsigned>(s));
      std::vector<ExprId> alts;
      if (count >= f.min_items) alts.push_back(Empty());
      if (count < max_i) {
        const auto& here = allowed[std::min<std::size_t>(count, plan.prefix.size())];
        for (int x : here) {
          if (s & (std::size_t{1} << x)) continue;
          alts.push_back(Seq({count == 0 ? Ws() : Comma(), ValueExpr(all[x]),
                              Ref(rules[s | (std::size_t{1} << x)])}));
        }
      }
      g_.rules[rules[s]].body = Alt(std::move(alts));
    }
    return Seq({Lit("["), Ref(rules[0]), Ws(), Lit("]")});
  }

  // uniqueItems checked at run time (grammar::Rule::unique_item): the items are a list rule that
  // calls one item rule per item, and the parser drops an item equal to an earlier one. Items:
  // strings, integers, or an enum of scalars, each spelt one way by the grammar (integers as
  // integers, strings canonically), so that equal values are equal texts. Where every prefix
  // of an item can still become infinitely many values (a string without maxLength, an integer
  // without maximum: "open") the check at completion is all it takes. Otherwise (an enum, a
  // pattern or format of bounded length, bounded integers) the item rule is one byte automaton,
  // and the parser also drops an item whose every way to finish repeats an earlier one, and a
  // list left with no new value for its next item (CfgProgram::item_completions); minItems is
  // then at most 1 (more would need counting the values left). minItems and maxItems are spelt
  // out in the list rule (at most kMaxUniqueBound apart). nullopt: not such an array.
  static constexpr std::int64_t kMaxUniqueBound = 1024;
  struct Openness {
    bool all_open = true;  // every state but a last one reaches a cycle
    bool start_finite = false;
  };
  // Peels the states of `dfa` with no successor left (Kahn); what is peeled has finitely many
  // ways to finish. A last state (accepting, nothing after it) is no choice.
  Result<Openness> OpennessOf(const ByteDfa& dfa, const std::string& loc) {
    const std::int32_t n = dfa.num_states, nc = dfa.num_classes;
    std::vector<std::int32_t> out(n, 0), rev_begin(n + 1, 0), rev;
    for (StateId q = 1; q < n; ++q) {
      for (std::int32_t c = 0; c < nc; ++c) {
        const StateId t = dfa.next[static_cast<std::size_t>(q) * nc + c];
        if (t == ByteDfa::kDead) continue;
        ++out[q];
        ++rev_begin[t + 1];
      }
      if ((q & 1023) == 0 && o_.deadline.Poll()) return o_.deadline.Error(loc);
    }
    for (std::int32_t q = 0; q < n; ++q) rev_begin[q + 1] += rev_begin[q];
    rev.resize(rev_begin[n]);
    std::vector<std::int32_t> fill(rev_begin.begin(), rev_begin.end() - 1);
    for (StateId q = 1; q < n; ++q) {
      for (std::int32_t c = 0; c < nc; ++c) {
        const StateId t = dfa.next[static_cast<std::size_t>(q) * nc + c];
        if (t != ByteDfa::kDead) rev[fill[t]++] = q;
      }
    }
    const std::vector<std::int32_t> degree = out;
    Openness o;
    std::vector<StateId> peel;
    for (StateId q = 1; q < n; ++q)
      if (out[q] == 0) peel.push_back(q);
    for (std::size_t i = 0; i < peel.size(); ++i) {
      const StateId q = peel[i];
      if (!dfa.IsAccepting(q) || degree[q] > 0) o.all_open = false;
      if (q == dfa.start) o.start_finite = true;
      for (std::int32_t j = rev_begin[q]; j < rev_begin[q + 1]; ++j)
        if (--out[rev[j]] == 0) peel.push_back(rev[j]);
    }
    return o;
  }
  // Items that are alternatives (anyOf, oneOf: each alternative with the others' negations)
  // of strings, each one byte automaton (an enum, a pattern, a format; no length counter): the
  // union of the automata, one expression, as an item of one string constraint is. -1 when the
  // alternatives are not all such strings (or more than 8).
  Result<ExprId> StringUnionExpr(const std::vector<std::pair<Conj, Facts>>& alts,
                                 const std::string& loc) {
    if (alts.empty() || alts.size() > 8) return ExprId{-1};
    std::vector<std::shared_ptr<const ByteDfa>> dfas;
    for (const auto& [conj, a] : alts) {
      ExprId e = -1;
      if (a.enum_vals) {
        // The values the alternative allows, as a pattern of alternatives (each character
        // but letters and digits escaped as \uXXXX; others than the BMP's as they are).
        std::string pattern = "^(?:";
        bool any = false;
        for (const json& v : *a.enum_vals) {
          if (!v.is_string()) return ExprId{-1};
          auto ok = m_.Check(conj, v);
          if (!ok.ok()) return ok.status();
          if (!*ok) continue;
          if (any) pattern += '|';
          any = true;
          const std::string& text = v.get_ref<const std::string&>();
          for (std::size_t i = 0; i < text.size();) {
            const auto c = static_cast<unsigned char>(text[i]);
            if (std::isalnum(c)) {
              pattern += static_cast<char>(c);
              ++i;
              continue;
            }
            char32_t cp = c;
            std::size_t len = 1;
            if (c >= 0xF0) {
              len = 4;
            } else if (c >= 0xE0) {
              len = 3, cp = c & 0x0F;
            } else if (c >= 0xC0) {
              len = 2, cp = c & 0x1F;
            }
            if (len == 4 || i + len > text.size()) {  // (beyond the BMP: the bytes themselves)
              pattern.append(text, i, std::min(len, text.size() - i));
              i += len;
              continue;
            }
            for (std::size_t k = 1; k < len; ++k)
              cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
            pattern += buf;
            i += len;
          }
        }
        if (!any) continue;
        pattern += ")$";
        StringConstraint sc;
        sc.pattern = pattern;
        auto se = AddStringExpr(&g_, sc, o_.lexical);
        if (!se.ok()) return ExprId{-1};
        e = *se;
      } else {
        if (a.types != kTString) return ExprId{-1};
        StringConstraint sc = StringConstraintOf(a);
        for (const json& v : a.not_in)
          if (v.is_string()) sc.excluded.push_back(v.get<std::string>());
        auto se = AddStringExpr(&g_, sc, o_.lexical);
        if (!se.ok()) {
          if (se.status().code() == StatusCode::kUnsatisfiable) continue;
          return WithLoc(se.status(), a.str_loc.empty() ? loc : a.str_loc);
        }
        e = *se;
      }
      if (IsNever(e)) continue;
      const Expr& x = g_.expr(e);
      if (x.kind != ExprKind::kByteDfa || x.dfa == nullptr) return ExprId{-1};
      dfas.push_back(x.dfa);
    }
    if (dfas.empty()) return ExprId{-1};
    if (dfas.size() == 1) return g_.Add(ByteDfaNode(dfas[0]));
    std::vector<const ByteDfa*> parts;
    for (const auto& d : dfas) parts.push_back(d.get());
    auto u = StringDfaUnion(parts, o_.lexical.max_dfa_states);
    if (!u.ok()) return WithLoc(u.status(), loc);
    return g_.Add(ByteDfaNode(std::make_shared<const ByteDfa>(std::move(*u))));
  }
  // Over a JSON string automaton (each state at one place of JSON's character syntax): the
  // fewest ways, over its states before the closing quote, to reach that quote starting at most
  // one new character, counted up to `cap`; -1 once `deadline` has passed (polled per byte
  // step).
  static std::int64_t FewestWaysWithinOneCharacter(const ByteDfa& d, std::int64_t cap,
                                                   const CompileDeadline& deadline) {
    const std::int32_t n = d.num_states;
    std::vector<std::int16_t> mode(static_cast<std::size_t>(n), -1);
    if (d.start == ByteDfa::kDead) return 0;
    mode[d.start] = kCharBeforeQuote;
    std::vector<StateId> order(1, d.start);
    for (std::size_t k = 0; k < order.size(); ++k) {
      const StateId q = order[k];
      for (int b = 0; b < 256; ++b) {
        const StateId t = d.Step(q, static_cast<std::uint8_t>(b));
        if (t == ByteDfa::kDead || mode[t] >= 0) continue;
        auto m = static_cast<std::uint8_t>(mode[q]);
        JsonCharStep(&m, static_cast<std::uint8_t>(b));
        mode[t] = m;
        order.push_back(t);
      }
    }
    // ways(q, m, started): memoised by (q, started); m is q's mode.
    std::vector<std::int64_t> memo(static_cast<std::size_t>(n) * 2, -1);
    std::function<std::int64_t(StateId, int, int)> ways = [&](StateId q, int started,
                                                              int depth) -> std::int64_t {
      std::int64_t& slot = memo[static_cast<std::size_t>(q) * 2 + started];
      if (slot >= 0) return slot;
      if (depth > 32) return 0;  // (not a string automaton's shape: no ways counted)
      std::int64_t w = 0;
      for (int b = 0; b < 256 && w < cap; ++b) {
        if (deadline.Poll()) return 0;  // (the caller reads the deadline)
        const StateId t = d.Step(q, static_cast<std::uint8_t>(b));
        if (t == ByteDfa::kDead) continue;
        auto m = static_cast<std::uint8_t>(mode[q]);
        const int s = started + (JsonCharStep(&m, static_cast<std::uint8_t>(b)) ? 1 : 0);
        if (s > 1) continue;
        if (m == kCharClosed) {
          w += d.IsAccepting(t) ? 1 : 0;
        } else {
          w += ways(t, s, depth + 1);
        }
      }
      slot = std::min(w, cap);
      return slot;
    };
    std::int64_t fewest = cap;
    for (const StateId q : order) {
      if (mode[q] == kCharClosed) continue;
      fewest = std::min(fewest, ways(q, 0, 0));
      if (deadline.Poll()) return -1;
    }
    return deadline.PassedNow() ? -1 : fewest;
  }
  static bool AnyValueSchema(const json& j) {
    if (j.is_boolean()) return j.get<bool>();
    if (!j.is_object()) return false;
    for (const auto& [k, v] : j.items()) {
      if (k != "description" && k != "title" && k != "default" && k != "examples" &&
          k != "$comment" && k != "markdownDescription") {
        return false;
      }
    }
    return true;
  }
  static bool ObjectItemsOpen(const Facts& it, const ObjectPlan& p) {
    if (p.never || !p.extras || p.extra_key_none || !p.patterns.empty() || it.max_props ||
        !it.some_members.empty() || it.enum_vals) {
      return false;
    }
    for (const Node& n : p.extra_conj)
      if (n.j == nullptr || !AnyValueSchema(*n.j)) return false;
    for (const json* j : it.obj) {
      for (const char* k : {"propertyNames", "dependentSchemas", "dependencies",
                            "unevaluatedProperties", "patternProperties"}) {
        if (j->contains(k)) return false;
      }
    }
    return true;
  }
  // Items of several types (of any type: `{}`, an untyped `pattern`), or numbers, or arrays,
  // whose every prefix can still become infinitely many values, but along a literal: numbers with no bound or
  // multipleOf (every prefix goes on with more digits), strings whose automaton is open, objects
  // that can always take one more member, arrays with no array keyword (any items, as many as
  // wanted), and null and booleans. The literals run out at their first byte (`t` can only be
  // `true`): the item rule is then its own item automaton, its calls of other rules (objects,
  // arrays) counted as infinitely many ways (grammar::Rule::unique_open_calls).
  Result<bool> AnyTypeItemsOpen(const Facts& it, const std::string& loc) {
    constexpr std::uint8_t kOpenKinds = kTObject | kTArray | kTString | kTNumber;
    if ((it.types & kOpenKinds) == 0 || it.enum_vals || !it.not_in.empty()) return false;
    // (Strings, objects and integers alone have their own cases above; numbers or arrays alone
    // are items of this kind too. A number that is no integer is not one here.)
    if ((it.types & kTFrac) != 0 && (it.types & kTInt) == 0) return false;
    if ((it.types & kTNumber) != 0 &&
        (it.min || it.max || it.multiple_of || !it.not_multiples.empty())) {
      return false;
    }
    if ((it.types & kTArray) != 0 && (!it.arr.empty() || it.max_items || it.unique ||
                                      !it.contains.empty())) {
      return false;
    }
    if ((it.types & kTObject) != 0) {
      auto plan_o = m_.PlanObject(it);
      if (!plan_o.ok()) return plan_o.status();
      if (!ObjectItemsOpen(it, *plan_o)) return false;
    }
    if ((it.types & kTString) != 0) {
      const StringConstraint sc = StringConstraintOf(it);
      if (sc.max_length) return false;
      if (sc.pattern || !sc.also_patterns.empty() || !sc.not_patterns.empty() || sc.format ||
          !sc.also_formats.empty() || !sc.not_formats.empty()) {
        auto e = AddStringExpr(&g_, sc, o_.lexical);
        if (!e.ok()) {
          if (e.status().code() == StatusCode::kUnsatisfiable) return false;
          return WithLoc(e.status(), it.str_loc.empty() ? loc : it.str_loc);
        }
        const Expr& x = g_.expr(*e);
        if (x.kind != ExprKind::kByteDfa || x.dfa == nullptr) return false;
        auto o = OpennessOf(*x.dfa, loc);
        if (!o.ok()) return o.status();
        if (!o->all_open) return false;
      }
    }
    return true;
  }
  Result<std::optional<ExprId>> UniqueRuntimeExpr(const Facts& f, const ArrayPlan& plan,
                                                  int depth) {
    const std::optional<ExprId> no;
    if (!plan.prefix.empty()) return no;
    auto fl = m_.Expand(plan.rest);
    if (!fl.ok()) return fl.status();
    if (fl->never) return no;
    bool split_open = false;  // items of alternatives, each an open object or open string
    // Objects that can run out of values (closed ones) among the items: masks search for a new
    // way to finish each item (grammar::Rule::unique_search).
    bool search = false;
    ExprId string_union = -1;  // items of alternatives that are strings of one automaton each
    // Alternatives of which some are items of any type (AnyTypeItemsOpen): the item rule is
    // the alternatives, those inlined (their literals run out in the item's own automaton).
    std::vector<std::pair<Conj, bool>> split_any;  // (alternative, of any type)
    if (fl->split >= 0) {
      std::vector<std::pair<Conj, Facts>> alts;
      for (const Conj& alt : m_.Alternatives(*fl)) {
        auto fa = m_.Expand(alt);
        if (!fa.ok()) return fa.status();
        if (fa->never) continue;
        if (fa->split >= 0) return no;
        auto fx = m_.BuildFacts(*fa);
        if (!fx.ok()) return fx.status();
        alts.emplace_back(alt, std::move(*fx));
      }
      auto u = StringUnionExpr(alts, f.unique_loc);
      if (!u.ok()) return u.status();
      string_union = *u;
      if (string_union < 0) {
        // An alternative of any type that allows every object (no object keyword) holds every
        // other alternative's objects, closed ones too: those add no value (conjure's items,
        // an untyped pattern or a closed object).
        bool every_object = false;
        std::vector<bool> any_type(alts.size(), false);
        for (std::size_t i = 0; i < alts.size(); ++i) {
          const Facts& fx = alts[i].second;
          if (fx.types == kTString || fx.types == kTObject) continue;
          auto a = AnyTypeItemsOpen(fx, f.unique_loc);
          if (!a.ok()) return a.status();
          if (!*a) return no;
          any_type[i] = true;
          every_object = every_object ||
                         ((fx.types & kTObject) != 0 && fx.obj.empty() && fx.required.empty() &&
                          fx.min_props == 0 && !fx.max_props && fx.some_members.empty());
        }
        for (std::size_t i = 0; i < alts.size(); ++i) {
          const auto& [conj, fx] = alts[i];
          split_any.emplace_back(conj, any_type[i]);
          if (any_type[i]) {
            split_open = true;
            continue;
          }
          if (fx.types == kTString) {
            // (a string with no bound, pattern, format or excluded value: open)
            const StringConstraint sc = StringConstraintOf(fx);
            if (sc.pattern || !sc.also_patterns.empty() || !sc.not_patterns.empty() ||
                sc.format || !sc.also_formats.empty() || !sc.not_formats.empty() ||
                sc.max_length ||
                std::any_of(fx.not_in.begin(), fx.not_in.end(),
                            [](const json& v) { return v.is_string(); })) {
              return no;
            }
          } else {
            if (fx.types != kTObject) return no;
            auto po = m_.PlanObject(fx);
            if (!po.ok()) return po.status();
            if (!ObjectItemsOpen(fx, *po) && !every_object) search = true;
          }
          split_open = true;
        }
        if (!split_open) return no;
        if (std::none_of(any_type.begin(), any_type.end(), [](bool b) { return b; }))
          split_any.clear();
        if (search && !split_any.empty()) return no;  // (literals and closed objects: not done)
      }
    }
    auto items = split_open || string_union >= 0 ? Result<Facts>(Facts{}) : m_.BuildFacts(*fl);
    if (!items.ok()) return items.status();
    const Facts& it = *items;
    const std::string loc = f.unique_loc;
    bool open = split_open, finite = false;
    bool open_calls = false;  // items of any type (AnyTypeItemsOpen)
    ExprId counted_body = -1;  // a string counted at run time (maxLength alone)
    std::int32_t counted_max = -1;
    ExprId body = -1;  // the item's expression when it is not open
    auto classify = [&](ExprId e) -> Status {
      const Expr& x = g_.expr(e);
      if (x.kind != ExprKind::kByteDfa || x.dfa == nullptr) return Status::Ok();
      auto o = OpennessOf(*x.dfa, loc);
      if (!o.ok()) return o.status();
      open = o->all_open;
      finite = o->start_finite;
      if (!open) body = e;
      return Status::Ok();
    };
    if (split_open) {
      // (compiled below as the item's whole conjunction)
    } else if (string_union >= 0) {
      LOCKSTEP_RETURN_IF_ERROR(classify(string_union));
    } else if (it.enum_vals) {
      if (std::any_of(it.enum_vals->begin(), it.enum_vals->end(),
                      [](const json& v) { return v.is_object() || v.is_array(); })) {
        return no;
      }
      auto e = FactsExpr(it, depth + 1);
      if (!e.ok()) return e.status();
      if (IsNever(*e)) return no;
      body = *e;
      finite = true;
    } else if (it.types == kTString) {
      StringConstraint sc = StringConstraintOf(it);
      for (const json& v : it.not_in)
        if (v.is_string()) sc.excluded.push_back(v.get<std::string>());
      if (!sc.pattern && sc.also_patterns.empty() && sc.not_patterns.empty() && !sc.format &&
          sc.also_formats.empty() && sc.not_formats.empty() && sc.excluded.empty()) {
        if (sc.max_length) {
          // Any string of minLength to maxLength characters: the automaton of the strings of
          // minLength or more (an empty pattern matches them all), its characters counted at
          // run time (RuleInfo::max_chars). Every prefix short of maxLength characters can
          // still become more values than any list holds (every character of Unicode is a way
          // on); at maxLength the parser counts the ways left (EarleyParser, "Unique items").
          // maxLength 0 is one value, "", which the counts above do not cover.
          if (*sc.max_length < 1 || *sc.max_length > std::numeric_limits<std::int32_t>::max()) {
            return no;
          }
          StringConstraint any = sc;
          any.max_length.reset();
          any.pattern = std::string();
          auto e = AddStringExpr(&g_, any, o_.lexical);
          if (!e.ok()) {
            if (e.status().code() == StatusCode::kUnsatisfiable) return no;
            return WithLoc(e.status(), it.str_loc.empty() ? loc : it.str_loc);
          }
          if (g_.expr(*e).kind != ExprKind::kByteDfa) return no;
          counted_body = *e;
          counted_max = static_cast<std::int32_t>(*sc.max_length);
        }
        open = true;
      } else {
        auto e = AddStringExpr(&g_, sc, o_.lexical);
        if (!e.ok() && e.status().code() == StatusCode::kResourceLimit && sc.max_length &&
            *sc.max_length <= std::numeric_limits<std::int32_t>::max() && f.max_items &&
            *f.max_items <= kMaxUniqueBound && !o_.lexical.deadline.PassedNow()) {
          // maxLength beside a pattern or format, past the budget of one automaton: the
          // automaton without it, its characters counted at run time (as values are). Exact
          // when every state has more ways to finish within one more character than the list
          // can hold earlier items: short of maxLength a new value is then always left, and at
          // maxLength the parser tries the ways left.
          StringConstraint uncounted = sc;
          uncounted.max_length.reset();
          auto body = AddStringExpr(&g_, uncounted, o_.lexical);
          const std::int64_t fewest =
              body.ok() && g_.expr(*body).kind == ExprKind::kByteDfa && g_.expr(*body).dfa != nullptr
                  ? FewestWaysWithinOneCharacter(*g_.expr(*body).dfa, *f.max_items, o_.deadline)
                  : 0;
          if (fewest < 0) return o_.deadline.Error(it.str_loc.empty() ? loc : it.str_loc);
          if (fewest >= *f.max_items) {
            counted_body = *body;
            counted_max = static_cast<std::int32_t>(*sc.max_length);
            open = true;
          } else if (body.ok() || body.status().code() == StatusCode::kUnsatisfiable) {
            return no;
          }
        }
        if (counted_body < 0) {
          if (!e.ok()) {
            if (e.status().code() == StatusCode::kUnsatisfiable) return no;
            return WithLoc(e.status(), it.str_loc.empty() ? loc : it.str_loc);
          }
          LOCKSTEP_RETURN_IF_ERROR(classify(*e));
        }
      }
    } else if (it.types == kTObject) {
      // Objects that can always take one more member: a key no declared name, pattern or
      // propertyNames constrains, with any value, and no maxProperties. Every prefix of such an
      // item can still become infinitely many values (the grammar lets extra members follow
      // the declared ones), so the check as items complete is exact.
      auto plan_o = m_.PlanObject(it);
      if (!plan_o.ok()) return plan_o.status();
      search = !ObjectItemsOpen(it, *plan_o);
      open = true;
    } else if (it.types == kTInt) {
      auto e = NumberExpr(it);
      if (!e.ok()) return e.status();
      const Expr& x = g_.expr(*e);
      if (x.kind == ExprKind::kChoice) {
        // Excluded values split the range into intervals, a choice of automata. Open when every
        // interval is (a prefix of the union has the ways on of each interval it is a prefix
        // in), or when the range has no bound at all: all integers (of a multipleOf) but
        // finitely many, where every prefix but a whole `0` goes on without end
        // (winget's installer codes, `"not": {"enum": [0]}`).
        open = !x.children.empty();
        const bool unbounded = !it.min && !it.max;
        for (ExprId c : std::vector<ExprId>(x.children)) {
          const Expr& y = g_.expr(c);
          if (y.kind != ExprKind::kByteDfa || y.dfa == nullptr) return no;
          if (unbounded) continue;
          auto o = OpennessOf(*y.dfa, loc);
          if (!o.ok()) return o.status();
          open = open && o->all_open;
        }
        if (!open) return no;
      } else {
        LOCKSTEP_RETURN_IF_ERROR(classify(*e));
      }
    } else {
      auto any = AnyTypeItemsOpen(it, loc);
      if (!any.ok()) return any.status();
      if (!*any) return no;
      open = open_calls = true;
    }
    if (!open && body < 0) return no;
    if (finite && f.min_items >= 2) return no;  // (counting the values left: not done)
    // (A search looks for one new item: with minItems 2 or more, the items after it would need
    // one too.)
    if (search && f.min_items >= 2) return no;
    const std::int64_t min_i = std::max<std::int64_t>(f.min_items, 1);
    const std::optional<std::int64_t> max_i = f.max_items;
    if (min_i - 1 > kMaxUniqueBound || (max_i && *max_i - min_i > kMaxUniqueBound)) return no;
    RuleId item;
    if (counted_body >= 0) {
      item = RuleOf(counted_body, "ui");
      g_.rules[item].max_chars = counted_max;
    } else if (!split_any.empty()) {
      // Alternatives, some of any type: those inlined, the others called.
      std::vector<ExprId> parts;
      for (const auto& [conj, any] : split_any) {
        auto e = CompileConj(conj, depth + 1);
        if (!e.ok()) return e.status();
        if (IsNever(*e)) continue;
        ExprId part = *e;
        if (any) {
          const Expr& x = g_.expr(part);
          if (x.kind != ExprKind::kRuleRef || g_.rules[x.rule].body < 0) return no;
          part = g_.rules[x.rule].body;
        }
        parts.push_back(part);
      }
      if (parts.empty()) return no;
      open_calls = true;
      item = RuleOf(parts.size() == 1 ? parts[0] : Alt(std::move(parts)), "ui");
    } else if (open) {
      auto e = CompileConj(plan.rest, depth + 1);
      if (!e.ok()) return e.status();
      if (IsNever(*e)) return no;
      ExprId item_body = *e;
      if (open_calls) {
        // The item rule is the item automaton: the alternatives themselves, not a call of the
        // rule that holds them (which other values share).
        const Expr& x = g_.expr(item_body);
        if (x.kind != ExprKind::kRuleRef || g_.rules[x.rule].body < 0) return no;
        item_body = g_.rules[x.rule].body;
      }
      item = RuleOf(item_body, "ui");
    } else {
      item = RuleOf(body, "ui");  // (one byte automaton: CfgProgram::item_automaton_of)
    }
    run_time_checks_.push_back(loc);
    const RuleId list = NewRule("ul" + std::to_string(g_.rules.size()));
    g_.rules[list].unique_item = item;
    g_.rules[list].unique_open_calls = open_calls;
    g_.rules[list].unique_search = search;
    auto next = [&] { return Seq({Comma(), Ref(item)}); };
    std::vector<ExprId> parts = {Ws(), Ref(item)};
    for (std::int64_t i = 1; i < min_i; ++i) parts.push_back(next());
    if (!max_i) {
      parts.push_back(Rep(next(), 0, -1));
    } else {
      ExprId tail = Empty();
      for (std::int64_t i = *max_i; i > min_i; --i) tail = Alt({Empty(), Seq({next(), tail})});
      parts.push_back(tail);
    }
    g_.rules[list].body = Seq(std::move(parts));
    LOCKSTEP_RETURN_IF_ERROR(Budget(loc));
    const ExprId content = f.min_items == 0 ? Alt({Empty(), Ref(list)}) : Ref(list);
    return std::optional<ExprId>(Seq({Lit("["), content, Ws(), Lit("]")}));
  }

  std::vector<std::string> run_time_checks_;  // SchemaGrammar::checked_at_run_time

  struct MemoEntry {
    RuleId rule;
    bool never;
  };

  const Schema& s_;
  SchemaCompileOptions o_;
  // o_.lexical for a string that is a value (LexicalOptions::count_class_patterns).
  LexicalOptions value_lexical_;
  Model m_;
  grammar::Grammar g_;
  RuleId ws_rule_ = -1;
  std::unordered_map<std::string, MemoEntry> memo_;
  // The rule of each expansion (FlatKey) compiled so far.
  std::unordered_map<std::string, RuleId> flat_memo_;
  Status overflow_;
  std::string cur_loc_;
};

// ---- RenderInstance ----

// The deadline's error once it has passed (a failed check is then not an answer), else ok.
Status DeadlineOf(const Model& m, const Conj& c) {
  const CompileDeadline& d = m.options().deadline;
  if (!d.PassedNow()) return Status::Ok();
  return d.Error(c.empty() ? "" : m.Loc(c[0].j));
}

Result<std::string> Render(Model& m, const Conj& c, const json& v, int indent, int depth) {
  // Draft-04: a double with a zero fraction is no integer, so 1.0 renders as "1.0" where a number
  // terminal reads it (an integer one then rejects it), as "1" where enum literals are listed.
  const bool fp = !m.schema().float_integers();
  const bool fp_scalar = fp && v.is_number_float() && IsIntegral(v);
  if (depth > 1000 || (!v.is_object() && !v.is_array() && !fp_scalar)) {
    return RenderPlain(v, indent, depth, fp);
  }
  std::shared_ptr<Model::Expansion> e = m.ExpandCached(c);
  if (!e->flat.ok() || e->flat->never) {
    LOCKSTEP_RETURN_IF_ERROR(DeadlineOf(m, c));
    return RenderPlain(v, indent, depth, fp);
  }
  if (e->flat->split >= 0) {
    for (const Conj& alt : m.Alternatives(*e->flat)) {
      auto ok = m.Check(alt, v);
      if (ok.ok() && *ok) return Render(m, alt, v, indent, depth);
      LOCKSTEP_RETURN_IF_ERROR(DeadlineOf(m, alt));
    }
    return RenderPlain(v, indent, depth, fp);
  }
  const Result<Facts>& f = m.FactsOf(*e);
  if (!f.ok() || f->enum_vals) return RenderPlain(v, indent, depth, fp && !f.ok());
  if (fp_scalar) return RenderScalar(v, true);
  if (v.empty()) return std::string(v.is_object() ? "{}" : "[]");
  std::string pad = Newline(indent, depth + 1);
  std::string out;
  bool first = true;
  auto item = [&](const std::string* key, const Conj& sub, const json& x) -> Status {
    out += first ? "" : ",";
    first = false;
    out += pad;
    if (key) out += RenderJsonString(*key) + (indent < 0 ? ":" : ": ");
    LOCKSTEP_ASSIGN_OR_RETURN(std::string inner, Render(m, sub, x, indent, depth + 1));
    out += inner;
    return Status::Ok();
  };
  if (v.is_object()) {
    const Result<ObjectPlan>& plan = m.PlanOf(*e);
    if (!plan.ok()) {
      LOCKSTEP_RETURN_IF_ERROR(DeadlineOf(m, c));
      return RenderPlain(v, indent, depth, fp);
    }
    out += '{';
    for (const Member& mem : plan->members) {
      if (auto it = v.find(mem.key); it != v.end()) {
        LOCKSTEP_RETURN_IF_ERROR(item(&mem.key, mem.conj, *it));
      }
    }
    for (auto& [k, x] : v.items()) {
      if (plan->declared.count(k)) continue;
      auto c = m.ExtraConj(*plan, k);
      LOCKSTEP_RETURN_IF_ERROR(item(&k, c.ok() && *c ? **c : Conj{}, x));
    }
  } else {
    ArrayPlan plan = m.PlanArray(*f);
    out += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      LOCKSTEP_RETURN_IF_ERROR(
          item(nullptr, i < plan.prefix.size() ? plan.prefix[i] : plan.rest, v[i]));
    }
  }
  out += Newline(indent, depth);
  out += v.is_object() ? "}" : "]";
  return out;
}

// PropertyOrderOf by SAX events: no document is built (this runs with every compile).
class OrderCollector : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit OrderCollector(PropertyOrder* out) : out_(out) {}
  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t) override { return Scalar(); }
  bool number_unsigned(number_unsigned_t) override { return Scalar(); }
  bool number_float(number_float_t, const string_t&) override { return Scalar(); }
  bool string(string_t&) override { return Scalar(); }
  bool binary(binary_t&) override { return Scalar(); }
  bool start_object(std::size_t) override { return Open(true); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_array() override { return Close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    f.key = k;
    if (f.keys != nullptr && std::find(f.keys->begin(), f.keys->end(), k) == f.keys->end()) {
      f.keys->push_back(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    std::string ptr;
    bool object;
    std::size_t index = 0;
    std::string key;
    std::vector<std::string>* keys = nullptr;  // a `properties` object: its keys, in order
  };
  // The pointer of the value about to start, below the top frame.
  std::string ChildPointer() const {
    if (stack_.empty()) return {};
    const Frame& f = stack_.back();
    return f.object ? f.ptr + Model::JsonPointerSegmentOf(f.key)
                    : f.ptr + "/" + std::to_string(f.index);
  }
  bool Open(bool object) {
    Frame f;
    f.object = object;
    if (stack_.size() <= 2000) {
      f.ptr = ChildPointer();
      if (object && !stack_.empty() && stack_.back().object && stack_.back().key == "properties") {
        f.keys = &(*out_)[f.ptr];
      }
    }
    stack_.push_back(std::move(f));
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return Scalar();
  }
  bool Scalar() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
    return true;
  }
  PropertyOrder* out_;
  std::vector<Frame> stack_;
};

}  // namespace

PropertyOrder PropertyOrderOf(std::string_view schema_json) {
  PropertyOrder out;
  OrderCollector collector(&out);
  if (!nlohmann::json::sax_parse(schema_json.begin(), schema_json.end(), &collector)) return {};
  return out;
}

Result<SchemaGrammar> CompileSchemaToGrammar(const Schema& schema,
                                             const SchemaCompileOptions& options) {
  try {
    // (Equal constraints, one automaton within this compile: LexicalOptions::memo.)
    LexicalOptions::Memo memo;
    SchemaCompileOptions o = options;
    o.lexical.memo = &memo;
    Emitter e(schema, o);
    return e.Run();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory compiling the schema");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidSchema, std::string("malformed schema: ") + e.what(), "");
  }
}

namespace {
SchemaCompileOptions RenderOptions(SchemaCompileOptions o) {
  // Never unbounded: without a deadline of the caller's, the default compile deadline.
  if (!o.deadline.active()) {
    o.deadline = CompileDeadline(CompileOptions{}.compile_timeout_ms, nullptr);
  }
  o.lexical.deadline = o.deadline;
  return o;
}
}  // namespace

InstanceRenderer::InstanceRenderer(const Schema& schema, const SchemaCompileOptions& options)
    : schema_(schema), model_(std::make_unique<Model>(schema, RenderOptions(options))) {}

InstanceRenderer::~InstanceRenderer() = default;

Result<std::string> InstanceRenderer::Render(const nlohmann::json& instance, int indent) {
  try {
    // The instance outlives the checks: their results are shared by every level.
    Model::CheckScope scope(model_.get());
    Result<std::string> out = schema::Render(*model_, {{&schema_.root(), 0}}, instance, indent, 0);
    // A rendering finished after the deadline may rest on checks that failed for it.
    const CompileDeadline& d = model_->options().deadline;
    if (out.ok() && d.PassedNow()) return d.Error("");
    return out;
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory rendering the instance");
  } catch (const std::exception&) {
    return RenderPlain(instance, indent, 0, !schema_.float_integers());
  }
}

Result<std::string> TryRenderInstance(const Schema& schema, const nlohmann::json& instance,
                                      int indent, const SchemaCompileOptions& options) {
  try {
    return InstanceRenderer(schema, options).Render(instance, indent);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory rendering the instance");
  }
}

std::string RenderInstance(const Schema& schema, const nlohmann::json& instance, int indent,
                           const SchemaCompileOptions& options) {
  Result<std::string> r = TryRenderInstance(schema, instance, indent, options);
  return r.ok() ? std::move(r).value() : RenderPlain(instance, indent, 0, !schema.float_integers());
}

}  // namespace lockstep::schema
