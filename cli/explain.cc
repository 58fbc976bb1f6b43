// `lockstep explain`: shows what each sampler stage does to a distribution. On given logits
// (--logits, with optional labels, history and allowed set) it prints the distribution after
// every stage as terminal bars, as JSON (--json) or as one self-contained HTML page with an
// inline SVG chart per stage (--html FILE), plus the histogram of N seeded draws (--samples N).
// On a real generation (--regex or --grammar) it prints, per step, the 16 most likely tokens
// before and after the mask and the token drawn. Every distribution comes from Sampler::Trace,
// the sampler's own code with the later stages switched off.
#include "cli/explain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/constraint.h"
#include "cli/decoding_flags.h"
#include "cli/sampler_flags.h"
#include "lockstep/bitmask.h"
#include "lockstep/compiler.h"
#include "lockstep/logits_source.h"
#include "lockstep/matcher.h"
#include "lockstep/ngram_model.h"
#include "lockstep/sampler.h"
#include "lockstep/vocabulary.h"

namespace lockstep::cli {
namespace {

constexpr const char* kExplainHelp = R"(usage: lockstep explain --logits Z1,Z2,... [options]
       lockstep explain (--regex RE | --grammar FILE | --schema FILE | --artifact FILE.lsg) [generation options]

Shows the sampler's distribution after every stage: logit bias, repetition, frequency and
presence, mask, temperature, top-k, top-p, min-p, final. The distributions are the sampler's
own (Sampler::Trace), not a re-computation.

On given logits:
  --logits Z1,Z2,...     the logits, comma separated
  --labels L1,L2,...     a label per logit (default: the ids 0, 1, ...)
  --history L,...        tokens seen so far (labels or ids), for the penalties
  --allow L,...          the tokens the mask allows (labels or ids; default all)
  --samples N            also draw N seeded samples (steps 0..N-1) and count them
  --json                 print {"labels", "stages": [{"name", "enabled", "probs", "cutoff",
                         "kept_mass"}], "samples": {"n", "counts"}} (probs in label order)
  --html FILE            write one self-contained HTML page (inline SVG, no scripts, no
                         network): a bar chart per stage with the cut-off and the kept mass,
                         and the histogram of the draws

On a real generation (per step: top 16 tokens before and after the mask, the token drawn):
  --regex RE             the constraint
  --grammar FILE         a GBNF or Lark-style EBNF grammar file (--grammar-syntax
                         auto|gbnf|lark)
  --schema FILE          or a JSON Schema (drafts 04 to 2020-12): JSON instances that
                         validate, formatted as in docs/json-schema-compiler.md
  --artifact FILE.lsg    or a compiled artifact (`lockstep compile ... -o FILE.lsg`), loaded
                         instead of compiled; it must match --tokenizer
  --lenient              schemas: relax keywords that cannot be enforced exactly (warnings on
                         stderr) instead of failing
)" LOCKSTEP_SCHEMA_FLAGS_HELP R"(  --tokenizer NAME|PATH  vocabulary (default llama3)
  --model MODEL          logits source (default ngram; as on generate: ngram, ngram2..4,
                         uniform, scripted:FILE, replay:FILE or an n-gram file)
  --ngram-model PATH     n-gram model file
  --prompt TEXT          context for the logits source
  --max-tokens M         token budget (default 32)
  --top N                tokens shown per list (default 16)
  --json                 one JSON object per step
  --guidance G --negative-prompt TEXT
                         classifier-free guidance, as on generate
  --contrastive-weak MODEL --alpha A --beta B
                         contrastive decoding, as on generate

sampler flags:
)";

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin <= s.size()) {
    std::size_t end = s.find(',', begin);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// A label or a decimal id in [0, n).
Result<TokenId> LookUp(const std::string& word, const std::vector<std::string>& labels,
                       const std::string& flag) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == word) return static_cast<TokenId>(i);
  }
  char* end = nullptr;
  const long v = std::strtol(word.c_str(), &end, 10);
  if (word.empty() || *end != '\0' || v < 0 || v >= static_cast<long>(labels.size())) {
    return Status(StatusCode::kInvalidArgument, "'" + word + "' is not a label or an id", flag);
  }
  return static_cast<TokenId>(v);
}

