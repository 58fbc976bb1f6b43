// GrammarCompiler and CompiledGrammar: the entry point that turns a constraint (a regex,
// a grammar, a JSON Schema, a structured format) into a token-level automaton over one vocabulary. A CompiledGrammar is immutable after
// compilation apart from its lazily filled, thread-safe mask cache, and is shared by any number
// of Matchers on any number of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/schema_draft.h"
#include "lockstep/status.h"
#include "lockstep/types.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

struct CompileOptions {
  // Budgets; exceeding one ends compilation with a kResourceLimit error naming it.
  // States of one automaton: a regex's DFA, a grammar rule's (its NFA may have 4 times as
  // many), a JSON Schema string or number constraint's.
  std::int32_t max_dfa_states = 100000;
  // States of a grammar's rule automata together (they share one transition table, a few
  // bytes per state and byte class). A schema's program grows with the schema: Kubernetes'
  // full API definitions (940 KB of JSON) take 118,000 states, its root rule 40,000-60,000.
  std::int64_t max_program_states = 500000;
  std::int32_t max_nfa_states = 1000000;
  std::int32_t max_repeat = 100000;
  // Per-state token masks are computed on first visit and cached (the default, fastest to the
  // first mask); true computes every state's mask at compile time.
  bool precompute_masks = false;
  // Cap on the memory of cached masks. States past it still get exact masks, computed per call.
  std::int64_t max_mask_cache_bytes = std::int64_t{512} << 20;
  // Grammars: deepest nesting of rule predictions (a JSON bracket costs two levels). Input that
  // would nest deeper is rejected (the matcher reports kResourceLimit), never a stack overflow.
  std::int32_t max_nesting_depth = 10000;
  // Grammars: Earley items that one byte of input may create or visit (predictions,
  // completions, the origin sets a completion reads). A byte over it is rejected (the matcher
  // reports kResourceLimit naming this option), never a hang. Counted repetitions of ambiguous
  // or nullable bodies stay far below it (docs/grammars.md, "Bounded sets").
  std::int32_t max_earley_items_per_byte = 100000;
  // JSON Schemas with uniqueItems over closed objects: the bytes the searches for a new way to
  // finish an item may try in one mask fill, and after one accepted token
  // (docs/json-schema-compiler.md, "Objects that can run out of values"). Past it, a fill leaves
  // the tokens still to search out of the mask (FillTrace::unique_search_over) and AcceptToken
  // refuses the token (kResourceLimit naming this option). Real-world lists use a few hundred.
  // A grammar loaded from an artifact runs with the default.
  std::int64_t max_unique_search_bytes = 65536;
  // Grammars: a bounded repetition of terminals ([ \t\n\r]{0,32}) is unrolled inside the rule's
  // byte automaton while it stays under this many NFA states, else it runs as a native counter
  // rule. 0 = automatic: 2048 for grammars (fewer stack-dependent tokens, faster masks) and 256
  // for JSON Schemas (a whitespace gap at every JSON gap: unrolling doubles the time to first
  // mask on the dev-set schemas, 2.9 ms vs 1.4 ms p50).
  std::int32_t max_unrolled_states = 0;
  // Grammars with precompute_masks: threads for the per-position precomputation (0 = all cores).
  std::int32_t precompute_threads = 0;
  // Grammars: a position (the tokens a rule state accepts, docs/grammars.md) computed by one
  // grammar is reused by every later grammar of the same compiler's vocabulary whose automaton
  // from that state is the same (the start of a string value followed by `, "`, a shared
  // `any value` rule), found by a structural key. Up to max_shared_position_bytes per
  // vocabulary; false keeps a grammar's positions to itself.
  bool share_positions = true;
  std::int64_t max_shared_position_bytes = std::int64_t{256} << 20;
  // Grammars computed lazily (precompute_masks false): after a grammar's first mask, one
  // background thread per vocabulary computes its remaining positions, the grammar being decoded
  // first (docs/grammars.md, "Background positions"), so that later fills rarely walk the trie
  // themselves. false: every position is computed by the fill that first needs it, on the
  // calling thread.
  bool background_positions = true;
  // JSON Schemas (CompileSchema; docs/json-schema-compiler.md).
  // Relax what cannot be enforced exactly (reported as warnings) instead of failing.
  bool schema_lenient = false;
  // The draft of a schema whose `$schema` names none of the five drafts (or is absent); a known
  // `$schema` always wins (docs/json-schema.md, as SchemaValidatorOptions::default_draft).
  SchemaDraft schema_default_draft = SchemaDraft::k2020_12;
  // No whitespace at all between tokens (else JSON whitespace, at most
  // schema_max_whitespace_run bytes per gap).
  bool schema_whitespace_compact = false;
  std::int32_t schema_max_whitespace_run = 32;
  // `format` enforced (the default) or only an annotation.
  bool schema_format_assertion = true;
  // Also assert the OpenAPI formats (docs/json-schema-compiler.md): int32 / int64 (an integer
  // in range), byte (base64); float, double, binary and password are known and assert nothing.
  // Without it they are unknown formats: annotations, with a warning.
  bool schema_openapi_formats = false;
  // Object members: kDeclared (the default) expects the declared properties in declared order,
  // then the other members; kAny takes the members in any order, each declared property at most
  // once, every required one present, the rest as additionalProperties / patternProperties
  // allow: exact either way (docs/json-schema-compiler.md, "Member order"). kAny builds one rule
  // per set of declared members written (2^n for n properties), so an object with more than
  // schema_any_order_max_properties declared properties is kResourceLimit in that mode (with
  // schema_lenient: that object keeps declared order, with a warning). 10 properties compile in
  // about 33 ms, 12 in 0.2 s: each property more doubles it, or worse.
  SchemaMemberOrder schema_member_order = SchemaMemberOrder::kDeclared;
  std::int32_t schema_any_order_max_properties = 10;
  // A `oneOf` whose branches are not provably disjoint compiles each branch with the negation
  // of every branch it may overlap: at most this many per branch, else kResourceLimit naming
  // this budget (the expressions multiply: 12 mutually overlapping object branches are about
  // schema_max_exprs). With schema_lenient, such a oneOf is relaxed to anyOf, with a warning.
  std::int32_t schema_max_oneof_overlaps = 11;
  // Negated additionalProperties / patternProperties / propertyNames ("some member breaks it",
  // docs/json-schema-compiler.md): the object's member chain carries the subset of such
  // requirements met so far, so n requirements on one object cost 2^n chain states; past this
  // many, kResourceLimit naming this budget.
  std::int32_t schema_max_some_member_requirements = 3;
  // Budget of grammar expressions built from one schema.
  std::int64_t schema_max_exprs = 2000000;
  // Wall-clock budget of one compile (CompileRegex, CompileGrammar, CompileSchema,
  // CompileStructured, with precompute_masks when set), in milliseconds; 0 = none. Every long
  // phase polls it, so a compile ends within milliseconds of it with kResourceLimit "compile
  // deadline of N ms passed", located at the JSON Pointer of the subschema or the rule being
  // compiled then. A budget against pathological inputs, not a target: the dev-set schemas
  // compile in milliseconds.
  std::int64_t compile_timeout_ms = 10000;
  // Cancellation: a flag the host owns and may set from any thread while a compile with these
  // options runs; the compile then ends the same way, with kResourceLimit "compile cancelled".
  // Null: none. The compile holds a reference to it, so the host may drop its own at any time.
  std::shared_ptr<const std::atomic<bool>> cancel = nullptr;
};

