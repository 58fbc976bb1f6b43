// Test helpers for the grammar front ends: a builder for expected IR written by hand (never by
// the parser under test) and a brute-force membership oracle over the IR, independent of every
// pass it checks.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <regex>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "grammar/ir/grammar_ir.h"

namespace lockstep::grammar::testing {

class Builder {
 public:
  ExprId Empty() { return Add(ExprKind::kEmpty); }
  ExprId Lit(std::string text) {
    Expr e;
    e.kind = ExprKind::kLiteral;
    e.text = std::move(text);
    return g_.Add(std::move(e));
  }
  ExprId Cls(std::vector<CodepointRange> ranges) {
    Expr e;
    e.kind = ExprKind::kCharClass;
    e.ranges = std::move(ranges);
    return g_.Add(std::move(e));
  }
  ExprId Any() { return Cls({{0, 0xD7FF}, {0xE000, 0x10FFFF}}); }
  ExprId Ref(const std::string& name) {
    Expr e;
    e.kind = ExprKind::kRuleRef;
    const ExprId id = g_.Add(std::move(e));
    refs_.emplace_back(id, name);
    return id;
  }
  ExprId Seq(std::vector<ExprId> kids) { return List(ExprKind::kSequence, std::move(kids)); }
  ExprId Alt(std::vector<ExprId> kids) { return List(ExprKind::kChoice, std::move(kids)); }
  ExprId Rep(ExprId child, std::int32_t min, std::int32_t max) {
    Expr e;
    e.kind = ExprKind::kRepeat;
    e.children = {child};
    e.min = min;
    e.max = max;
    return g_.Add(std::move(e));
  }
  ExprId Star(ExprId c) { return Rep(c, 0, Expr::kUnbounded); }
  ExprId Plus(ExprId c) { return Rep(c, 1, Expr::kUnbounded); }
  ExprId Opt(ExprId c) { return Rep(c, 0, 1); }
  ExprId Lexeme(std::string pattern) {
    Expr e;
    e.kind = ExprKind::kLexeme;
    e.text = std::move(pattern);
    return g_.Add(std::move(e));
  }
  ExprId Special(std::string name, bool negated = false) {
    Expr e;
    e.kind = ExprKind::kSpecialToken;
    e.text = std::move(name);
    e.negated = negated;
    return g_.Add(std::move(e));
  }
  ExprId TokenById(std::int32_t id, bool negated = false) {
    Expr e;
    e.kind = ExprKind::kSpecialToken;
    e.token_id = id;
    e.negated = negated;
    return g_.Add(std::move(e));
  }
  // Rules are numbered in the order they are defined; references resolve in Build.
  void Define(const std::string& name, ExprId body) {
    Rule r;
    r.name = name;
    r.body = body;
    g_.rules.push_back(r);
  }
  Grammar Build(const std::string& root) {
    Grammar g = g_;
    for (const auto& [id, name] : refs_) g.exprs[id].rule = g.FindRule(name);
    g.root = g.FindRule(root);
    return g;
  }

