// The JSON Schema validator over the shared schema model: draft 2020-12 and draft-07 assertion
// semantics with annotation tracking for unevaluatedProperties/unevaluatedItems and dynamic
// scope for $dynamicRef. Instances are nlohmann::json values (one JSON model for schema and
// instance; numbers keep their int64/uint64/double kind). Regexes run on RE2.
#include <re2/re2.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <unordered_set>

#include "grammar/base/json_pointer.h"
#include "grammar/regex/lookahead.h"
#include "grammar/schema/json_schema.h"

namespace lockstep::schema {

// A pattern as RE2 programs: one, or for leading lookaheads ("^(?=A)(?!B)R") one per part,
// every positive part matching and no negated one (grammar/regex/lookahead.h).
struct CompiledPattern {
  std::vector<std::pair<std::unique_ptr<RE2>, bool>> parts;  // (program, negated)
  bool Search(std::string_view text) const {
    for (const auto& [re, negated] : parts)
      if (RE2::PartialMatch(text, *re) == negated) return false;
    return true;
  }
};

struct Validator::Regexes {
  std::unordered_map<std::string, CompiledPattern> by_pattern;
  const CompiledPattern* Find(const std::string& p) const {
    auto it = by_pattern.find(p);
    return it == by_pattern.end() ? nullptr : &it->second;
  }
};

bool CheckFormat(const std::string& format, const std::string& value);  // json_schema_format.cc

namespace {

using json = nlohmann::json;

// A JSON Schema pattern (ECMA-262) in RE2's syntax, keeping ECMA's meaning where the two differ:
// - long Unicode property names (\p{Letter}) in RE2's short spelling (\p{L});
// - `.` excludes every ECMA line terminator (\n, \r, U+2028, U+2029), not only \n;
// - `\s` / `\S` are ECMA's WhiteSpace and LineTerminator set (Unicode spaces, \v, U+FEFF), not
//   RE2's ASCII one (inside a class, `\S` keeps RE2's meaning: a class cannot hold a negation);
// - `\uXXXX` and `\cX` escapes, which RE2 does not read, as `\x{XXXX}`.
std::string TranslateEcmaRegex(const std::string& pattern) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"Letter", "L"},
      {"Lowercase_Letter", "Ll"},
      {"Uppercase_Letter", "Lu"},
      {"Number", "N"},
      {"Decimal_Number", "Nd"},
      {"Punctuation", "P"},
      {"Symbol", "S"},
      {"Separator", "Z"},
      {"Space_Separator", "Zs"},
      {"Mark", "M"},
      {"Other", "C"},
      {"Control", "Cc"},
      {"digit", "Nd"},
  };
  static const char* kSpaces =
      "\\t\\n\\x{0b}\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
      "\\x{205f}\\x{3000}\\x{feff}";
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 2 < pattern.size() &&
        (pattern[i + 1] == 'p' || pattern[i + 1] == 'P') && pattern[i + 2] == '{') {
      std::size_t close = pattern.find('}', i + 3);
      if (close != std::string::npos) {
        std::string name = pattern.substr(i + 3, close - i - 3);
        for (const auto& [long_name, short_name] : kNames) {
          if (name == long_name) name = short_name;
        }
        out += pattern.substr(i, 3) + name + "}";
        i = close;
        continue;
      }
    }
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 's') {
        out += in_class ? std::string(kSpaces) : "[" + std::string(kSpaces) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kSpaces) + "]";
      } else if (e == 'u' && i + 5 < pattern.size() && hex(pattern[i + 2]) && hex(pattern[i + 3]) &&
                 hex(pattern[i + 4]) && hex(pattern[i + 5])) {
        out += "\\x{" + pattern.substr(i + 2, 4) + "}";
        i += 4;
      } else if (e == 'c' && i + 2 < pattern.size() &&
                 std::isalpha(static_cast<unsigned char>(pattern[i + 2]))) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "\\x{%02x}", pattern[i + 2] % 32);
        out += buf;
        i += 1;
      } else {
        out += pattern.substr(i, 2);
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    if (!in_class && c == '.') {
      out += "[^\\n\\r\\x{2028}\\x{2029}]";
      continue;
    }
    out += c;
  }
  return out;
}