std::string Bar(double p, int width) {
  static const char* kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int eighths = static_cast<int>(std::lround(std::clamp(p, 0.0, 1.0) * width * 8));
  std::string s;
  for (int i = 0; i < eighths / 8; ++i) s += "█";
  s += kEighths[eighths % 8];
  return s;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Fixed(double v, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// One horizontal-bar chart: a row per label; `prev` (the previous stage) drawn faint behind,
// the cut-off as a dashed line on prev's scale.
std::string SvgChart(const std::string& title, const std::vector<std::string>& labels,
                     const std::vector<float>& probs, const std::vector<float>* prev,
                     double cutoff, const std::string& note, const std::vector<double>* marks) {
  const int row = 22, left = 110, bar_w = 360, top = 28;
  const int height = top + row * static_cast<int>(labels.size()) + 10;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + bar_w + 90 << "\" height=\""
    << height << "\" role=\"img\" aria-label=\"" << Escape(title) << "\">\n";
  o << "<text x=\"4\" y=\"17\" class=\"t\">" << Escape(title) << "</text>";
  if (!note.empty()) {
    o << "<text x=\"" << left + bar_w + 86 << "\" y=\"17\" class=\"n\" text-anchor=\"end\">"
      << Escape(note) << "</text>";
  }
  o << "\n";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const int y = top + row * static_cast<int>(i);
    o << "<text x=\"" << left - 6 << "\" y=\"" << y + 15 << "\" text-anchor=\"end\">"
      << Escape(labels[i]) << "</text>";
    if (prev != nullptr) {
      o << "<rect class=\"prev\" x=\"" << left << "\" y=\"" << y + 3 << "\" width=\""
        << Fixed((*prev)[i] * bar_w, 1) << "\" height=\"" << row - 6 << "\"/>";
    }
    o << "<rect class=\"" << (probs[i] > 0 ? "bar" : "cut") << "\" x=\"" << left << "\" y=\""
      << y + 3 << "\" width=\"" << Fixed(probs[i] * bar_w, 1) << "\" height=\"" << row - 6
      << "\"/>";
    if (marks != nullptr) {
      const double x = left + (*marks)[i] * bar_w;
      o << "<line class=\"mark\" x1=\"" << Fixed(x, 1) << "\" x2=\"" << Fixed(x, 1) << "\" y1=\""
        << y + 1 << "\" y2=\"" << y + row - 1 << "\"/>";
    }
    o << "<text x=\"" << left + bar_w + 6 << "\" y=\"" << y + 15 << "\">" << Fixed(probs[i])
      << "</text>\n";
  }
  if (cutoff > 0) {
    const double x = left + cutoff * bar_w;
    o << "<line class=\"cutoff\" x1=\"" << Fixed(x, 1) << "\" x2=\"" << Fixed(x, 1)
      << "\" y1=\"" << top - 4 << "\" y2=\"" << height - 6 << "\"/>";
    o << "<text class=\"n\" x=\"" << Fixed(x + 3, 1) << "\" y=\"" << top - 6 << "\">cut-off "
      << Fixed(cutoff) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string HtmlPage(const std::vector<std::string>& labels,
                     const std::vector<StageDistribution>& stages,
                     const std::vector<std::int64_t>& counts, std::int64_t samples,
                     const SamplerConfig& c) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
       "<title>lockstep explain</title>\n<style>\n"
       "body{font:14px sans-serif;margin:24px;color:#222;background:#fff}\n"
       "svg{display:block;margin:6px 0 18px}svg text{font:13px sans-serif;fill:#222}\n"
       ".t{font-weight:bold}.n{fill:#666}.bar{fill:#3b6fb6}.cut{fill:#ccc}\n"
       ".prev{fill:#3b6fb6;opacity:.18}.cutoff{stroke:#c0392b;stroke-width:1.5;"
       "stroke-dasharray:4 3}\n.mark{stroke:#c0392b;stroke-width:2}.off{color:#888}\n"
       "</style></head><body>\n<h1>Sampler stages</h1>\n<p>temperature "
    << c.temperature << ", top-k " << c.top_k << ", top-p " << c.top_p << ", min-p " << c.min_p
    << ", repetition " << c.repetition_penalty << ", frequency " << c.frequency_penalty
    << ", presence " << c.presence_penalty << ", seed " << c.seed << "</p>\n";
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageDistribution& st = stages[s];
    const bool truncation = st.name == "top_k" || st.name == "top_p" || st.name == "min_p";
    std::string note;
    if (!st.enabled) {
      note = "off";
    } else if (truncation) {
      note = "kept mass " + Fixed(st.kept_mass);
    }
    const std::vector<float>* prev = truncation && s > 0 ? &stages[s - 1].probs : nullptr;
    o << "<section class=\"" << (st.enabled ? "on" : "off") << "\">"
      << SvgChart(st.name, labels, st.probs, prev, st.enabled && truncation ? st.cutoff : 0.0,
                  note, nullptr)
      << "</section>\n";
  }
  if (samples > 0) {
    std::vector<float> freq(labels.size());
    std::vector<double> expected(labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i) {
      freq[i] = static_cast<float>(static_cast<double>(counts[i]) / samples);
      expected[i] = stages.back().probs[i];
    }
    o << "<h2>" << samples << " seeded draws</h2>\n<p>bars: observed frequency; red marks: the "
         "final distribution</p>\n"
      << SvgChart("draws", labels, freq, nullptr, 0, "", &expected);
  }
  o << "</body></html>\n";
  return o.str();
}

int ExplainLogits(const Args& args) {
  std::vector<float> logits;
  for (const std::string& w : SplitCommas(args.Get("logits"))) {
    char* end = nullptr;
    const float v = std::strtof(w.c_str(), &end);
    if (w.empty() || *end != '\0' || std::isnan(v) || v == INFINITY) {
      return Fail(Status(StatusCode::kInvalidArgument, "not a logit: '" + w + "'", "--logits"));
    }
    logits.push_back(v);
  }
  const std::int32_t n = static_cast<std::int32_t>(logits.size());
  std::vector<std::string> labels;
  if (args.Has("labels")) {
    labels = SplitCommas(args.Get("labels"));
    if (labels.size() != logits.size()) {
      return Fail(Status(StatusCode::kInvalidArgument,
                         "--labels has " + std::to_string(labels.size()) + " labels for " +
                             std::to_string(n) + " logits",
                         "--labels"));
    }
  } else {
    for (std::int32_t i = 0; i < n; ++i) labels.push_back(std::to_string(i));
  }
  auto config = SamplerConfigFromArgs(args, labels);
  if (!config.ok()) return Fail(config.status());
  std::vector<TokenId> history;
  if (args.Has("history")) {
    for (const std::string& w : SplitCommas(args.Get("history"))) {
      auto id = LookUp(w, labels, "--history");
      if (!id.ok()) return Fail(id.status());
      history.push_back(*id);
    }
  }
  std::vector<std::uint32_t> mask;
  if (args.Has("allow")) {
    mask.assign(PaddedBitmaskWords(n), 0);
    for (const std::string& w : SplitCommas(args.Get("allow"))) {
      auto id = LookUp(w, labels, "--allow");
      if (!id.ok()) return Fail(id.status());
      mask[*id >> 5] |= 1u << (*id & 31);
    }
  }
  const std::uint32_t* m = mask.empty() ? nullptr : mask.data();
  auto samples = args.GetInt("samples", 0, 0, 100000000);
  if (!samples.ok()) return Fail(samples.status());

  Sampler sampler(*config, n);
  const std::vector<StageDistribution> stages = sampler.Trace(logits, m, history);
  std::vector<std::int64_t> counts(n, 0);
  std::vector<float> scratch(n);
  for (std::int64_t s = 0; s < *samples; ++s) {
    scratch = logits;
    const TokenId t = sampler.Sample(scratch, m, history, 0, static_cast<std::uint64_t>(s));
    if (t != kNoToken) ++counts[t];
  }

  if (args.Has("html")) {
    std::ofstream out(args.Get("html"), std::ios::binary);
    out << HtmlPage(labels, stages, counts, *samples, *config);
    if (!out) {
      return Fail(Status(StatusCode::kInvalidArgument, "cannot write " + args.Get("html"),
                         "--html"));
    }
  }
  if (args.Has("json")) {
    nlohmann::ordered_json j;
    j["labels"] = labels;
    j["stages"] = nlohmann::ordered_json::array();
    for (const StageDistribution& st : stages) {
      nlohmann::ordered_json o = {{"name", st.name}, {"enabled", st.enabled}};
      std::vector<double> p(st.probs.begin(), st.probs.end());
      o["probs"] = p;
      o["cutoff"] = st.cutoff;
      o["kept_mass"] = st.kept_mass;
      j["stages"].push_back(o);
    }
    if (*samples > 0) j["samples"] = {{"n", *samples}, {"counts", counts}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  if (args.Has("html")) return 0;
  std::size_t label_w = 0;
  for (const auto& l : labels) label_w = std::max(label_w, l.size());
  for (const StageDistribution& st : stages) {
    std::printf("%s%s", st.name.c_str(), st.enabled ? "" : " (off)");
    if (st.enabled && st.cutoff > 0) {
      std::printf("  cut-off %.3f, kept mass %.3f", st.cutoff, st.kept_mass);
    }
    std::printf("\n");
    for (std::int32_t i = 0; i < n; ++i) {
      std::printf("  %-*s %5.3f %s\n", static_cast<int>(label_w), labels[i].c_str(),
                  st.probs[i], Bar(st.probs[i], 40).c_str());
    }
  }
  if (*samples > 0) {
    std::printf("draws (%lld)\n", static_cast<long long>(*samples));
    for (std::int32_t i = 0; i < n; ++i) {
      const double f = static_cast<double>(counts[i]) / static_cast<double>(*samples);
      std::printf("  %-*s %5.3f %s\n", static_cast<int>(label_w), labels[i].c_str(), f,
                  Bar(f, 40).c_str());
    }
  }
  return 0;
}

// The `top` most likely ids of `probs` (probability > 0), best first, ties to the lowest id.
std::vector<TokenId> TopIds(const std::vector<float>& probs, std::int32_t top) {
  std::vector<TokenId> ids;
  for (TokenId i = 0; i < static_cast<TokenId>(probs.size()); ++i) {
    if (probs[i] > 0) ids.push_back(i);
  }
  const std::size_t k = std::min<std::size_t>(ids.size(), static_cast<std::size_t>(top));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](TokenId a, TokenId b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  ids.resize(k);
  return ids;
}

int ExplainGeneration(const Args& args) {
  auto config = SamplerConfigFromArgs(args);
  if (!config.ok()) return Fail(config.status());
  auto max_tokens = args.GetInt("max-tokens", 32, 1, 100000);
  if (!max_tokens.ok()) return Fail(max_tokens.status());
  auto top = args.GetInt("top", 16, 1, 1000);
  if (!top.ok()) return Fail(top.status());
  auto loaded = LoadConstraint(args);
  if (!loaded.ok()) return Fail(loaded.status());
  const std::shared_ptr<const Vocabulary>& vocab = loaded->vocab;
  auto source = LoadModel(args.Get("model", "ngram"), *vocab, config->seed,
                          args.Get("ngram-model"), "--model");
  if (!source.ok()) return Fail(source.status());
  auto prompt = EncodePrompt(args, *vocab);
  if (!prompt.ok()) return Fail(prompt.status());
  std::vector<TokenId> context = std::move(*prompt);
  // --guidance / --contrastive-weak wrap the source, as on `generate`.
  auto decoding = SetupDecoding(args, *vocab, **source, context, config->seed);
  if (!decoding.ok()) return Fail(decoding.status());
  if ((*decoding)->mode != DecodingMode::kSample) {
    return Fail(Status(StatusCode::kInvalidArgument,
                       "explain shows sampling steps: --beam and --draft are for generate",
                       "arguments"));
  }
  LogitsSource& model = *(*decoding)->source;
  const std::int32_t width = vocab->logits_width();
  Sampler sampler(*config, width);
  Matcher matcher(loaded->grammar);
  std::vector<float> logits(width), scratch(width);
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(width));
  const bool json = args.Has("json");
  auto text_of = [&](TokenId t) { return std::string(vocab->TokenBytes(t)); };
  for (std::int64_t step = 0; step < *max_tokens && !matcher.IsTerminated(); ++step) {
    matcher.FillNextTokenBitmask(mask);
    model.MaskedLogits(context, mask.data(), logits);
    const auto stages = sampler.Trace(logits, mask.data(), context);
    // "frequency_presence" is the last stage before the mask, "mask" the first after it.
    const std::vector<float>& before = stages[3].probs;
    const std::vector<float>& after = stages[4].probs;
    const std::vector<float>& final_probs = stages.back().probs;
    scratch = logits;
    const TokenId tok = sampler.Sample(scratch, mask.data(), context, 0,
                                       static_cast<std::uint64_t>(step));
    if (tok == kNoToken || !matcher.AcceptToken(tok)) {
      return Fail(Status(StatusCode::kInternal, "the sampler drew a token the mask forbids",
                         "step " + std::to_string(step)));
    }
    const auto top_before = TopIds(before, static_cast<std::int32_t>(*top));
    const auto top_after = TopIds(after, static_cast<std::int32_t>(*top));
    if (json) {
      auto list = [&](const std::vector<TokenId>& ids, const std::vector<float>& p) {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (TokenId t : ids) a.push_back({{"token", t}, {"text", text_of(t)}, {"p", p[t]}});
        return a;
      };
      nlohmann::ordered_json j = {{"step", step},
                                  {"token", tok},
                                  {"text", text_of(tok)},
                                  {"p", final_probs[tok]},
                                  {"before_mask", list(top_before, before)},
                                  {"after_mask", list(top_after, after)}};
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::printf("step %lld: drew %d %s (p %.3f)\n", static_cast<long long>(step), tok,
                  nlohmann::json(text_of(tok))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                      .c_str(),
                  final_probs[tok]);
      const std::size_t rows = std::max(top_before.size(), top_after.size());
      std::printf("  %-36s %s\n", "before the mask", "after the mask");
      for (std::size_t r = 0; r < rows; ++r) {
        std::string l, rt;
        auto cell = [&](const std::vector<TokenId>& ids, const std::vector<float>& p) {
          if (r >= ids.size()) return std::string();
          std::string t = nlohmann::json(text_of(ids[r]))
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
          if (t.size() > 20) t = t.substr(0, 19) + "…";
          char buf[96];
          std::snprintf(buf, sizeof buf, "%c%6d %-21s %.3f", ids[r] == tok ? '*' : ' ', ids[r],
                        t.c_str(), p[ids[r]]);
          return std::string(buf);
        };
        l = cell(top_before, before);
        rt = cell(top_after, after);
        std::printf("  %-36s %s\n", l.c_str(), rt.c_str());
      }
    }
    if (!matcher.IsTerminated()) context.push_back(tok);
  }
  return 0;
}

}  // namespace

int Explain(int argc, char** argv) {
  std::set<std::string> value_flags = {"logits", "labels", "history", "allow", "samples",
                                       "html", "tokenizer", "logits-width", "model",
                                       "ngram-model", "prompt", "max-tokens", "top"};
  AddDecodingFlags(&value_flags);
  std::set<std::string> switches = {"json", "help"};
  if (Status st = AddConstrainedSamplingFlags(&value_flags, &switches); !st.ok()) return Fail(st);
  Args args(value_flags, switches, {{"-h", "help"}});
  const std::string help = std::string(kExplainHelp) + kSamplerFlagsHelp;
  if (auto done = ParseCommand(args, argc, argv, help, /*allow_positional=*/false)) return *done;
  if (args.Has("logits") == HasConstraint(args)) {
    return Fail(Status(StatusCode::kInvalidArgument,
                       "explain needs --logits or a constraint (--regex, --grammar, --schema), not both",
                       "arguments"));
  }
  return args.Has("logits") ? ExplainLogits(args) : ExplainGeneration(args);
}

}  // namespace lockstep::cli
