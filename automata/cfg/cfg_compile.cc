// GrammarCompiler::CompileGrammar / CompileSchema, CompileGrammarIr: grammar text or schema ->
// IR -> CfgProgram -> CfgGrammar behind a CompiledGrammar, all under one compile deadline.
#include <chrono>
#include <limits>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_program.h"
#include "automata/schema/schema_compile.h"
#include "grammar/ir/grammar_ir.h"
#include "lockstep/compiler.h"

namespace lockstep {

namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> CompileGrammarIrUnder(
    const GrammarCompiler& compiler, const grammar::Grammar& ir, const CompileOptions& options,
    const CompileDeadline& deadline, double source_ms) {
  auto t0 = std::chrono::steady_clock::now();
  Result<CfgProgram> program =
      CompileCfg(ir, compiler.vocabulary(), CfgOptionsFrom(options, deadline));
  if (!program.ok()) return program.status();
  const double ms = MsSince(t0);
  t0 = std::chrono::steady_clock::now();
  auto cfg = std::make_unique<CfgGrammar>(compiler.vocabulary_ptr(),
                                          GrammarAccess::Trie(compiler),
                                          std::move(program).value(), options, ms, &deadline);
  cfg->SetPhaseTimes(source_ms, MsSince(t0));
  if (!cfg->FoldStoppedAt().empty()) {
    return deadline.Error("rule '" + cfg->FoldStoppedAt() + "' (folding its states for tokens)");
  }
  if (options.precompute_masks) {
    LOCKSTEP_RETURN_IF_ERROR(cfg->PrecomputePositions(options.precompute_threads, &deadline));
  }
  return GrammarAccess::Make(std::move(cfg));
}

namespace {

CompileDeadline DeadlineOf(const CompileOptions& options) {
  return CompileDeadline(options.compile_timeout_ms, options.cancel);
}

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> CompileGrammarIr(const GrammarCompiler& compiler,
                                                                const grammar::Grammar& ir,
                                                                const CompileOptions& options) {
  return CompileGrammarIrUnder(compiler, ir, options, DeadlineOf(options));
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::CompileGrammar(
    std::string_view text, const CompileOptions& options, std::string_view syntax,
    std::vector<std::string>* warnings) const {
  grammar::GrammarSyntax sx;
  if (syntax == "auto" || syntax.empty()) {
    sx = grammar::GrammarSyntax::kAuto;
  } else if (syntax == "gbnf") {
    sx = grammar::GrammarSyntax::kGbnf;
  } else if (syntax == "lark") {
    sx = grammar::GrammarSyntax::kLark;
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "unknown grammar syntax '" + std::string(syntax) + "' (auto, gbnf, lark)");
  }
  const CompileDeadline deadline = DeadlineOf(options);
  const auto t0 = std::chrono::steady_clock::now();
  grammar::GrammarParseOptions po;
  po.max_repeat = options.max_repeat;
  Result<grammar::Grammar> ir = grammar::ParseGrammar(text, sx, po);
  if (!ir.ok()) return ir.status();
  if (warnings != nullptr) {
    warnings->insert(warnings->end(), ir->warnings.begin(), ir->warnings.end());
  }
  grammar::DropUnreachableRules(*ir);  // unused rules are warnings: never lowered
  return CompileGrammarIrUnder(*this, *ir, options, deadline, MsSince(t0));
}

schema::SchemaCompileOptions schema::SchemaOptionsFrom(const CompileOptions& options,
                                                       std::string_view schema_json,
                                                       const CompileDeadline& deadline) {
  schema::SchemaCompileOptions so;
  so.deadline = deadline;
  so.property_order = std::make_shared<const PropertyOrder>(PropertyOrderOf(schema_json));
  so.lenient = options.schema_lenient;
  so.whitespace = options.schema_whitespace_compact ? schema::Whitespace::kCompact
                                                    : schema::Whitespace::kFlexible;
  so.max_whitespace_run = options.schema_max_whitespace_run;
  so.format_assertion = options.schema_format_assertion;
  so.openapi_formats = options.schema_openapi_formats;
  so.any_member_order = options.schema_member_order == SchemaMemberOrder::kAny;
  so.any_order_max_properties = options.schema_any_order_max_properties;
  so.max_oneof_overlaps = options.schema_max_oneof_overlaps;
  so.max_some_member_requirements = options.schema_max_some_member_requirements;
  so.max_exprs = options.schema_max_exprs;
  so.lexical.max_dfa_states = options.max_dfa_states;
  return so;
}

namespace {

// The schema's grammar IR under `deadline`, its relaxed keywords into `warnings` (when given) as
// "pointer: message".
Result<schema::SchemaGrammar> SchemaGrammarUnder(std::string_view schema_json,
                                                 const CompileOptions& options,
                                                 const CompileDeadline& deadline,
                                                 std::vector<std::string>* warnings,
                                                 bool for_gbnf = false) {
  auto schema =
      schema::Schema::Load(schema_json, schema::WithDefaultDraft(options.schema_default_draft));
  if (!schema.ok()) return schema.status();
  schema::SchemaCompileOptions so = schema::SchemaOptionsFrom(options, schema_json, deadline);
  // GBNF has no count: a maxLength beside a pattern is the product whenever it fits.
  if (for_gbnf) so.lexical.count_at_run_time_from = 0;
  auto g = schema::CompileSchemaToGrammar(**schema, so);
  if (!g.ok()) return g.status();
  if (warnings) {
    for (const auto& r : g->relaxed) {
      warnings->push_back((r.pointer.empty() ? std::string("(root)") : r.pointer) + ": " +
                          r.message);
    }
  }
  return g;
}

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::CompileSchema(
    std::string_view schema_json, const CompileOptions& options,
    std::vector<std::string>* warnings) const {
  const CompileDeadline deadline = DeadlineOf(options);
  const auto t0 = std::chrono::steady_clock::now();
  auto g = SchemaGrammarUnder(schema_json, options, deadline, warnings);
  if (!g.ok()) return g.status();
  const double source_ms = MsSince(t0);
  CompileOptions lowered = options;
  if (lowered.max_unrolled_states <= 0) lowered.max_unrolled_states = kSchemaUnrolledStates;
  // A schema's counts (maxLength, maxItems, maxProperties...) lower to native counter rules whose
  // cost does not depend on their bound (positions clamp the count; unrolling and counted
  // automata have their own state budgets), so max_repeat, which bounds repetitions written in
  // grammar and regex text, does not apply to them: 2^31 does (the schema compiler's check).
  lowered.max_repeat = std::numeric_limits<std::int32_t>::max();
  return CompileGrammarIrUnder(*this, g->grammar, lowered, deadline, source_ms);
}

Result<std::string> SchemaToGbnf(std::string_view schema_json, const CompileOptions& options,
                                 std::vector<std::string>* warnings) {
  auto g = SchemaGrammarUnder(schema_json, options, DeadlineOf(options), warnings,
                              /*for_gbnf=*/true);
  if (!g.ok()) return g.status();
  // uniqueItems, a maxLength counted beside a big pattern or format, and `format: regex` are the
  // matcher's checks at run time: GBNF has no way to say them.
  for (const std::string& at : g->checked_at_run_time) {
    const char* what =
        "checked by lockstep's parser at run time (uniqueItems, a maxLength counted beside "
        "a pattern or format, or format: regex)";
    if (!options.schema_lenient) {
      return Status(StatusCode::kUnsupported,
                    std::string(what) + "; a GBNF grammar cannot express it (lenient mode "
                                        "prints the grammar without it)",
                    at);
    }
    if (warnings) {
      warnings->push_back((at.empty() ? std::string("(root)") : at) + ": " + what +
                          "; not in this GBNF, which allows what it would refuse");
    }
  }
  return grammar::PrintGbnf(g->grammar);
}

class SchemaInstanceRenderer::Impl {
 public:
  Impl(std::shared_ptr<const schema::Schema> schema, const schema::SchemaCompileOptions& options)
      : schema_(std::move(schema)), renderer_(*schema_, options) {}
  schema::InstanceRenderer& renderer() { return renderer_; }