std::unique_ptr<RE2> CompileRegex(const std::string& pattern, std::string* error) {
  RE2::Options opt;
  opt.set_log_errors(false);
  opt.set_encoding(RE2::Options::EncodingUTF8);
  auto re = std::make_unique<RE2>(TranslateEcmaRegex(pattern), opt);
  if (!re->ok()) {
    *error = re->error();
    return nullptr;
  }
  return re;
}

// ---- numbers ----

bool IsInteger(const json& j) {
  if (j.is_number_integer()) return true;
  if (!j.is_number_float()) return false;
  double d = j.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

}  // namespace

// -1, 0, 1 comparing two JSON numbers exactly when both are integers.
int CompareNumbers(const json& a, const json& b) {
  auto sign = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  if (a.is_number_integer() && b.is_number_integer()) {
    bool au = a.is_number_unsigned(), bu = b.is_number_unsigned();
    if (au && bu) return sign(a.get<std::uint64_t>(), b.get<std::uint64_t>());
    if (!au && !bu) return sign(a.get<std::int64_t>(), b.get<std::int64_t>());
    if (au) {
      std::int64_t bv = b.get<std::int64_t>();
      return bv < 0 ? 1 : sign(a.get<std::uint64_t>(), static_cast<std::uint64_t>(bv));
    }
    std::int64_t av = a.get<std::int64_t>();
    return av < 0 ? -1 : sign(static_cast<std::uint64_t>(av), b.get<std::uint64_t>());
  }
  auto ld = [](const json& j) -> long double {
    if (j.is_number_unsigned()) return static_cast<long double>(j.get<std::uint64_t>());
    if (j.is_number_integer()) return static_cast<long double>(j.get<std::int64_t>());
    return static_cast<long double>(j.get<double>());
  };
  return sign(ld(a), ld(b));
}

ExactDecimal ExactDecimalOf(const json& j) {
  ExactDecimal d;
  std::string text = j.dump();
  if (!text.empty() && text[0] == '-') text.erase(0, 1);
  std::size_t e = text.find_first_of("eE");
  int exp = 0;
  if (e != std::string::npos) {
    exp = std::atoi(text.c_str() + e + 1);
    text.erase(e);
  }
  std::size_t dot = text.find('.');
  if (dot != std::string::npos) {
    exp -= static_cast<int>(text.size() - dot - 1);
    text.erase(dot, 1);
  }
  std::size_t first = text.find_first_not_of('0');
  text = first == std::string::npos ? "0" : text.substr(first);
  while (text.size() > 1 && text.back() == '0') text.pop_back(), ++exp;
  if (text.size() > 36) {
    d.ok = false;
    return d;
  }
  for (char c : text) d.mantissa = d.mantissa * 10 + static_cast<unsigned>(c - '0');
  d.exponent = text == "0" ? 0 : exp;
  return d;
}

bool IsMultipleOf(const json& value, const json& divisor) {
  ExactDecimal v = ExactDecimalOf(value), m = ExactDecimalOf(divisor);
  if (!v.ok || !m.ok || m.mantissa == 0) return false;
  if (v.mantissa == 0) return true;
  if (v.exponent < m.exponent) return false;  // v has a nonzero digit below m's last one
  // (v.mantissa * 10^(v.exponent - m.exponent)) mod m.mantissa, in modular arithmetic.
  unsigned __int128 r = v.mantissa % m.mantissa;
  for (int k = v.exponent - m.exponent; k > 0 && r != 0; --k) r = (r * 10) % m.mantissa;
  return r == 0;
}

// ---- strings ----

std::size_t CodePoints(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool JsonEqual(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b) == 0;
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!JsonEqual(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto& [k, v] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !JsonEqual(v, *it)) return false;
    }
    return true;
  }
  return a == b;
}

namespace {

const char* TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    default:
      return IsInteger(j) ? "integer" : "number";
  }
}

// `float_integers`: 1.0 is an integer (every draft but draft-04, where only 1 is).
bool HasType(const json& inst, const std::string& t, bool float_integers) {
  if (t == "integer") return float_integers ? IsInteger(inst) : inst.is_number_integer();
  if (t == "number") return inst.is_number();
  return t == TypeName(inst) || (t == "number" && inst.is_number());
}

