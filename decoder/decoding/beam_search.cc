// BeamSearch (include/lockstep/decoding.h): B beams, each with its own forked matcher, scored by
// summed constrained log-probabilities and ranked with a length penalty.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "decoder/decoding/decode_util.h"
#include "lockstep/decoding.h"

namespace lockstep {
namespace {

struct Beam {
  Matcher matcher;
  std::vector<TokenId> tokens;
  double logprob = 0;
};

struct Candidate {
  double logprob;
  std::int32_t beam;
  TokenId token;
};

double Score(double logprob, std::size_t len, float alpha) {
  if (alpha == 0.0f) return logprob;
  return logprob / std::pow(static_cast<double>(std::max<std::size_t>(len, 1)), alpha);
}

}  // namespace

Result<BeamResult> BeamSearch(LogitsSource& source, const Matcher& matcher,
                              std::span<const TokenId> prompt, const BeamOptions& options) {
  const std::int32_t width = matcher.grammar().logits_width();
  const Vocabulary& vocab = matcher.grammar().vocabulary();
  if (Status st = internal::CheckSourceWidth(source.width(), width); !st.ok()) return st;
  if (options.beam_width < 1) {
    return Status(StatusCode::kInvalidArgument, "beam width must be at least 1", "beam_width");
  }
  const std::size_t B = static_cast<std::size_t>(options.beam_width);
  const float alpha = options.length_penalty;
  BeamResult result;
  std::vector<Beam> live;
  live.push_back({matcher.Fork(), {}, 0.0});
  if (matcher.IsTerminated()) live.clear();
  std::vector<BeamHypothesis> finished;
  std::vector<float> logits(width);
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(width));
  std::vector<TokenId> context;
  std::vector<std::pair<float, TokenId>> top;
  std::vector<Candidate> cands;

  auto add_finished = [&](const Beam& b, FinishReason why, double logprob) {
    BeamHypothesis h;
    h.tokens = b.tokens;
    h.finish = why;
    h.logprob = logprob;
    h.score = Score(logprob, b.tokens.size(), alpha);
    finished.push_back(std::move(h));
  };
  auto by_score = [](const BeamHypothesis& a, const BeamHypothesis& b) {
    return a.score > b.score;
  };

  for (std::int32_t step = 0; !live.empty(); ++step) {
    if (step >= options.max_tokens) {
      for (const Beam& b : live) add_finished(b, FinishReason::kLength, b.logprob);
      break;
    }
    ++result.steps;
    cands.clear();
    for (std::size_t bi = 0; bi < live.size(); ++bi) {
      Beam& b = live[bi];
      if (!b.matcher.FillNextTokenBitmask(mask)) continue;
      context.assign(prompt.begin(), prompt.end());
      context.insert(context.end(), b.tokens.begin(), b.tokens.end());
      source.MaskedLogits(context, mask.data(), logits);
      ++result.model_calls;
      const double lse = internal::MaskedLogSumExp(logits, mask.data());
      if (!std::isfinite(lse)) continue;  // nothing allowed or every allowed logit is -inf
      // The B + 1 best allowed tokens (at most one is EOS, so B live continuations remain).
      top.clear();
      mask_words::ForEachSetBit(mask.data(), width, [&](std::int32_t id) {
        if (logits[id] != -std::numeric_limits<float>::infinity()) top.push_back({logits[id], id});
      });
      const std::size_t keep = std::min(top.size(), B + 1);
      std::partial_sort(top.begin(), top.begin() + keep, top.end(),
                        [](const auto& x, const auto& y) {
                          return x.first > y.first || (x.first == y.first && x.second < y.second);
                        });
      for (std::size_t k = 0; k < keep; ++k) {
        cands.push_back({b.logprob + (double{top[k].first} - lse), static_cast<std::int32_t>(bi),
                         top[k].second});
      }
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate& x, const Candidate& y) {
      if (x.logprob != y.logprob) return x.logprob > y.logprob;
      if (x.beam != y.beam) return x.beam < y.beam;
      return x.token < y.token;
    });
    std::vector<Beam> next;
    for (const Candidate& c : cands) {
      if (next.size() >= B) break;
      const Beam& parent = live[c.beam];
      if (internal::IsEos(vocab, c.token)) {
        add_finished(parent, FinishReason::kEos, c.logprob);
        continue;
      }
      Beam child{parent.matcher.Fork(), parent.tokens, c.logprob};
      if (!child.matcher.AcceptToken(c.token)) {
        return Status(StatusCode::kInternal, "the matcher rejected a token its mask allowed",
                      "step " + std::to_string(step));
      }
      child.tokens.push_back(c.token);
      if (child.matcher.IsTerminated()) {  // an end token the vocabulary does not list as EOS
        add_finished(child, FinishReason::kEos, c.logprob);
        continue;
      }
      next.push_back(std::move(child));
    }
    live = std::move(next);
    // Stop once B hypotheses are finished and no live beam can still beat the worst of them:
    // log p only falls, so a live beam's final score is at most logprob / max_len^alpha
    // (alpha > 0) or logprob (alpha = 0).
    if (finished.size() >= B && !live.empty() && alpha >= 0.0f) {
      std::sort(finished.begin(), finished.end(), by_score);
      const double worst = finished[B - 1].score;
      double bound = -std::numeric_limits<double>::infinity();
      for (const Beam& b : live) {
        bound = std::max(
            bound, alpha == 0.0f ? b.logprob
                                 : b.logprob / std::pow(double(options.max_tokens), double{alpha}));
      }
      if (bound <= worst) break;
    }
  }
  std::stable_sort(finished.begin(), finished.end(), by_score);
  if (finished.size() > B) finished.resize(B);
  for (BeamHypothesis& h : finished) {
    auto text = vocab.Decode(h.tokens);
    if (text.ok()) h.text = std::move(text).value();
  }
  result.hypotheses = std::move(finished);
  return result;
}

}  // namespace lockstep
