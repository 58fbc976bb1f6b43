// The C ABI under arbitrary use: a host's token table (lockstep_vocab_from_tokens), a regex or
// grammar text, then a script of matcher, sampler and batch calls with arbitrary arguments
// (null handles, short buffers, out-of-range ids and counts). Every call must return a status
// and never crash, read or write out of bounds (ASan), or leave an error without a message.
// Checks what the contract promises: a buffer shorter than the mask is refused, a token outside
// the mask is refused, accepting a token the filled mask allows succeeds.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lockstep/lockstep_c.h"

namespace {

struct Input {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t Byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::uint32_t U16() { return Byte() | (std::uint32_t{Byte()} << 8); }
  std::string Bytes(std::size_t len) {
    len = len < n ? len : n;
    std::string s(reinterpret_cast<const char*>(p), len);
    p += len;
    n -= len;
    return s;
  }
};

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "capi_fuzz: contract broken: %s (last error: %s)\n", what,
                 lockstep_last_error());
    std::abort();
  }
}

void CheckStatus(lockstep_status s) {
  // A failing call leaves a message.
  if (s != LOCKSTEP_OK) Check(lockstep_last_error()[0] != '\0', "error without a message");
}

// A vocabulary from the input: up to 48 tokens of up to 6 bytes, types 0..4 (4 is invalid).
lockstep_vocab* VocabFrom(Input& in) {
  const std::size_t num_tokens = in.Byte() % 48;
  std::vector<std::string> storage(num_tokens);
  std::vector<const char*> ptrs(num_tokens);
  std::vector<std::size_t> lens(num_tokens);
  std::vector<std::int32_t> types(num_tokens);
  for (std::size_t i = 0; i < num_tokens; ++i) {
    storage[i] = in.Bytes(in.Byte() % 7);
    ptrs[i] = storage[i].data();
    lens[i] = storage[i].size();
    types[i] = in.Byte() % 5;
  }
  std::vector<std::int32_t> eos;
  for (std::size_t k = in.Byte() % 3; k > 0; --k) {
    eos.push_back(static_cast<std::int32_t>(in.Byte()) - 8);
  }
  const std::int32_t width = static_cast<std::int32_t>(num_tokens) + (in.Byte() % 40) - 4;
  lockstep_vocab* vocab = nullptr;
  lockstep_status st = lockstep_vocab_from_tokens(
      num_tokens ? ptrs.data() : nullptr, num_tokens ? lens.data() : nullptr,
      (in.Byte() & 1) ? types.data() : nullptr, num_tokens, eos.empty() ? nullptr : eos.data(),
      eos.size(), width < 0 ? 0 : width, &vocab);
  CheckStatus(st);
  Check((st == LOCKSTEP_OK) == (vocab != nullptr), "vocab handle and status disagree");
  return vocab;
}

// A constraint: regex, grammar or schema text from the input, else a fixed regex.
lockstep_grammar* GrammarFrom(Input& in, lockstep_vocab* vocab) {
  lockstep_compile_options options;
  lockstep_compile_options_init(&options);
  options.max_dfa_states = 2000;
  options.max_nfa_states = 4000;
  const std::uint8_t kind = in.Byte() % 3;
  const std::string text = in.Bytes(in.Byte() % 48);
  lockstep_grammar* grammar = nullptr;
  lockstep_status st;
  if (kind == 0) {
    st = lockstep_compile_regex(vocab, text.data(), text.size(), &options, &grammar);
  } else if (kind == 1) {
    st = lockstep_compile_grammar(vocab, text.data(), text.size(), nullptr, &options, &grammar);
  } else {
    st = lockstep_compile_schema(vocab, text.data(), text.size(), &options, &grammar);
  }
  CheckStatus(st);
  if (grammar == nullptr) {
    const char* fallback = "[a-c]{0,6}(xy|z)*";
    CheckStatus(lockstep_compile_regex(vocab, fallback, std::strlen(fallback), nullptr, &grammar));
  }
  return grammar;
}

