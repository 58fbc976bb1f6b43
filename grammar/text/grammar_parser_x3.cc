// The grammar front ends: ParseGbnf (llama.cpp's GBNF), ParseLark (a Lark-style EBNF subset) and
// ParseGrammar, all producing the shared Grammar IR (grammar/ir/grammar_ir.h). Both syntaxes are
// Boost.Spirit X3 grammars whose semantic actions build the IR directly; this is the one
// boundary file of the front end, so every Spirit exception is caught here and turned into a
// Status with a "line:column" location and a caret snippet.
//
// Whitespace, newlines and comments are insignificant between tokens; a rule ends where the next
// `name ::=` (GBNF) or `name:` (Lark) starts, which accepts everything llama.cpp and Lark accept
// for these constructs, with the same meaning.
#include <boost/spirit/home/x3.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>  // std::ref
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/ir/grammar_ir.h"
#include "grammar/ir/ir_builder.h"
#include "grammar/regex/regex_parser.h"
#include "grammar/base/text_place.h"
#include "grammar/base/utf8.h"

namespace lockstep::grammar {
namespace {

namespace x3 = boost::spirit::x3;
using It = const char*;
using Ranges = std::vector<CodepointRange>;

constexpr char32_t kSurrogateLo = 0xD800;
constexpr char32_t kSurrogateHi = 0xDFFF;

// A failure raised from inside a semantic action: where, what, and the code to report.
struct Failure {
  std::size_t offset;
  std::string what;
  StatusCode code = StatusCode::kInvalidGrammar;
};

// The error every grammar front end reports: location "L:C" (1-based, bytes) and a message of
// `what` followed by the offending line with a caret under the column (RegexError's snippet).
Status GrammarError(std::string_view text, std::size_t offset, std::string_view what,
                    StatusCode code) {
  const TextPlace p = PlaceOf(text, offset);
  Status snippet = RegexError(p.line, std::min(p.col, p.line.size()), what, code);
  return Status(code, snippet.message(), p.LineColumn());
}

Ranges NormalizeRanges(Ranges r, bool negate) { return NormalizeCodepointRanges(std::move(r), negate); }

// Everything the semantic actions share while one text is parsed.
struct State {
  std::string_view text;
  GrammarParseOptions options;
  bool lark = false;
  Grammar g;
  std::vector<std::int32_t> height;  // per expr: tree height, bounded to keep later passes safe
  std::int32_t max_height = 0;
  std::int32_t depth = 0;
  // Token buffers (tokens never nest, so one of each suffices).
  std::size_t tok_at = 0;
  std::string str;  // literal being read, UTF-8
  std::vector<char32_t> cps;
  bool str_nocase = false;
  std::vector<char32_t> cps2;  // second literal of a Lark range "a".."z"
  std::size_t tok2_at = 0;
  bool has_range = false;
  Ranges ranges;
  bool negate = false;
  bool token_not = false;  // a token item after '!'
  std::uint32_t range_lo = 0;
  std::string regex;                 // unescaped pattern
  std::vector<std::size_t> regex_at;  // source offset of each pattern byte
  std::int32_t rep_min = 0;
  std::int32_t rep_max = 0;
  // Rules and references, resolved after the parse.
  std::unordered_map<std::string, RuleId> rule_ids;
  struct Ref {
    ExprId expr;
    std::string name;
    std::size_t offset;
  };
  std::vector<Ref> refs;
  std::vector<std::size_t> rule_at;
  std::size_t mark = 0;  // see Mark
  std::string name;  // the last name read
  std::size_t name_at = 0;
  std::string cur_name;
  std::size_t cur_at = 0;

  std::vector<std::size_t> line_starts;  // offsets where each line begins

  SourceLocation Loc(std::size_t offset) const {
    const auto it = std::upper_bound(line_starts.begin(), line_starts.end(), offset);
    const auto line = static_cast<std::int32_t>(it - line_starts.begin());  // >= 1
    SourceLocation loc;
    loc.line = line;
    loc.column = static_cast<std::int32_t>(offset - line_starts[line - 1] + 1);
    return loc;
  }
  std::size_t Offset(It p) const { return static_cast<std::size_t>(p - text.data()); }