// Annotations collected about one instance location by the schemas applied in place to it.
struct Annotations {
  std::unordered_set<std::string> props;  // evaluated property names
  std::vector<char> items;                // evaluated item indices (sized on demand)
  void MarkItem(std::size_t i, std::size_t n) {
    if (items.size() < n) items.resize(n, 0);
    items[i] = 1;
  }
  void Merge(const Annotations& o) {
    props.insert(o.props.begin(), o.props.end());
    if (items.size() < o.items.size()) items.resize(o.items.size(), 0);
    for (std::size_t i = 0; i < o.items.size(); ++i) items[i] |= o.items[i];
  }
};

class Evaluator {
 public:
  // `memoise`: no error list is kept and no $dynamicRef makes a result depend on the dynamic
  // scope, so Eval's result is a function of (subschema, instance value).
  Evaluator(const Schema& s, const ValidateOptions& o, const Validator::Regexes& re,
            std::vector<ValidationError>* errors, bool memoise)
      : s_(s), o_(o), re_(re), errors_(errors), memoise_(memoise) {}

  Status fatal;

  // `ann` is empty on entry (every caller passes a fresh one) and receives this subschema's
  // annotations.
  bool Eval(const json& sch, const json& inst, const std::string& iptr, Annotations& ann) {
    if (sch.is_boolean()) {
      if (!sch.get<bool>()) Error(iptr, &sch, "", "false schema allows nothing");
      return sch.get<bool>();
    }
    if (!fatal.ok()) return false;
    // Subschemas reached along several paths (a definition referenced from the branches of an
    // anyOf at every level) are evaluated on one value once, not once per path (2^depth).
    const bool memo = memoise_ && temporaries_ == 0;
    const std::pair<const json*, const json*> key{&sch, &inst};
    if (memo) {
      if (auto it = memo_.find(key); it != memo_.end()) {
        ann = it->second.second;
        return it->second.first;
      }
    }
    const bool valid = EvalUncached(sch, inst, iptr, ann);
    if (memo && fatal.ok()) memo_.emplace(key, std::make_pair(valid, ann));
    return valid;
  }

 private:
  bool EvalUncached(const json& sch, const json& inst, const std::string& iptr, Annotations& ann) {
    if (++depth_ > o_.max_depth) {
      fatal = Status(StatusCode::kResourceLimit,
                     "schema evaluation nested too deeply "
                     "(recursive $ref without progress?)",
                     s_.Location(&sch));
      --depth_;
      return false;
    }
    const NodeInfo* info = s_.Info(&sch);
    bool pushed = false;
    if (info && (scope_.empty() || scope_.back() != info->base_uri)) {
      scope_.push_back(info->base_uri);
      pushed = true;
    }
    bool valid = EvalObject(sch, inst, iptr, ann);
    if (pushed) scope_.pop_back();
    --depth_;
    return valid;
  }

  void Error(const std::string& iptr, const json* sch, const std::string& kw, std::string msg) {
    if (!errors_ || errors_->size() >= o_.max_errors) return;
    std::string sp = s_.Location(sch);
    if (!kw.empty()) sp += JsonPointerSegment(kw);
    errors_->push_back({iptr.empty() ? "" : iptr, sp, std::move(msg)});
  }
  std::size_t Mark() const { return errors_ ? errors_->size() : 0; }
  void Rewind(std::size_t m) {
    if (errors_ && errors_->size() > m) errors_->resize(m);
  }

  bool Draft7() const { return s_.draft() == Draft::k7; }

  // An in-place applicator's subschema: it sees only its own annotations (not its cousins'),
  // and passes them up when it is valid.
  bool EvalInPlace(const json& sub, const json& inst, const std::string& iptr, Annotations& ann) {
    Annotations a;
    bool ok = Eval(sub, inst, iptr, a);
    if (ok) ann.Merge(a);
    return ok;
  }

