// The JSON Schema compiler's model of a schema: conjunctions of in-place subschemas, expanded
// through $ref / allOf and rewritten (not, oneOf, if/then/else, dependencies) into a disjunction
// of merged facts; negation as synthetic nodes; and the checker of instances under the compiled
// semantics. Used by schema_compile.cc (grammar emission and RenderInstance).
#include <algorithm>
#include <cmath>
#include <iterator>
#include <span>
#include <string_view>
#include <vector>

#include "automata/schema/schema_compile_internal.h"
#include "grammar/base/json_pointer.h"

namespace lockstep::schema::internal {

// ---- JSON value helpers ----

bool IsIntegral(const json& j) {
  if (j.is_number_integer()) return true;
  if (!j.is_number_float()) return false;
  double d = j.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

std::uint8_t TypeOf(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return kTNull;
    case json::value_t::boolean:
      return kTBool;
    case json::value_t::object:
      return kTObject;
    case json::value_t::array:
      return kTArray;
    case json::value_t::string:
      return kTString;
    default:
      return IsIntegral(v) ? kTInt : kTFrac;
  }
}

static std::uint8_t TypeBit(const std::string& t) {
  if (t == "null") return kTNull;
  if (t == "boolean") return kTBool;
  if (t == "object") return kTObject;
  if (t == "array") return kTArray;
  if (t == "string") return kTString;
  if (t == "integer") return kTInt;
  if (t == "number") return kTNumber;
  return 0;
}

std::uint8_t TypeBits(const json& t) {
  if (t.is_string()) return TypeBit(t.get<std::string>());
  std::uint8_t m = 0;
  if (t.is_array())
    for (const json& x : t)
      if (x.is_string()) m |= TypeBit(x.get<std::string>());
  return m;
}

std::optional<json> LcmOf(const json& a, const json& b) {
  ExactDecimal x = ExactDecimalOf(a), y = ExactDecimalOf(b);
  if (!x.ok || !y.ok || x.mantissa == 0 || y.mantissa == 0) return std::nullopt;
  int e = std::min(x.exponent, y.exponent);
  unsigned __int128 limit = 1;
  for (int i = 0; i < 36; ++i) limit *= 10;
  auto scale = [&](const ExactDecimal& d) -> std::optional<unsigned __int128> {
    unsigned __int128 m = d.mantissa;
    for (int k = d.exponent; k > e; --k) {
      if (m > limit) return std::nullopt;
      m *= 10;
    }
    return m;
  };
  auto mx = scale(x), my = scale(y);
  if (!mx || !my) return std::nullopt;
  unsigned __int128 g = *mx, h = *my;
  while (h != 0) {
    unsigned __int128 t = g % h;
    g = h;
    h = t;
  }
  unsigned __int128 l = *mx / g;
  if (l > limit / *my) return std::nullopt;
  l *= *my;
  std::string digits;
  for (unsigned __int128 v = l; v != 0; v /= 10)
    digits.insert(digits.begin(), char('0' + int(v % 10)));
  std::string text;
  if (e >= 0) {
    text = digits + std::string(static_cast<std::size_t>(e), '0');
  } else {
    auto frac = static_cast<std::size_t>(-e);
    if (digits.size() <= frac) digits.insert(0, frac - digits.size() + 1, '0');
    text = digits.substr(0, digits.size() - frac) + "." + digits.substr(digits.size() - frac);
  }
  json out = json::parse(text, nullptr, false);
  if (out.is_discarded()) return std::nullopt;
  return out;
}

std::string RenderScalar(const json& v, bool float_point) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) return RenderJsonString(v.get_ref<const std::string&>());
  std::string text = RenderJsonNumber(v);
  if (float_point && v.is_number_float() && IsIntegral(v)) text += ".0";
  return text;
}

std::string Newline(int indent, int depth) {
  std::string s;
  if (indent < 0) return s;
  s.push_back('\n');
  s.append(static_cast<std::size_t>(depth) * static_cast<std::size_t>(indent), ' ');
  return s;
}

std::string RenderPlain(const json& v, int indent, int depth, bool float_point) {
  if (!v.is_object() && !v.is_array()) return RenderScalar(v, float_point);
  if (v.empty()) return v.is_object() ? "{}" : "[]";
  std::string out(1, v.is_object() ? '{' : '[');
  std::string pad = Newline(indent, depth + 1);
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first) out += ",";
    first = false;
    out += pad;
    if (v.is_object()) out += RenderJsonString(it.key()) + (indent < 0 ? ":" : ": ");
    out += RenderPlain(*it, indent, depth + 1, float_point);
  }
  out += Newline(indent, depth);
  out += v.is_object() ? '}' : ']';
  return out;
}

// ---- locations and synthetic nodes ----

std::string Model::JsonPointerSegmentOf(const std::string& kw) { return JsonPointerSegment(kw); }

std::string Model::Loc(const json* j) const {
  if (s_.Info(j)) return s_.Location(j);
  auto it = synth_loc_.find(j);
  return it == synth_loc_.end() ? "" : it->second;
}

const std::string& Model::CachedLoc(const json* j) {
  auto [it, fresh] = loc_cache_.try_emplace(j);
  if (fresh) it->second = Loc(j);
  return it->second;
}

void Model::RegisterLocs(const json* j, const std::string& loc) {
  if (s_.Info(j)) return;
  synth_loc_.emplace(j, loc);
  if (j->is_object() || j->is_array()) {
    for (const json& c : *j) RegisterLocs(&c, loc);
  }
}

const json* Model::MakeSynth(json j, const std::string& loc) {
  synth_.push_back(std::move(j));
  RegisterLocs(&synth_.back(), loc);
  return &synth_.back();
}

json Model::NodeRef(const json* n) {
  auto [it, added] = table_index_.emplace(n, static_cast<int>(table_.size()));
  if (added) table_.push_back(n);
  return json{{"$ls:node", json::array({it->second})}};
}

// ---- expansion ----

// A $dynamicRef resolves statically when no other subschema (in any loaded document) declares
// the same $dynamicAnchor name: the dynamic scope can then only find that one.
bool Model::UniqueDynamicAnchor(const json& target) {
  const json& a = target["$dynamicAnchor"];
  if (!a.is_string()) return false;
  if (dynamic_anchor_counts_.empty()) {
    dynamic_anchor_counts_[""] = 0;  // computed
    for (const json* n : s_.Nodes()) {
      if (!n->is_object()) continue;
      auto it = n->find("$dynamicAnchor");
      if (it != n->end() && it->is_string()) ++dynamic_anchor_counts_[it->get<std::string>()];
    }
  }
  auto it = dynamic_anchor_counts_.find(a.get<std::string>());
  return it != dynamic_anchor_counts_.end() && it->second == 1;
}

namespace {
std::int64_t CountOf(const json& v) { return static_cast<std::int64_t>(v.get<double>()); }
const json* Kw(const json& j, const char* k) {
  auto it = j.find(k);
  return it == j.end() ? nullptr : &*it;
}
bool IsTrivial(const json& j) {
  return (j.is_boolean() && j.get<bool>()) || (j.is_object() && j.empty());
}
}  // namespace