 private:
  std::shared_ptr<const schema::Schema> schema_;  // outlives renderer_
  schema::InstanceRenderer renderer_;
};

Result<std::unique_ptr<SchemaInstanceRenderer>> SchemaInstanceRenderer::Create(
    std::string_view schema_json, const CompileOptions& options) {
  auto schema =
      schema::Schema::Load(schema_json, schema::WithDefaultDraft(options.schema_default_draft));
  if (!schema.ok()) return schema.status();
  const schema::SchemaCompileOptions so =
      schema::SchemaOptionsFrom(options, schema_json, DeadlineOf(options));
  return std::unique_ptr<SchemaInstanceRenderer>(
      new SchemaInstanceRenderer(std::make_unique<Impl>(*schema, so)));
}

SchemaInstanceRenderer::SchemaInstanceRenderer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
SchemaInstanceRenderer::~SchemaInstanceRenderer() = default;

Result<std::string> SchemaInstanceRenderer::Render(std::string_view instance_json, int indent) {
  nlohmann::json instance = nlohmann::json::parse(instance_json, nullptr, false);
  if (instance.is_discarded()) {
    return Status(StatusCode::kInvalidArgument, "the instance is not JSON", "instance");
  }
  return impl_->renderer().Render(instance, indent);
}

}  // namespace lockstep
