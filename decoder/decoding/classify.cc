// Classify and ChoicesRegex (include/lockstep/classify.h): best-first expansion of the token
// prefix tree under the mask, with a probability floor and a node budget.
#include "lockstep/classify.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>

#include "decoder/decoding/decode_util.h"

namespace lockstep {
namespace {

struct Node {
  double prob;
  std::uint64_t order;  // ties: first pushed, first expanded
  std::vector<TokenId> path;
  Matcher matcher;
};

struct Less {  // priority_queue puts the greatest on top: highest prob, then lowest order
  bool operator()(const Node* a, const Node* b) const {
    if (a->prob != b->prob) return a->prob < b->prob;
    return a->order > b->order;
  }
};

}  // namespace

double ClassifyResult::total() const {
  double t = floor_mass + budget_mass + other_mass;
  for (const LabelProbability& l : labels) t += l.probability;
  return t;
}

Result<ClassifyResult> Classify(LogitsSource& source, const Matcher& matcher,
                                std::span<const TokenId> prompt,
                                std::span<const std::string> labels,
                                const ClassifyOptions& options) {
  const std::int32_t width = matcher.grammar().logits_width();
  const Vocabulary& vocab = matcher.grammar().vocabulary();
  if (Status st = internal::CheckSourceWidth(source.width(), width); !st.ok()) return st;
  if (!(options.floor >= 0) || options.max_nodes < 1) {
    return Status(StatusCode::kInvalidArgument, "floor must be >= 0 and max_nodes >= 1",
                  "classify options");
  }
  Sampler sampler(options.sampler, width);
  std::vector<float> logits(width), probs(width);
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(width));
  std::vector<TokenId> context;
  std::map<std::string, LabelProbability> found;
  ClassifyResult r;

  std::priority_queue<Node*, std::vector<Node*>, Less> heap;
  std::vector<std::unique_ptr<Node>> owned;  // nodes stay alive until the end; few thousand
  std::uint64_t order = 0;
  auto push = [&](double prob, std::vector<TokenId> path, Matcher m) {
    owned.push_back(std::make_unique<Node>(Node{prob, order++, std::move(path), std::move(m)}));
    heap.push(owned.back().get());
  };
  push(1.0, {}, matcher.Fork());

  while (!heap.empty()) {
    Node* node = heap.top();
    heap.pop();
    if (r.nodes >= options.max_nodes ||
        static_cast<std::int32_t>(node->path.size()) >= options.max_depth) {
      r.budget_mass += node->prob;
      continue;
    }
    ++r.nodes;
    if (!node->matcher.FillNextTokenBitmask(mask)) {
      r.other_mass += node->prob;  // a dead end (cannot happen with a sound matcher)
      continue;
    }
    context.assign(prompt.begin(), prompt.end());
    context.insert(context.end(), node->path.begin(), node->path.end());
    source.MaskedLogits(context, mask.data(), logits);
    if (sampler.Distribution(logits, mask.data(), context, probs) == 0) {
      r.other_mass += node->prob;
      continue;
    }
    double sum = 0;
    mask_words::ForEachSetBit(mask.data(), width, [&](std::int32_t id) { sum += probs[id]; });
    bool ended_here = false;  // several EOS ids end one tokenisation once
    mask_words::ForEachSetBit(mask.data(), width, [&](std::int32_t id) {
      if (!(probs[id] > 0)) return;
      const double child = node->prob * (probs[id] / sum);
      if (internal::IsEos(vocab, id)) {
        std::string text = vocab.Decode(node->path).value();
        LabelProbability& l = found[text];
        l.label = text;
        l.probability += child;
        if (!ended_here) ++l.tokenizations;
        ended_here = true;
        return;
      }
      if (child < options.floor) {
        r.floor_mass += child;
        return;
      }
      Matcher m = node->matcher.Fork();
      if (!m.AcceptToken(id)) {
        r.other_mass += child;
        return;
      }
      std::vector<TokenId> path = node->path;
      path.push_back(id);
      push(child, std::move(path), std::move(m));
    });
    node->path = {};  // expanded: free what the node no longer needs
  }

  if (!labels.empty()) {
    for (const std::string& label : labels) {
      auto it = found.find(label);
      LabelProbability l{label, 0, 0};
      if (it != found.end()) {
        l = it->second;
        found.erase(it);
      }
      r.labels.push_back(std::move(l));
    }
    for (const auto& [text, l] : found) r.other_mass += l.probability;
  } else {
    for (auto& [text, l] : found) r.labels.push_back(std::move(l));
    std::stable_sort(r.labels.begin(), r.labels.end(),
                     [](const LabelProbability& a, const LabelProbability& b) {
                       return a.probability > b.probability;
                     });
  }
  return r;
}

Result<std::string> ChoicesRegex(std::span<const std::string> choices) {
  if (choices.empty()) {
    return Status(StatusCode::kInvalidArgument, "no choices given", "choices");
  }
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) {
      return Status(StatusCode::kInvalidArgument, "empty choice", "choice " + std::to_string(i));
    }
    if (i) out += '|';
    for (char c : choices[i]) {
      if (std::string_view("\\^$.|?*+()[]{}/").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out;
}

}  // namespace lockstep