const Model::NodeKeys& Model::KeysOf(const json* j) const {
  auto [it, fresh] = node_keys_.try_emplace(j);
  if (!fresh) return it->second;
  // Sorted by name, for a binary search per member.
  static constexpr std::pair<std::string_view, NodeKey> kNames[] = {
      {"$dynamicRef", kKeyDynamicRef},
      {"$ls:absent", kKeyLsAbsent},
      {"$ls:node", kKeyLsNode},
      {"$ls:types", kKeyLsTypes},
      {"$ref", kKeyRef},
      {"allOf", kKeyAllOf},
      {"anyOf", kKeyAnyOf},
      {"const", kKeyConst},
      {"dependencies", kKeyDependencies},
      {"dependentRequired", kKeyDependentRequired},
      {"dependentSchemas", kKeyDependentSchemas},
      {"enum", kKeyEnum},
      {"if", kKeyIf},
      {"not", kKeyNot},
      {"oneOf", kKeyOneOf},
      {"properties", kKeyProperties},
      {"required", kKeyRequired},
      {"type", kKeyType},
      {"unevaluatedItems", kKeyUnevaluatedItems},
      {"unevaluatedProperties", kKeyUnevaluatedProperties},
  };
  static_assert(std::size(kNames) == kNumNodeKeys);
  static_assert(std::is_sorted(std::begin(kNames), std::end(kNames),
                               [](const auto& a, const auto& b) { return a.first < b.first; }));
  NodeKeys& keys = it->second;
  keys.fill(nullptr);
  if (!j->is_object()) return keys;
  for (auto m = j->begin(); m != j->end(); ++m) {
    const std::string_view name = m.key();
    auto f = std::lower_bound(std::begin(kNames), std::end(kNames), name,
                              [](const auto& e, std::string_view n) { return e.first < n; });
    if (f != std::end(kNames) && f->first == name) keys[f->second] = &*m;
  }
  return keys;
}

namespace {
// The nodes one expansion has met: open addressing, no allocation per node (a std::set's was a
// twentieth of a big schema's compile).
class NodeSet {
 public:
  // True when n was not in the set.
  bool Insert(const Node& n) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    if (Place(slots_, n)) {
      ++size_;
      return true;
    }
    return false;
  }

 private:
  static std::size_t Hash(const Node& n) {
    const std::uint64_t x = (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(n.j)) ^
                             (std::uint64_t{n.skip} << 48)) *
                            0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(x >> 32);
  }
  static bool Place(std::vector<Node>& slots, const Node& n) {
    const std::size_t mask = slots.size() - 1;
    for (std::size_t i = Hash(n) & mask;; i = (i + 1) & mask) {
      if (slots[i].j == nullptr) {
        slots[i] = n;
        return true;
      }
      if (slots[i] == n) return false;
    }
  }
  void Grow() {
    std::vector<Node> bigger(std::max<std::size_t>(64, slots_.size() * 2));
    for (const Node& n : slots_) {
      if (n.j != nullptr) Place(bigger, n);
    }
    slots_ = std::move(bigger);
  }
  std::vector<Node> slots_;  // (j null: empty; a node's j never is)
  std::size_t size_ = 0;
};
}  // namespace

Result<Flat> Model::Expand(const Conj& in) {
  Flat flat;
  bool draft7 = s_.draft() == Draft::k7;
  std::vector<Node> work(in.rbegin(), in.rend());
  NodeSet seen;
  std::vector<const json*> order;
  std::unordered_map<const json*, std::uint16_t> skips;
  std::size_t steps = 0;
  while (!work.empty()) {
    Node n = work.back();
    work.pop_back();
    if (!seen.Insert(n)) continue;
    if (++steps > 1000000) {
      return Status(StatusCode::kResourceLimit, "schema expansion too large", Loc(n.j));
    }
    if (o_.deadline.Poll()) return o_.deadline.Error(Loc(n.j));
    const json& j = *n.j;
    if (j.is_boolean()) {
      if (!j.get<bool>()) {
        flat.never = true;
        return flat;
      }
      continue;
    }
    if (!j.is_object() || j.empty()) continue;
    const NodeKeys& keys = KeysOf(n.j);
    bool original = s_.Info(n.j) != nullptr;
    if (!(n.skip & kSkipRef)) {
      if (keys[kKeyRef] != nullptr) {
        const json* t = s_.RefTarget(n.j);
        if (!t) return Status(StatusCode::kInvalidSchema, "unresolved $ref", KwLoc(n.j, "$ref"));
        work.push_back({t, 0});
        if (draft7 && original) continue;  // draft-07: $ref overrides its siblings
      }
      if (!draft7 && keys[kKeyDynamicRef] != nullptr) {
        const json* t = s_.DynamicRefTarget(n.j);
        if (!t) {
          return Status(StatusCode::kInvalidSchema, "unresolved $dynamicRef",
                        KwLoc(n.j, "$dynamicRef"));
        }
        if (t->is_object() && t->contains("$dynamicAnchor") && !UniqueDynamicAnchor(*t)) {
          return Status(StatusCode::kUnsupported,
                        "$dynamicRef to a $dynamicAnchor depends on the dynamic scope, which the "
                        "grammar cannot track",
                        KwLoc(n.j, "$dynamicRef"));
        }
        work.push_back({t, 0});
      }
      if (const json* ids = keys[kKeyLsNode]) {
        for (const json& i : *ids) work.push_back({table_[i.get<int>()], 0});
      }
    }
    if (!(n.skip & kSkipAllOf)) {
      if (const json* all = keys[kKeyAllOf]; all && all->is_array()) {
        for (auto it = all->rbegin(); it != all->rend(); ++it) work.push_back({&*it, 0});
      }
    }
    if (!(n.skip & kSkipRewrite)) {
      static constexpr std::pair<const char*, NodeKey> kRewritten[] = {
          {"not", kKeyNot},
          {"oneOf", kKeyOneOf},
          {"if", kKeyIf},
          {"dependentRequired", kKeyDependentRequired},
          {"dependentSchemas", kKeyDependentSchemas},
          {"dependencies", kKeyDependencies},
          {"unevaluatedProperties", kKeyUnevaluatedProperties},
          {"unevaluatedItems", kKeyUnevaluatedItems}};
      for (const auto& [kw, key] : kRewritten) {
        if (keys[key] == nullptr) continue;
        auto r = Rewrite(n.j, kw);
        if (!r.ok()) return r.status();
        if (*r) work.push_back({*r, 0});
      }
    }
    auto [it, added] = skips.emplace(n.j, n.skip | kSkipExpanded);
    if (added) {
      order.push_back(n.j);
    } else {
      it->second |= n.skip;
    }
  }
  // A subschema and its negation in one conjunction: nothing satisfies both. Nested oneOf / if /
  // not bring them together (branch i next to "not branch j" whose subschemas share a $ref);
  // cut here, before the alternatives of both are multiplied out (each level of such nesting
  // multiplied the work by about ten). Strict mode only: a lenient negation may be relaxed to a
  // superset of the complement.
  if (!o_.lenient) {
    for (const json* j : order) {
      auto it = negation_cache_.find(j);
      if (it != negation_cache_.end() && skips.count(it->second)) {
        flat.never = true;
        return flat;
      }
    }
  }
  if (Contradictory(order)) {
    flat.never = true;
    return flat;
  }
  for (const json* j : order) {
    std::uint16_t sk = skips[j];
    flat.leaves.push_back({j, sk});
    if (flat.split < 0 && !(sk & kSkipAnyOf) && j->is_object() &&
        KeysOf(j)[kKeyAnyOf] != nullptr) {
      flat.split = static_cast<int>(flat.leaves.size()) - 1;
    }
  }
  return flat;
}