  bool EvalObject(const json& sch, const json& inst, const std::string& iptr, Annotations& ann) {
    bool valid = true;
    auto kw = [&](const char* k) -> const json* {
      auto it = sch.find(k);
      return it == sch.end() ? nullptr : &*it;
    };
    if (kw("$ref")) {
      const json* target = s_.RefTarget(&sch);
      if (target && !EvalInPlace(*target, inst, iptr, ann)) valid = false;
      if (Draft7()) return valid;
    }
    if (!Draft7() && kw("$dynamicRef")) {
      if (!EvalDynamicRef(sch, inst, iptr, ann)) valid = false;
    }
    if (s_.validation_vocabulary() && !EvalAssertions(sch, inst, iptr)) valid = false;
    if (const json* all = kw("allOf")) {
      for (const json& sub : *all) valid &= EvalInPlace(sub, inst, iptr, ann);
    }
    if (const json* any = kw("anyOf")) {
      std::size_t m = Mark();
      bool one = false;
      for (const json& sub : *any) {
        Annotations a;
        if (Eval(sub, inst, iptr, a)) one = true, ann.Merge(a);
      }
      if (one) {
        Rewind(m);
      } else {
        valid = false;
        Error(iptr, &sch, "anyOf", "matches none of the anyOf subschemas");
      }
    }
    if (const json* one_of = kw("oneOf")) {
      std::size_t m = Mark();
      int count = 0;
      Annotations keep;
      for (const json& sub : *one_of) {
        Annotations a;
        if (Eval(sub, inst, iptr, a)) ++count, keep = std::move(a);
      }
      Rewind(m);
      if (count == 1) {
        ann.Merge(keep);
      } else {
        valid = false;
        Error(iptr, &sch, "oneOf",
              count == 0
                  ? "matches none of the oneOf subschemas"
                  : "matches " + std::to_string(count) + " oneOf subschemas, not exactly one");
      }
    }
    if (const json* n = kw("not")) {
      std::size_t m = Mark();
      Annotations a;
      bool sub = Eval(*n, inst, iptr, a);
      Rewind(m);
      if (sub) {
        valid = false;
        Error(iptr, &sch, "not", "matches the schema under not");
      }
    }
    if (const json* cond = kw("if")) {
      std::size_t m = Mark();
      Annotations a;
      bool ok = Eval(*cond, inst, iptr, a);
      Rewind(m);
      if (ok) {
        ann.Merge(a);
        if (const json* t = kw("then")) valid &= EvalInPlace(*t, inst, iptr, ann);
      } else if (const json* e = kw("else")) {
        valid &= EvalInPlace(*e, inst, iptr, ann);
      }
    }
    if (inst.is_object()) valid &= EvalObjectApplicators(sch, inst, iptr, ann);
    if (inst.is_array()) valid &= EvalArrayApplicators(sch, inst, iptr, ann);
    if (const json* f = kw("format"); f && f->is_string()) {
      const std::string& name = f->get_ref<const std::string&>();
      if (o_.openapi_formats && IsOpenApiFormat(name)) {
        if (!CheckOpenApiFormat(name, inst)) {
          valid = false;
          Error(iptr, &sch, "format", "not a valid " + name);
        }
      } else if (o_.format_assertion && inst.is_string() &&
                 !CheckFormat(name, inst.get<std::string>())) {
        valid = false;
        Error(iptr, &sch, "format", "not a valid " + name);
      }
    }
    if (!Draft7()) {
      // Last: they see the annotations of every other keyword of this schema.
      if (const json* u = kw("unevaluatedProperties"); u && inst.is_object()) {
        for (auto& [k, v] : inst.items()) {
          if (ann.props.count(k)) continue;
          Annotations a;
          valid &= Eval(*u, v, iptr + JsonPointerSegment(k), a);
        }
        for (auto& [k, v] : inst.items()) ann.props.insert(k);
      }
      if (const json* u = kw("unevaluatedItems"); u && inst.is_array()) {
        for (std::size_t i = 0; i < inst.size(); ++i) {
          if (i < ann.items.size() && ann.items[i]) continue;
          Annotations a;
          valid &= Eval(*u, inst[i], iptr + "/" + std::to_string(i), a);
        }
        for (std::size_t i = 0; i < inst.size(); ++i) ann.MarkItem(i, inst.size());
      }
    }
    return valid;
  }