  ExprId Add(Expr e, std::size_t offset) {
    std::int32_t h = 1;
    for (ExprId c : e.children) h = std::max(h, height[c] + 1);
    if (h > max_height) {
      throw Failure{offset, "expression nested too deeply (more than " +
                                std::to_string(max_height) + " levels)",
                    StatusCode::kResourceLimit};
    }
    // Line:column only for leaves and rule bodies; composite nodes take their first child's.
    if (e.children.empty()) {
      e.loc = Loc(offset);
    } else {
      e.loc = g.exprs[e.children[0]].loc;
    }
    height.push_back(h);
    return g.Add(std::move(e));
  }
  // The IR builders (grammar/ir/ir_builder.h) at a source offset.
  ExprId List(ExprKind kind, std::vector<ExprId> kids, std::size_t offset) {
    if (kids.size() == 1) return kids[0];
    return Add(kids.empty() ? EmptyExpr() : ListExpr(kind, std::move(kids)), offset);
  }
  ExprId Literal(const std::vector<char32_t>& cps, std::size_t offset) {
    std::string text;
    for (char32_t c : cps) AppendUtf8(c, &text);
    return Add(LiteralExpr(std::move(text)), offset);
  }
  ExprId Class(Ranges r, std::size_t offset) { return Add(CharClassExpr(std::move(r)), offset); }
  ExprId Repeat(ExprId child, std::int32_t min, std::int32_t max, std::size_t offset) {
    return Add(RepeatExpr(child, min, max), offset);
  }
  std::int32_t Count(std::string_view digits, std::size_t offset) const {
    std::int64_t v = 0;
    for (char c : digits) {
      v = v * 10 + (c - '0');
      if (v > options.max_repeat) {
        throw Failure{offset,
                      "repetition bound exceeds max_repeat (" +
                          std::to_string(options.max_repeat) + ")",
                      StatusCode::kResourceLimit};
      }
    }
    return static_cast<std::int32_t>(v);
  }
  void Enter(std::size_t offset) {
    if (++depth > options.max_nesting_depth) {
      throw Failure{offset,
                    "groups nested deeper than max_nesting_depth (" +
                        std::to_string(options.max_nesting_depth) + ")",
                    StatusCode::kResourceLimit};
    }
  }
};

struct StateTag;
template <typename Ctx>
State& St(const Ctx& ctx) {
  return x3::get<StateTag>(ctx).get();
}
// Where the parser stands when an action runs: the end of what the action's subject matched
// (Boost 1.74's _where starts there).
template <typename Ctx>
std::size_t Here(const Ctx& ctx) {
  return St(ctx).Offset(x3::_where(ctx).begin());
}

// A primitive parser from a function fn(first, last, ctx, attr) -> bool: x3's parser interface
// (parse() on a class deriving from x3::parser) written once for the token parsers below.
// `Attribute` is what it produces, x3::unused_type for nothing.
template <typename Attribute, typename Fn>
struct Primitive : x3::parser<Primitive<Attribute, Fn>> {
  using attribute_type = Attribute;
  static bool const has_attribute = !std::is_same_v<Attribute, x3::unused_type>;
  constexpr explicit Primitive(Fn f) : fn(f) {}
  template <typename Ctx, typename RCtx, typename Attr>
  bool parse(It& first, It last, const Ctx& ctx, RCtx&, Attr& attr) const {
    return fn(first, last, ctx, attr);
  }
  Fn fn;
};
template <typename Attribute = x3::unused_type, typename Fn>
constexpr Primitive<Attribute, Fn> MakePrimitive(Fn fn) {
  return Primitive<Attribute, Fn>(fn);
}

// Records the current position (after skipping) in State::mark; consumes nothing.
constexpr auto mark = MakePrimitive([](It& first, It last, const auto& ctx, auto&) {
  x3::skip_over(first, last, ctx);
  St(ctx).mark = St(ctx).Offset(first);
  return true;
});

// One UTF-8 encoded code point; invalid UTF-8 is an error at its first byte.
constexpr auto utf8_char = MakePrimitive<std::uint32_t>([](It& first, It last, const auto& ctx,
                                                           auto& attr) {
  x3::skip_over(first, last, ctx);
  if (first == last) return false;
  const auto b0 = static_cast<unsigned char>(*first);
  std::uint32_t cp = 0;
  int len = 1;
  if (b0 < 0x80) {
    cp = b0;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    cp = b0 & 0x1F, len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    cp = b0 & 0x0F, len = 3;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    cp = b0 & 0x07, len = 4;
  } else {
    throw Failure{St(ctx).Offset(first), "invalid UTF-8"};
  }
  if (last - first < len) throw Failure{St(ctx).Offset(first), "invalid UTF-8"};
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(first[i]);
    if ((b & 0xC0) != 0x80) throw Failure{St(ctx).Offset(first), "invalid UTF-8"};
    cp = (cp << 6) | (b & 0x3F);
  }
  const std::uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_len[len] || cp > kMaxCodepoint || (cp >= kSurrogateLo && cp <= kSurrogateHi)) {
    throw Failure{St(ctx).Offset(first), "invalid UTF-8"};
  }
  first += len;
  x3::traits::move_to(cp, attr);
  return true;
});