bool Model::Contradictory(const std::vector<const json*>& leaves) const {
  std::uint8_t types = kTAll;
  std::vector<const std::string*> required, absent;
  std::vector<const json*> value_sets;  // enum arrays; a const as a one-value "set" below
  std::vector<const json*> consts;
  std::vector<const json*> with_props;  // the leaves' `properties` (objects, not empty)
  for (const json* j : leaves) {
    if (!j->is_object()) continue;
    const NodeKeys& keys = KeysOf(j);
    if (const json* t = keys[kKeyType]) types &= TypeBits(*t);
    if (const json* t = keys[kKeyLsTypes]; t && t->is_number_integer()) {
      types &= t->get<std::uint8_t>();
    }
    for (auto [kw, out] : {std::pair{kKeyRequired, &required}, std::pair{kKeyLsAbsent, &absent}}) {
      if (const json* r = keys[kw]; r && r->is_array()) {
        for (const json& x : *r)
          if (x.is_string()) out->push_back(&x.get_ref<const std::string&>());
      }
    }
    if (const json* e = keys[kKeyEnum]; e && e->is_array()) value_sets.push_back(e);
    if (const json* c = keys[kKeyConst]) consts.push_back(c);
    if (const json* props = keys[kKeyProperties]; props && props->is_object() && !props->empty()) {
      with_props.push_back(props);
    }
  }
  // The required names, sorted and once each.
  std::vector<std::string_view> names;
  names.reserve(required.size());
  for (const std::string* r : required) names.push_back(*r);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string* a : absent) {
    if (std::binary_search(names.begin(), names.end(), std::string_view(*a))) {
      types &= static_cast<std::uint8_t>(~kTObject);  // no object; other instances ignore both
      break;
    }
  }
  // A required property whose `properties` subschemas admit disjoint values (const / enum): no
  // object. allOf of `if: {properties: {kind: {const: ...}}}` / `then` pairs (one per kind) is
  // the common shape: two `if`s taken together with a negated one (which requires `kind`) are
  // cut here, so the alternatives grow with the number of kinds, not 2^kinds.
  if ((types & kTObject) && !names.empty()) {
    for (std::string_view r : with_props.empty() ? std::span<const std::string_view>()
                                                 : std::span<const std::string_view>(names)) {
      std::vector<const json*> vals;
      bool constrained = false;
      for (const json* props : with_props) {
        auto p = props->find(std::string(r));
        // (A subschema with $ref is left alone: in draft-07 its siblings would not apply.)
        if (p == props->end() || !p->is_object() || p->contains("$ref")) continue;
        std::vector<const json*> allowed;
        if (const json* c = Kw(*p, "const")) {
          allowed.push_back(c);
        } else if (const json* e = Kw(*p, "enum"); e && e->is_array() && e->size() <= 256) {
          for (const json& x : *e) allowed.push_back(&x);
        } else {
          continue;
        }
        if (!constrained) {
          vals = std::move(allowed);
          constrained = true;
          continue;
        }
        std::erase_if(vals, [&](const json* v) {
          return std::none_of(allowed.begin(), allowed.end(),
                              [&](const json* x) { return JsonEqual(*v, *x); });
        });
      }
      if (constrained && vals.empty()) {
        types &= static_cast<std::uint8_t>(~kTObject);
        break;
      }
    }
  }
  if (types == 0) return true;
  if (value_sets.empty() && consts.empty()) return false;
  // The values of one enum (or const) that the types admit and every other enum / const holds.
  std::vector<const json*> vals;
  if (!consts.empty()) {
    vals.push_back(consts[0]);
  } else {
    for (const json& x : *value_sets[0]) vals.push_back(&x);
  }
  std::erase_if(vals, [&](const json* v) { return (TypeOf(*v) & types) == 0; });
  std::size_t work = 0;
  auto keep_in = [&](auto&& holds) {
    std::erase_if(vals, [&](const json* v) { return !holds(*v); });
  };
  for (const json* c : consts) keep_in([&](const json& v) { return ++work, JsonEqual(v, *c); });
  for (const json* e : value_sets) {
    if (work + vals.size() * e->size() > 100000) break;  // big enums: left to the facts
    keep_in([&](const json& v) {
      return std::any_of(e->begin(), e->end(),
                         [&](const json& x) { return ++work, JsonEqual(v, x); });
    });
  }
  return vals.empty();
}

std::vector<Conj> Model::Alternatives(const Flat& f) const {
  std::vector<Conj> out;
  const json& any = (*f.leaves[f.split].j)["anyOf"];
  for (const json& b : any) {
    Conj c = f.leaves;
    c[f.split].skip |= kSkipAnyOf;
    c.push_back({&b, 0});
    out.push_back(std::move(c));
  }
  return out;
}

// ---- rewriting into anyOf ----

Result<std::optional<Facts>> Model::BranchFacts(const json* n) {
  auto e = ExpandCached({{n, 0}});
  if (!e->flat.ok()) return e->flat.status();
  if (e->flat->never) {
    Facts none;
    none.types = 0;
    return std::optional<Facts>(std::move(none));
  }
  if (e->flat->split >= 0) return std::optional<Facts>();
  const Result<Facts>& f = FactsOf(*e);
  if (!f.ok()) return f.status();
  return std::optional<Facts>(*f);
}

Result<bool> Model::Disjoint(const std::optional<Facts>& fa, const std::optional<Facts>& fb,
                             std::uint8_t ctx_types, const std::vector<std::string>& ctx_required) {
  // Cheap, sound tests only: disjoint types, disjoint finite value sets, or a required
  // property whose values are disjoint finite sets.
  if (!fa || !fb) return false;
  const Facts& x = *fa;
  const Facts& y = *fb;
  const std::uint8_t types = x.types & y.types & ctx_types;
  if (types == 0) return true;
  auto disjoint_values = [](const std::vector<json>& p, const std::vector<json>& q) {
    for (const json& u : p)
      for (const json& v : q)
        if (JsonEqual(u, v)) return false;
    return true;
  };
  if (x.enum_vals && y.enum_vals && disjoint_values(*x.enum_vals, *y.enum_vals)) return true;
  // Objects only on both sides, a property that either side (or the node around them) requires
  // with disjoint const/enum values: an instance of both would have it, with a value in both.
  // (One side may only constrain the value when the property is there: it is there.)
  if (types == kTObject) {
    std::vector<std::string> keys = x.required;
    keys.insert(keys.end(), y.required.begin(), y.required.end());
    keys.insert(keys.end(), ctx_required.begin(), ctx_required.end());
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    auto required_by = [](const Facts& f, const std::string& k) {
      return std::find(f.required.begin(), f.required.end(), k) != f.required.end();
    };
    // A `const` or `enum` the conjunction's nodes write themselves or through $refs: a superset
    // of the property's values, read without expanding anything (an expansion from here can
    // reach this same oneOf again through a recursive schema).
    auto written_values = [&](const Conj& c) -> std::optional<std::vector<json>> {
      for (const Node& n : c) {
        const json* j = n.j;
        for (int hops = 0; j != nullptr && j->is_object() && hops < 32; ++hops) {
          const bool ref_only = s_.draft() == Draft::k7 && j->contains("$ref") &&
                                s_.Info(j) != nullptr;  // (draft-07 ignores $ref's siblings)
          if (!ref_only) {
            if (const json* v = Kw(*j, "const")) return std::vector<json>{*v};
            if (const json* v = Kw(*j, "enum"); v && v->is_array()) {
              return std::vector<json>(v->begin(), v->end());
            }
          }
          if (!j->contains("$ref")) break;
          j = s_.RefTarget(j);
        }
      }
      return std::nullopt;
    };
    // A property one side requires that the other forbids (`additionalProperties: false`
    // without it, `"k": false`, `not: {required: [k]}`): an instance of both would have it and
    // not have it.
    auto forbids = [](const Facts& f, const Result<Conj>& c, const std::string& k) {
      if (f.absent.count(k) != 0) return true;
      if (!c.ok()) return false;
      for (const Node& n : *c)
        if (n.j->is_boolean() && !n.j->get<bool>()) return true;
      return false;
    };
    for (const std::string& k : keys) {
      auto px = PropConj(x, k);
      auto py = PropConj(y, k);
      if ((required_by(x, k) && forbids(y, py, k)) || (required_by(y, k) && forbids(x, px, k)))
        return true;
      if (!px.ok() || !py.ok()) continue;
      auto wx = written_values(*px), wy = written_values(*py);
      if (wx && wy && disjoint_values(*wx, *wy)) return true;
      // Required on both sides (or by the node around them): the values the expansion finds,
      // which also see through allOf and merged bounds.
      const bool both = std::find(ctx_required.begin(), ctx_required.end(), k) !=
                            ctx_required.end() ||
                        (required_by(x, k) && required_by(y, k));
      if (!both) continue;
      auto values = [&](const Conj& c) -> std::optional<std::vector<json>> {
        auto e = ExpandCached(c);
        if (!e->flat.ok() || e->flat->never || e->flat->split >= 0) return std::nullopt;
        const Result<Facts>& f = FactsOf(*e);
        if (!f.ok() || !f->enum_vals) return std::nullopt;
        return f->enum_vals;
      };
      auto vx = values(*px), vy = values(*py);
      if (vx && vy && disjoint_values(*vx, *vy)) return true;
    }
  }
  return false;
}

