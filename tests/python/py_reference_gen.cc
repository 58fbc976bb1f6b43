// The C++ side of the Python module's acceptance test (test_lockstep.py): generates under a JSON
// Schema with lockstep::Generate and the C ABI tests' deterministic logits function
// (capi_test_logits, tests/capi/capi_test_support.c), and prints the ids as one JSON line, so
// the Python binding can be checked to give exactly the same tokens for the same seeds.
//
//   py_reference_gen SCHEMA_FILE MODEL_SEED SAMPLER_SEED MAX_TOKENS JUMP_FORWARD
//   -> {"ids":[...],"finish":"eos"}
// Sampler settings: temperature CAPI_TEST_TEMPERATURE, top_p CAPI_TEST_TOP_P, vocabulary llama3.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "capi/capi_test_support.h"
#include "lockstep/compiler.h"
#include "lockstep/decoding.h"
#include "lockstep/logits_source.h"
#include "lockstep/matcher.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr,
                 "usage: py_reference_gen SCHEMA_FILE MODEL_SEED SAMPLER_SEED MAX_TOKENS "
                 "JUMP_FORWARD\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  std::stringstream schema;
  schema << in.rdbuf();
  const std::uint64_t model_seed = std::strtoull(argv[2], nullptr, 10);
  const std::uint64_t sampler_seed = std::strtoull(argv[3], nullptr, 10);
  const int max_tokens = std::atoi(argv[4]);
  const bool jump_forward = std::atoi(argv[5]) != 0;

  auto vocab = lockstep::Vocabulary::Load("llama3");
  if (!vocab.ok()) {
    std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str());
    return 1;
  }
  lockstep::GrammarCompiler compiler(*vocab);
  auto grammar = compiler.CompileSchema(schema.str());
  if (!grammar.ok()) {
    std::fprintf(stderr, "%s\n", grammar.status().ToString().c_str());
    return 1;
  }
  // The model reads token bytes through the C ABI, so it needs the vocabulary as a C handle.
  lockstep_vocab* cvocab = nullptr;
  if (lockstep_vocab_load("llama3", &cvocab) != LOCKSTEP_OK) {
    std::fprintf(stderr, "%s\n", lockstep_last_error());
    return 1;
  }
  capi_test_model model;
  if (capi_test_model_init(&model, cvocab, model_seed) != LOCKSTEP_OK) {
    std::fprintf(stderr, "%s\n", lockstep_last_error());
    return 1;
  }
  lockstep::CallbackSource source(capi_test_logits, &model, (*grammar)->logits_width());
  lockstep::Matcher matcher(*grammar);
  lockstep::GenerateOptions options;
  options.sampler.temperature = CAPI_TEST_TEMPERATURE;
  options.sampler.top_p = CAPI_TEST_TOP_P;
  options.sampler.seed = sampler_seed;
  options.max_tokens = max_tokens;
  options.jump_forward = jump_forward;
  auto r = lockstep::Generate(source, matcher, {}, options);
  capi_test_model_free(&model);
  lockstep_vocab_free(cvocab);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return 1;
  }
  std::string out = "{\"ids\":[";
  for (std::size_t i = 0; i < r->tokens.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(r->tokens[i]);
  }
  out += "],\"finish\":\"";
  out += lockstep::FinishReasonName(r->finish);
  out += "\"}\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}
