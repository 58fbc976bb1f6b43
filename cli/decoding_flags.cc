// Decoding flags for `lockstep generate` and model loading for `generate`/`classify`
// (cli/decoding_flags.h).
#include "cli/decoding_flags.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/report.h"
#include "lockstep/decoding.h"
#include "lockstep/matcher.h"
#include "lockstep/ngram_model.h"

namespace lockstep::cli {

const char* const kDecodingFlagsHelp =
    R"(decoding flags (MODEL: ngram | ngram2..ngram4 | uniform | scripted:FILE | replay:FILE |
an n-gram model file):
  --beam B               beam search with B beams under the constraint (deterministic; prints
                         the best min(-n, B) hypotheses with "logprob" and "score")
  --length-penalty A     rank beams by sum(log p) / len^A (default 1)
  --draft MODEL          speculative decoding with MODEL as the draft (the output keeps the
                         target's distribution); reports the acceptance rate
  --gamma K              draft tokens per verification (default 4)
  --guidance G           classifier-free guidance z_u + G (z_c - z_u), z_u on the negative prompt
  --negative-prompt TEXT unconditional context for --guidance (default empty)
  --contrastive-weak MODEL  contrastive decoding z_strong - A z_weak on plausible tokens
  --alpha A              weight of the weak model (default 0.5)
  --beta B               plausibility: keep tokens with p >= B * max p (default 0.1)
)";

void AddDecodingFlags(std::set<std::string>* value_flags) {
  for (const char* f : {"beam", "length-penalty", "draft", "gamma", "guidance", "negative-prompt",
                        "contrastive-weak", "alpha", "beta"}) {
    value_flags->insert(f);
  }
}

std::string PrebuiltNgramModel(const Vocabulary& vocab) {
  const std::string file = "ngram-" + vocab.name() + ".bin";
  for (const std::string& dir : {DataDirectory() + "/models", std::string(LOCKSTEP_MODEL_DIR)}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir + "/" + file, ec)) return dir + "/" + file;
  }
  return {};
}

Result<std::unique_ptr<LogitsSource>> LoadModel(std::string_view spec, const Vocabulary& vocab,
                                                std::uint64_t seed,
                                                const std::string& ngram_model_path,
                                                const std::string& flag) {
  const std::string s(spec);
  auto check_width =
      [&](std::unique_ptr<LogitsSource> src) -> Result<std::unique_ptr<LogitsSource>> {
    if (src->width() != vocab.logits_width()) {
      return Status(StatusCode::kInvalidArgument,
                    "model width " + std::to_string(src->width()) +
                        " differs from the vocabulary's logits width " +
                        std::to_string(vocab.logits_width()),
                    flag);
    }
    return src;
  };
  if (s == "uniform") {
    return std::unique_ptr<LogitsSource>(new UniformSource(vocab.logits_width(), seed));
  }
  if (s.rfind("scripted:", 0) == 0) {
    auto r = ScriptedSource::Load(s.substr(9));
    if (!r.ok()) return r.status();
    return check_width(std::move(r).value());
  }
  if (s.rfind("replay:", 0) == 0) {
    auto r = ReplaySource::Load(s.substr(7));
    if (!r.ok()) return r.status();
    return check_width(std::move(r).value());
  }
  int order = 0;
  std::string path;
  if (s == "ngram") {
    path = ngram_model_path;
    if (path.empty()) {
      std::string built = PrebuiltNgramModel(vocab);
      if (!built.empty() && vocab.logits_width() == vocab.size()) path = built;
    }
    if (path.empty()) order = 4;
  } else if (s.size() == 6 && s.rfind("ngram", 0) == 0 && s[5] >= '2' && s[5] <= '4') {
    order = s[5] - '0';
  } else if (std::filesystem::is_regular_file(s)) {
    path = s;
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "unknown model '" + s +
                      "' (ngram, ngram2..ngram4, uniform, scripted:FILE, replay:FILE or an "
                      "n-gram model file)",
                  flag);
  }
  if (!path.empty()) {
    auto model = NgramModel::Load(path, vocab.Fingerprint());
    if (!model.ok()) return model.status();
    return std::unique_ptr<LogitsSource>(new NgramModel(std::move(model).value()));
  }
  std::cerr << "lockstep: training an order-" << order << " n-gram model for '" << vocab.name()
            << "' on " << DataDirectory() << "/corpus\n";
  auto model = NgramModel::TrainFromCorpus(vocab, DefaultNgramCorpus(DataDirectory()), order);
  if (!model.ok()) return model.status();
  return std::unique_ptr<LogitsSource>(new NgramModel(std::move(model).value()));
}

