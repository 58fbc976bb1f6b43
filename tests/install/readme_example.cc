#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/sampler.h"

int main() {
  auto vocab = lockstep::Vocabulary::Load("llama3");  // a bundled tokenizer, or a file path
  if (!vocab.ok()) return std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str()), 1;
  lockstep::GrammarCompiler compiler(*vocab);
  auto grammar = compiler.CompileRegex(R"(\d{4}-\d{2}-\d{2})");  // or CompileSchema, CompileGrammar
  if (!grammar.ok()) return std::fprintf(stderr, "%s\n", grammar.status().ToString().c_str()), 2;
  lockstep::Matcher matcher(*grammar);
  lockstep::Sampler sampler({.temperature = 0.7f, .seed = 42});
  const std::int32_t width = (*vocab)->logits_width();
  std::vector<std::uint32_t> mask(lockstep::BitmaskWords(width));
  std::string text;
  for (std::uint64_t step = 0; !matcher.IsTerminated(); ++step) {
    std::vector<float> logits(width, 0.0f);  // your model's logits for the text so far
    matcher.FillNextTokenBitmask(mask);      // exact; EOS only where the match is complete
    lockstep::TokenId token = sampler.Sample(logits, mask.data(), /*sequence_id=*/0, step);
    matcher.AcceptToken(token);
    text += (*vocab)->TokenBytes(token);  // EOS emits no bytes
  }
  std::printf("%s\n", text.c_str());
}
