// A grammar's TokenSequence: an Earley parser, one set per byte. A history entry is the number
// of sets after a step, so going back is popping sets. Masks come from CfgGrammar::FillMask
// (positions and the mask cache); the matcher's public contract is in lockstep/matcher.h.
#include <string>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/earley.h"
#include "automata/cfg/position_worker.h"

namespace lockstep {
namespace {

class CfgSequence final : public TokenSequence {
 public:
  explicit CfgSequence(const CfgGrammar& g)
      : g_(g), parser_(&g.program(), g.max_depth(), g.max_step_items()) {
    parser_.InitRoot();
  }
  std::unique_ptr<TokenSequence> Clone() const override {
    return std::make_unique<CfgSequence>(*this);
  }

  StateId Start() const override { return parser_.num_sets(); }

  void Fill(StateId, std::span<std::uint32_t> out,
            const std::shared_ptr<const CompiledGrammar>& self) const override {
    {
      PositionWorker::FillScope filling;  // (the background worker waits meanwhile)
      g_.FillMask(parser_, sigs_, out);
    }
    g_.NoteFill(self, CurrentFillTrace().positions_walked > 0);
  }

  // A token the grammar names (<X>, or any but X: !<X>) is taken over those edges first, and a
  // text token over its bytes too (both parses are kept); EOS ends the text where the root may
  // end and the grammar does not take it as an item.
  Step AcceptToken(StateId at, TokenId id, Status* error) override {
    const bool text = g_.IsTextToken(id);
    if (g_.HasTokenEdges() && g_.TokenEdgesTaking(id, &take_)) {
      parser_.ClearLimitFlags();
      const bool taken = text ? parser_.StepBytesOrTokenEdges(g_.vocab().TokenBytes(id), take_)
                              : parser_.StepTokenEdges(take_);
      if (taken) return {Step::kTaken, parser_.num_sets()};
    }
    if (g_.IsEos(id)) {
      if (!parser_.CanEnd()) return {};
      return {Step::kEnded, parser_.num_sets()};
    }
    if (!text) return {};
    return AcceptBytes(at, g_.vocab().TokenBytes(id), error);
  }

  Step AcceptBytes(StateId, std::string_view bytes, Status* error) override {
    EarleyParser& p = parser_;
    const std::int32_t before = p.num_sets();
    p.ClearLimitFlags();
    for (unsigned char c : bytes) {
      if (p.StepByte(c)) continue;
      if (p.items_exceeded()) {
        *error = Status(StatusCode::kResourceLimit,
                        "grammar parse of one byte exceeds max_earley_items_per_byte (" +
                            std::to_string(p.max_step_items()) + " items)",
                        "byte " + std::to_string(p.num_sets() - 1));
      } else if (p.depth_exceeded() || p.truncated(p.num_sets() - 1)) {
        *error = Status(StatusCode::kResourceLimit,
                        "grammar nesting deeper than max_nesting_depth (" +
                            std::to_string(p.max_depth()) + ")",
                        "byte " + std::to_string(p.num_sets() - 1));
      }
      BackTo(before);
      return {};
    }
    if (g_.has_search_lists() && !g_.SearchedListsLive(p, error)) {
      BackTo(before);
      return {};
    }
    return {Step::kTaken, p.num_sets()};
  }

  // Sets popped lose their signatures at once: a later token may rebuild a set j with other
  // items while sigs_ still covers j.
  void BackTo(StateId at) override {
    parser_.PopTo(at);
    if (static_cast<std::int32_t>(sigs_.size()) > at) sigs_.resize(static_cast<std::size_t>(at));
  }

  bool CanEnd(StateId) const override { return parser_.CanEnd(); }

  // A byte is forced when it is the only live one and the grammar cannot end (or take a special
  // token) here.
  std::string ForcedBytes(StateId, std::size_t max_bytes) const override {
    std::string out;
    EarleyParser& p = parser_;
    const std::int32_t base = p.num_sets();
    while (out.size() < max_bytes && !p.CanEnd() && !TakesSpecial()) {
      const int live = OnlyLiveByte();
      if (live < 0) break;
      p.StepByte(static_cast<std::uint8_t>(live));
      out.push_back(static_cast<char>(live));
    }
    p.PopTo(base);
    p.ClearLimitFlags();
    return out;
  }

 private:
  bool TakesSpecial() const {
    EarleyParser& p = parser_;
    for (std::size_t i = 0; i < p.program().special_tokens.size(); ++i) {
      if (p.StepSpecial(static_cast<std::int32_t>(i))) {
        p.PopTo(p.num_sets() - 1);
        return true;
      }
    }
    return false;
  }
  // The one byte the parser can take next, or -1 (none, or several).
  int OnlyLiveByte() const {
    EarleyParser& p = parser_;
    int live = -1;
    const std::int32_t here = p.num_sets();
    for (int b = 0; b < 256; ++b) {
      if (!p.StepByte(static_cast<std::uint8_t>(b))) continue;
      p.PopTo(here);
      if (live >= 0) return -1;
      live = b;
    }
    return live;
  }

  const CfgGrammar& g_;
  mutable EarleyParser parser_;  // Fill and ForcedBytes push and pop scratch sets
  // sigs_[j]: the interned signature of set j, for a prefix of the sets (FillMask extends it).
  mutable std::vector<std::int32_t> sigs_;
  std::vector<std::uint8_t> take_;  // scratch: the token edges that take a token
};

}  // namespace

std::unique_ptr<TokenSequence> CfgGrammar::NewSequence() const {
  return std::make_unique<CfgSequence>(*this);
}

}  // namespace lockstep