  bool EvalDynamicRef(const json& sch, const json& inst, const std::string& iptr,
                      Annotations& ann) {
    const json* target = s_.DynamicRefTarget(&sch);
    if (!target) return true;
    const std::string& ref = sch["$dynamicRef"].get_ref<const std::string&>();
    std::size_t hash = ref.find('#');
    std::string name = hash == std::string::npos ? "" : ref.substr(hash + 1);
    if (!name.empty() && name[0] != '/' && target->is_object()) {
      auto da = target->find("$dynamicAnchor");
      if (da != target->end() && da->is_string() && da->get<std::string>() == name) {
        for (const std::string& base : scope_) {
          if (const json* d = s_.DynamicAnchor(base, name)) {
            target = d;
            break;
          }
        }
      }
    }
    return EvalInPlace(*target, inst, iptr, ann);
  }

  bool EvalAssertions(const json& sch, const json& inst, const std::string& iptr) {
    bool valid = true;
    auto kw = [&](const char* k) -> const json* {
      auto it = sch.find(k);
      return it == sch.end() ? nullptr : &*it;
    };
    if (const json* t = kw("type")) {
      bool ok = false;
      if (t->is_string()) {
        ok = HasType(inst, t->get<std::string>(), s_.float_integers());
      } else if (t->is_array()) {
        for (const json& x : *t)
          ok |= x.is_string() && HasType(inst, x.get<std::string>(), s_.float_integers());
      }
      if (!ok)
        valid = false,
        Error(iptr, &sch, "type",
              std::string("wrong type ") + TypeName(inst) + ", expected " + t->dump());
    }
    if (const json* e = kw("enum"); e && e->is_array()) {
      bool ok =
          std::any_of(e->begin(), e->end(), [&](const json& x) { return JsonEqual(x, inst); });
      if (!ok) valid = false, Error(iptr, &sch, "enum", "not one of the enum values");
    }
    if (const json* c = kw("const"); c && !JsonEqual(*c, inst)) {
      valid = false, Error(iptr, &sch, "const", "not equal to the const value");
    }
    if (inst.is_number()) {
      if (const json* m = kw("multipleOf"); m && m->is_number() && !IsMultipleOf(inst, *m)) {
        valid = false, Error(iptr, &sch, "multipleOf", "not a multiple of " + m->dump());
      }
      struct Bound {
        const char* name;
        bool (*ok)(int);
      };
      static const Bound kBounds[] = {
          {"maximum", [](int c) { return c <= 0; }},
          {"exclusiveMaximum", [](int c) { return c < 0; }},
          {"minimum", [](int c) { return c >= 0; }},
          {"exclusiveMinimum", [](int c) { return c > 0; }},
      };
      for (const Bound& b : kBounds) {
        const json* v = kw(b.name);
        if (v && v->is_number() && !b.ok(CompareNumbers(inst, *v))) {
          valid = false,
          Error(iptr, &sch, b.name, std::string("violates ") + b.name + " " + v->dump());
        }
      }
    }
    if (inst.is_string()) {
      const std::string& str = inst.get_ref<const std::string&>();
      std::size_t n = 0;
      bool counted = false;
      auto len = [&] { return counted ? n : (counted = true, n = CodePoints(str)); };
      if (const json* v = kw("maxLength"); v && v->is_number() && len() > v->get<double>()) {
        valid = false, Error(iptr, &sch, "maxLength", "longer than " + v->dump());
      }
      if (const json* v = kw("minLength"); v && v->is_number() && len() < v->get<double>()) {
        valid = false, Error(iptr, &sch, "minLength", "shorter than " + v->dump());
      }
      if (const json* p = kw("pattern"); p && p->is_string()) {
        const CompiledPattern* re = re_.Find(p->get<std::string>());
        if (re && !re->Search(str)) {
          valid = false, Error(iptr, &sch, "pattern", "does not match " + p->dump());
        }
      }
    }
    if (inst.is_array()) {
      if (const json* v = kw("maxItems"); v && v->is_number() && inst.size() > v->get<double>()) {
        valid = false, Error(iptr, &sch, "maxItems", "more items than " + v->dump());
      }
      if (const json* v = kw("minItems"); v && v->is_number() && inst.size() < v->get<double>()) {
        valid = false, Error(iptr, &sch, "minItems", "fewer items than " + v->dump());
      }
      if (const json* u = kw("uniqueItems"); u && u->is_boolean() && u->get<bool>()) {
        for (std::size_t i = 0; i < inst.size(); ++i) {
          for (std::size_t j = i + 1; j < inst.size(); ++j) {
            if (JsonEqual(inst[i], inst[j])) {
              valid = false;
              Error(iptr, &sch, "uniqueItems",
                    "items " + std::to_string(i) + " and " + std::to_string(j) + " are equal");
              i = j = inst.size();
            }
          }
        }
      }
    }
    if (inst.is_object()) {
      if (const json* v = kw("maxProperties");
          v && v->is_number() && inst.size() > v->get<double>()) {
        valid = false, Error(iptr, &sch, "maxProperties", "more properties than " + v->dump());
      }
      if (const json* v = kw("minProperties");
          v && v->is_number() && inst.size() < v->get<double>()) {
        valid = false, Error(iptr, &sch, "minProperties", "fewer properties than " + v->dump());
      }
      if (const json* r = kw("required"); r && r->is_array()) {
        for (const json& name : *r) {
          if (name.is_string() && !inst.contains(name.get<std::string>())) {
            valid = false, Error(iptr, &sch, "required", "missing property " + name.dump());
          }
        }
      }
      const json* dr = Draft7() ? kw("dependencies") : kw("dependentRequired");
      if (dr && dr->is_object()) {
        for (auto& [k, names] : dr->items()) {
          if (!names.is_array() || !inst.contains(k)) continue;
          for (const json& name : names) {
            if (name.is_string() && !inst.contains(name.get<std::string>())) {
              valid = false;
              Error(iptr, &sch, Draft7() ? "dependencies" : "dependentRequired",
                    "property " + name.dump() + " is required when " + k + " is present");
            }
          }
        }
      }
    }
    return valid;
  }