Result<std::unique_ptr<DecodingSetup>> SetupDecoding(const Args& args, const Vocabulary& vocab,
                                                     LogitsSource& base,
                                                     const std::vector<TokenId>& prompt,
                                                     std::uint64_t seed) {
  auto setup = std::make_unique<DecodingSetup>();
  setup->source = &base;
  if (args.Has("beam") && args.Has("draft")) {
    return Status(StatusCode::kInvalidArgument, "--beam and --draft cannot be combined", "--draft");
  }
  for (const char* f : {"length-penalty"}) {
    if (args.Has(f) && !args.Has("beam")) {
      return Status(StatusCode::kInvalidArgument, std::string("--") + f + " needs --beam",
                    std::string("--") + f);
    }
  }
  if (args.Has("gamma") && !args.Has("draft")) {
    return Status(StatusCode::kInvalidArgument, "--gamma needs --draft", "--gamma");
  }
  if (args.Has("negative-prompt") && !args.Has("guidance")) {
    return Status(StatusCode::kInvalidArgument, "--negative-prompt needs --guidance",
                  "--negative-prompt");
  }
  for (const char* f : {"alpha", "beta"}) {
    if (args.Has(f) && !args.Has("contrastive-weak")) {
      return Status(StatusCode::kInvalidArgument,
                    std::string("--") + f + " needs --contrastive-weak", std::string("--") + f);
    }
  }
  if (args.Has("guidance")) {
    auto g = args.GetDouble("guidance", 1.0, -1e6, 1e6);
    if (!g.ok()) return g.status();
    std::vector<TokenId> negative;
    if (args.Has("negative-prompt")) {
      auto ids = vocab.Encode(args.Get("negative-prompt"));
      if (!ids.ok()) {
        return Status(ids.status().code(), ids.status().message(), "--negative-prompt");
      }
      negative = *ids;
    }
    setup->owned.push_back(std::make_unique<GuidanceSource>(
        *setup->source, prompt.size(), std::move(negative), static_cast<float>(*g)));
    setup->source = setup->owned.back().get();
  }
  if (args.Has("contrastive-weak")) {
    auto alpha = args.GetDouble("alpha", 0.5, 0.0, 1e6);
    if (!alpha.ok()) return alpha.status();
    auto beta = args.GetDouble("beta", 0.1, 0.0, 1.0);
    if (!beta.ok()) return beta.status();
    auto weak = LoadModel(args.Get("contrastive-weak"), vocab, seed ^ 0x5EEDull,
                          args.Get("ngram-model"), "--contrastive-weak");
    if (!weak.ok()) return weak.status();
    setup->owned.push_back(std::move(weak).value());
    LogitsSource& weak_ref = *setup->owned.back();
    setup->owned.push_back(std::make_unique<ContrastiveSource>(
        *setup->source, weak_ref, static_cast<float>(*alpha), static_cast<float>(*beta)));
    setup->source = setup->owned.back().get();
  }
  if (args.Has("beam")) {
    auto b = args.GetInt("beam", 1, 1, 1024);
    if (!b.ok()) return b.status();
    auto lp = args.GetDouble("length-penalty", 1.0, -100, 100);
    if (!lp.ok()) return lp.status();
    setup->mode = DecodingMode::kBeam;
  }
  if (args.Has("draft")) {
    auto k = args.GetInt("gamma", 4, 1, 64);
    if (!k.ok()) return k.status();
    auto draft =
        LoadModel(args.Get("draft"), vocab, seed ^ 0xD4AF7ull, args.Get("ngram-model"), "--draft");
    if (!draft.ok()) return draft.status();
    setup->draft = std::move(draft).value();
    setup->mode = DecodingMode::kSpeculative;
  }
  return setup;
}