const json* Model::UnevaluatedFallback(const json* j, const char* kw) const {
  if (s_.draft() == Draft::k7 || j->contains("allOf") || j->contains("$ref")) return nullptr;
  return Kw(*j, kw);
}

// unevaluated* next to allOf / $ref (and `not`, which yields no annotations): the subschemas
// reached through them all hold when the instance is valid, so the evaluated names (items) are
// known statically: the keyword becomes additionalProperties after those names (items after
// that prefix). Applicators whose annotations depend on the instance stay unsupported.
Result<const json*> Model::RewriteUnevaluated(const json* j, const char* kw) {
  const json& v = (*j)[kw];
  if (IsTrivial(v) || s_.draft() == Draft::k7 || !(j->contains("allOf") || j->contains("$ref"))) {
    return nullptr;
  }
  const bool props = std::string(kw) == "unevaluatedProperties";
  std::string loc = KwLoc(j, kw);
  std::set<std::string> names, patterns;
  std::size_t prefix = 0;
  bool all = false;
  std::vector<const json*> stack = {j};
  std::set<const json*> seen;
  while (!stack.empty()) {
    const json* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second || !n->is_object()) continue;
    for (const char* app : {"anyOf", "oneOf", "if", "dependentSchemas", "$dynamicRef"}) {
      if (n->contains(app)) {
        return Status(StatusCode::kUnsupported,
                      std::string(kw) + " next to " + app +
                          " depends on which branches the instance satisfies",
                      loc);
      }
    }
    if (props) {
      if ((n != j && n->contains(kw)) || n->contains("additionalProperties")) all = true;
      if (const json* p = Kw(*n, "properties"); p && p->is_object())
        for (auto& [k, x] : p->items()) names.insert(k);
      if (const json* p = Kw(*n, "patternProperties"); p && p->is_object())
        for (auto& [k, x] : p->items()) patterns.insert(k);
    } else {
      if (n->contains("contains")) {
        return Status(StatusCode::kUnsupported,
                      "unevaluatedItems next to contains depends on which items match", loc);
      }
      if ((n != j && n->contains(kw)) || n->contains("items")) all = true;
      if (const json* p = Kw(*n, "prefixItems"); p && p->is_array())
        prefix = std::max(prefix, p->size());
    }
    if (n->contains("$ref")) {
      if (const json* t = s_.RefTarget(n)) stack.push_back(t);
    }
    if (const json* a = Kw(*n, "allOf"); a && a->is_array())
      for (const json& x : *a) stack.push_back(&x);
  }
  if (all) return nullptr;
  json out;
  if (props) {
    json p = json::object(), pp = json::object();
    for (const std::string& k : names) p[k] = json::object();
    for (const std::string& k : patterns) pp[k] = json::object();
    if (!p.empty()) out["properties"] = p;
    if (!pp.empty()) out["patternProperties"] = pp;
    out["additionalProperties"] = NodeRef(&v);
  } else {
    if (prefix > 0) out["prefixItems"] = json::array();
    for (std::size_t i = 0; i < prefix; ++i) out["prefixItems"].push_back(json::object());
    out["items"] = NodeRef(&v);
  }
  return MakeSynth(std::move(out), loc);
}

Result<const json*> Model::Rewrite(const json* j, const char* kw) {
  auto key = std::make_pair(j, std::string(kw));
  if (auto it = rewrite_cache_.find(key); it != rewrite_cache_.end()) return it->second;
  if (std::string(kw) == "unevaluatedProperties" || std::string(kw) == "unevaluatedItems") {
    auto r = RewriteUnevaluated(j, kw);
    if (!r.ok()) return r.status();
    rewrite_cache_[key] = *r;
    return *r;
  }

  bool draft7 = s_.draft() == Draft::k7;
  const json& v = (*j)[kw];
  std::string loc = KwLoc(j, kw);
  const json* out = nullptr;
  std::string k = kw;
  if (k == "not") {
    auto n = Negate(&v);
    if (!n.ok()) return n.status();
    out = *n;
  } else if (k == "oneOf" && v.is_array()) {
    // Each branch's facts once: n branches make n(n-1)/2 pairs.
    std::vector<std::optional<Facts>> facts;
    for (const json& b : v) {
      auto f = BranchFacts(&b);
      if (!f.ok()) return f.status();
      facts.push_back(std::move(*f));
    }
    // The oneOf's own node holds too (the rewrite stands in for this keyword of this node): its
    // type and required names narrow what the branches must tell apart.
    std::uint8_t ctx_types = kTAll;
    if (const json* t = Kw(*j, "type")) ctx_types = TypeBits(*t);
    std::vector<std::string> ctx_required;
    if (const json* r = Kw(*j, "required"); r && r->is_array()) {
      for (const json& name : *r)
        if (name.is_string()) ctx_required.push_back(name.get<std::string>());
    }
    // Which pairs may overlap: branch i must exclude only those (a branch provably disjoint
    // from i fails wherever i holds).
    std::vector<std::vector<std::size_t>> overlap(v.size());
    std::size_t most = 0;
    for (std::size_t a = 0; a < v.size(); ++a) {
      for (std::size_t b = a + 1; b < v.size(); ++b) {
        if (o_.deadline.Poll()) return o_.deadline.Error(loc);
        auto d = Disjoint(facts[a], facts[b], ctx_types, ctx_required);
        if (!d.ok()) return d.status();
        if (*d) continue;
        overlap[a].push_back(b);
        overlap[b].push_back(a);
        most = std::max({most, overlap[a].size(), overlap[b].size()});
      }
    }
    json any = json::array();
    if (most == 0) {
      for (const json& b : v) any.push_back(NodeRef(&b));
    } else if (most > static_cast<std::size_t>(std::max(o_.max_oneof_overlaps, 0))) {
      // Each branch is compiled with the negation of every branch it may overlap: the
      // expressions multiply (12 mutually overlapping branches of object schemas are about
      // 2,000,000, the default max_exprs).
      if (!o_.lenient) {
        return Status(
            StatusCode::kResourceLimit,
            "oneOf branch that may overlap " + std::to_string(most) +
                " others (not provably disjoint), past max_oneof_overlaps (" +
                std::to_string(o_.max_oneof_overlaps) +
                "; raise it, with schema_max_exprs, or compile leniently: oneOf as anyOf)",
            loc);
      }
      relaxed_.push_back({loc, "oneOf treated as anyOf (branches not provably disjoint)"});
      for (const json& b : v) any.push_back(NodeRef(&b));
    } else {
      // Exactly one: branch i and the negation of every branch it may overlap.
      for (std::size_t a = 0; a < v.size(); ++a) {
        if (overlap[a].empty()) {
          any.push_back(NodeRef(&v[a]));
          continue;
        }
        json all = json::array({NodeRef(&v[a])});
        for (std::size_t b : overlap[a]) all.push_back(json{{"not", NodeRef(&v[b])}});
        any.push_back(json{{"allOf", all}});
      }
    }
    out = MakeSynth(json{{"anyOf", any}}, loc);
  } else if (k == "if") {
    const json* then = Kw(*j, "then");
    const json* els = Kw(*j, "else");
    if (then || els) {
      json t = json::array({NodeRef(&v)});
      if (then) t.push_back(NodeRef(then));
      json e = json::array({json{{"not", NodeRef(&v)}}});
      if (els) e.push_back(NodeRef(els));
      out = MakeSynth(json{{"anyOf", json::array({json{{"allOf", t}}, json{{"allOf", e}}})}}, loc);
    }
  } else if ((k == "dependentRequired" && !draft7) || (k == "dependentSchemas" && !draft7) ||
             (k == "dependencies" && draft7)) {
    json all = json::array();
    if (v.is_object()) {
      for (auto& [name, dep] : v.items()) {
        json absent = json{{"$ls:absent", json::array({name})}};
        if (dep.is_array()) {
          if (k == "dependentSchemas" || dep.empty()) continue;
          json req = json::array({name});
          for (const json& x : dep) req.push_back(x);
          all.push_back(json{
              {"anyOf", json::array({absent, json{{"$ls:types", kTObject}, {"required", req}}})}});
        } else {
          if (k == "dependentRequired" || IsTrivial(dep)) continue;
          json present = NodeRef(&dep);
          present["$ls:types"] = kTObject;
          present["required"] = json::array({name});
          all.push_back(json{{"anyOf", json::array({absent, present})}});
        }
      }
    }
    if (!all.empty()) out = MakeSynth(json{{"allOf", all}}, loc);
  }
  rewrite_cache_[key] = out;
  return out;
}