  bool EvalObjectApplicators(const json& sch, const json& inst, const std::string& iptr,
                             Annotations& ann) {
    bool valid = true;
    const json* props = nullptr;
    const json* pattern_props = nullptr;
    if (auto it = sch.find("properties"); it != sch.end() && it->is_object()) props = &*it;
    if (auto it = sch.find("patternProperties"); it != sch.end() && it->is_object()) {
      pattern_props = &*it;
    }
    auto additional = sch.find("additionalProperties");
    for (auto& [k, v] : inst.items()) {
      bool matched = false;
      std::string child = iptr + JsonPointerSegment(k);
      if (props) {
        if (auto p = props->find(k); p != props->end()) {
          matched = true;
          Annotations a;
          valid &= Eval(*p, v, child, a);
        }
      }
      if (pattern_props) {
        for (auto& [pat, sub] : pattern_props->items()) {
          const CompiledPattern* re = re_.Find(pat);
          if (re && re->Search(k)) {
            matched = true;
            Annotations a;
            valid &= Eval(sub, v, child, a);
          }
        }
      }
      if (matched) {
        ann.props.insert(k);
      } else if (additional != sch.end()) {
        Annotations a;
        valid &= Eval(*additional, v, child, a);
        ann.props.insert(k);
      }
    }
    if (auto pn = sch.find("propertyNames"); pn != sch.end()) {
      ++temporaries_;  // the names are temporary values: their addresses are reused
      for (auto& [k, v] : inst.items()) {
        Annotations a;
        valid &= Eval(*pn, json(k), iptr + JsonPointerSegment(k), a);
      }
      --temporaries_;
    }
    const json* deps = nullptr;
    if (auto it = sch.find(Draft7() ? "dependencies" : "dependentSchemas");
        it != sch.end() && it->is_object()) {
      deps = &*it;
    }
    if (deps) {
      for (auto& [k, sub] : deps->items()) {
        if (sub.is_array() || !inst.contains(k)) continue;
        valid &= EvalInPlace(sub, inst, iptr, ann);
      }
    }
    return valid;
  }