// A /regex/ terminal: the pattern up to the next unescaped '/' on the same line, with "\/"
// unescaped (the IR holds plain regex syntax) and the source offset of every pattern byte kept
// so regex errors point into the grammar text.
constexpr auto regex_token = MakePrimitive([](It& first, It last, const auto& ctx, auto&) {
  x3::skip_over(first, last, ctx);
  if (first == last || *first != '/') return false;
  // "//" starts a comment in Lark; an empty regex is never meant.
  if (last - first >= 2 && first[1] == '/') return false;
  State& st = St(ctx);
  st.tok_at = st.Offset(first);
  st.regex.clear();
  st.regex_at.clear();
  It p = first + 1;
  for (;;) {
    if (p == last || *p == '\n' || *p == '\r') {
      throw Failure{st.tok_at, "unterminated /regex/"};
    }
    if (*p == '/') break;
    if (*p == '\\' && p + 1 != last && p[1] == '/') {
      st.regex_at.push_back(st.Offset(p));
      st.regex.push_back('/');
      p += 2;
      continue;
    }
    if (*p == '\\' && p + 1 != last && p[1] != '\n') {
      st.regex_at.push_back(st.Offset(p));
      st.regex.push_back(*p++);
    }
    st.regex_at.push_back(st.Offset(p));
    st.regex.push_back(*p++);
  }
  st.regex_at.push_back(st.Offset(p));  // one past the pattern: the closing '/'
  first = p + 1;
  if (st.lark) {
    It f = first;
    while (f != last && std::isalpha(static_cast<unsigned char>(*f))) ++f;
    if (f != first) {
      throw Failure{st.Offset(first),
                    "regex flags are not supported (write the case variants out)",
                    StatusCode::kUnsupported};
    }
  }
  return true;
});

// True when only spaces and tabs precede the current token on its line (Lark's `?rule:` prefix
// versus the `?` postfix operator).
constexpr auto at_line_start = MakePrimitive([](It& first, It last, const auto& ctx, auto&) {
  It p = first;
  x3::skip_over(p, last, ctx);
  const char* begin = St(ctx).text.data();
  while (p != begin && (p[-1] == ' ' || p[-1] == '\t')) --p;
  return p == begin || p[-1] == '\n' || p[-1] == '\r';
});

// ---- Semantic actions shared by both syntaxes ----