struct CompiledGrammarStats {
  bool is_grammar = false;           // a context-free grammar (else a regex)
  std::int32_t dfa_states = 0;       // regex: including the dead state; grammar: all rule DFAs
  std::int32_t byte_classes = 0;
  std::int32_t accepting_states = 0;
  double compile_ms = 0;             // regex -> minimal byte DFA; grammar: rules -> automata
  std::int32_t cached_masks = 0;     // states whose token mask is cached now
  std::int64_t mask_cache_bytes = 0;
  // Grammars only.
  std::int32_t rules = 0;             // after lowering (counter rules included)
  std::int32_t counter_rules = 0;     // native {m,n} counters
  std::int32_t positions = 0;         // rule positions whose token classes are computed
  std::int32_t shared_positions = 0;  // of which taken from other grammars (share_positions)
  std::int64_t accepted_tokens = 0;   // context-independent accepted, summed over positions
  std::int64_t uncertain_tokens = 0;  // (token, split) pairs checked against the stack
  std::int32_t signatures = 0;        // distinct parser states interned
  // Grammars: the rest of the compile's time, in ms, beside compile_ms (its rules lowered into
  // byte automata). source_ms: the grammar text parsed into the IR, or the JSON Schema loaded
  // and compiled into a normalised grammar (0 when the IR was given, or for an artifact);
  // tables_ms: the runtime's tables built from the automata (follow sets, repetition edges,
  // states folded for tokens, the program's fingerprint; 0 for an artifact). A compile's time
  // is about their sum, so a slow compile says which phase to look at.
  double source_ms = 0;
  double tables_ms = 0;
};

class TokenTrie;
class TokenAutomaton;
class CompiledGrammar;
struct GrammarAccess;

