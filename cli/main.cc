// The `lockstep` command: tokenize, detokenize, compile and generate under a constraint, with
// any bundled or user vocabulary. Bad input ends with one line on stderr that names the
// location, and a non-zero exit: 2 for usage and input errors, 1 for internal failures.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/artifact_cmd.h"
#include "cli/bench.h"
#include "cli/classify.h"
#include "cli/constraint.h"
#include "cli/explain.h"
#include "cli/generate.h"
#include "cli/report.h"
#include "cli/validate.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/status.h"
#include "lockstep/vocabulary.h"

namespace lockstep::cli {
namespace {


std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace);
}

constexpr const char* kMainHelp = R"(lockstep: grammar-constrained structured output over real tokenizer vocabularies

usage: lockstep COMMAND [options]

commands:
  tokenize     encode text into token ids
  detokenize   decode token ids into text
  compile      compile a constraint and report automaton and mask statistics
  generate     generate text under a constraint with a sampler and a logits source
  classify     the exact probability of each label (choices or a finite regex) under the model
  explain      the sampler's distribution after every stage, on given logits or a generation
  train-ngram  train the token n-gram logits source on a corpus
  validate     validate JSON / NDJSON instances against a JSON Schema
  bench        time first masks and per-token masks over MaskBench-style schema/instance files

Run `lockstep COMMAND --help` for the options of a command.
Bundled vocabularies: llama3 (default), gpt2, qwen2.5, mistral; or a path to a tokenizer.json
(.gz), a .tiktoken rank file or a SentencePiece tokenizer.model.
)";

constexpr const char* kTokenizeHelp = R"(usage: lockstep tokenize [--tokenizer NAME|PATH] [--json] [--no-prefix] TEXT...

Prints the canonical token ids of TEXT (the arguments joined by spaces; "-" reads stdin),
space separated, or as a JSON array with --json. Special-token text is encoded as plain text.
  --tokenizer NAME|PATH  vocabulary (default llama3)
  --no-prefix            SentencePiece vocabularies: do not prepend the dummy "▁"
  --json                 print {"ids":[...], "tokens":[...]} with each token's text
)";

constexpr const char* kDetokenizeHelp = R"(usage: lockstep detokenize [--tokenizer NAME|PATH] ID...

Prints the bytes of the token ids (arguments, or whitespace/comma separated on stdin if none).
  --tokenizer NAME|PATH  vocabulary (default llama3)
)";

constexpr const char* kCompileHelp =
    R"(usage: lockstep compile (--regex RE | --grammar FILE | --schema FILE) [--tokenizer NAME|PATH] [--stats] [--json] [-o FILE.lsg [--lazy]]
       lockstep compile --batch DIR -o OUTDIR [--tokenizer NAME|PATH] [--lenient] [--compact] [--lazy] [--json]