auto const check_cp = [](auto& ctx) {
  const std::uint32_t cp = x3::_attr(ctx);
  if (cp > kMaxCodepoint) throw Failure{St(ctx).mark, "code point above U+10FFFF"};
};
auto const str_begin = [](auto& ctx) {
  State& st = St(ctx);
  st.tok_at = Here(ctx) - 1;
  st.cps.clear();
  st.str_nocase = false;
  st.has_range = false;
};
auto const str_char = [](auto& ctx) {
  const std::uint32_t cp = x3::_attr(ctx);
  if (cp >= kSurrogateLo && cp <= kSurrogateHi) {
    throw Failure{St(ctx).mark, "surrogate code point in a string literal"};
  }
  St(ctx).cps.push_back(cp);
};
auto const make_literal = [](auto& ctx) {
  State& st = St(ctx);
  x3::_val(ctx) = st.Literal(st.cps, st.tok_at);
};
auto const cls_begin = [](auto& ctx) {
  State& st = St(ctx);
  st.tok_at = Here(ctx) - 1;
  st.ranges.clear();
  st.negate = false;
};
auto const cls_negate = [](auto& ctx) { St(ctx).negate = true; };
auto const cls_lo = [](auto& ctx) {
  State& st = St(ctx);
  st.range_lo = x3::_attr(ctx);
  st.ranges.push_back({st.range_lo, st.range_lo});
};
auto const cls_hi = [](auto& ctx) {
  State& st = St(ctx);
  const std::uint32_t hi = x3::_attr(ctx);
  if (hi < st.range_lo) throw Failure{st.mark, "character range is out of order"};
  st.ranges.back().hi = hi;
};
auto const make_class = [](auto& ctx) {
  State& st = St(ctx);
  x3::_val(ctx) = st.Class(NormalizeRanges(std::move(st.ranges), st.negate), st.tok_at);
};
auto const make_any = [](auto& ctx) {
  x3::_val(ctx) = St(ctx).Class(NormalizeRanges({}, /*negate=*/true), Here(ctx) - 1);
};
auto const make_regex = [](auto& ctx) {
  State& st = St(ctx);
  RegexParseOptions ro;
  ro.max_repeat = st.options.max_repeat;
  ro.max_nesting_depth = st.options.max_nesting_depth;
  Result<RegexAst> ast = ParseRegex(st.regex, ro);
  if (!ast.ok()) {
    const std::string& loc = ast.status().location();
    std::size_t at = 0;
    if (loc.rfind("offset ", 0) == 0) at = std::stoul(loc.substr(7));
    at = std::min(at, st.regex_at.size() - 1);
    std::string what = ast.status().message().substr(0, ast.status().message().find('\n'));
    const StatusCode code = ast.status().code() == StatusCode::kResourceLimit
                                ? StatusCode::kResourceLimit
                                : StatusCode::kInvalidGrammar;
    throw Failure{st.regex_at[at], "invalid regex: " + what, code};
  }
  x3::_val(ctx) = st.Add(LexemeExpr(st.regex), st.tok_at);
};
// Names are stashed when read and used once the construct around them has matched, so
// backtracking never leaves a half-made rule or reference behind.
auto const stash_name = [](auto& ctx) {
  State& st = St(ctx);
  const auto& r = x3::_attr(ctx);
  st.name.assign(r.begin(), r.end());
  st.name_at = st.Offset(r.begin());
};
// <[ID]> (digits: a token id) or <[NAME]> (a token's text, the older by-name form).
auto const make_special = [](auto& ctx) {
  State& st = St(ctx);
  const std::size_t at = st.name_at - 2;
  const bool digits = st.name.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) {
    x3::_val(ctx) = st.Add(SpecialTokenExpr(st.name, st.token_not), at);
    return;
  }
  if (st.name.size() > 9) throw Failure{st.name_at, "token id " + st.name + " is too large"};
  x3::_val(ctx) = st.Add(TokenIdExpr(std::stoi(st.name), st.token_not), at);
};
// <TEXT>: the token whose text is TEXT, angle brackets included (<|eot_id|>, <think>).
auto const make_token_text = [](auto& ctx) {
  State& st = St(ctx);
  const auto& r = x3::_attr(ctx);
  x3::_val(ctx) = st.Add(SpecialTokenExpr(std::string(r.begin(), r.end()), st.token_not),
                         st.Offset(r.begin()));
};
auto const token_plain = [](auto& ctx) { St(ctx).token_not = false; };
auto const token_negated = [](auto& ctx) { St(ctx).token_not = true; };
auto const make_ref = [](auto& ctx) {
  State& st = St(ctx);
  const ExprId id = st.Add(RuleRefExpr(/*resolved after the parse*/ -1), st.name_at);
  st.refs.push_back({id, st.name, st.name_at});
  x3::_val(ctx) = id;
};
auto const set_val = [](auto& ctx) { x3::_val(ctx) = x3::_attr(ctx); };
auto const make_seq = [](auto& ctx) {
  x3::_val(ctx) = St(ctx).List(ExprKind::kSequence, x3::_attr(ctx), Here(ctx));
};
auto const make_choice = [](auto& ctx) {
  x3::_val(ctx) = St(ctx).List(ExprKind::kChoice, x3::_attr(ctx), Here(ctx));
};
auto const enter = [](auto& ctx) { St(ctx).Enter(Here(ctx) - 1); };
auto const leave = [](auto& ctx) { --St(ctx).depth; };
auto const make_optional = [](auto& ctx) {
  State& st = St(ctx);
  x3::_val(ctx) = st.Repeat(x3::_attr(ctx), 0, 1, Here(ctx));
};
auto const rep_star = [](auto& ctx) {
  x3::_val(ctx) = St(ctx).Repeat(x3::_val(ctx), 0, Expr::kUnbounded, Here(ctx));
};
auto const rep_plus = [](auto& ctx) {
  x3::_val(ctx) = St(ctx).Repeat(x3::_val(ctx), 1, Expr::kUnbounded, Here(ctx));
};
auto const rep_opt = [](auto& ctx) {
  x3::_val(ctx) = St(ctx).Repeat(x3::_val(ctx), 0, 1, Here(ctx));
};
auto const rep_min = [](auto& ctx) {
  State& st = St(ctx);
  const auto& r = x3::_attr(ctx);
  st.rep_min = st.Count(std::string_view(r.begin(), r.size()), st.Offset(r.begin()));
  st.rep_max = st.rep_min;
};
auto const rep_max = [](auto& ctx) {
  State& st = St(ctx);
  const auto& r = x3::_attr(ctx);
  st.rep_max = st.Count(std::string_view(r.begin(), r.size()), st.Offset(r.begin()));
  if (st.rep_max < st.rep_min) {
    throw Failure{st.Offset(r.begin()), "repetition maximum is below the minimum"};
  }
};
auto const rep_unbounded = [](auto& ctx) { St(ctx).rep_max = Expr::kUnbounded; };
auto const rep_counted = [](auto& ctx) {
  State& st = St(ctx);
  x3::_val(ctx) = st.Repeat(x3::_val(ctx), st.rep_min, st.rep_max, Here(ctx));
};
auto const begin_rule = [](auto& ctx) {
  State& st = St(ctx);
  st.cur_name = st.name;
  st.cur_at = st.name_at;
  auto [it, inserted] = st.rule_ids.emplace(st.cur_name, static_cast<RuleId>(st.g.rules.size()));
  if (!inserted) {
    const SourceLocation first = st.g.rules[it->second].loc;
    throw Failure{st.cur_at, "rule '" + st.cur_name + "' is defined twice (first at " +
                                 std::to_string(first.line) + ":" +
                                 std::to_string(first.column) + ")"};
  }
  Rule rule;
  rule.name = st.cur_name;
  rule.loc = st.Loc(st.cur_at);
  st.g.rules.push_back(std::move(rule));
  st.rule_at.push_back(st.cur_at);
};
auto const end_rule = [](auto& ctx) { St(ctx).g.rules.back().body = x3::_attr(ctx); };

