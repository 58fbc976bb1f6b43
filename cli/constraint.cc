#include "cli/constraint.h"

#include <fstream>
#include <sstream>

namespace lockstep::cli {

void AddConstraintFlags(std::set<std::string>* value_flags) {
  value_flags->insert("regex");
  value_flags->insert("grammar");
  value_flags->insert("grammar-syntax");
}

bool HasConstraint(const Args& args) { return args.Has("regex") || args.Has("grammar"); }

std::string ConstraintLabel(const Args& args) {
  return args.Has("grammar") ? "grammar " + args.Get("grammar") : args.Get("regex");
}

Result<std::shared_ptr<const CompiledGrammar>> CompileConstraint(const Args& args,
                                                                 const GrammarCompiler& compiler,
                                                                 const CompileOptions& options) {
  if (args.Has("regex") && args.Has("grammar")) {
    return Status(StatusCode::kInvalidArgument, "give one of --regex and --grammar, not both",
                  "arguments");
  }
  if (args.Has("regex")) return compiler.CompileRegex(args.Get("regex"), options);
  if (!args.Has("grammar")) {
    return Status(StatusCode::kInvalidArgument, "a constraint is needed: --regex RE or --grammar FILE",
                  "arguments");
  }
  const std::string path = args.Get("grammar");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, "cannot read grammar file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto g = compiler.CompileGrammar(ss.str(), options, args.Get("grammar-syntax", "auto"));
  if (!g.ok()) {
    const Status& st = g.status();
    return Status(st.code(), st.message(),
                  st.location().empty() ? path : path + ":" + st.location());
  }
  return g;
}

}  // namespace lockstep::cli