Compiles RE (full-match semantics) into a minimal byte DFA and its token-level masks, or a
grammar (GBNF / Lark-style EBNF) or a JSON Schema into rule automata for the Earley runtime and
its adaptive token-mask cache.
  --regex RE             the constraint (JSON Schema `pattern` syntax, see schemas/regex/README.md)
  --grammar FILE         a grammar file (e.g. schemas/grammars/json.gbnf)
  --grammar-syntax S     auto (default), gbnf or lark
  --schema FILE          a JSON Schema (drafts 04 to 2020-12), see docs/json-schema-compiler.md;
                         a keyword that cannot be enforced exactly is an error (exit 2) naming
                         its JSON Pointer
  --lenient              schemas: relax such keywords instead, with a warning on stderr each
)" LOCKSTEP_SCHEMA_FLAGS_HELP R"(  --emit-grammar         schemas: print the compiled grammar (GBNF with /regex/ and /<dfa>/
                         terminals) and stop
  --tokenizer NAME|PATH  vocabulary (default llama3)
  --stats                also compute every state's token mask and report their sizes (grammars:
                         every position's accepted / uncertain token classes, on all cores)
  --logits-width V       the model's logits width when it exceeds the vocabulary
  --max-states N         states of one automaton (a regex's, a grammar rule's, a schema string
                         or number constraint's; default 100000); past it, a resource limit
  --max-program-states N states of a grammar's rule automata together (default 500000)
  --compile-timeout MS   wall-clock budget of the compile (default 10000; 0 = none); past it, a
                         resource limit naming the deadline and the JSON Pointer or rule
  --json                 print one JSON object instead of text

Compiled artifacts (docs/artifacts.md):
  -o FILE.lsg            write the compiled constraint with its mask cache to FILE.lsg (every
                         position / state mask precomputed first, on all cores), then load it
                         back once; `generate`, `explain` and `classify` take --artifact FILE.lsg
  --lazy                 with -o: write the automaton only (masks computed on first use)
  --batch DIR -o OUTDIR  compile every *.json (a JSON Schema, or a MaskBench file's "schema"),
                         *.gbnf and *.lark file in DIR to OUTDIR/NAME.lsg, with a progress bar
                         on a terminal and a summary (compiled, failed with reasons, compile and
                         load time p50/p99/max); exit 1 if any failed
)";

int Tokenize(int argc, char** argv) {
  Args args({"tokenizer"}, {"json", "no-prefix", "help"}, {{"-h", "help"}});
  if (auto done = ParseCommand(args, argc, argv, kTokenizeHelp)) return *done;
  std::string text;
  if (args.positional().size() == 1 && args.positional()[0] == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    for (std::size_t i = 0; i < args.positional().size(); ++i) {
      if (i) text += ' ';
      text += args.positional()[i];
    }
  }
  auto vocab = LoadVocabulary(args);
  if (!vocab.ok()) return Fail(vocab.status());
  EncodeOptions eo;
  eo.add_dummy_prefix = !args.Has("no-prefix");
  auto ids = (*vocab)->Encode(text, eo);
  if (!ids.ok()) return Fail(ids.status());
  if (args.Has("json")) {
    std::string out = "{\"ids\":[";
    for (std::size_t i = 0; i < ids->size(); ++i) out += (i ? "," : "") + std::to_string((*ids)[i]);
    out += "],\"tokens\":[";
    for (std::size_t i = 0; i < ids->size(); ++i) {
      out += (i ? "," : "") + JsonString((*vocab)->TokenBytes((*ids)[i]));
    }
    std::cout << out << "]}\n";
  } else {
    for (std::size_t i = 0; i < ids->size(); ++i) std::cout << (i ? " " : "") << (*ids)[i];
    std::cout << "\n";
  }
  return 0;
}

int Detokenize(int argc, char** argv) {
  Args args({"tokenizer"}, {"help"}, {{"-h", "help"}});
  if (auto done = ParseCommand(args, argc, argv, kDetokenizeHelp)) return *done;
  std::vector<std::string> words = args.positional();
  if (words.empty()) {
    std::string w;
    std::stringstream ss;
    ss << std::cin.rdbuf();
    std::string all = ss.str();
    std::replace(all.begin(), all.end(), ',', ' ');
    std::replace(all.begin(), all.end(), '[', ' ');
    std::replace(all.begin(), all.end(), ']', ' ');
    std::istringstream is(all);
    while (is >> w) words.push_back(w);
  }
  std::vector<TokenId> ids;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    char* end = nullptr;
    long v = std::strtol(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || v < 0 || v > INT32_MAX) {
      return Fail(Status(StatusCode::kInvalidArgument, "not a token id: '" + w + "'",
                         "id " + std::to_string(i)));
    }
    ids.push_back(static_cast<TokenId>(v));
  }
  auto vocab = LoadVocabulary(args);
  if (!vocab.ok()) return Fail(vocab.status());
  auto text = (*vocab)->Decode(ids);
  if (!text.ok()) return Fail(text.status());
  std::cout << *text << "\n";
  return 0;
}

// compile --schema S --emit-grammar: the schema's grammar IR as GBNF, warnings on stderr.
int EmitSchemaGrammar(const Args& args, CompileOptions options) {
  if (Status st = ApplySchemaFlags(args, &options); !st.ok()) return Fail(st);
  const std::string path = args.Get("schema");
  auto text = ReadConstraintFile(path, "schema");
  if (!text.ok()) return Fail(text.status());
  std::vector<std::string> warnings;
  auto gbnf = SchemaToGbnf(*text, options, &warnings);
  if (!gbnf.ok()) {
    const Status& st = gbnf.status();
    return Fail(Status(st.code(), st.message(), SchemaFileLocation(path, st.location())));
  }
  for (const std::string& w : warnings) std::cerr << SchemaWarning(path, w) << "\n";
  std::cout << *gbnf;
  return 0;
}

// What `compile` times for its report: loading the vocabulary, building the token trie,
// compiling the constraint, and its first mask.
struct TimedCompile {
  std::shared_ptr<const Vocabulary> vocab;
  std::shared_ptr<const CompiledGrammar> grammar;
  std::vector<std::uint32_t> first_mask;
  double load_ms = 0, trie_ms = 0, compile_ms = 0, first_mask_ms = 0;
};

// Loads the vocabulary, compiles with `compile(compiler)` and fills the first mask, each timed.
template <typename Compile>
Result<TimedCompile> TimeCompile(const Args& args, Compile&& compile) {
  TimedCompile out;
  auto t0 = Clock::now();
  auto vocab = LoadVocabulary(args);
  if (!vocab.ok()) return vocab.status();
  out.vocab = *vocab;
  out.load_ms = MsSince(t0);
  t0 = Clock::now();
  GrammarCompiler compiler(out.vocab);
  out.trie_ms = MsSince(t0);
  t0 = Clock::now();
  Result<std::shared_ptr<const CompiledGrammar>> grammar = compile(compiler);
  if (!grammar.ok()) return grammar.status();
  out.grammar = *grammar;
  out.compile_ms = MsSince(t0);
  Matcher matcher(out.grammar);
  out.first_mask.resize(BitmaskWords(out.vocab->logits_width()));
  t0 = Clock::now();
  matcher.FillNextTokenBitmask(out.first_mask);
  out.first_mask_ms = MsSince(t0);
  return out;
}

// The report's head: what was compiled (`what` is "regex", "grammar" or "schema") and over which
// vocabulary, as JSON fields and as the text's first lines.
nlohmann::ordered_json ReportHead(const char* what, const std::string& value,
                                  const Vocabulary& vocab) {
  return {{what, value}, {"tokenizer", vocab.name()}, {"vocab_size", vocab.size()}};
}
void PrintReportHead(const char* what, const std::string& value, const Vocabulary& vocab) {
  std::printf("%-17s%s\n", what, value.c_str());
  std::printf("tokenizer        %s (%d ids, logits width %d)\n", vocab.name().c_str(),
              vocab.size(), vocab.logits_width());
}
// The times, as JSON fields and as text lines.
void AddReportTimes(const TimedCompile& run, nlohmann::ordered_json* out) {
  (*out)["vocab_load_ms"] = run.load_ms;
  (*out)["trie_build_ms"] = run.trie_ms;
  (*out)["compile_ms"] = run.compile_ms;
  const CompiledGrammarStats s = run.grammar->Stats();
  if (s.is_grammar) {
    (*out)["compile_phases_ms"] = {
        {"source", s.source_ms}, {"lowering", s.compile_ms}, {"tables", s.tables_ms}};
  }
  (*out)["first_mask_ms"] = run.first_mask_ms;
}
void PrintReportTimes(const TimedCompile& run) {
  std::printf("vocabulary load  %.2f ms (+ token trie %.2f ms)\n", run.load_ms, run.trie_ms);
  std::printf("compile          %.3f ms\n", run.compile_ms);
  const CompiledGrammarStats s = run.grammar->Stats();
  if (s.is_grammar) {
    // (The source: grammar text parsed, or a JSON Schema compiled to a normalised grammar.)
    std::printf("  phases         source %.3f ms, lowering %.3f ms, tables %.3f ms\n", s.source_ms,
                s.compile_ms, s.tables_ms);
  }
  std::printf("first mask       %.3f ms (%lld tokens allowed at the start)\n", run.first_mask_ms,
              static_cast<long long>(CountBits(run.first_mask)));
}

int CompileGrammarFile(const Args& args, const CompileOptions& options) {
  std::vector<std::string> warnings;
  auto run = TimeCompile(args, [&](const GrammarCompiler& compiler) {
    return CompileConstraint(args, compiler, options, &warnings);
  });
  if (!run.ok()) return Fail(run.status());
  const Vocabulary& vocab = *run->vocab;
  const CompiledGrammar& grammar = *run->grammar;
  const std::int64_t first_allowed = CountBits(run->first_mask);
  double all_ms = -1;
  if (args.Has("stats")) {
    const auto t0 = Clock::now();
    grammar.PrecomputeAllMasks();
    all_ms = MsSince(t0);
  }
  CompiledGrammarStats stats = grammar.Stats();
  const char* what = args.Has("schema") ? "schema" : "grammar";
  nlohmann::ordered_json out = ReportHead(what, args.Get(what), vocab);
  out["rules"] = stats.rules;
  out["counter_rules"] = stats.counter_rules;
  out["dfa_states"] = stats.dfa_states;
  out["byte_classes"] = stats.byte_classes;
  AddReportTimes(*run, &out);
  out["first_mask_allowed"] = first_allowed;
  out["positions"] = stats.positions;
  out["shared_positions"] = stats.shared_positions;
  out["accepted_tokens"] = stats.accepted_tokens;
  out["uncertain_tokens"] = stats.uncertain_tokens;
  out["mask_cache_bytes"] = stats.mask_cache_bytes;
  if (all_ms >= 0) out["all_positions_ms"] = all_ms;
  out["warnings"] = warnings;
  if (args.Has("json")) {
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  PrintReportHead(what, args.Get(what), vocab);
  std::printf("rules            %d (%d native counters), %d DFA states, %d byte classes\n",
              stats.rules, stats.counter_rules, stats.dfa_states, stats.byte_classes);
  PrintReportTimes(*run);
  if (all_ms >= 0) std::printf("all positions    %.1f ms\n", all_ms);
  std::printf("positions        %d computed: %lld accepted, %lld uncertain (token, split) pairs\n",
              stats.positions, static_cast<long long>(stats.accepted_tokens),
              static_cast<long long>(stats.uncertain_tokens));
  std::printf("mask cache       %.2f MiB\n", stats.mask_cache_bytes / 1048576.0);
  return 0;
}

// compile --regex RE: the DFA's statistics; with --stats every live state's mask.
int CompileRegexFile(const Args& args, const CompileOptions& options) {
  auto run = TimeCompile(args, [&](const GrammarCompiler& compiler) {
    return compiler.CompileRegex(args.Get("regex"), options);
  });
  if (!run.ok()) return Fail(run.status());
  const Vocabulary& vocab = *run->vocab;
  const CompiledGrammar& grammar = *run->grammar;
  CompiledGrammarStats stats = grammar.Stats();
  nlohmann::ordered_json out = ReportHead("regex", args.Get("regex"), vocab);
  out["dfa_states"] = stats.dfa_states - 1;  // live states, the dead state not counted
  out["byte_classes"] = stats.byte_classes;
  out["accepting_states"] = stats.accepting_states;
  AddReportTimes(*run, &out);
  if (args.Has("stats")) {
    // Every live state's mask: how many tokens each admits, and what that cost to compute.
    const auto t0 = Clock::now();
    grammar.PrecomputeAllMasks();
    out["all_masks_ms"] = MsSince(t0);
    std::vector<std::int64_t> per_state = grammar.AllowedTokensPerState();
    std::vector<std::int64_t> sorted = per_state;
    std::sort(sorted.begin(), sorted.end());
    if (!sorted.empty()) {
      out["allowed_tokens_min"] = sorted.front();
      out["allowed_tokens_median"] = sorted[sorted.size() / 2];
      out["allowed_tokens_max"] = sorted.back();
    }
    out["allowed_tokens_per_state"] = per_state;
    stats = grammar.Stats();
    out["cached_masks"] = stats.cached_masks;
    out["mask_cache_bytes"] = stats.mask_cache_bytes;
  }
  if (args.Has("json")) {
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  PrintReportHead("regex", args.Get("regex"), vocab);
  std::printf("dfa states       %d live (+1 dead), %d accepting, %d byte classes\n",
              stats.dfa_states - 1, stats.accepting_states, stats.byte_classes);
  PrintReportTimes(*run);
  if (args.Has("stats")) {
    std::printf("all masks        %.3f ms for %d states, %.1f MiB cached\n",
                out["all_masks_ms"].get<double>(), stats.dfa_states - 1,
                static_cast<double>(stats.mask_cache_bytes) / (1 << 20));
    std::printf("allowed/state    min %lld, median %lld, max %lld\n",
                static_cast<long long>(out["allowed_tokens_min"].get<std::int64_t>()),
                static_cast<long long>(out["allowed_tokens_median"].get<std::int64_t>()),
                static_cast<long long>(out["allowed_tokens_max"].get<std::int64_t>()));
    PrintHistogram(out["allowed_tokens_per_state"].get<std::vector<std::int64_t>>());
  }
  return 0;
}

// The options every `compile` takes: --max-states, --max-program-states and --compile-timeout.
Result<CompileOptions> CompileFlagOptions(const Args& args) {
  CompileOptions options;
  auto max_states = args.GetInt("max-states", options.max_dfa_states, 1, 100000000);
  if (!max_states.ok()) return max_states.status();
  options.max_dfa_states = static_cast<std::int32_t>(*max_states);
  auto max_program = args.GetInt("max-program-states", options.max_program_states, 1,
                                 std::int64_t{1} << 40);
  if (!max_program.ok()) return max_program.status();
  options.max_program_states = *max_program;
  LOCKSTEP_RETURN_IF_ERROR(ApplyCompileTimeout(args, &options));
  return options;
}

// compile -o FILE.lsg / compile --batch DIR -o OUTDIR: compiled artifacts.
int CompileArtifacts(const Args& args) {
  auto options = CompileFlagOptions(args);
  if (!options.ok()) return Fail(options.status());
  if (!args.Has("output")) {
    return Fail(Status(StatusCode::kInvalidArgument, "--batch DIR needs -o OUTDIR", "arguments"));
  }
  if (Status st = args.NoPositional(); !st.ok()) return Fail(st);
  if (args.Has("batch")) {
    if (HasConstraint(args)) {
      return Fail(
          Status(StatusCode::kInvalidArgument,
                 "--batch DIR compiles the files in DIR; give no --regex/--grammar/--schema",
                 "arguments"));
    }
    return CompileBatch(args, *options);
  }
  if (!HasConstraint(args)) {
    return Fail(Status(StatusCode::kInvalidArgument,
                       "compile -o needs --regex RE, --grammar FILE or --schema FILE",
                       "arguments"));
  }
  if (Status st = ApplySchemaFlags(args, &*options); !st.ok()) return Fail(st);
  return CompileToArtifact(args, *options);
}

int Compile(int argc, char** argv) {
  std::set<std::string> value_flags = {"tokenizer", "logits-width", "max-states",
                                       "max-program-states", "output", "batch"};
  AddConstraintFlags(&value_flags);
  std::set<std::string> switches = {"stats", "json", "help", "emit-grammar", "lazy"};
  AddConstraintSwitches(&switches);
  Args args(value_flags, switches, {{"-h", "help"}, {"-o", "output"}});
  if (auto done = ParseCommand(args, argc, argv, kCompileHelp)) return *done;
  if (args.Has("artifact")) {
    return Fail(Status(StatusCode::kInvalidArgument,
                       "compile takes a constraint, not --artifact (generate, explain and "
                       "classify load artifacts)", "--artifact"));
  }
  if (args.Has("batch") || args.Has("output")) return CompileArtifacts(args);
  if (args.Has("schema")) {
    if (args.Has("regex") || args.Has("grammar")) {
      return Fail(Status(StatusCode::kInvalidArgument,
                         "give one of --regex, --grammar and --schema, not several", "arguments"));
    }
    auto options = CompileFlagOptions(args);
    if (!options.ok()) return Fail(options.status());
    if (args.Has("emit-grammar")) return EmitSchemaGrammar(args, *options);
    return CompileGrammarFile(args, *options);
  }
  if (args.Has("grammar") && !args.Has("regex")) {
    auto options = CompileFlagOptions(args);
    if (!options.ok()) return Fail(options.status());
    return CompileGrammarFile(args, *options);
  }
  if (!args.Has("regex") || args.Has("grammar")) {
    return Fail(Status(StatusCode::kInvalidArgument,
                       "compile needs one of --regex RE or --grammar FILE", "arguments"));
  }
  if (Status st = args.NoPositional(); !st.ok()) return Fail(st);
  auto options = CompileFlagOptions(args);
  if (!options.ok()) return Fail(options.status());
  return CompileRegexFile(args, *options);
}

}  // namespace
}  // namespace lockstep::cli

int main(int argc, char** argv) {
  using namespace lockstep::cli;
  if (argc < 2) {
    std::cerr << kMainHelp;
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") return std::cout << kMainHelp, 0;
  if (cmd == "tokenize") return Tokenize(argc, argv);
  if (cmd == "detokenize") return Detokenize(argc, argv);
  if (cmd == "compile") return Compile(argc, argv);
  if (cmd == "generate") return Generate(argc, argv);
  if (cmd == "classify") return Classify(argc, argv);
  if (cmd == "explain") return Explain(argc, argv);
  if (cmd == "train-ngram") return TrainNgram(argc, argv);
  if (cmd == "validate") return Validate(argc, argv);
  if (cmd == "bench") return Bench(argc, argv);
  std::cerr << "lockstep: invalid argument at argument 1: unknown command '" << cmd
            << "' (see lockstep --help)\n";
  return 2;
}