// ---- Lexical pieces shared by both syntaxes ----

// A parser with a name, so an expectation failure on it reads "expected <name>".
template <typename Tag, typename Attr = x3::unused_type, typename P>
auto Named(const char* name, const P& p) {
  return x3::rule<Tag, Attr>{name} = p;
}

// Named punctuation, so an expectation failure reads "expected ')'".
x3::rule<class CloseBracket> const close_bracket = "']'";
x3::rule<class CloseBrace> const close_brace = "'}'";
x3::rule<class Quote> const quote = "'\"'";
x3::rule<class CloseSpecial> const close_special = "']>'";
x3::rule<class Digits> const digits_rule = "a number";
auto const close_bracket_def = x3::lit(']');
auto const close_brace_def = x3::lit('}');
auto const quote_def = x3::lit('"');
auto const close_special_def = x3::lit("]>");
auto const digits_rule_def = x3::lexeme[+x3::digit];
auto const close_group = Named<class CloseGroup>("')'", x3::lit(')')[leave]);
auto const close_optional = Named<class CloseOptional>("']'", x3::lit(']')[leave]);
BOOST_SPIRIT_DEFINE(close_bracket, close_brace, quote, close_special, digits_rule)

x3::uint_parser<std::uint32_t, 16, 2, 2> const hex2{};
x3::uint_parser<std::uint32_t, 16, 4, 4> const hex4{};
x3::uint_parser<std::uint32_t, 16, 8, 8> const hex8{};

x3::rule<class EscapeBody, std::uint32_t> const escape_body =
    "an escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)";
auto const escape_body_def =
    (x3::lit('n') >> x3::attr(std::uint32_t{'\n'})) | (x3::lit('r') >> x3::attr(std::uint32_t{'\r'})) |
    (x3::lit('t') >> x3::attr(std::uint32_t{'\t'})) | (x3::lit('\\') >> x3::attr(std::uint32_t{'\\'})) |
    (x3::lit('"') >> x3::attr(std::uint32_t{'"'})) | (x3::lit('[') >> x3::attr(std::uint32_t{'['})) |
    (x3::lit(']') >> x3::attr(std::uint32_t{']'})) | (x3::lit('x') > Named<class Hex2, std::uint32_t>("two hex digits", hex2)) |
    (x3::lit('u') > Named<class Hex4, std::uint32_t>("four hex digits", hex4)) |
    (x3::lit('U') > Named<class Hex8, std::uint32_t>("eight hex digits", hex8));
x3::rule<class Escape, std::uint32_t> const escape = "escape";
auto const escape_def = x3::lit('\\') > escape_body;

x3::rule<class StrChar, std::uint32_t> const str_ch = "string character";
auto const str_ch_def = mark >> (escape | (utf8_char - '"' - '\\'));
x3::rule<class ClsChar, std::uint32_t> const cls_ch = "character-class character";
auto const cls_ch_def = mark >> (escape | (utf8_char - ']' - '\\'));

// The characters of "...", into State::cps.
auto const string_token =
    x3::omit[x3::lexeme[x3::lit('"')[str_begin] > *(str_ch[check_cp][str_char]) > quote]];

x3::rule<class Literal, ExprId> const literal = "string literal";
auto const literal_def = string_token[make_literal];