// ---- negation ----

namespace {
// `extra` for instances of the types `t` only (a keyword that holds for every other type).
json Typed(std::uint8_t t, json extra) {
  extra["$ls:types"] = t;
  return extra;
}
}  // namespace

// The negation of one node while Negate builds it: the alternatives (the node fails exactly when
// one of them holds) and the first keyword that could not be negated.
struct Model::Negation {
  Negation(const json* node, bool is_draft7) : n(node), draft7(is_draft7) {}
  const json* n;
  bool draft7;
  json alts = json::array();
  Status failure;
};

Result<const json*> Model::Negate(const json* n) {
  if (auto it = negation_cache_.find(n); it != negation_cache_.end()) return it->second;
  std::string loc = Loc(n);
  if (n->is_boolean()) {
    const json* r = MakeSynth(json(!n->get<bool>()), loc);
    negation_cache_[n] = r;
    return r;
  }
  if (!n->is_object()) return MakeSynth(json(false), loc);
  if (negating_.size() > 1000) {
    return Status(StatusCode::kResourceLimit, "`not` over a $ref chain deeper than 1000", loc);
  }
  if (!negating_.insert(n).second) {
    return Status(StatusCode::kUnsupported, "a $ref cycle under `not` cannot be negated", loc);
  }
  Negation neg{n, s_.draft() == Draft::k7};
  bool original = s_.Info(n) != nullptr;
  bool has_ref = n->contains("$ref");
  if (has_ref) {
    const json* t = s_.RefTarget(n);
    if (t) NegateInto(neg, t);
  }
  // (In draft-07 the siblings of a $ref the schema wrote are ignored; synthetic nodes keep theirs.)
  if (!(has_ref && neg.draft7 && original)) {
    for (auto& [k, v] : n->items()) {
      if (!neg.failure.ok()) break;
      NegateKeyword(neg, k, v);
    }
  }
  negating_.erase(n);
  if (!neg.failure.ok()) return neg.failure;
  const json* r;
  if (neg.alts.empty()) {
    r = MakeSynth(json(false), loc);
  } else if (neg.alts.size() == 1) {
    r = MakeSynth(neg.alts[0], loc + "/not");
  } else {
    r = MakeSynth(json{{"anyOf", neg.alts}}, loc + "/not");
  }
  negation_cache_[n] = r;
  return r;
}

void Model::RefuseNegation(Negation& neg, const std::string& kw, const std::string& why) {
  std::string where = KwLoc(neg.n, kw);
  if (o_.lenient) {
    relaxed_.push_back({where, "negation of `" + kw + "` relaxed to true: " + why});
    neg.alts.push_back(json::object());
  } else if (neg.failure.ok()) {
    neg.failure =
        Status(StatusCode::kUnsupported,
               "`" + kw + "` cannot be negated (needed by not, oneOf or if): " + why, where);
  }
}

void Model::NegateInto(Negation& neg, const json* sub) {
  auto r = Negate(sub);
  if (!r.ok()) {
    if (neg.failure.ok()) neg.failure = r.status();
    return;
  }
  neg.alts.push_back(NodeRef(*r));
}

json Model::LazyNot(const json* sub) { return json{{"not", NodeRef(sub)}}; }

void Model::NegateKeyword(Negation& neg, const std::string& k, const json& v) {
  if (NegateValueKeyword(neg, k, v)) return;
  if (NegateMemberKeyword(neg, k, v)) return;
  if (NegateApplicator(neg, k, v)) return;
  RefuseWithoutComplement(neg, k, v);
  // Everything else is an annotation or unknown: no assertion to negate.
}

bool Model::NegateValueKeyword(Negation& neg, const std::string& k, const json& v) {
  const json& n = *neg.n;
  json& alts = neg.alts;
  if (k == "type" || k == "$ls:types") {
    std::uint8_t m = k == "type" ? TypeBits(v) : v.get<std::uint8_t>();
    if ((kTAll & ~m) != 0) alts.push_back(json{{"$ls:types", kTAll & ~m}});
  } else if (k == "enum") {
    alts.push_back(json{{"$ls:notIn", v}});
  } else if (k == "const") {
    alts.push_back(json{{"$ls:notIn", json::array({v})}});
  } else if (k == "$ls:notIn") {
    alts.push_back(json{{"enum", v}});
  } else if (k == "pattern") {
    // A string that the pattern does not match (non-strings satisfy `pattern`).
    if (v.is_string()) alts.push_back(Typed(kTString, json{{"$ls:notPattern", v}}));
  } else if (k == "$ls:notPattern") {
    if (v.is_string()) alts.push_back(Typed(kTString, json{{"pattern", v}}));
  } else if (k == "$ls:notFormat") {
    if (v.is_string()) alts.push_back(Typed(kTString, json{{"format", v}}));
  } else if (k == "multipleOf") {
    // A number that is not a multiple (non-numbers satisfy `multipleOf`).
    if (v.is_number()) alts.push_back(Typed(kTNumber, json{{"$ls:notMultipleOf", v}}));
  } else if (k == "$ls:notMultipleOf") {
    if (v.is_number()) alts.push_back(Typed(kTNumber, json{{"multipleOf", v}}));
  } else if (k == "minimum" || k == "maximum") {
    bool is_min = k == "minimum";
    const json* ex = Kw(n, is_min ? "exclusiveMinimum" : "exclusiveMaximum");
    bool excl = ex && ex->is_boolean() && ex->get<bool>();
    const char* opp =
        is_min ? (excl ? "maximum" : "exclusiveMaximum") : (excl ? "minimum" : "exclusiveMinimum");
    alts.push_back(Typed(kTNumber, json{{opp, v}}));
  } else if (k == "exclusiveMinimum" || k == "exclusiveMaximum") {
    if (!v.is_number()) return true;
    alts.push_back(Typed(kTNumber, json{{k == "exclusiveMinimum" ? "maximum" : "minimum", v}}));
  } else if (k == "minLength" || k == "minItems" || k == "minProperties") {
    std::uint8_t t = k == "minLength" ? kTString : k == "minItems" ? kTArray : kTObject;
    std::string opp = k == "minLength"  ? "maxLength"
                      : k == "minItems" ? "maxItems"
                                        : "maxProperties";
    if (v.get<double>() > 0) {
      alts.push_back(
          Typed(t, json{{opp, static_cast<std::int64_t>(std::ceil(v.get<double>())) - 1}}));
    }
  } else if (k == "maxLength" || k == "maxItems" || k == "maxProperties") {
    std::uint8_t t = k == "maxLength" ? kTString : k == "maxItems" ? kTArray : kTObject;
    std::string opp = k == "maxLength"  ? "minLength"
                      : k == "maxItems" ? "minItems"
                                        : "minProperties";
    alts.push_back(
        Typed(t, json{{opp, static_cast<std::int64_t>(std::floor(v.get<double>())) + 1}}));
  } else {
    return false;
  }
  return true;
}