int RunDecoding(const DecodingSetup& setup, const Args& args,
                const std::shared_ptr<const CompiledGrammar>& grammar,
                const std::vector<TokenId>& prompt, const SamplerConfig& config, std::int64_t count,
                std::int64_t max_tokens) {
  const bool json = args.Has("json");
  if (setup.mode == DecodingMode::kBeam) {
    BeamOptions opt;
    opt.beam_width = static_cast<std::int32_t>(*args.GetInt("beam", 1, 1, 1024));
    opt.length_penalty = static_cast<float>(*args.GetDouble("length-penalty", 1.0, -100, 100));
    opt.max_tokens = static_cast<std::int32_t>(max_tokens);
    Matcher matcher(grammar);
    auto r = BeamSearch(*setup.source, matcher, prompt, opt);
    if (!r.ok()) return Fail(r.status());
    const std::size_t shown = std::min<std::size_t>(
        r->hypotheses.size(), static_cast<std::size_t>(std::max<std::int64_t>(count, 1)));
    for (std::size_t i = 0; i < shown; ++i) {
      const BeamHypothesis& h = r->hypotheses[i];
      if (json) {
        std::cout << JsonLine({{"text", h.text},
                           {"tokens", h.tokens},
                           {"finish", FinishReasonName(h.finish)},
                           {"match", h.finish == FinishReason::kEos},
                           {"logprob", h.logprob},
                           {"score", h.score}})
                  << "\n";
      } else {
        std::cout << h.text << "\n";
      }
    }
    return 0;
  }
  SpeculativeOptions opt;
  opt.sampler = config;
  opt.gamma = static_cast<std::int32_t>(*args.GetInt("gamma", 4, 1, 64));
  opt.max_tokens = static_cast<std::int32_t>(max_tokens);
  std::int64_t drafted = 0, accepted = 0, rounds = 0, emitted = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    Matcher matcher(grammar);
    opt.sequence_id = static_cast<std::uint64_t>(i);
    auto r = SpeculativeGenerate(*setup.source, *setup.draft, matcher, prompt, opt);
    if (!r.ok()) return Fail(r.status());
    drafted += r->drafted;
    accepted += r->accepted;
    rounds += r->rounds;
    emitted += static_cast<std::int64_t>(r->tokens.size()) + (r->finish == FinishReason::kEos);
    const bool match = matcher.IsTerminated() || matcher.CanEnd();
    if (json) {
      std::cout << JsonLine({{"text", r->text},
                         {"tokens", r->tokens},
                         {"finish", FinishReasonName(r->finish)},
                         {"match", match},
                         {"acceptance_rate", r->acceptance_rate()},
                         {"tokens_per_target_call", r->tokens_per_round()}})
                << "\n";
    } else {
      std::cout << r->text << "\n";
    }
  }
  std::fprintf(stderr,
               "lockstep: speculative decoding: %lld of %lld draft tokens accepted (%.3f), %.3f "
               "tokens per target call (%lld calls)\n",
               static_cast<long long>(accepted), static_cast<long long>(drafted),
               drafted ? static_cast<double>(accepted) / drafted : 0.0,
               rounds ? static_cast<double>(emitted) / rounds : 0.0,
               static_cast<long long>(rounds));
  return 0;
}

}  // namespace lockstep::cli