// The script of calls on one matcher (and its forks, a sampler, the vocabulary): one step per
// input byte that picks the call.
class Script {
 public:
  Script(Input& in, lockstep_vocab* vocab, lockstep_grammar* grammar)
      : in_(in),
        vocab_(vocab),
        words_(lockstep_vocab_bitmask_words(vocab)),
        lw_(lockstep_vocab_logits_width(vocab)) {
    if (grammar != nullptr) CheckStatus(lockstep_matcher_create(grammar, &m_));
    lockstep_sampler_config cfg;
    lockstep_sampler_config_init(&cfg);
    cfg.temperature = static_cast<float>(in.Byte() % 4) * 0.5f;
    cfg.top_k = in.Byte() % 5;
    CheckStatus(lockstep_sampler_create(&cfg, 0, &sampler_));
  }
  ~Script() {
    for (lockstep_matcher* f : forks_) lockstep_matcher_free(f);
    lockstep_matcher_free(m_);
    lockstep_sampler_free(sampler_);
  }

  void Run() {
    for (int step = 0; step < 64 && in_.n > 0; ++step) {
      lockstep_matcher* target = (in_.Byte() % 8 == 0) ? nullptr : m_;
      switch (in_.Byte() % 12) {
        case 0:
          Fill(target);
          break;
        case 1:
          AcceptAny(target);
          break;
        case 2:
          AcceptAllowed(target);
          break;
        case 3:
          CheckStatus(lockstep_matcher_rollback(target, static_cast<std::int32_t>(in_.Byte()) - 2));
          break;
        case 4:
          Fork(target);
          break;
        case 5:
          CheckStatus(lockstep_matcher_reset(target));
          break;
        case 6:
          Forced(target);
          break;
        case 7:
          ValidateDraft(target);
          break;
        case 8:
          Sample(step);
          break;
        case 9:
          BatchFill(target);
          break;
        case 10:
          LoadArtifact();
          break;
        default:
          AcceptString(target);
          break;
      }
    }
  }