bool Model::NegateMemberKeyword(Negation& neg, const std::string& k, const json& v) {
  const json& n = *neg.n;
  const bool draft7 = neg.draft7;
  json& alts = neg.alts;
  if (k == "required") {
    for (const json& name : v)
      alts.push_back(Typed(kTObject, json{{"$ls:absent", json::array({name})}}));
  } else if (k == "$ls:absent") {
    for (const json& name : v)
      alts.push_back(Typed(kTObject, json{{"required", json::array({name})}}));
  } else if (k == "properties") {
    for (auto& [name, sub] : v.items()) {
      if (IsTrivial(sub)) continue;
      alts.push_back(Typed(kTObject, json{{"required", json::array({name})},
                                          {"properties", json{{name, LazyNot(&sub)}}}}));
    }
  } else if (k == "additionalProperties" || k == "patternProperties" || k == "propertyNames" ||
             k == "$ls:someMember") {
    NegateMemberClass(neg, k, v);
  } else if (k == "items") {
    if (IsTrivial(v)) return true;
    if (v.is_array() || (!draft7 && n.contains("prefixItems"))) {
      RefuseNegation(neg, k, "items after a prefix");
    } else {
      alts.push_back(Typed(kTArray, json{{"contains", LazyNot(&v)}}));
    }
  } else if (k == "contains") {
    if (!draft7 && (n.contains("minContains") || n.contains("maxContains"))) {
      // Not (a <= matches <= b): fewer than a matches, or more than b.
      const json* lo = Kw(n, "minContains");
      const json* hi = Kw(n, "maxContains");
      const std::int64_t a = lo ? CountOf(*lo) : 1;
      if (a >= 1) {
        alts.push_back(Typed(kTArray, json{{"contains", NodeRef(&v)},
                                           {"minContains", 0},
                                           {"maxContains", a - 1}}));
      }
      if (hi) {
        alts.push_back(
            Typed(kTArray, json{{"contains", NodeRef(&v)}, {"minContains", CountOf(*hi) + 1}}));
      }
    } else {
      alts.push_back(Typed(kTArray, json{{"items", LazyNot(&v)}}));
    }
  } else if ((k == "dependentRequired" && !draft7) || (k == "dependencies" && draft7) ||
             (k == "dependentSchemas" && !draft7)) {
    for (auto& [name, dep] : v.items()) {
      if (dep.is_array()) {
        if (k == "dependentSchemas") continue;
        for (const json& other : dep) {
          alts.push_back(Typed(kTObject, json{{"required", json::array({name})},
                                              {"$ls:absent", json::array({other})}}));
        }
      } else if (k != "dependentRequired" && !IsTrivial(dep)) {
        json x = LazyNot(&dep);
        x["$ls:types"] = kTObject;
        x["required"] = json::array({name});
        alts.push_back(x);
      }
    }
  } else {
    return false;
  }
  return true;
}

// "Some member breaks it": an object with at least one member whose key is in the keyword's class
// and whose value fails its subschema ($ls:someMember, planned by ObjectExpr as a member list
// with a witness). The keys of additionalProperties are those outside `properties` matching no
// `patternProperties` pattern; of a patternProperties pattern, those it matches; propertyNames
// fails on the key itself, whatever the value. $ls:someMember negates back into the keyword
// that says every such member holds.
void Model::NegateMemberClass(Negation& neg, const std::string& k, const json& v) {
  const json& n = *neg.n;
  json& alts = neg.alts;
  if (k == "additionalProperties") {
    if (IsTrivial(v)) return;
    json names = json::array(), patterns = json::array();
    if (const json* props = Kw(n, "properties"); props && props->is_object()) {
      for (auto& [name, sub] : props->items()) names.push_back(name);
    }
    if (const json* pp = Kw(n, "patternProperties"); pp && pp->is_object()) {
      for (auto& [pat, sub] : pp->items()) patterns.push_back(pat);
    }
    alts.push_back(Typed(kTObject, json{{"$ls:someMember", json{{"names", names},
                                                                 {"notPatterns", patterns},
                                                                 {"value", LazyNot(&v)}}}}));
  } else if (k == "patternProperties") {
    if (!v.is_object()) return;
    for (auto& [pat, sub] : v.items()) {
      if (IsTrivial(sub)) continue;
      alts.push_back(Typed(
          kTObject, json{{"$ls:someMember", json{{"pattern", pat}, {"value", LazyNot(&sub)}}}}));
    }
  } else if (k == "propertyNames") {
    if (IsTrivial(v)) return;
    alts.push_back(Typed(
        kTObject, json{{"$ls:someMember", json{{"keyNot", NodeRef(&v)}, {"value", true}}}}));
  } else if (const json* key_not = Kw(v, "keyNot")) {  // $ls:someMember
    alts.push_back(json{{"propertyNames", *key_not}});
  } else if (const json* pat = Kw(v, "pattern")) {
    alts.push_back(
        json{{"patternProperties", json{{pat->get<std::string>(), LazyNot(&v.at("value"))}}}});
  } else {
    json props = json::object(), pp = json::object();
    for (const json& name : v.at("names")) props[name.get<std::string>()] = true;
    for (const json& pat : v.at("notPatterns")) pp[pat.get<std::string>()] = true;
    json every = json{{"additionalProperties", LazyNot(&v.at("value"))}};
    if (!props.empty()) every["properties"] = props;
    if (!pp.empty()) every["patternProperties"] = pp;
    alts.push_back(every);
  }
}

bool Model::NegateApplicator(Negation& neg, const std::string& k, const json& v) {
  json& alts = neg.alts;
  if (k == "$ls:node") {
    for (const json& i : v) NegateInto(neg, table_[i.get<int>()]);
  } else if (k == "anyOf") {
    json all = json::array();
    for (const json& b : v) all.push_back(LazyNot(&b));
    alts.push_back(json{{"allOf", all}});
  } else if (k == "allOf") {
    for (const json& b : v) alts.push_back(LazyNot(&b));
  } else if (k == "oneOf") {
    json none = json::array();
    for (const json& b : v) none.push_back(LazyNot(&b));
    alts.push_back(json{{"allOf", none}});
    for (std::size_t a = 0; a < v.size(); ++a)
      for (std::size_t b = a + 1; b < v.size(); ++b)
        alts.push_back(json{{"allOf", json::array({NodeRef(&v[a]), NodeRef(&v[b])})}});
  } else if (k == "not") {
    alts.push_back(NodeRef(&v));
  } else if (k == "if") {
    const json* then = Kw(*neg.n, "then");
    const json* els = Kw(*neg.n, "else");
    if (then) alts.push_back(json{{"allOf", json::array({NodeRef(&v), LazyNot(then)})}});
    if (els) alts.push_back(json{{"allOf", json::array({LazyNot(&v), LazyNot(els)})}});
  } else {
    return false;
  }
  return true;
}

