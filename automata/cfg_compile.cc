// GrammarCompiler::CompileGrammar / CompileGrammarIr: grammar text -> IR -> CfgProgram ->
// CfgGrammar behind a CompiledGrammar.
#include <chrono>

#include "automata/cfg_grammar.h"
#include "automata/cfg_program.h"
#include "grammar/grammar_ir.h"
#include "lockstep/compiler.h"

namespace lockstep {

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::CompileGrammarIr(
    const grammar::Grammar& ir, const CompileOptions& options) const {
  auto t0 = std::chrono::steady_clock::now();
  CfgCompileOptions co;
  co.max_states = options.max_dfa_states;
  co.max_repeat = options.max_repeat;
  Result<CfgProgram> program = CompileCfg(ir, *vocab_, co);
  if (!program.ok()) return program.status();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
  auto cfg = std::make_unique<CfgGrammar>(vocab_, trie_, std::move(program).value(), options, ms);
  auto grammar = std::make_shared<const CompiledGrammar>(std::move(cfg));
  if (options.precompute_masks) grammar->cfg().PrecomputePositions(options.precompute_threads);
  return grammar;
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::CompileGrammar(
    std::string_view text, const CompileOptions& options, std::string_view syntax) const {
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
  grammar::GrammarParseOptions po;
  po.max_repeat = options.max_repeat;
  Result<grammar::Grammar> ir = grammar::ParseGrammar(text, sx, po);
  if (!ir.ok()) return ir.status();
  return CompileGrammarIr(*ir, options);
}

}  // namespace lockstep