// Holds a vocabulary and its token trie (built once, ~tens of ms for a 128k vocabulary) and
// compiles constraints against it. Thread-safe; compiled grammars keep what they need alive.
class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const Vocabulary> vocab);
  ~GrammarCompiler();

  // Full-match semantics: the generated text as a whole matches `pattern`.
  Result<std::shared_ptr<const CompiledGrammar>> CompileRegex(
      std::string_view pattern, const CompileOptions& options = {}) const;

  // A context-free grammar in GBNF (llama.cpp's dialect) or Lark-style EBNF; `syntax` is
  // "auto" (GBNF if rules use "::="), "gbnf" or "lark". Parse errors are kInvalidGrammar with
  // line:column; see grammar/ir/grammar_ir.h. A rule the start rule never reaches is not an
  // error (llama.cpp and XGrammar accept it): `warnings` (when given) receives one
  // "line:column: rule 'x' is never used (unreachable from 'root')" per such rule.
  Result<std::shared_ptr<const CompiledGrammar>> CompileGrammar(
      std::string_view text, const CompileOptions& options = {}, std::string_view syntax = "auto",
      std::vector<std::string>* warnings = nullptr) const;
  // A JSON Schema (draft 2020-12 or draft-07, by its $schema): valid JSON texts of the instances
  // it accepts, rendered under the formatting policy. Errors keep the JSON Pointer of the keyword
  // in Status::location() (kInvalidSchema, kUnsupported, kUnsatisfiable, kResourceLimit).
  // With schema_lenient, `warnings` (when given) receives one "pointer: message" per relaxed
  // keyword.
  Result<std::shared_ptr<const CompiledGrammar>> CompileSchema(
      std::string_view schema_json, const CompileOptions& options = {},
      std::vector<std::string>* warnings = nullptr) const;

  const Vocabulary& vocabulary() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& vocabulary_ptr() const { return vocab_; }
  // vocabulary().Fingerprint(), computed once here (compiled artifacts are checked against it).
  std::uint64_t vocab_fingerprint() const { return vocab_fingerprint_; }

 private:
  friend struct GrammarAccess;  // the token trie, for the engine's own layers
  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const TokenTrie> trie_;
  std::uint64_t vocab_fingerprint_ = 0;
};

// The grammar a JSON Schema compiles to (what GrammarCompiler::CompileSchema lifts to tokens),
// as GBNF text to read (`lockstep compile --schema F --emit-grammar`). Lexemes the schema
// compiles to automata directly (patterns, formats, bounded numbers) print as `/<dfa N states>/`,
// so the text is a description, not a grammar to compile again. It needs no vocabulary. Errors
// and `warnings` as CompileSchema's.
Result<std::string> SchemaToGbnf(std::string_view schema_json, const CompileOptions& options = {},
                                 std::vector<std::string>* warnings = nullptr);

// JSON instances of a schema rendered as the grammar GrammarCompiler::CompileSchema makes expects
// to see them: declared properties first, in the order the applicable subschema declares them,
// then the others in instance order; strings and numbers in the grammar's canonical spelling;
// compact (indent < 0) or pretty-printed. What a benchmark or a few-shot prompt feeds a matcher.
// The work that does not depend on the instance (expanded subschemas, string automata) is shared
// by every Render, all under one deadline (options.compile_timeout_ms and options.cancel, started
// by Create). Not thread-safe: one per thread.
class SchemaInstanceRenderer {
 public:
  // Errors as CompileSchema's for a schema that does not load.
  static Result<std::unique_ptr<SchemaInstanceRenderer>> Create(std::string_view schema_json,
                                                                const CompileOptions& options = {});
  ~SchemaInstanceRenderer();
  // kInvalidArgument for an instance that is not JSON (at its byte offset); kResourceLimit when
  // the deadline passed while choosing an anyOf / oneOf branch (at that subschema).
  Result<std::string> Render(std::string_view instance_json, int indent = -1);

 private:
  class Impl;
  explicit SchemaInstanceRenderer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A constraint compiled for one vocabulary: immutable and thread-safe, shared by every Matcher
// (and BatchMaskFiller) that runs it. Made by GrammarCompiler or LoadArtifact.
class CompiledGrammar {
 public:
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Vocabulary& vocabulary() const;
  std::int32_t logits_width() const { return vocabulary().logits_width(); }
  // A context-free grammar (a JSON Schema, GBNF, Lark, a triggered format), not a regex.
  bool is_grammar() const;
  // Fills the token masks of every state now (what `compile --stats` reports on).
  void PrecomputeAllMasks() const;
  CompiledGrammarStats Stats() const;
  // A regex's live DFA states, in order: how many tokens each state's mask allows (computed
  // where not cached). Empty for a grammar, whose masks depend on the parse, not on a state.
  std::vector<std::int64_t> AllowedTokensPerState() const;

 private:
  friend struct GrammarAccess;  // the engine's own layers (not installed)
  explicit CompiledGrammar(std::unique_ptr<TokenAutomaton> automaton);
  std::unique_ptr<TokenAutomaton> automaton_;
};

}  // namespace lockstep
