// `lockstep generate`: the sampling loop with the matcher in lockstep: logits from a source,
// the constraint's mask, one draw, one accepted token, until EOS or the token budget.
// `lockstep train-ngram`: trains the n-gram logits source (run by the build for llama3).
#include "cli/generate.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/constraint.h"
#include "cli/decoding_flags.h"
#include "cli/sampler_flags.h"
#include "lockstep/compiler.h"
#include "lockstep/logits_source.h"
#include "lockstep/matcher.h"
#include "lockstep/structured.h"
#include "lockstep/ngram_model.h"
#include "lockstep/sampler.h"
#include "lockstep/vocabulary.h"

namespace lockstep::cli {
namespace {

// What reads a sample's calls back: the format and the tools of --tools/--format, or of a
// --request that has tools.
struct CallReader {
  StructuredFormat format;
  std::vector<ToolSpec> tools;  // their names, for per-tool triggers (<function=NAME>)
};

std::optional<CallReader> MakeCallReader(const Args& args, const LoadedConstraint& loaded) {
  if (loaded.request) {
    if (loaded.request->tool_choice.empty()) return std::nullopt;
    return CallReader{loaded.request->format, loaded.request->tools};
  }
  if (!args.Has("format")) return std::nullopt;
  auto format = LoadFormat(args.Get("format"));
  if (!format.ok()) return std::nullopt;
  CallReader reader{std::move(*format), {}};
  if (auto text = ReadConstraintFile(args.Get("tools"), "tools"); text.ok()) {
    if (auto t = ParseTools(*text); t.ok()) reader.tools = std::move(*t);
  }
  return reader;
}

// The sample's calls, parsed independently of the automaton (a sample cut short by --max-tokens
// reports "calls_error" instead).
void AddCalls(const CallReader& reader, const Vocabulary& vocab,
              const std::vector<TokenId>& tokens, nlohmann::ordered_json& j) {
  auto calls = ParseToolCalls(reader.format, vocab, tokens, reader.tools);
  if (!calls.ok()) {
    j["calls_error"] = calls.status().ToString();
    return;
  }
  j["calls"] = nlohmann::ordered_json::parse(ToolCallsJson(*calls));
}

constexpr const char* kGenerateHelp =
    R"(usage: lockstep generate (--regex RE | --grammar FILE | --schema FILE | --artifact FILE.lsg |
                         --tools FILE --format F | --request FILE [--format F]) [options]

Generates text that fully matches RE (or is a sentence of the grammar), token by token: the logits source scores the vocabulary,
the constraint masks it, the sampler draws. Prints one line per sample, or with --json one
object per line: {"text":..., "tokens":[...], "finish":"eos"|"length", "match":true|false}
("tokens" are the generated ids without the final EOS; "match" is whether the text is a
complete match of RE).

options:
  --regex RE             the constraint (full match; syntax in schemas/regex/README.md)
  --grammar FILE         or a grammar: GBNF (llama.cpp dialect) or Lark-style EBNF, e.g.
                         schemas/grammars/json.gbnf ("match" then means: a sentence)
  --grammar-syntax S     auto (default: GBNF if rules use ::=), gbnf or lark
  --schema FILE          or a JSON Schema (drafts 04 to 2020-12): JSON instances that
                         validate, formatted as in docs/json-schema-compiler.md
  --artifact FILE.lsg    or a compiled artifact (`lockstep compile ... -o FILE.lsg`), loaded
                         instead of compiled; it must match --tokenizer
  --tools FILE           or tool calls in a chat format: FILE is a JSON array of tools
                         ({"name", "parameters"} or OpenAI-style {"type": "function",
                         "function": {...}}); free text, then calls switched on by the
                         format's trigger (docs/structured.md); with --json each sample adds
                         "calls": [{"name", "arguments"}], parsed
  --format F             with --tools: qwen, hermes, llama3, llama3-function, mistral,
                         think-json or a format file (schemas/formats/)
  --request FILE         or an OpenAI-style chat-completions body ("-": stdin): its
                         response_format (text, json_object, json_schema), tools, tool_choice
                         and parallel_tool_calls make the constraint (docs/requests.md); other
                         keys are ignored. --format F names the tools' chat format (default:
                         the body's "lockstep_format", else the tokenizer's family: llama3,
                         qwen, mistral); with tools, --json adds "calls" as --tools does
  --lenient              schemas: relax keywords that cannot be enforced exactly (warnings on
                         stderr) instead of failing
)" LOCKSTEP_SCHEMA_FLAGS_HELP R"(  --tokenizer NAME|PATH  vocabulary (default llama3)
  --logits-width V       the model's logits width when it exceeds the vocabulary (padding
                         ids are never allowed)
  --model ngram|uniform  logits source (default ngram: a token n-gram model trained at build
                         time on schemas/corpus; uniform: seeded random logits)
  --ngram-model PATH     n-gram model file (default: the one built for the tokenizer)
  -n, --count COUNT      number of samples (default 1)
  --max-tokens M         token budget per sample (default 256)
  --prompt TEXT          context given to the logits source (not constrained, not printed);
                         the penalties' history is the prompt and the generated tokens
  --json                 JSON lines output
  --logprobs N           with --json, add "logprobs": per generated token (and the final EOS)
                         {"token", "logprob" (raw model), "constrained_logprob" (masked, T 1),
                         "sampled_logprob" (the draw's distribution), "entropy" (nats, masked,
                         T 1), "top": N alternatives [{"token", "text", "logprob"}] by
                         constrained logprob}