void Model::RefuseWithoutComplement(Negation& neg, const std::string& k, const json& v) {
  if (k == "uniqueItems") {
    if (v.is_boolean() && v.get<bool>()) RefuseNegation(neg, k, "it would require duplicate items");
  } else if (k == "format") {
    // Unknown formats (and OpenAPI's without a constraint) assert nothing: nothing to negate.
    const std::string fmt = v.is_string() ? v.get<std::string>() : std::string();
    const bool openapi = o_.openapi_formats && IsOpenApiFormat(fmt);
    const bool asserts = openapi ? (fmt == "int32" || fmt == "int64" || fmt == "byte")
                                 : (o_.format_assertion && FormatKnown(fmt));
    if (!asserts) return;
    if (fmt == "byte" || FormatSupported(fmt)) {
      // A string that does not have the format (the complement of its automaton).
      neg.alts.push_back(Typed(kTString, json{{"$ls:notFormat", fmt}}));
      return;
    }
    RefuseNegation(neg, k, "no automaton for this format to complement");
  } else if (k == "prefixItems" || k == "additionalItems" || k == "unevaluatedProperties" ||
             k == "unevaluatedItems" || k == "$dynamicRef" || k == "minContains" ||
             k == "maxContains") {
    if (k == "minContains" || k == "maxContains") return;  // with contains
    const json& n = *neg.n;
    if (k == "additionalItems" && !(n.contains("items") && n["items"].is_array())) return;
    if (!neg.draft7 && k == "additionalItems") return;
    if (neg.draft7 && (k == "prefixItems" || k == "unevaluatedProperties" ||
                       k == "unevaluatedItems" || k == "$dynamicRef"))
      return;
    if (IsTrivial(v)) return;
    RefuseNegation(neg, k, "not expressible as a grammar");
  }
}

// ---- facts ----

namespace {

// One more format on the strings of `f`: the first is f.format, the others must hold too.
void AddFormat(Facts& f, const std::string& fmt, const std::string& where) {
  if (!f.format) f.str_loc = where;
  AddApplying(f.format, f.also_formats, fmt);
}

// Bound `v` (exclusive when `excl`) on the numbers of `f`, the lower one when `lower`: kept when
// it is tighter than the bound already there.
void Tighten(Facts& f, bool lower, const json& v, bool excl, const std::string& where) {
  std::optional<json>& bound = lower ? f.min : f.max;
  bool& bound_excl = lower ? f.min_excl : f.max_excl;
  const int tighter = bound ? CompareNumbers(v, *bound) * (lower ? 1 : -1) : 1;
  if (tighter > 0 || (tighter == 0 && excl && !bound_excl)) bound = v, bound_excl = excl;
  f.num_loc = where;
}

// BuildFacts' steps that cannot fail, like those declared in the header: keyword `k` (value `v`)
// merged into `f`, false when `k` is not one of the step's keywords.
// type, $ls:types, enum / const (the values both admit) and $ls:notIn.
bool MergeValueFacts(Facts& f, const std::string& k, const json& v) {
  if (k == "type") {
    f.types &= TypeBits(v);
  } else if (k == "$ls:types") {
    f.types &= v.get<std::uint8_t>();
  } else if (k == "enum" || k == "const") {
    std::vector<json> vals;
    if (k == "const") {
      vals.push_back(v);
    } else {
      for (const json& x : v) vals.push_back(x);
    }
    if (f.enum_vals) {
      std::vector<json> keep;
      for (const json& x : *f.enum_vals) {
        if (std::any_of(vals.begin(), vals.end(), [&](const json& y) { return JsonEqual(x, y); }))
          keep.push_back(x);
      }
      f.enum_vals = std::move(keep);
    } else {
      f.enum_vals = std::move(vals);
    }
  } else if (k == "$ls:notIn") {
    for (const json& x : v) f.not_in.push_back(x);
  } else {
    return false;
  }
  return true;
}

// The keywords the Merge*Facts below know (every name they compare `k` with: keep the two in
// step). BuildFacts skips any other member at once instead of comparing it with all of them;
// most subschemas of a real schema carry a description, a title, a $ref or an applicator.
bool IsFactKeyword(std::string_view k) {
  static constexpr std::string_view kNames[] = {
      "$ls:absent",       "$ls:notFormat",       "$ls:notIn",         "$ls:notMultipleOf",
      "$ls:notPattern",   "$ls:someMember",      "$ls:types",         "additionalItems",
      "additionalProperties", "const",           "contains",          "enum",
      "exclusiveMaximum", "exclusiveMinimum",    "format",            "items",
      "maxItems",         "maxLength",           "maxProperties",     "maximum",
      "minItems",         "minLength",           "minProperties",     "minimum",
      "multipleOf",       "pattern",             "patternProperties", "prefixItems",
      "properties",       "propertyNames",       "required",          "type",
      "unevaluatedItems", "unevaluatedProperties", "uniqueItems"};
  static_assert(std::is_sorted(std::begin(kNames), std::end(kNames)));
  return std::binary_search(std::begin(kNames), std::end(kNames), k);
}

// The object keywords: counts, required and absent names; *in_obj when the leaf constrains the
// members (properties, patternProperties, ...: planned from f.obj).
bool MergeObjectFacts(Facts& f, const std::string& k, const json& v, bool draft7, bool* in_obj) {
  if (k == "properties" || k == "patternProperties" || k == "additionalProperties" ||
      k == "propertyNames" || (k == "unevaluatedProperties" && !draft7)) {
    *in_obj = true;
  } else if (k == "required") {
    for (const json& x : v) f.required.push_back(x.get<std::string>());
  } else if (k == "$ls:absent") {
    for (const json& x : v) f.absent.insert(x.get<std::string>());
  } else if (k == "$ls:someMember") {
    f.some_members.push_back(&v);
  } else if (k == "minProperties") {
    f.min_props = std::max<std::int64_t>(f.min_props, std::ceil(v.get<double>()));
  } else if (k == "maxProperties") {
    f.max_props = f.max_props ? std::min(*f.max_props, CountOf(v)) : CountOf(v);
  } else {
    return false;
  }
  return true;
}

}  // namespace

Result<Facts> Model::BuildFacts(const Flat& flat) {
  Facts f;
  bool draft7 = s_.draft() == Draft::k7;
  for (const Node& leaf : flat.leaves) {
    const json& j = *leaf.j;
    if (!j.is_object()) continue;
    bool in_obj = false, in_arr = false;
    for (auto& [k, v] : j.items()) {
      if (!IsFactKeyword(k)) continue;
      if (MergeValueFacts(f, k, v) || MergeObjectFacts(f, k, v, draft7, &in_obj)) continue;
      LOCKSTEP_ASSIGN_OR_RETURN(bool merged, MergeNumberFacts(f, leaf.j, k, v));
      if (merged) continue;
      LOCKSTEP_ASSIGN_OR_RETURN(merged, MergeStringFacts(f, leaf.j, k, v));
      if (merged) continue;
      LOCKSTEP_ASSIGN_OR_RETURN(merged, MergeArrayFacts(f, leaf.j, k, v, &in_arr));
    }
    if (in_obj) f.obj.push_back(leaf.j);
    if (in_arr) f.arr.push_back(leaf.j);
    if (!draft7) LOCKSTEP_RETURN_IF_ERROR(DropUnevaluatedBesideApplicators(f, leaf.j));
  }
  return f;
}

Result<bool> Model::MergeNumberFacts(Facts& f, const json* leaf, const std::string& k,
                                     const json& v) {
  if (k == "minimum" || k == "maximum") {
    if (!v.is_number()) return true;
    const json* ex = Kw(*leaf, k == "minimum" ? "exclusiveMinimum" : "exclusiveMaximum");
    bool excl = ex && ex->is_boolean() && ex->get<bool>();
    Tighten(f, k == "minimum", v, excl, KwLoc(leaf, k));
  } else if ((k == "exclusiveMinimum" || k == "exclusiveMaximum") && v.is_number()) {
    Tighten(f, k == "exclusiveMinimum", v, true, KwLoc(leaf, k));
  } else if (k == "multipleOf" && v.is_number()) {
    LOCKSTEP_RETURN_IF_ERROR(MergeMultipleOf(f, v, KwLoc(leaf, k)));
  } else if (k == "$ls:notMultipleOf" && v.is_number()) {
    if (std::none_of(f.not_multiples.begin(), f.not_multiples.end(),
                     [&](const json& m) { return JsonEqual(m, v); })) {
      f.not_multiples.push_back(v);
    }
    if (f.num_loc.empty()) f.num_loc = KwLoc(leaf, k);
  } else {
    return false;
  }
  return true;
}

