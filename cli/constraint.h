// The constraint flags shared by `generate`, `compile`, `explain` and `classify`: exactly one of
// --regex RE or --grammar FILE (GBNF or Lark-style EBNF, --grammar-syntax auto|gbnf|lark).
#pragma once

#include <memory>
#include <set>
#include <string>

#include "cli/args.h"
#include "lockstep/compiler.h"

namespace lockstep::cli {

// Adds "regex", "grammar" and "grammar-syntax" to a subcommand's value flags.
void AddConstraintFlags(std::set<std::string>* value_flags);
bool HasConstraint(const Args& args);
// A short description for output: the regex, or "grammar FILE".
std::string ConstraintLabel(const Args& args);
// Compiles the constraint the flags name; kInvalidArgument if none or both are given, kIoError
// for an unreadable grammar file, parse errors with FILE:line:column.
Result<std::shared_ptr<const CompiledGrammar>> CompileConstraint(const Args& args,
                                                                 const GrammarCompiler& compiler,
                                                                 const CompileOptions& options = {});

}  // namespace lockstep::cli