sampler flags (the seed also seeds the --model uniform source):
)";

constexpr const char* kTrainHelp = R"(usage: lockstep train-ngram [--tokenizer NAME|PATH] [--order N] -o OUT FILE.jsonl...

Trains the token n-gram logits source on JSONL documents ({"text": ...} per line), tokenised
with the vocabulary, and writes it to OUT (bound to the vocabulary's fingerprint).
)";

std::string CorpusDir() { return DataDirectory() + "/corpus"; }

std::vector<std::string> DefaultCorpus() { return DefaultNgramCorpus(DataDirectory()); }

constexpr int kDefaultOrder = 4;

Result<std::unique_ptr<LogitsSource>> MakeSource(const Args& args, const Vocabulary& vocab,
                                                 std::uint64_t seed) {
  std::string kind = args.Get("model", "ngram");
  if (kind == "uniform") {
    return std::unique_ptr<LogitsSource>(new UniformSource(vocab.logits_width(), seed));
  }
  if (kind != "ngram") {
    return Status(StatusCode::kInvalidArgument,
                  "--model must be ngram or uniform, got '" + kind + "'", "--model");
  }
  std::string path = args.Get("ngram-model");
  if (path.empty()) {
    std::string built = PrebuiltNgramModel(vocab);
    // The built model covers the vocabulary's own width; another width trains afresh.
    if (!built.empty() && vocab.logits_width() == vocab.size()) path = built;
  }
  if (!path.empty()) {
    auto model = NgramModel::Load(path, vocab.Fingerprint());
    if (!model.ok()) return model.status();
    return std::unique_ptr<LogitsSource>(new NgramModel(std::move(model).value()));
  }
  // No model was built for this vocabulary: train one now from the shipped corpus.
  std::cerr << "lockstep: no prebuilt n-gram model for '" << vocab.name()
            << "', training one on " << CorpusDir() << "\n";
  auto model = NgramModel::TrainFromCorpus(vocab, DefaultCorpus(), kDefaultOrder);
  if (!model.ok()) return model.status();
  return std::unique_ptr<LogitsSource>(new NgramModel(std::move(model).value()));
}

}  // namespace

