// `lockstep classify` (cli/classify.h): prints the distribution over labels, not one label, for
// a prompt or for every line of a JSONL batch. The algorithm is lockstep::Classify
// (include/lockstep/classify.h).
#include "cli/classify.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/constraint.h"
#include "cli/decoding_flags.h"
#include "cli/report.h"
#include "cli/sampler_flags.h"
#include "lockstep/classify.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"

namespace lockstep::cli {
namespace {

constexpr const char* kClassifyHelp =
    R"(usage: lockstep classify (--regex RE | --grammar FILE | --schema FILE | --artifact FILE.lsg | --choices a,b,c) [--prompt TEXT | --batch FILE.jsonl] [options]

Prints the probability of every completion of a finite constraint under the model, summed over
every tokenisation the mask allows (not a single sampled label):
  label  probability  bar
plus the mass left under --floor or by the --max-nodes budget when there is any.
With --batch, reads one JSON object per line with a "prompt" string and writes one line per
input: the input object plus "distribution" ({label: probability}, in label order) and
"unassigned_mass" (floor + budget mass): soft labels.

options:
  --choices a,b,c        the labels (comma separated; use --regex for labels with commas)
  --regex RE             a constraint with finitely many completions; each completion is a label
  --grammar FILE         the same with a GBNF / Lark-style grammar (--grammar-syntax auto|gbnf|lark)
  --schema FILE          the same with a JSON Schema (--lenient, --compact, --any-order, --schema-draft D as
                         on generate)
  --prompt TEXT          context for the model (default empty)
  --batch FILE.jsonl     classify every {"prompt": ...} line (implies JSON output)
  --json                 one JSON object: {"labels": [{"label", "probability",
                         "tokenizations"}], "floor_mass", "budget_mass", "other_mass", "nodes"}
  --tokenizer NAME|PATH  vocabulary (default llama3)
  --logits-width V       the model's logits width when it exceeds the vocabulary
  --model MODEL          ngram (default) | ngram2..ngram4 | uniform | scripted:FILE |
                         replay:FILE | an n-gram model file
  --ngram-model PATH     n-gram model file for --model ngram
  --floor P              do not expand prefixes with probability below P (default 1e-9)
  --max-nodes N          model calls allowed per prompt (default 100000)

sampler flags (each step's distribution; default temperature 1, the model's own):
)";

std::vector<std::string> SplitChoices(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

void PrintTable(const ClassifyResult& r) {
  std::size_t w = 5;
  for (const auto& l : r.labels) w = std::max(w, l.label.size());
  auto row = [&](const std::string& label, double p) {
    const int cells = static_cast<int>(p * 40 + 0.5);
    std::string bar;
    for (int i = 0; i < cells; ++i) bar += "\u2588";
    std::printf("%-*s  %.6f  %s\n", static_cast<int>(w), label.c_str(), p, bar.c_str());
  };
  for (const auto& l : r.labels) row(l.label, l.probability);
  if (r.floor_mass > 0) std::printf("(mass under the floor: %.3g)\n", r.floor_mass);
  if (r.budget_mass > 0) std::printf("(mass left by the node budget: %.3g)\n", r.budget_mass);
  if (r.other_mass > 0) std::printf("(mass of other completions: %.3g)\n", r.other_mass);
}

nlohmann::ordered_json ResultJson(const ClassifyResult& r) {
  nlohmann::ordered_json labels = nlohmann::ordered_json::array();
  for (const auto& l : r.labels) {
    labels.push_back(
        {{"label", l.label}, {"probability", l.probability}, {"tokenizations", l.tokenizations}});
  }
  return {{"labels", labels},
          {"floor_mass", r.floor_mass},
          {"budget_mass", r.budget_mass},
          {"other_mass", r.other_mass},
          {"nodes", r.nodes}};
}

}  // namespace

int Classify(int argc, char** argv) {
  std::set<std::string> value_flags = {"tokenizer", "logits-width", "choices", "prompt",   "batch",
                                       "model",     "ngram-model",  "floor",   "max-nodes"};
  std::set<std::string> switches = {"json", "help"};
  if (Status st = AddConstrainedSamplingFlags(&value_flags, &switches); !st.ok()) return Fail(st);
  Args args(value_flags, switches, {{"-h", "help"}});
  const std::string help = std::string(kClassifyHelp) + kSamplerFlagsHelp;
  if (auto done = ParseCommand(args, argc, argv, help, /*allow_positional=*/false)) return *done;
  if (HasConstraint(args) == args.Has("choices")) {
    return Fail(
        Status(StatusCode::kInvalidArgument,
               "classify needs exactly one of --regex RE, --grammar FILE, --schema FILE, --artifact FILE.lsg or --choices a,b,c",
               "arguments"));
  }
  if (args.Has("prompt") && args.Has("batch")) {
    return Fail(
        Status(StatusCode::kInvalidArgument, "--prompt and --batch cannot be combined", "--batch"));
  }
  ClassifyOptions options;
  auto floor = args.GetDouble("floor", options.floor, 0.0, 1.0);
  auto max_nodes = args.GetInt("max-nodes", options.max_nodes, 1, INT64_MAX);
  auto seed = args.GetInt("seed", 0, 0, INT64_MAX);
  auto config = SamplerConfigFromArgs(args);
  for (const Status* st :
       {&floor.status(), &max_nodes.status(), &seed.status(), &config.status()}) {
    if (!st->ok()) return Fail(*st);
  }
  options.floor = *floor;
  options.max_nodes = *max_nodes;
  options.sampler = *config;

  std::vector<std::string> choices;
  std::string regex;
  if (args.Has("choices")) {
    choices = SplitChoices(args.Get("choices"));
    auto re = ChoicesRegex(choices);
    if (!re.ok()) {
      return Fail(Status(re.status().code(), re.status().message(),
                         "--choices: " + re.status().location()));
    }
    regex = *re;
  }
  auto vocab = LoadVocabulary(args);
  if (!vocab.ok()) return Fail(vocab.status());
  GrammarCompiler compiler(*vocab);
  auto grammar =
      args.Has("choices") ? compiler.CompileRegex(regex) : CompileConstraint(args, compiler);
  if (!grammar.ok()) return Fail(grammar.status());
  auto model = LoadModel(args.Get("model", "ngram"), **vocab, static_cast<std::uint64_t>(*seed),
                         args.Get("ngram-model"), "--model");
  if (!model.ok()) return Fail(model.status());

  auto classify = [&](const std::string& prompt_text,
                      const std::string& where) -> Result<ClassifyResult> {
    std::vector<TokenId> prompt;
    if (!prompt_text.empty()) {
      auto ids = (*vocab)->Encode(prompt_text);
      if (!ids.ok()) return Status(ids.status().code(), ids.status().message(), where);
      prompt = *ids;
    }
    return lockstep::Classify(**model, Matcher(*grammar), prompt, choices, options);
  };

  if (!args.Has("batch")) {
    auto r = classify(args.Get("prompt"), "--prompt");
    if (!r.ok()) return Fail(r.status());
    if (args.Has("json")) {
      std::cout << JsonLine(ResultJson(*r)) << "\n";
    } else {
      PrintTable(*r);
    }
    return 0;
  }
  const std::string path = args.Get("batch");
  std::ifstream in(path);
  if (!in) return Fail(Status(StatusCode::kIoError, "cannot open batch file", path));
  std::string line;
  for (std::int64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      return Fail(Status(StatusCode::kInvalidArgument, std::string("bad JSON: ") + e.what(),
                         where + ": offset " + std::to_string(e.byte)));
    }
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) {
      return Fail(Status(StatusCode::kInvalidArgument,
                         "each line must be an object with a \"prompt\" string", where));
    }
    auto r = classify(j["prompt"].get<std::string>(), where);
    if (!r.ok()) return Fail(r.status());
    nlohmann::ordered_json dist = nlohmann::ordered_json::object();
    for (const auto& l : r->labels) dist[l.label] = l.probability;
    j["distribution"] = dist;
    j["unassigned_mass"] = r->floor_mass + r->budget_mass + r->other_mass;
    std::cout << JsonLine(j) << "\n";
  }
  return 0;
}

}  // namespace lockstep::cli