Status Model::MergeMultipleOf(Facts& f, const json& v, const std::string& where) {
  f.num_loc = where;
  if (!f.multiple_of || IsMultipleOf(v, *f.multiple_of)) {
    f.multiple_of = v;
  } else if (auto lcm =
                 IsMultipleOf(*f.multiple_of, v) ? std::nullopt : LcmOf(*f.multiple_of, v)) {
    // Multiples of both: exactly the multiples of their least common multiple.
    f.multiple_of = *lcm;
  } else if (!IsMultipleOf(*f.multiple_of, v)) {
    Status st(StatusCode::kUnsupported,
              "two multipleOf values (" + f.multiple_of->dump() + " and " + v.dump() +
                  ") on one number, neither a multiple of the other",
              where);
    if (!Relax(st)) return st;
  }
  return Status::Ok();
}

// OpenAPI formats (with openapi_formats): int32 / int64 are an integer range on the numbers
// (multipleOf 1 and the bounds, as the validator's CheckOpenApiFormat), byte the base64
// automaton on the strings, the others nothing. False for other formats.
Result<bool> Model::MergeOpenApiFormat(Facts& f, const json* leaf, const std::string& fmt) {
  if (!o_.openapi_formats || !IsOpenApiFormat(fmt)) return false;
  const std::string where = KwLoc(leaf, "format");
  json lo, hi;
  if (OpenApiIntegerRange(fmt, &lo, &hi)) {
    LOCKSTEP_RETURN_IF_ERROR(MergeMultipleOf(f, json(1), where));
    Tighten(f, true, lo, false, where);
    Tighten(f, false, hi, false, where);
  } else if (fmt == "byte") {
    AddFormat(f, fmt, where);
  }
  return true;
}

Result<bool> Model::MergeStringFacts(Facts& f, const json* leaf, const std::string& k,
                                     const json& v) {
  if (k == "minLength") {
    f.min_len = std::max<std::int64_t>(f.min_len, std::ceil(v.get<double>()));
  } else if (k == "maxLength") {
    auto m = static_cast<std::int64_t>(std::floor(v.get<double>()));
    f.max_len = f.max_len ? std::min(*f.max_len, m) : m;
  } else if (k == "pattern") {
    if (!v.is_string()) return true;
    const std::string& p = v.get_ref<const std::string&>();
    // Several patterns on one string: the intersection of their automata.
    if (!f.pattern) f.str_loc = KwLoc(leaf, k);
    AddApplying(f.pattern, f.also_patterns, p);
  } else if (k == "$ls:notPattern" || k == "$ls:notFormat") {
    // (From Negate: a string that matches none of these patterns / has none of these formats.)
    std::vector<std::string>& none = k == "$ls:notPattern" ? f.not_patterns : f.not_formats;
    if (v.is_string() && std::find(none.begin(), none.end(), v.get<std::string>()) == none.end()) {
      none.push_back(v.get<std::string>());
      if (f.str_loc.empty()) f.str_loc = KwLoc(leaf, k);
    }
  } else if (k == "format") {
    if (!v.is_string()) return true;
    std::string fmt = v.get<std::string>();
    LOCKSTEP_ASSIGN_OR_RETURN(bool openapi, MergeOpenApiFormat(f, leaf, fmt));
    if (openapi || !o_.format_assertion) return true;
    if (!FormatKnown(fmt)) {
      // Draft 2020-12: an unknown format is an annotation (the validator ignores it too).
      relaxed_.push_back(
          {KwLoc(leaf, k), "format \"" + fmt + "\" is unknown: an annotation, not enforced" +
                               (IsOpenApiFormat(fmt) ? " (see --openapi-formats)" : "")});
      return true;
    }
    // (`regex` is checked at run time: the schema compiler's PatternString.)
    if (!FormatSupported(fmt) && fmt != "regex") {
      if (!o_.lenient) {
        return Status(StatusCode::kUnsupported, "format \"" + fmt + "\" is not enforced",
                      KwLoc(leaf, k));
      }
      relaxed_.push_back({KwLoc(leaf, k), "format \"" + fmt + "\" not enforced"});
      return true;
    }
    AddFormat(f, fmt, KwLoc(leaf, k));
  } else {
    return false;
  }
  return true;
}

Result<bool> Model::MergeArrayFacts(Facts& f, const json* leaf, const std::string& k, const json& v,
                                    bool* in_arr) {
  const bool draft7 = s_.draft() == Draft::k7;
  if (k == "items" || (k == "prefixItems" && !draft7) || (k == "additionalItems" && draft7) ||
      (k == "unevaluatedItems" && !draft7)) {
    *in_arr = true;
  } else if (k == "minItems") {
    f.min_items = std::max<std::int64_t>(f.min_items, std::ceil(v.get<double>()));
  } else if (k == "maxItems") {
    f.max_items = f.max_items ? std::min(*f.max_items, CountOf(v)) : CountOf(v);
  } else if (k == "uniqueItems") {
    if (v.is_boolean() && v.get<bool>()) f.unique = true, f.unique_loc = KwLoc(leaf, k);
  } else if (k == "contains") {
    for (const Facts::Contains& c : f.contains)
      if (c.schema == &v) return true;
    Facts::Contains c;
    c.schema = &v;
    c.owner = leaf;
    if (!draft7) {
      if (const json* m = Kw(*leaf, "minContains")) c.min = CountOf(*m);
      if (const json* m = Kw(*leaf, "maxContains")) c.max = CountOf(*m);
    }
    f.contains.push_back(c);
  } else {
    return false;
  }
  return true;
}

// unevaluated*: exact only without in-place applicators whose annotations they would see.
Status Model::DropUnevaluatedBesideApplicators(Facts& f, const json* leaf) {
  const json& j = *leaf;
  for (const char* u : {"unevaluatedProperties", "unevaluatedItems"}) {
    const json* uv = Kw(j, u);
    if (!uv || IsTrivial(*uv)) continue;
    // (allOf / $ref next to them are rewritten in Expand, see RewriteUnevaluated.)
    if (j.contains("allOf") || j.contains("$ref")) continue;
    for (const char* app :
         {"anyOf", "oneOf", "if", "$dynamicRef", "dependentSchemas", "$ls:node", "contains"}) {
      if (std::string(app) == "contains" && std::string(u) == "unevaluatedProperties") continue;
      if (j.contains(app)) {
        Status st(StatusCode::kUnsupported,
                  std::string(u) + " next to in-place applicators (" + app +
                      ") depends on their annotations",
                  KwLoc(leaf, u));
        if (!Relax(st)) return st;
        if (std::string(u) == "unevaluatedProperties") {
          f.obj.erase(std::remove(f.obj.begin(), f.obj.end(), leaf), f.obj.end());
          if (j.contains("properties") || j.contains("patternProperties") ||
              j.contains("additionalProperties") || j.contains("propertyNames")) {
            relaxed_.back().message += "; its sibling object keywords are dropped too";
          }
        } else {
          f.arr.erase(std::remove(f.arr.begin(), f.arr.end(), leaf), f.arr.end());
          relaxed_.back().message += "; its sibling array keywords are dropped too";
        }
        break;
      }
    }
  }
  return Status::Ok();
}

Conj Model::ContainsConj(const Facts& f, std::size_t i, bool negated) {
  ArrayPlan p = PlanArray(f);
  Conj c = p.rest;
  const Facts::Contains& k = f.contains[i];
  if (!negated) {
    c.push_back({k.schema, 0});
  } else {
    auto key = std::make_pair(k.schema, std::string("$ls:notContains"));
    const json*& neg = rewrite_cache_[key];
    if (!neg) neg = MakeSynth(json{{"not", NodeRef(k.schema)}}, KwLoc(k.owner, "contains"));
    c.push_back({neg, 0});
  }
  return c;
}

}  // namespace lockstep::schema::internal
