# Decoder runtime sources owned by the kernels/sampler/logits-source work (relative to decoder/).
# lockstep_decoder must link nlohmann_json::nlohmann_json (PRIVATE; ngram_corpus.cc reads JSONL).
set(LOCKSTEP_DECODER_SOURCES
  mask_kernels.cc
  sampler.cc
  logits_source.cc
  ngram_model.cc
  ngram_corpus.cc
  # logits sources and decoding algorithms (include/lockstep/decoding.h, classify.h)
  logits_file.cc
  scripted_source.cc
  generate_loop.cc
  beam_search.cc
  speculative.cc
  classify.cc
)