 private:
  // Fill into a buffer of arbitrary size.
  void Fill(lockstep_matcher* target) {
    const std::size_t n = in_.Byte() % (words_ + 3);
    std::vector<std::uint32_t> buf(n);
    const lockstep_status st = lockstep_matcher_fill_bitmask(target, n ? buf.data() : nullptr, n);
    CheckStatus(st);
    if (target != nullptr && n < words_) Check(st != LOCKSTEP_OK, "short mask buffer accepted");
    if (st == LOCKSTEP_OK) last_mask_.assign(buf.begin(), buf.begin() + words_);
  }
  // Accept an arbitrary id.
  void AcceptAny(lockstep_matcher* target) {
    const std::int32_t id = static_cast<std::int32_t>(in_.U16() % (lw_ + 8)) - 4;
    CheckStatus(lockstep_matcher_accept_token(target, id));
    last_mask_.clear();
  }
  // Accept an id a fresh mask allows: it must be accepted.
  void AcceptAllowed(lockstep_matcher* target) {
    if (target == nullptr) return;
    std::vector<std::uint32_t> buf(words_);
    if (lockstep_matcher_fill_bitmask(target, buf.data(), words_) != LOCKSTEP_OK) return;
    std::vector<std::int32_t> allowed;
    for (std::int32_t t = 0; t < lw_; ++t) {
      if ((buf[t >> 5] >> (t & 31)) & 1) allowed.push_back(t);
    }
    if (allowed.empty()) return;
    const lockstep_status st =
        lockstep_matcher_accept_token(target, allowed[in_.Byte() % allowed.size()]);
    CheckStatus(st);
    Check(st == LOCKSTEP_OK, "a token the mask allows was refused");
  }
  void Fork(lockstep_matcher* target) {
    lockstep_matcher* f = nullptr;
    CheckStatus(lockstep_matcher_fork(target, &f));
    if (f != nullptr) forks_.push_back(f);
  }
  void Forced(lockstep_matcher* target) {
    std::size_t len = in_.Byte() % 9;
    std::vector<char> buf(len);
    const bool null_len = in_.Byte() % 7 == 0;
    CheckStatus(lockstep_matcher_forced_bytes(target, len ? buf.data() : nullptr,
                                              null_len ? nullptr : &len));
    std::size_t count = in_.Byte() % 5;
    std::vector<std::int32_t> toks(count);
    CheckStatus(lockstep_matcher_forced_tokens(target, count ? toks.data() : nullptr, &count));
  }
  void ValidateDraft(lockstep_matcher* target) {
    std::vector<std::int32_t> draft(in_.Byte() % 6);
    for (auto& t : draft) t = static_cast<std::int32_t>(in_.U16() % (lw_ + 4)) - 2;
    std::size_t accepted = 0;
    CheckStatus(lockstep_matcher_validate_draft(target, draft.empty() ? nullptr : draft.data(),
                                                draft.size(), &accepted));
  }
  // Sample with arbitrary logits and a mask of arbitrary size.
  void Sample(int step) {
    std::vector<float> logits(static_cast<std::size_t>(lw_) + (in_.Byte() % 3) - 1);
    for (float& x : logits) x = static_cast<float>(static_cast<std::int8_t>(in_.Byte())) / 8;
    const std::size_t mw = in_.Byte() % (words_ + 2);
    std::vector<std::uint32_t> mask(mw, 0xFFFFFFFFu);
    if (!last_mask_.empty() && mw >= words_)
      std::memcpy(mask.data(), last_mask_.data(), words_ * 4);
    std::int32_t tok = -7;
    const lockstep_status st = lockstep_sampler_sample(
        in_.Byte() % 9 == 0 ? nullptr : sampler_, logits.data(), logits.size(),
        mw ? mask.data() : nullptr, mw, nullptr, 0, 0, static_cast<std::uint64_t>(step), &tok);
    CheckStatus(st);
    if (st == LOCKSTEP_OK) {
      Check(tok >= 0 && static_cast<std::size_t>(tok) < logits.size(), "sampled id out of range");
    }
  }
  // Batch fill, with a stride that may be too short.
  void BatchFill(lockstep_matcher* target) {
    std::vector<lockstep_matcher*> batch = forks_;
    batch.push_back(target);
    const std::size_t stride = in_.Byte() % (words_ + 2);
    std::vector<std::uint32_t> out(batch.size() * stride + 1);
    CheckStatus(
        lockstep_batch_fill(batch.data(), batch.size(), out.data(), stride, in_.Byte() % 3));
  }
  // An artifact from arbitrary bytes, with or without the handles.
  void LoadArtifact() {
    const std::string b = in_.Bytes(in_.Byte() % 80);
    lockstep_grammar* g = nullptr;
    const std::uint8_t how = in_.Byte() % 4;
    const lockstep_status st =
        lockstep_grammar_load_bytes(how == 0 ? nullptr : vocab_, how == 1 ? nullptr : b.data(),
                                    b.size(), how == 2 ? nullptr : &g);
    CheckStatus(st);
    Check((st == LOCKSTEP_OK) == (g != nullptr), "artifact handle and status disagree");
    lockstep_grammar_free(g);
  }
  void AcceptString(lockstep_matcher* target) {
    const std::string s = in_.Bytes(in_.Byte() % 5);
    CheckStatus(lockstep_matcher_accept_string(target, s.empty() ? nullptr : s.data(), s.size()));
  }

  Input& in_;
  lockstep_vocab* vocab_;
  const std::size_t words_;
  const std::int32_t lw_;
  lockstep_matcher* m_ = nullptr;
  lockstep_sampler* sampler_ = nullptr;
  std::vector<lockstep_matcher*> forks_;
  std::vector<std::uint32_t> last_mask_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{data, size};
  lockstep_vocab* vocab = VocabFrom(in);
  if (vocab == nullptr) return 0;
  lockstep_grammar* grammar = GrammarFrom(in, vocab);
  {
    Script script(in, vocab, grammar);
    script.Run();
  }
  lockstep_grammar_free(grammar);
  lockstep_vocab_free(vocab);
  return 0;
}