  bool EvalArrayApplicators(const json& sch, const json& inst, const std::string& iptr,
                            Annotations& ann) {
    bool valid = true;
    std::size_t n = inst.size();
    std::size_t prefix = 0;
    auto items = sch.find("items");
    auto item = [&](const json& sub, std::size_t i) {
      Annotations a;
      valid &= Eval(sub, inst[i], iptr + "/" + std::to_string(i), a);
      ann.MarkItem(i, n);
    };
    if (Draft7()) {
      if (items != sch.end() && items->is_array()) {
        prefix = std::min(n, items->size());
        for (std::size_t i = 0; i < prefix; ++i) item((*items)[i], i);
        if (auto add = sch.find("additionalItems"); add != sch.end()) {
          for (std::size_t i = prefix; i < n; ++i) item(*add, i);
        }
      } else if (items != sch.end()) {
        for (std::size_t i = 0; i < n; ++i) item(*items, i);
      }
    } else {
      if (auto pi = sch.find("prefixItems"); pi != sch.end() && pi->is_array()) {
        prefix = std::min(n, pi->size());
        for (std::size_t i = 0; i < prefix; ++i) item((*pi)[i], i);
      }
      if (items != sch.end()) {
        for (std::size_t i = prefix; i < n; ++i) item(*items, i);
      }
    }
    if (auto c = sch.find("contains"); c != sch.end()) {
      std::size_t m = Mark(), matches = 0;
      for (std::size_t i = 0; i < n; ++i) {
        Annotations a;
        if (Eval(*c, inst[i], iptr + "/" + std::to_string(i), a)) {
          ++matches;
          if (!Draft7()) ann.MarkItem(i, n);
        }
      }
      Rewind(m);
      double min_c = 1, max_c = -1;
      if (!Draft7() && s_.validation_vocabulary()) {
        if (auto v = sch.find("minContains"); v != sch.end() && v->is_number())
          min_c = v->get<double>();
        if (auto v = sch.find("maxContains"); v != sch.end() && v->is_number())
          max_c = v->get<double>();
      }
      if (matches < min_c) {
        valid = false;
        Error(iptr, &sch, "contains",
              "fewer than " + std::to_string(static_cast<long>(min_c)) + " items match contains");
      }
      if (max_c >= 0 && matches > max_c) {
        valid = false;
        Error(iptr, &sch, "maxContains",
              "more than " + std::to_string(static_cast<long>(max_c)) + " items match contains");
      }
    }
    return valid;
  }

  const Schema& s_;
  const ValidateOptions& o_;
  const Validator::Regexes& re_;
  std::vector<ValidationError>* errors_;
  std::vector<std::string> scope_;  // dynamic scope: base URIs, outermost first
  int depth_ = 0;
  const bool memoise_;
  int temporaries_ = 0;  // > 0 while evaluating values that are not in the instance
  struct PairHash {
    std::size_t operator()(const std::pair<const json*, const json*>& p) const {
      return std::hash<const void*>()(p.first) * 31 + std::hash<const void*>()(p.second);
    }
  };
  std::unordered_map<std::pair<const json*, const json*>, std::pair<bool, Annotations>, PairHash>
      memo_;
};

}  // namespace

Result<Validator> Validator::Create(std::shared_ptr<const Schema> schema,
                                    const ValidateOptions& options) {
  try {
    return CreateImpl(std::move(schema), options);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory compiling the schema's patterns");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidSchema, e.what(), "/");
  }
}

Result<Validator> Validator::CreateImpl(std::shared_ptr<const Schema> schema,
                                        const ValidateOptions& options) {
  auto regexes = std::make_shared<Regexes>();
  // In document order, so the first unsupported pattern reported is deterministic.
  std::vector<const json*> nodes = schema->Nodes();
  std::sort(nodes.begin(), nodes.end(), [&](const json* a, const json* b) {
    const NodeInfo* ia = schema->Info(a);
    const NodeInfo* ib = schema->Info(b);
    return std::tie(ia->doc, ia->pointer) < std::tie(ib->doc, ib->pointer);
  });
  for (const json* node : nodes) {
    if (!node->is_object()) continue;
    std::vector<std::pair<std::string, std::string>> patterns;  // pattern, pointer
    if (auto p = node->find("pattern"); p != node->end()) {
      if (!p->is_string()) {
        return Status(StatusCode::kInvalidSchema, "pattern must be a string",
                      schema->Location(node) + "/pattern");
      }
      patterns.emplace_back(p->get<std::string>(), schema->Location(node) + "/pattern");
    }
    if (auto pp = node->find("patternProperties"); pp != node->end() && pp->is_object()) {
      for (auto& [pat, sub] : pp->items()) {
        patterns.emplace_back(
            pat, schema->Location(node) + "/patternProperties" + JsonPointerSegment(pat));
      }
    }
    for (auto& [pat, where] : patterns) {
      if (regexes->by_pattern.count(pat)) continue;
      std::vector<LookaheadPart> parts;
      if (auto split = SplitLeadingLookaheads(pat)) {
        parts = std::move(*split);
      } else {
        parts.push_back({pat, false});
      }
      CompiledPattern compiled;
      for (const LookaheadPart& part : parts) {
        std::string error;
        auto re = CompileRegex(part.pattern, &error);
        if (!re) {
          return Status(StatusCode::kUnsupported,
                        "pattern " + json(pat).dump() + " cannot be run by RE2 (" + error +
                            "; lookaround other than lookaheads right after a leading '^', and "
                            "backreferences, are not supported)",
                        where);
        }
        compiled.parts.emplace_back(std::move(re), part.negated);
      }
      regexes->by_pattern.emplace(pat, std::move(compiled));
    }
  }
  Validator v;
  for (const json* node : nodes) {
    if (node->is_object() && node->contains("$dynamicRef")) v.dynamic_refs_ = true;
  }
  v.schema_ = std::move(schema);
  v.options_ = options;
  v.regexes_ = std::move(regexes);
  return v;
}