 private:
  ExprId Add(ExprKind kind) {
    Expr e;
    e.kind = kind;
    return g_.Add(std::move(e));
  }
  ExprId List(ExprKind kind, std::vector<ExprId> kids) {
    Expr e;
    e.kind = kind;
    e.children = std::move(kids);
    return g_.Add(std::move(e));
  }
  Grammar g_;
  std::vector<std::pair<ExprId, std::string>> refs_;
};

// Membership by least fixpoint: ends[r][i] = every j such that rule r derives s[i, j). ASCII
// strings only (one byte, one code point); special tokens never match text.
class Oracle {
 public:
  Oracle(const Grammar& g, std::string s) : g_(g), s_(std::move(s)) {
    const std::size_t n = s_.size() + 1;
    ends_.assign(g_.rules.size(), std::vector<std::set<std::size_t>>(n));
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t r = 0; r < g_.rules.size(); ++r) {
        for (std::size_t i = 0; i < n; ++i) {
          std::set<std::size_t> next = Ends(g_.rules[r].body, i);
          if (next != ends_[r][i]) {
            ends_[r][i] = std::move(next);
            changed = true;
          }
        }
      }
    }
  }
  bool Accepts() const { return ends_[g_.root][0].count(s_.size()) > 0; }

 private:
  std::set<std::size_t> Step(ExprId id, const std::set<std::size_t>& from) {
    std::set<std::size_t> out;
    for (std::size_t i : from) {
      std::set<std::size_t> e = Ends(id, i);
      out.insert(e.begin(), e.end());
    }
    return out;
  }
  std::set<std::size_t> Ends(ExprId id, std::size_t i) {
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty: return {i};
      case ExprKind::kLiteral:
        if (s_.compare(i, e.text.size(), e.text) == 0 && i + e.text.size() <= s_.size()) {
          return {i + e.text.size()};
        }
        return {};
      case ExprKind::kCharClass:
        if (i < s_.size()) {
          const auto c = static_cast<unsigned char>(s_[i]);
          for (const CodepointRange& r : e.ranges) {
            if (c >= r.lo && c <= r.hi) return {i + 1};
          }
        }
        return {};
      case ExprKind::kRuleRef: return ends_[e.rule][i];
      case ExprKind::kSequence: {
        std::set<std::size_t> cur = {i};
        for (ExprId c : e.children) cur = Step(c, cur);
        return cur;
      }
      case ExprKind::kChoice: {
        std::set<std::size_t> out;
        for (ExprId c : e.children) {
          std::set<std::size_t> x = Ends(c, i);
          out.insert(x.begin(), x.end());
        }
        return out;
      }
      case ExprKind::kRepeat: {
        std::set<std::size_t> cur = {i};
        std::int32_t count = 0;
        for (; count < e.min; ++count) cur = Step(e.children[0], cur);
        std::set<std::size_t> out = cur;
        while (e.max == Expr::kUnbounded || count < e.max) {
          cur = Step(e.children[0], cur);
          ++count;
          const std::size_t before = out.size();
          out.insert(cur.begin(), cur.end());
          if (out.size() == before && e.max == Expr::kUnbounded) break;
          if (cur.empty()) break;
        }
        return out;
      }
      case ExprKind::kLexeme: {
        std::set<std::size_t> out;
        const std::regex re(e.text, std::regex::ECMAScript);
        for (std::size_t j = i; j <= s_.size(); ++j) {
          if (std::regex_match(s_.substr(i, j - i), re)) out.insert(j);
        }
        return out;
      }
      case ExprKind::kSpecialToken: return {};
      case ExprKind::kByteDfa: {
        std::set<std::size_t> out;
        if (e.dfa == nullptr || e.dfa->start == ByteDfa::kDead) return out;
        StateId st = e.dfa->start;
        for (std::size_t j = i;; ++j) {
          if (e.dfa->IsAccepting(st)) out.insert(j);
          if (j == s_.size()) break;
          st = e.dfa->Step(st, static_cast<std::uint8_t>(s_[j]));
          if (st == ByteDfa::kDead) break;
        }
        return out;
      }
    }
    return {};
  }

  const Grammar& g_;
  std::string s_;
  std::vector<std::vector<std::set<std::size_t>>> ends_;
};

inline bool Accepts(const Grammar& g, const std::string& s) { return Oracle(g, s).Accepts(); }

// Every string over `alphabet` of length at most `max_len`, shortest first.
inline std::vector<std::string> AllStrings(const std::string& alphabet, std::size_t max_len) {
  std::vector<std::string> out = {""};
  std::size_t begin = 0;
  for (std::size_t len = 1; len <= max_len; ++len) {
    const std::size_t end = out.size();
    for (std::size_t k = begin; k < end; ++k) {
      for (char c : alphabet) out.push_back(out[k] + c);
    }
    begin = end;
  }
  return out;
}

}  // namespace lockstep::grammar::testing
