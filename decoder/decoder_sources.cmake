# Decoder runtime sources owned by the kernels/sampler/logits-source work (relative to decoder/).
# lockstep_decoder must link nlohmann_json::nlohmann_json (PRIVATE; ngram_corpus.cc reads JSONL).
set(LOCKSTEP_DECODER_SOURCES
  mask_kernels.cc
  sampler.cc
  logits_source.cc
  ngram_model.cc
  ngram_corpus.cc
)