Result<bool> Validator::Validate(const nlohmann::json& instance,
                                 std::vector<ValidationError>* errors) const {
  try {
    Evaluator ev(*schema_, options_, *regexes_, errors, errors == nullptr && !dynamic_refs_);
    Annotations ann;
    bool valid = ev.Eval(schema_->root(), instance, "", ann);
    if (!ev.fatal.ok()) return ev.fatal;
    return valid;
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory validating the instance");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, e.what());
  }
}

namespace {

// simdjson DOM -> nlohmann value. Iterative over containers would be safer against deep input,
// but simdjson itself caps depth (kMaxInstanceDepth) before we get here.
json FromDom(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      json out = json::array();
      simdjson::dom::array arr;
      if (e.get(arr) != simdjson::SUCCESS) return out;
      for (simdjson::dom::element x : arr) out.push_back(FromDom(x));
      return out;
    }
    case simdjson::dom::element_type::OBJECT: {
      json out = json::object();
      simdjson::dom::object obj;
      if (e.get(obj) != simdjson::SUCCESS) return out;
      for (simdjson::dom::key_value_pair kv : obj) {
        out[std::string(kv.key)] = FromDom(kv.value);  // duplicate keys: the last one wins
      }
      return out;
    }
    case simdjson::dom::element_type::INT64: return e.get_int64().value_unsafe();
    case simdjson::dom::element_type::UINT64: return e.get_uint64().value_unsafe();
    case simdjson::dom::element_type::DOUBLE: return e.get_double().value_unsafe();
    case simdjson::dom::element_type::STRING: return std::string(e.get_string().value_unsafe());
    case simdjson::dom::element_type::BOOL: return e.get_bool().value_unsafe();
    case simdjson::dom::element_type::NULL_VALUE: return nullptr;
  }
  return nullptr;
}

constexpr std::size_t kMaxInstanceDepth = 1024;

}  // namespace

Result<json> ParseInstance(std::string_view text) {
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  simdjson::error_code err = parser.parse(padded).get(root);
  if (!err) return FromDom(root);
  if (err == simdjson::DEPTH_ERROR) {
    return Status(StatusCode::kResourceLimit,
                  "instance nests deeper than " + std::to_string(kMaxInstanceDepth) + " levels");
  }
  // simdjson refuses integers beyond 64 bits (BIGINT_ERROR), which are valid JSON: nlohmann reads
  // them as doubles. Any other failure gets nlohmann's byte offset for the message.
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("instance is not valid JSON: ") + simdjson::error_message(err),
                  "byte " + std::to_string(e.byte == 0 ? 0 : e.byte - 1));
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidArgument, std::string("instance is not valid JSON: ") +
                                                    e.what());
  }
}

Result<bool> Validator::ValidateText(std::string_view text,
                                     std::vector<ValidationError>* errors) const {
  Result<json> inst = ParseInstance(text);
  if (!inst.ok()) return inst.status();
  return Validate(*inst, errors);
}

}  // namespace lockstep::schema
