// Sampler flags shared by the subcommands (see sampler_flags.h).
#include "cli/sampler_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "lockstep/vocabulary.h"

namespace lockstep::cli {
namespace {

const char* const kFlagNames[] = {
    "preset",           "temperature",       "top-k",            "top-p",
    "min-p",            "repetition-penalty", "repetition-window", "frequency-penalty",
    "presence-penalty", "logit-bias",        "seed",
};

Status BadBias(const std::string& item, const std::string& why) {
  return Status(StatusCode::kInvalidArgument,
                "--logit-bias expects ID:BIAS (comma separated), got '" + item + "': " + why,
                "--logit-bias");
}

// One "ID:BIAS" item; ID may be a label when `labels` is given.
Status ParseBias(const std::string& item, std::span<const std::string> labels, SamplerConfig* c) {
  const auto colon = item.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
    return BadBias(item, "missing ':'");
  }
  const std::string id_text = item.substr(0, colon), bias_text = item.substr(colon + 1);
  long long id = -1;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == id_text) id = static_cast<long long>(i);
  }
  if (id < 0) {
    char* end = nullptr;
    errno = 0;
    id = std::strtoll(id_text.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE || id < 0 || id > std::numeric_limits<TokenId>::max()) {
      return BadBias(item, labels.empty() ? "not a token id" : "not a token id or label");
    }
  }
  char* end = nullptr;
  const double bias = std::strtod(bias_text.c_str(), &end);
  // -inf is a useful bias (ban a token); NaN and +inf are not.
  if (*end != '\0' || std::isnan(bias) || bias == std::numeric_limits<double>::infinity()) {
    return BadBias(item, "not a number");
  }
  c->logit_bias.emplace_back(static_cast<TokenId>(id), static_cast<float>(bias));
  return Status::Ok();
}

}  // namespace

const char* const kSamplerFlagsHelp =
    R"(  --preset NAME          start from a preset of schemas/presets/presets.json (extraction,
                         chat, creative, code); explicit flags override its fields
  --temperature T        0 = greedy (default 1.0)
  --top-k K              keep the K most likely allowed tokens (default 0 = off)
  --top-p P              nucleus: smallest set with mass >= P, in [0, 1] (default 1 = off)
  --min-p P              keep tokens with p >= P * p_max (default 0 = off)
  --repetition-penalty θ CTRL penalty on tokens of the history: z>0 -> z/θ, z<0 -> z*θ (1 = off)
  --repetition-window N  penalties look at the last N tokens (default 0 = all)
  --frequency-penalty λ  z - count * λ for tokens of the history (default 0)
  --presence-penalty λ   z - λ for tokens present in the history (default 0)
  --logit-bias ID:BIAS   add BIAS to token ID's logit; repeatable or comma separated
                         (BIAS may be -inf to ban a token)
  --seed N               sampler seed (default 0); same seed, same output
)";

Status AddSamplerFlags(std::set<std::string>* value_flags, const std::set<std::string>& switches) {
  for (const char* name : kFlagNames) {
    if (switches.count(name)) {
      return Status(StatusCode::kInternal,
                    std::string("--") + name + " is both a switch and a sampler flag", "--" + std::string(name));
    }
    value_flags->insert(name);
  }
  return Status::Ok();
}

Result<SamplerConfig> SamplerConfigFromArgs(const Args& args, std::span<const std::string> labels) {
  SamplerConfig c;
  if (args.Has("preset")) {
    const std::string path = DataDirectory() + "/presets/presets.json";
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return Status(StatusCode::kInvalidArgument, "cannot read the presets file " + path,
                    "--preset");
    }
    std::stringstream ss;
    ss << in.rdbuf();
    auto preset = SamplerPreset(args.Get("preset"), ss.str());
    if (!preset.ok()) {
      return Status(preset.status().code(), preset.status().message(),
                    "--preset (" + path + (preset.status().location().empty() ? "" : " ") +
                        preset.status().location() + ")");
    }
    c = *preset;
  }
  constexpr double kMaxFloat = std::numeric_limits<float>::max();
  auto temperature = args.GetDouble("temperature", c.temperature, 0.0, 1e6);
  if (!temperature.ok()) return temperature.status();
  c.temperature = static_cast<float>(*temperature);
  auto top_k = args.GetInt("top-k", c.top_k, 0, std::numeric_limits<std::int32_t>::max());
  if (!top_k.ok()) return top_k.status();
  c.top_k = static_cast<std::int32_t>(*top_k);
  auto top_p = args.GetDouble("top-p", c.top_p, 0.0, 1.0);
  if (!top_p.ok()) return top_p.status();
  c.top_p = static_cast<float>(*top_p);
  auto min_p = args.GetDouble("min-p", c.min_p, 0.0, 1.0);
  if (!min_p.ok()) return min_p.status();
  c.min_p = static_cast<float>(*min_p);
  auto rep = args.GetDouble("repetition-penalty", c.repetition_penalty, 1e-6, kMaxFloat);
  if (!rep.ok()) return rep.status();
  c.repetition_penalty = static_cast<float>(*rep);
  auto window = args.GetInt("repetition-window", c.repetition_window, 0,
                            std::numeric_limits<std::int32_t>::max());
  if (!window.ok()) return window.status();
  c.repetition_window = static_cast<std::int32_t>(*window);
  auto freq = args.GetDouble("frequency-penalty", c.frequency_penalty, -kMaxFloat, kMaxFloat);
  if (!freq.ok()) return freq.status();
  c.frequency_penalty = static_cast<float>(*freq);
  auto presence = args.GetDouble("presence-penalty", c.presence_penalty, -kMaxFloat, kMaxFloat);
  if (!presence.ok()) return presence.status();
  c.presence_penalty = static_cast<float>(*presence);
  auto seed = args.GetInt("seed", static_cast<std::int64_t>(c.seed & INT64_MAX), 0, INT64_MAX);
  if (!seed.ok()) return seed.status();
  if (args.Has("seed")) c.seed = static_cast<std::uint64_t>(*seed);
  for (const std::string& value : args.GetAll("logit-bias")) {
    std::size_t begin = 0;
    while (begin <= value.size()) {
      std::size_t end = value.find(',', begin);
      if (end == std::string::npos) end = value.size();
      const std::string item = value.substr(begin, end - begin);
      if (!item.empty()) LOCKSTEP_RETURN_IF_ERROR(ParseBias(item, labels, &c));
      begin = end + 1;
    }
  }
  return c;
}

}  // namespace lockstep::cli
