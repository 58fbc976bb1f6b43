// SpeculativeGenerate (include/lockstep/decoding.h): draft proposes, target verifies, with the
// modified rejection sampling that makes the output distribution exactly the target's. Both
// distributions are the Sampler's final distribution (mask and every sampler stage applied).
#include <algorithm>
#include <string>

#include "decoder/decoding/decode_util.h"
#include "lockstep/decoding.h"

namespace lockstep {

double SpeculativeResult::tokens_per_round() const {
  if (rounds == 0) return 0;
  return static_cast<double>(tokens.size() + (finish == FinishReason::kEos ? 1 : 0)) / rounds;
}

Result<SpeculativeResult> SpeculativeGenerate(LogitsSource& target, LogitsSource& draft,
                                              Matcher& matcher, std::span<const TokenId> prompt,
                                              const SpeculativeOptions& options) {
  const std::int32_t width = matcher.grammar().logits_width();
  const Vocabulary& vocab = matcher.grammar().vocabulary();
  for (LogitsSource* s : {&target, &draft}) {
    const std::string role = s == &target ? "target" : "draft";
    const Status st = internal::CheckSourceWidth(s->width(), width, role + " source", role);
    if (!st.ok()) return st;
  }
  if (options.gamma < 1) {
    return Status(StatusCode::kInvalidArgument, "gamma must be at least 1", "gamma");
  }
  const std::size_t G = static_cast<std::size_t>(options.gamma);
  const std::size_t W = static_cast<std::size_t>(width);
  const std::size_t words = PaddedBitmaskWords(width);
  Sampler sampler(options.sampler, width);
  std::vector<float> logits(W), residual(W);
  std::vector<float> p(G * W), q((G + 1) * W);
  std::vector<std::uint32_t> masks((G + 1) * words);
  std::vector<TokenId> drafted, context;  // context: prompt + tokens, also the penalties' history
  SpeculativeResult r;
  std::uint64_t counter = 0;
  auto uniform = [&] {
    return CounterUniform(options.sampler.seed, options.sequence_id, counter++);
  };
  auto internal_error = [&](const char* what) {
    return Status(StatusCode::kInternal, what, "token " + std::to_string(r.tokens.size()));
  };
  auto emit = [&](TokenId t) -> bool {  // appends an accepted token; true if it ended the text
    if (internal::IsEos(vocab, t)) {
      matcher.AcceptToken(t);  // checked by the caller through IsTerminated
      r.finish = FinishReason::kEos;
      return true;
    }
    r.tokens.push_back(t);
    return false;
  };

  while (!matcher.IsTerminated() &&
         static_cast<std::int32_t>(r.tokens.size()) < options.max_tokens) {
    ++r.rounds;
    const std::size_t room = static_cast<std::size_t>(options.max_tokens) - r.tokens.size();
    // Draft: up to G tokens, each accepted into the matcher (EOS excepted: it ends the draft and
    // is only given to the matcher once verified, so rollbacks never cross an end).
    drafted.clear();
    bool draft_ended = false;
    context.assign(prompt.begin(), prompt.end());
    context.insert(context.end(), r.tokens.begin(), r.tokens.end());
    for (std::size_t i = 0; i < G && i < room && !draft_ended; ++i) {
      std::uint32_t* m = &masks[i * words];
      matcher.FillNextTokenBitmask({m, words});
      draft.MaskedLogits(context, m, logits);
      ++r.draft_calls;
      std::span<float> pi(&p[i * W], W);
      if (sampler.Distribution(logits, m, context, pi) == 0) {
        return internal_error("the mask allows no token before the end");
      }
      const TokenId x = internal::DrawFrom(pi, uniform());
      if (x == kNoToken) return internal_error("the draft distribution is empty");
      drafted.push_back(x);
      ++r.drafted;
      if (internal::IsEos(vocab, x)) {
        draft_ended = true;
      } else {
        if (!matcher.AcceptToken(x)) return internal_error("the matcher rejected an allowed token");
        context.push_back(x);
      }
    }
    const std::size_t k = drafted.size();
    const std::size_t in_matcher = draft_ended ? k - 1 : k;
    // Target: q at each drafted position, plus one more when the draft neither ended nor filled
    // the budget (a host would score these k + 1 positions in one batched call).
    const bool bonus = !draft_ended && k < room;
    if (bonus) matcher.FillNextTokenBitmask({&masks[k * words], words});
    context.assign(prompt.begin(), prompt.end());
    context.insert(context.end(), r.tokens.begin(), r.tokens.end());
    for (std::size_t i = 0; i < k + (bonus ? 1 : 0); ++i) {
      if (i > 0) {
        context.push_back(drafted[i - 1]);
      }
      target.MaskedLogits(context, &masks[i * words], logits);
      ++r.target_calls;
      if (sampler.Distribution(logits, &masks[i * words], context, {&q[i * W], W}) == 0) {
        return internal_error("the mask allows no token before the end");
      }
    }
    // Verify in order.
    bool ended = false;
    std::size_t i = 0;
    for (; i < k; ++i) {
      const TokenId x = drafted[i];
      const double pv = p[i * W + x], qv = q[i * W + x];
      const double u = uniform();
      if (qv >= pv || u * pv < qv) {  // accept with probability min(1, q/p)
        ++r.accepted;
        ended = emit(x);
        if (ended) break;
        continue;
      }
      // Rejected: undo the drafted tokens from i on, draw from normalised max(0, q - p).
      if (!matcher.Rollback(static_cast<std::int32_t>(in_matcher - std::min(in_matcher, i)))) {
        return internal_error("rollback failed");
      }
      for (std::size_t j = 0; j < W; ++j) {
        const float d = q[i * W + j] - p[i * W + j];
        residual[j] = d > 0 ? d : 0.0f;
      }
      TokenId y = internal::DrawFrom(residual, uniform());
      if (y == kNoToken) y = internal::DrawFrom({&q[i * W], W}, uniform());  // p == q numerically
      if (!internal::IsEos(vocab, y) && !matcher.AcceptToken(y)) {
        return internal_error("the matcher rejected an allowed token");
      }
      ended = emit(y);
      break;
    }
    if (i == k && bonus) {
      const TokenId y = internal::DrawFrom({&q[k * W], W}, uniform());
      if (!internal::IsEos(vocab, y) && !matcher.AcceptToken(y)) {
        return internal_error("the matcher rejected an allowed token");
      }
      ended = emit(y);
    }
    if (ended && !matcher.IsTerminated()) return internal_error("the matcher rejected an EOS");
    if (ended) break;
  }
  if (matcher.IsTerminated()) r.finish = FinishReason::kEos;
  auto text = vocab.Decode(r.tokens);
  if (text.ok()) r.text = std::move(text).value();
  return r;
}

}  // namespace lockstep