x3::rule<class CharClass, ExprId> const char_class = "character class";
auto const char_class_def =
    x3::omit[x3::lexeme[(x3::lit('[')[cls_begin] >> -x3::lit('^')[cls_negate] >>
                         *(cls_ch[check_cp][cls_lo] >>
                           -((x3::lit('-') >> !x3::lit(']')) >
                             Named<class ClsHi>("a character", cls_ch[check_cp][cls_hi])))) >
                        close_bracket]][make_class];

x3::rule<class Regex, ExprId> const regex = "regex";
auto const regex_def = regex_token[make_regex];

// A token item: <[ID]>, <[NAME]> or <TEXT>, matched by id; with '!' before it, any one token
// but that one (llama.cpp's token syntax).
x3::rule<class TokenRef, ExprId> const token_ref = "token";
auto const token_ref_def =
    x3::lexeme[x3::lit("<[") >
               Named<class SpecialName>("a token id or name",
                                        x3::raw[+(x3::char_ - "]>" - x3::eol)][stash_name]) >
               close_special][make_special] |
    x3::lexeme[x3::raw[x3::lit('<') >> !x3::lit('[') >> +(x3::char_ - '>' - x3::eol) >
                       Named<class CloseToken>("'>'", x3::lit('>'))]][make_token_text];
x3::rule<class Special, ExprId> const special = "special token";
auto const special_def = (x3::eps[token_plain] >> token_ref)[set_val] |
                         (x3::lit('!')[token_negated] > token_ref)[set_val];

auto const digits = x3::raw[digits_rule];

BOOST_SPIRIT_DEFINE(escape_body, escape, str_ch, cls_ch, literal, char_class, regex, token_ref,
                    special)

// The expression rules both syntaxes have. Each syntax has its own: X3 binds a rule to its
// definition (BOOST_SPIRIT_DEFINE, found by argument-dependent lookup) by the rule's tag, which
// carries the syntax here. The names are what an expectation failure prints.
template <typename Syntax, int kRule>
struct RuleTag;
template <typename Syntax>
struct ExprRules {
  x3::rule<RuleTag<Syntax, 0>, ExprId> alternatives{"alternatives"};
  x3::rule<RuleTag<Syntax, 1>, ExprId> sequence{"sequence"};
  x3::rule<RuleTag<Syntax, 2>, ExprId> item{"item"};
  x3::rule<RuleTag<Syntax, 3>, ExprId> primary{"expression"};
  x3::rule<RuleTag<Syntax, 4>, ExprId> group{"group"};
  x3::rule<RuleTag<Syntax, 5>, ExprId> ref{"rule reference"};
};

// ---- GBNF ----
namespace gbnf {

auto const skipper = x3::ascii::space | ('#' >> *(x3::char_ - x3::eol));
auto const name_char = x3::ascii::alnum | x3::char_('-') | x3::char_('_');
auto const name = x3::raw[x3::lexeme[+name_char]][stash_name];

struct Syntax;
auto const [alternatives, sequence, item, primary, group, ref] = ExprRules<Syntax>{};
x3::rule<class Any, ExprId> const any = "'.'";

auto const alternatives_def = (sequence % '|')[make_choice];
auto const sequence_def = (*item)[make_seq];
auto const counted =
    x3::lit('{') > Named<class RepMin>("a number", digits[rep_min]) >
    -(x3::lit(',') >> (x3::omit[digits[rep_max]] | x3::eps[rep_unbounded])) > close_brace;
auto const item_def = primary[set_val] >> *(x3::lit('*')[rep_star] | x3::lit('+')[rep_plus] |
                                            x3::lit('?')[rep_opt] | counted[rep_counted]);
auto const group_def = x3::lit('(')[enter] > alternatives[set_val] > close_group;
auto const ref_def = (name >> !x3::lit("::="))[make_ref];
auto const any_def = x3::lit('.')[make_any];
auto const primary_def = literal | char_class | any | regex | special | group | ref;

auto const rule_def = (name >> "::=")[begin_rule] > alternatives[end_rule];
auto const grammar = *rule_def;

BOOST_SPIRIT_DEFINE(alternatives, sequence, item, primary, group, ref, any)

}  // namespace gbnf

