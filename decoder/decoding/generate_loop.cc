// Generate (include/lockstep/decoding.h): the sampling loop with the matcher in lockstep and
// jump-forward of forced bytes, re-tokenised canonically.
#include <string>

#include "decoder/decoding/decode_util.h"
#include "lockstep/decoding.h"

namespace lockstep {
namespace {

// Appends the canonical tokens of the matcher's forced bytes, as far as they are safe (see
// GenerateOptions::jump_forward). Returns how many were appended to `tokens` and `context`.
std::int32_t JumpForward(Matcher& matcher, std::int32_t budget, std::vector<std::uint32_t>& mask,
                         std::vector<TokenId>& tokens, std::vector<TokenId>& context) {
  if (budget <= 0) return 0;
  const std::string forced = matcher.ForcedBytes();
  if (forced.empty()) return 0;
  const Vocabulary& vocab = matcher.grammar().vocabulary();
  auto ids = vocab.Encode(forced, EncodeOptions{.add_dummy_prefix = false});
  if (!ids.ok() || ids->empty()) return 0;  // e.g. forced bytes end inside a UTF-8 character
  std::int32_t n = 0;
  for (std::size_t i = 0; i < ids->size() && n < budget; ++i) {
    const TokenId t = (*ids)[i];
    if (!matcher.AcceptToken(t)) break;
    if (i + 1 == ids->size()) {
      // The last forced token could merge with the next bytes: keep it only if the text ends
      // here (nothing but EOS may follow).
      bool only_eos = matcher.FillNextTokenBitmask(mask);
      const std::int32_t width = matcher.grammar().logits_width();
      mask_words::ForEachSetBit(mask.data(), width, [&](std::int32_t id) {
        if (!internal::IsEos(vocab, id)) only_eos = false;
      });
      if (!only_eos) {
        matcher.Rollback(1);
        break;
      }
    }
    tokens.push_back(t);
    context.push_back(t);
    ++n;
  }
  return n;
}

}  // namespace

const char* FinishReasonName(FinishReason r) { return r == FinishReason::kEos ? "eos" : "length"; }

Result<GenerateResult> Generate(LogitsSource& source, Matcher& matcher,
                                std::span<const TokenId> prompt, const GenerateOptions& options) {
  const std::int32_t width = matcher.grammar().logits_width();
  if (Status st = internal::CheckSourceWidth(source.width(), width); !st.ok()) return st;
  Sampler sampler(options.sampler, width);
  std::vector<float> logits(width);
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(width));
  std::vector<TokenId> context(prompt.begin(), prompt.end());
  GenerateResult r;
  std::uint64_t step = 0;
  while (!matcher.IsTerminated()) {
    const std::int32_t left = options.max_tokens - static_cast<std::int32_t>(r.tokens.size());
    if (options.jump_forward)
      r.forced_tokens += JumpForward(matcher, left, mask, r.tokens, context);
    if (static_cast<std::int32_t>(r.tokens.size()) >= options.max_tokens) break;
    matcher.FillNextTokenBitmask(mask);
    source.MaskedLogits(context, mask.data(), logits);
    ++r.model_calls;
    SampleResult s =
        sampler.SampleDetailed(logits, mask.data(), context, options.sequence_id, step);
    if (s.token == kNoToken || !matcher.AcceptToken(s.token)) {
      return Status(StatusCode::kInternal,
                    s.token == kNoToken ? "the mask allows no token before the end"
                                        : "the matcher rejected a token its mask allowed",
                    "step " + std::to_string(step));
    }
    ++step;
    r.logprob += s.masked_logprob;
    if (matcher.IsTerminated()) {
      r.finish = FinishReason::kEos;
      break;
    }
    r.tokens.push_back(s.token);
    context.push_back(s.token);
  }
  if (matcher.IsTerminated()) r.finish = FinishReason::kEos;
  auto text = matcher.grammar().vocabulary().Decode(r.tokens);
  if (text.ok()) r.text = std::move(text).value();
  return r;
}

}  // namespace lockstep
