// Shared helpers of the decoding tests: a tiny byte-level vocabulary (a, b, c, ab, ba and an EOS)
// with a grammar compiler over it, and Pearson chi-square with its p-value (regularised upper
// incomplete gamma), so tests can state "p > 0.001" directly.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace lockstep::testing {

// Ids: a 0, b 1, c 2, ab 3, ba 4, </s> 5 (special, the EOS). "aba" has the tokenisations
// a.b.a, ab.a, a.ba; the encoder merges a+b first.
inline std::shared_ptr<const Vocabulary> TinyVocab() {
  static const std::shared_ptr<const Vocabulary> v = [] {
    auto r = Vocabulary::FromTokenizerJson(R"({
      "added_tokens": [{"id": 5, "content": "</s>", "special": true}],
      "normalizer": null, "pre_tokenizer": null,
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "ba": 4},
                "merges": ["a b", "b a"]}})",
                                           {}, "tiny");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : nullptr;
  }();
  return v;
}

inline std::shared_ptr<const CompiledGrammar> CompileTiny(const std::string& regex) {
  static GrammarCompiler compiler(TinyVocab());
  auto g = compiler.CompileRegex(regex);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? g.value() : nullptr;
}

// Q(a, x) = Gamma(a, x) / Gamma(a), by series (x < a + 1) or continued fraction.
inline double RegularizedGammaQ(double a, double x) {
  if (x <= 0) return 1.0;
  const double lg = std::lgamma(a);
  if (x < a + 1) {
    double sum = 1.0 / a, term = sum;
    for (int n = 1; n < 10000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - lg);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;  // modified Lentz
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - lg) * h;
}

struct ChiSquareResult {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;
};

// Pearson chi-square of observed counts against expected probabilities over the same keys
// (keys observed but not expected count as a failure: p = 0). Bins expecting fewer than 5 are
// pooled into one.
template <typename Key>
ChiSquareResult ChiSquare(const std::map<Key, std::int64_t>& counts,
                          const std::map<Key, double>& expected, std::int64_t n) {
  ChiSquareResult r;
  for (const auto& [k, c] : counts) {
    if (!expected.count(k) || expected.at(k) <= 0) {
      r.p_value = 0;
      r.statistic = INFINITY;
      return r;
    }
  }
  double pooled_e = 0, pooled_o = 0;
  int bins = 0;
  for (const auto& [k, p] : expected) {
    const double e = p * static_cast<double>(n);
    const double o = counts.count(k) ? static_cast<double>(counts.at(k)) : 0.0;
    if (e < 5) {
      pooled_e += e;
      pooled_o += o;
      continue;
    }
    r.statistic += (o - e) * (o - e) / e;
    ++bins;
  }
  if (pooled_e > 0) {
    r.statistic += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-12);
    ++bins;
  }
  r.dof = std::max(bins - 1, 1);
  r.p_value = RegularizedGammaQ(r.dof / 2.0, r.statistic / 2.0);
  return r;
}

}  // namespace lockstep::testing