// ---- Lark ----
namespace lark {

auto const skipper = x3::ascii::space | ("//" >> *(x3::char_ - x3::eol));
auto const name =
    x3::raw[x3::lexeme[(x3::ascii::alpha | '_') >> *(x3::ascii::alnum | '_')]][stash_name];
auto const priority = x3::lexeme['.' >> -x3::lit('-') >> +x3::digit];

struct Syntax;
auto const [alternatives, sequence, item, primary, group, ref] = ExprRules<Syntax>{};
x3::rule<class Optional, ExprId> const optional = "optional";
x3::rule<class String, ExprId> const string = "string literal";

auto const str_nocase = [](auto& ctx) { St(ctx).str_nocase = true; };
auto const str_second = [](auto& ctx) { St(ctx).has_range = true; };
auto const str_first = [](auto& ctx) {
  State& st = St(ctx);
  st.cps2 = st.cps;  // stash the first string: the second one reuses the buffer
  st.tok2_at = st.tok_at;
  st.has_range = false;
};
// "lit", "lit"i (case-insensitive: ASCII letters become two-letter classes) or "a".."z".
auto const make_string = [](auto& ctx) {
  State& st = St(ctx);
  if (st.has_range) {
    // cps2 = first string (restored below), cps = second.
    const std::vector<char32_t>& hi = st.cps;
    const std::vector<char32_t>& lo = st.cps2;
    if (lo.size() != 1 || hi.size() != 1) {
      throw Failure{st.tok2_at, "a range \"a\"..\"z\" needs one character on each side"};
    }
    if (hi[0] < lo[0]) throw Failure{st.tok_at, "character range is out of order"};
    x3::_val(ctx) = st.Class(NormalizeRanges({{lo[0], hi[0]}}, false), st.tok2_at);
    return;
  }
  const std::vector<char32_t>& cps = st.cps2;
  if (!st.str_nocase) {
    x3::_val(ctx) = st.Literal(cps, st.tok2_at);
    return;
  }
  std::vector<ExprId> parts;
  std::vector<char32_t> run;
  for (char32_t c : cps) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!letter) {
      run.push_back(c);
      continue;
    }
    if (!run.empty()) parts.push_back(st.Literal(run, st.tok2_at));
    run.clear();
    const char32_t upper = c & ~char32_t{0x20};
    parts.push_back(st.Class({{upper, upper}, {upper | 0x20, upper | 0x20}}, st.tok2_at));
  }
  if (!run.empty() || parts.empty()) parts.push_back(st.Literal(run, st.tok2_at));
  x3::_val(ctx) = st.List(ExprKind::kSequence, std::move(parts), st.tok2_at);
};
auto const unsupported_directive = [](auto& ctx) {
  throw Failure{Here(ctx) - 1,
                "directives (%import, %ignore, %declare, ...) are not supported; define the "
                "terminals in the grammar",
                StatusCode::kUnsupported};
};

auto const alternatives_def = (sequence % '|')[make_choice];
auto const alias = x3::omit[x3::lit("->") > Named<class AliasName>("an alias name", name)];
auto const sequence_def = (*item)[make_seq] >> -alias;
auto const tilde = x3::lit('~') > Named<class TildeMin>("a number", digits[rep_min]) >
                   -(x3::lit("..") > Named<class TildeMax>("a number", digits[rep_max]));
auto const item_def =
    primary[set_val] >> *(x3::lit('*')[rep_star] | x3::lit('+')[rep_plus] |
                          (!at_line_start >> x3::lit('?'))[rep_opt] | tilde[rep_counted]);
auto const group_def = x3::lit('(')[enter] > alternatives[set_val] > close_group;
auto const optional_def =
    x3::lit('[')[enter] > alternatives[make_optional] > close_optional;
auto const rule_head = x3::omit[-(x3::lit('?') | '!')] >> name >> x3::omit[-priority] >> ':';
auto const ref_def = (name >> !(x3::omit[-priority] >> ':'))[make_ref];
auto const string_def =
    (x3::lexeme[string_token >> -(x3::lit('i') >> !(x3::ascii::alnum | '_'))[str_nocase]]
         [str_first] >>
     -(x3::lit("..") > Named<class RangeHi>("a string literal", string_token[str_second])))
        [make_string];
auto const primary_def = string | regex | group | optional | ref;

auto const rule_def = rule_head[begin_rule] > alternatives[end_rule];
auto const grammar = *(rule_def | x3::lit('%')[unsupported_directive]);

BOOST_SPIRIT_DEFINE(alternatives, sequence, item, primary, group, optional, ref, string)

}  // namespace lark

// Copies the expressions reachable from rule bodies into a fresh arena in depth-first order, so
// the arena holds no nodes left behind by backtracking. CopyTree recurses as deep as the tree,
// which State::max_height bounds.
void Compact(Grammar& g) {
  Grammar out;
  out.rules = g.rules;
  out.root = g.root;
  for (Rule& r : out.rules) r.body = CopyTree(g, r.body, &out);
  g = std::move(out);
}