int Generate(int argc, char** argv) {
  std::set<std::string> value_flags = {"tokenizer", "logits-width", "model",   "ngram-model",
                                       "count",     "max-tokens",   "prompt",  "logprobs",
                                       "request"};
  std::set<std::string> switches = {"json", "help"};
  if (Status st = AddConstrainedSamplingFlags(&value_flags, &switches); !st.ok()) return Fail(st);
  AddDecodingFlags(&value_flags);
  Args args(value_flags, switches, {{"-h", "help"}, {"-n", "count"}});
  const std::string help = std::string(kGenerateHelp) + kSamplerFlagsHelp + kDecodingFlagsHelp;
  if (auto done = ParseCommand(args, argc, argv, help, /*allow_positional=*/false)) return *done;
  if (!HasConstraint(args)) {
    return Fail(Status(StatusCode::kInvalidArgument,
                       "generate needs --regex RE, --grammar FILE, --schema FILE, --artifact "
                       "FILE.lsg, --tools FILE --format F or --request FILE",
                       "arguments"));
  }
  auto seed = args.GetInt("seed", 0, 0, INT64_MAX);
  auto count = args.GetInt("count", 1, 0, 1000000);
  auto max_tokens = args.GetInt("max-tokens", 256, 1, 1000000);
  auto logprobs = args.GetInt("logprobs", -1, 0, 1000);
  auto config_r = SamplerConfigFromArgs(args);
  for (const Status* st : {&seed.status(), &count.status(), &max_tokens.status(),
                           &logprobs.status(), &config_r.status()}) {
    if (!st->ok()) return Fail(*st);
  }
  if (*logprobs >= 0 && !args.Has("json")) {
    return Fail(Status(StatusCode::kInvalidArgument, "--logprobs needs --json", "--logprobs"));
  }

  auto loaded = LoadConstraint(args);
  if (!loaded.ok()) return Fail(loaded.status());
  const std::shared_ptr<const Vocabulary>& vocab = loaded->vocab;
  const std::shared_ptr<const CompiledGrammar>& grammar = loaded->grammar;
  auto source = MakeSource(args, *vocab, static_cast<std::uint64_t>(*seed));
  if (!source.ok()) return Fail(source.status());
  auto prompt_ids = EncodePrompt(args, *vocab);
  if (!prompt_ids.ok()) return Fail(prompt_ids.status());
  const std::vector<TokenId>& prompt = *prompt_ids;
  // Guidance / contrastive wrap the source; beam search and speculative decoding run their own
  // loops (cli/decoding_flags.cc).
  auto decoding = SetupDecoding(args, *vocab, **source, prompt, static_cast<std::uint64_t>(*seed));
  if (!decoding.ok()) return Fail(decoding.status());
  if ((*decoding)->mode != DecodingMode::kSample) {
    if (*logprobs >= 0) {
      return Fail(Status(StatusCode::kInvalidArgument,
                         "--logprobs is not available with --beam or --draft", "--logprobs"));
    }
    return RunDecoding(**decoding, args, grammar, prompt, *config_r, *count, *max_tokens);
  }
  LogitsSource& model = *(*decoding)->source;

  const SamplerConfig config = *config_r;
  const std::int32_t width = vocab->logits_width();
  Sampler sampler(config, width);
  std::vector<float> logits(width);
  std::vector<float> report_logits;
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(width));
  const bool progress = isatty(STDERR_FILENO) && *count > 1;
  const std::optional<CallReader> calls = MakeCallReader(args, *loaded);

  for (std::int64_t i = 0; i < *count; ++i) {
    Matcher matcher(grammar);
    std::vector<TokenId> context = prompt;
    std::vector<TokenId> out;
    std::string finish = "length";
    nlohmann::ordered_json step_logprobs = nlohmann::ordered_json::array();
    for (std::int64_t step = 0; step < *max_tokens; ++step) {
      matcher.FillNextTokenBitmask(mask);
      model.MaskedLogits(context, mask.data(), logits);
      if (*logprobs >= 0) report_logits = logits;  // Sample overwrites its input
      TokenId tok = sampler.Sample(logits, mask.data(), context, static_cast<std::uint64_t>(i),
                                   static_cast<std::uint64_t>(step));
      if (*logprobs >= 0 && tok != kNoToken) {
        const TokenLogprobs lp = sampler.Logprobs(report_logits, mask.data(), context, tok,
                                                  static_cast<std::int32_t>(*logprobs));
        nlohmann::ordered_json top = nlohmann::ordered_json::array();
        for (const auto& [alt, alt_lp] : lp.top) {
          top.push_back({{"token", alt}, {"text", std::string(vocab->TokenBytes(alt))}, {"logprob", alt_lp}});
        }
        step_logprobs.push_back(nlohmann::ordered_json{
            {"token", tok},
            {"text", std::string(vocab->TokenBytes(tok))},
            {"logprob", lp.raw_logprob},
            {"constrained_logprob", lp.constrained_logprob},
            {"sampled_logprob", lp.sampled_logprob},
            {"entropy", lp.entropy},
            {"top", top}});
      }
      if (tok == kNoToken || !matcher.AcceptToken(tok)) {
        return Fail(Status(StatusCode::kInternal, "the sampler drew a token the mask forbids",
                           "sample " + std::to_string(i) + ", step " + std::to_string(step)));
      }
      if (matcher.IsTerminated()) {  // the token was an EOS id
        finish = "eos";
        break;
      }
      out.push_back(tok);
      context.push_back(tok);
    }
    std::string text = *vocab->Decode(out);
    bool match = matcher.IsTerminated() || matcher.CanEnd();
    if (args.Has("json")) {
      nlohmann::ordered_json j = {{"text", text}, {"tokens", out}, {"finish", finish}, {"match", match}};
      if (*logprobs >= 0) j["logprobs"] = step_logprobs;
      if (calls) AddCalls(*calls, *vocab, out, j);
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << text << "\n";
    }
    if (progress) std::cerr << "\r[" << (i + 1) << "/" << *count << "]" << std::flush;
  }
  if (progress) std::cerr << "\n";
  return 0;
}

int TrainNgram(int argc, char** argv) {
  Args args({"tokenizer", "order", "output"}, {"help"}, {{"-h", "help"}, {"-o", "output"}});
  if (auto done = ParseCommand(args, argc, argv, kTrainHelp)) return *done;
  if (!args.Has("output")) {
    return Fail(Status(StatusCode::kInvalidArgument, "train-ngram needs -o OUT", "arguments"));
  }
  auto order = args.GetInt("order", kDefaultOrder, NgramModel::kMinOrder, NgramModel::kMaxOrder);
  if (!order.ok()) return Fail(order.status());
  std::vector<std::string> files = args.positional();
  if (files.empty()) files = DefaultCorpus();
  auto vocab = Vocabulary::Load(args.Get("tokenizer", "llama3"));
  if (!vocab.ok()) return Fail(vocab.status());
  auto model = NgramModel::TrainFromCorpus(**vocab, files, static_cast<int>(*order));
  if (!model.ok()) return Fail(model.status());
  if (Status st = model->Save(args.Get("output"), (*vocab)->Fingerprint()); !st.ok()) {
    return Fail(st);
  }
  std::cerr << "lockstep: trained order-" << *order << " n-gram on " << model->num_tokens()
            << " tokens -> " << args.Get("output") << "\n";
  return 0;
}

}  // namespace lockstep::cli
