# Vocabulary loaders and the canonical BPE encoder (paths relative to automata/).
set(LOCKSTEP_VOCAB_SOURCES
  unicode.cc
  pretokenizer.cc
  bpe.cc
  gzip.cc
  vocabulary.cc
  tokenizer_json.cc
  tiktoken.cc
  sentencepiece_vocab.cc)