// A leading "# lockstep-root: NAME" comment names the start rule (PrintGbnf writes it when the
// root is not called "root", e.g. for grammars read from Lark).
std::string RootDirective(std::string_view text) {
  constexpr std::string_view kTag = "# lockstep-root: ";
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.rfind(kTag, 0) == 0) return std::string(line.substr(kTag.size()));
    if (!line.empty() && line[0] != '#') break;
    pos = end + 1;
  }
  return {};
}

template <typename Grammar_, typename Skipper>
Result<Grammar> Run(std::string_view text, const GrammarParseOptions& options, bool lark,
                    const Grammar_& grammar, const Skipper& skipper) {
  State st;
  st.text = text;
  st.options = options;
  st.lark = lark;
  st.max_height = 4 * std::max(options.max_nesting_depth, 1) + 16;
  st.line_starts.push_back(0);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') st.line_starts.push_back(i + 1);
  }
  It first = text.data();
  const It last = text.data() + text.size();
  try {
    x3::phrase_parse(first, last, x3::with<StateTag>(std::ref(st))[grammar], skipper);
    x3::skip_over(first, last, x3::make_context<x3::skipper_tag>(skipper));
    if (first != last) {
      std::string what;
      const bool name_char = std::isalnum(static_cast<unsigned char>(*first)) || *first == '_' ||
                             (!lark && *first == '-');
      if (name_char) {
        what = lark ? "expected a rule definition 'name: ...'"
                    : "expected a rule definition 'name ::= ...'";
      } else {
        what = std::string("unexpected '") +
               (std::isprint(static_cast<unsigned char>(*first)) ? std::string(1, *first)
                                                                  : std::string("?")) +
               "'";
      }
      return GrammarError(text, st.Offset(first), what, StatusCode::kInvalidGrammar);
    }
  } catch (const Failure& f) {
    return GrammarError(text, f.offset, f.what, f.code);
  } catch (const x3::expectation_failure<It>& e) {
    It where = e.where();  // points before the whitespace the failed parser would skip
    while (where != last && std::isspace(static_cast<unsigned char>(*where))) ++where;
    return GrammarError(text, st.Offset(where), "expected " + e.which(),
                        StatusCode::kInvalidGrammar);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory while parsing the grammar");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("grammar parser: ") + e.what());
  }

  Grammar& g = st.g;
  for (const State::Ref& ref : st.refs) {
    auto it = st.rule_ids.find(ref.name);
    if (it == st.rule_ids.end()) {
      return GrammarError(text, ref.offset, "undefined rule '" + ref.name + "'",
                          StatusCode::kInvalidGrammar);
    }
    g.exprs[ref.expr].rule = it->second;
  }
  std::string root_name = lark ? "start" : "root";
  if (!lark) {
    std::string directive = RootDirective(text);
    if (!directive.empty()) root_name = directive;
  }
  g.root = g.FindRule(root_name);
  if (g.root < 0) {
    return GrammarError(text, 0, "missing the start rule '" + root_name + "'",
                        StatusCode::kInvalidGrammar);
  }
  Compact(g);
  const std::vector<bool> reachable = ReachableRules(g);
  for (std::size_t r = 0; r < g.rules.size(); ++r) {
    if (reachable[r]) continue;
    const std::string what =
        "rule '" + g.rules[r].name + "' is never used (unreachable from '" + root_name + "')";
    if (!options.allow_unused_rules) {
      return GrammarError(text, st.rule_at[r], what, StatusCode::kInvalidGrammar);
    }
    g.warnings.push_back(LineColumn(text, st.rule_at[r]) + ": " + what);
  }
  return std::move(g);
}

GrammarSyntax Detect(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    const std::size_t b = line.find_first_not_of(" \t\r");
    pos = end + 1;
    if (b == std::string_view::npos || line[b] == '#' || line.substr(b, 2) == "//") continue;
    return line.find("::=") != std::string_view::npos ? GrammarSyntax::kGbnf
                                                       : GrammarSyntax::kLark;
  }
  return GrammarSyntax::kGbnf;
}

}  // namespace

Result<Grammar> ParseGbnf(std::string_view text, const GrammarParseOptions& options) {
  return Run(text, options, /*lark=*/false, gbnf::grammar, gbnf::skipper);
}

Result<Grammar> ParseLark(std::string_view text, const GrammarParseOptions& options) {
  return Run(text, options, /*lark=*/true, lark::grammar, lark::skipper);
}

Result<Grammar> ParseGrammar(std::string_view text, GrammarSyntax syntax,
                             const GrammarParseOptions& options) {
  if (syntax == GrammarSyntax::kAuto) syntax = Detect(text);
  return syntax == GrammarSyntax::kLark ? ParseLark(text, options) : ParseGbnf(text, options);
}

}  // namespace lockstep::grammar
