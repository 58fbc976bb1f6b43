// Object and array plans of the JSON Schema compiler (which key gets which subschema, which
// item gets which) and the instance checker under the same semantics: it filters enum values
// exactly, picks the anyOf branch RenderInstance follows, and evaluates string terminals by
// running their IR on the rendered string. Internal to automata/schema_compile*.cc.
#include <algorithm>
#include <map>
#include <tuple>

#include "automata/schema/schema_compile_internal.h"
#include "grammar/regex/ecma_pattern.h"

namespace lockstep::schema::internal {

namespace {
const json* Kw(const json& j, const char* k) {
  auto it = j.find(k);
  return it == j.end() ? nullptr : &*it;
}
bool IsFalse(const json& j) { return j.is_boolean() && !j.get<bool>(); }

// The string keywords of one propertyNames subschema (its facts `nf`), merged into `names`:
// lengths tightened, every pattern and format applies (their intersection), negated ones and
// excluded values added.
void MergeNameStrings(const Facts& nf, StringConstraint& names) {
  names.min_length = std::max(names.min_length, nf.min_len);
  if (nf.max_len) {
    names.max_length = names.max_length ? std::min(*names.max_length, *nf.max_len) : *nf.max_len;
  }
  if (nf.pattern) AddApplying(names.pattern, names.also_patterns, *nf.pattern);
  for (const std::string& p : nf.also_patterns) AddApplying(names.pattern, names.also_patterns, p);
  names.not_patterns.insert(names.not_patterns.end(), nf.not_patterns.begin(),
                            nf.not_patterns.end());
  if (nf.format) AddApplying(names.format, names.also_formats, *nf.format);
  for (const std::string& f : nf.also_formats) AddApplying(names.format, names.also_formats, f);
  names.not_formats.insert(names.not_formats.end(), nf.not_formats.begin(), nf.not_formats.end());
  for (const json& v : nf.not_in) {
    if (v.is_string()) names.excluded.push_back(v.get<std::string>());
  }
}

// The keys of a $ls:someMember class without keyNot: those a pattern matches, or those outside
// the names that match none of the patterns.
StringConstraint ClassKeys(const json& some) {
  StringConstraint sc;
  if (const json* pat = Kw(some, "pattern")) {
    sc.pattern = pat->get<std::string>();
  } else {
    for (const json& n : some.at("names")) sc.excluded.push_back(n.get<std::string>());
    for (const json& p : some.at("notPatterns")) sc.not_patterns.push_back(p.get<std::string>());
  }
  return sc;
}

}  // namespace

std::vector<Model::PropSource> Model::PropSources(const Facts& f) const {
  std::vector<PropSource> out;
  out.reserve(f.obj.size());
  for (const json* j : f.obj) {
    PropSource src{j, Kw(*j, "properties"), Kw(*j, "patternProperties"),
                   Kw(*j, "additionalProperties")};
    if (src.props != nullptr && !src.props->is_object()) src.props = nullptr;
    if (src.patterns != nullptr && !src.patterns->is_object()) src.patterns = nullptr;
    if (src.rest == nullptr) src.rest = UnevaluatedFallback(j, "unevaluatedProperties");
    out.push_back(src);
  }
  return out;
}

Result<Conj> Model::PropConj(const Facts& f, const std::string& key) {
  return PropConj(PropSources(f), key);
}

Result<Conj> Model::PropConj(std::span<const PropSource> sources, const std::string& key) {
  Conj c;
  for (const PropSource& src : sources) {
    bool matched = false;
    if (src.props != nullptr) {
      if (auto it = src.props->find(key); it != src.props->end()) {
        c.push_back({&*it, 0});
        matched = true;  // patternProperties still apply to declared names
      }
    }
    if (src.patterns != nullptr) {
      for (auto& [pat, sub] : src.patterns->items()) {
        StringConstraint sc;
        sc.pattern = pat;
        auto m = StringMatches(sc, key);
        if (!m.ok()) {
          return Status(m.status().code(), m.status().message(),
                        KwLoc(src.j, "patternProperties") + JsonPointerSegmentOf(pat));
        }
        if (*m) matched = true, c.push_back({&sub, 0});
      }
    }
    if (!matched && src.rest != nullptr) c.push_back({src.rest, 0});
  }
  return c;
}

Status Model::ForEachStringAlternative(Conj start, std::string_view what, const std::string& loc,
                                       const std::function<Status(Facts&)>& leaf) {
  std::vector<Conj> work = {std::move(start)};
  std::size_t steps = 0;
  while (!work.empty()) {
    Conj c = std::move(work.back());
    work.pop_back();
    if (++steps > 64) {
      return Status(StatusCode::kResourceLimit,
                    std::string(what) + " splits into more than 64 alternatives", loc);
    }
    LOCKSTEP_ASSIGN_OR_RETURN(Flat fl, Expand(c));
    if (fl.never) continue;
    if (fl.split >= 0) {
      for (Conj& alt : Alternatives(fl)) work.push_back(std::move(alt));
      continue;
    }
    LOCKSTEP_ASSIGN_OR_RETURN(Facts nf, BuildFacts(fl));
    if (!(nf.types & kTString)) continue;
    LOCKSTEP_RETURN_IF_ERROR(leaf(nf));
  }
  return Status::Ok();
}

Result<Model::NameUnion> Model::PropertyNamesUnion(const json* pn, const std::string& loc) {
  NameUnion u;
  Status st = ForEachStringAlternative({{pn, 0}}, "propertyNames", loc, [&](Facts& nf) -> Status {
    if (nf.enum_vals) {
      for (const json& v : *nf.enum_vals) {
        if (!v.is_string()) continue;
        LOCKSTEP_ASSIGN_OR_RETURN(bool ok, CheckFacts(nf, v, 0));
        if (ok) u.names.push_back(v.get<std::string>());
      }
    } else if (u.cls) {
      u.two_classes = true;  // stops the walk: the caller refuses (or relaxes) this union
      return Status(StatusCode::kUnsupported, "two classes", loc);
    } else {
      u.cls = std::move(nf);
    }
    return Status::Ok();
  });
  if (!st.ok() && !u.two_classes) return st;
  return u;
}

Result<Model::MergedNames> Model::MergePropertyNames(const Facts& f) {
  MergedNames out;
  std::size_t with_names = 0;
  for (const json* j : f.obj) with_names += Kw(*j, "propertyNames") != nullptr;
  auto intersect_enum = [&](const std::vector<std::string>& values) {
    std::vector<std::string> keep;
    for (const std::string& v : values) {
      if (!out.names || std::count(out.names->begin(), out.names->end(), v)) keep.push_back(v);
    }
    out.names = std::move(keep);
  };
  for (const json* j : f.obj) {
    const json* pn = Kw(*j, "propertyNames");
    if (!pn) continue;
    std::string loc = KwLoc(j, "propertyNames");
    auto fl = Expand({{pn, 0}});
    if (!fl.ok()) return fl.status();
    if (fl->never) {
      out.none = true;
      continue;
    }
    if (fl->split >= 0) {
      // A union: names from its finite alternatives, at most one class from another.
      LOCKSTEP_ASSIGN_OR_RETURN(NameUnion u, PropertyNamesUnion(pn, loc));
      Status st = Status::Ok();
      if (u.two_classes) {
        st = Status(StatusCode::kUnsupported,
                    "propertyNames whose alternatives make two classes of names (only one "
                    "besides lists of names is enforced)",
                    loc);
      } else if (u.cls && !u.names.empty() && with_names > 1) {
        st = Status(StatusCode::kUnsupported,
                    "propertyNames of several subschemas, one a union of names and a class", loc);
      }
      if (!st.ok()) {
        if (!Relax(st)) return st;
        continue;
      }
      if (!u.cls) {
        intersect_enum(u.names);
      } else {
        MergeNameStrings(*u.cls, out.cls);
        out.union_names.insert(u.names.begin(), u.names.end());
      }
      continue;
    }
    auto nf = BuildFacts(*fl);
    if (!nf.ok()) return nf.status();
    if (!(nf->types & kTString)) out.none = true;
    if (nf->enum_vals) {
      std::vector<std::string> values;
      for (const json& v : *nf->enum_vals)
        if (v.is_string()) values.push_back(v.get<std::string>());
      intersect_enum(values);
    }
    MergeNameStrings(*nf, out.cls);
  }
  return out;
}

Result<ObjectPlan> Model::PlanObject(const Facts& f) {
  ObjectPlan p;
  LOCKSTEP_ASSIGN_OR_RETURN(MergedNames merged, MergePropertyNames(f));
  const bool names_none = merged.none;
  const std::optional<std::vector<std::string>>& names_enum = merged.names;
  const StringConstraint& names = merged.cls;
  const std::set<std::string>& union_names = merged.union_names;
  auto name_ok = [&](const std::string& k) -> Result<bool> {
    if (names_none) return false;
    if (union_names.count(k) != 0) return true;  // (the object's only propertyNames)
    if (names_enum && !std::count(names_enum->begin(), names_enum->end(), k)) return false;
    return StringMatches(names, k);
  };
  // Declared members: the names of every `properties` (in declared order, merged subschemas by
  // their location), then required-only names, then names a propertyNames enum allows (both
  // sorted). A function of the set of subschemas, not of the order they were merged in, so the
  // grammar and RenderInstance agree.
  // A name's rank is the least (group, where, place) it is offered at. `where` numbers the
  // subschemas' locations in their sorted order (equal locations alike): comparing the numbers
  // orders as comparing the locations did, without copying a location per name.
  // (Each subschema's keywords looked up once, not once per key: an object of 30 names under
  // seven merged subschemas asked them 1,500 times.)
  const std::vector<PropSource> sources = PropSources(f);
  std::vector<std::pair<const std::string*, std::size_t>> locs;  // (location, index in f.obj)
  for (std::size_t x = 0; x < sources.size(); ++x) {
    if (sources[x].props != nullptr) locs.emplace_back(&CachedLoc(sources[x].j), x);
  }
  std::sort(locs.begin(), locs.end(), [](const auto& a, const auto& b) {
    return *a.first != *b.first ? *a.first < *b.first : a.second < b.second;
  });
  std::vector<std::size_t> where_of(f.obj.size(), 0);
  for (std::size_t n = 0, ordinal = 0; n < locs.size(); ++n) {
    if (n > 0 && *locs[n].first != *locs[n - 1].first) ++ordinal;
    where_of[locs[n].second] = ordinal;
  }
  using Rank = std::tuple<int, std::size_t, std::size_t>;
  std::map<std::string, Rank> rank;
  auto offer = [&](const std::string& k, int group, std::size_t where, std::size_t i) {
    const Rank key{group, where, i};
    auto [it, added] = rank.emplace(k, key);
    if (!added && key < it->second) it->second = key;
  };
  for (std::size_t x = 0; x < sources.size(); ++x) {
    const json* j = sources[x].j;
    const json* props = sources[x].props;
    if (props == nullptr) continue;
    const std::size_t where = where_of[x];
    std::size_t i = 0;
    const NodeInfo* info = s_.Info(j);
    if (o_.property_order && info && info->doc == 0) {
      auto it = o_.property_order->find(info->pointer + "/properties");
      if (it != o_.property_order->end()) {
        for (const std::string& k : it->second)
          if (props->contains(k)) offer(k, 0, where, i++);
      }
    }
    for (auto& [k, v] : props->items()) offer(k, 0, where, i++);
  }
  for (const std::string& k : f.required) offer(k, 1, 0, 0);
  if (names_enum)
    for (const std::string& k : *names_enum) offer(k, 2, 0, 0);
  for (const std::string& k : union_names) offer(k, 2, 0, 0);
  // By rank, names of equal rank by name (the map's order).
  std::vector<std::pair<Rank, const std::string*>> ranked;
  ranked.reserve(rank.size());
  for (const auto& [k, r] : rank) ranked.emplace_back(r, &k);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> order;
  order.reserve(ranked.size());
  for (const auto& [r, k] : ranked) order.push_back(*k);
  p.declared.insert(order.begin(), order.end());
  for (const std::string& k : order) {
    Member m;
    m.key = k;
    m.required = std::count(f.required.begin(), f.required.end(), k) > 0;
    auto ok = name_ok(k);
    if (!ok.ok()) return ok.status();
    m.forbidden = f.absent.count(k) > 0 || !*ok;
    if (m.forbidden && m.required) p.never = true;
    auto c = PropConj(sources, k);
    if (!c.ok()) return c.status();
    m.conj = std::move(*c);
    p.member_index.emplace(m.key, p.members.size());
    p.members.push_back(std::move(m));
  }
  // Extra properties: keys outside the declared names (and the propertyNames constraints).
  std::vector<const json*> pattern_nodes;
  for (const json* j : f.obj) {
    const json* pp = Kw(*j, "patternProperties");
    if (pp && pp->is_object() && !pp->empty()) {
      pattern_nodes.push_back(j);
      continue;
    }
    if (const json* a = Kw(*j, "additionalProperties")) {
      p.extra_conj.push_back({a, 0});
    } else if (const json* u = UnevaluatedFallback(j, "unevaluatedProperties")) {
      p.extra_conj.push_back({u, 0});
    }
  }
  p.extra_key = names;
  // Each subschema with patternProperties is a group: its patterns, and its rest for the keys
  // matching none of them (merged subschemas' classes are the sets of patterns of all groups
  // one key matches together: PatternKinds).
  for (const json* j : pattern_nodes) {
    if (p.loc.empty()) p.loc = KwLoc(j, "patternProperties");
    const std::size_t g = p.groups.size();
    for (auto& [pat, sub] : (*j)["patternProperties"].items()) {
      p.patterns.emplace_back(pat, &sub);
      p.pattern_group.push_back(g);
    }
    ObjectPlan::PatternGroup group;
    group.rest = Kw(*j, "additionalProperties");
    if (!group.rest) group.rest = UnevaluatedFallback(j, "unevaluatedProperties");
    group.rest_allowed = !(group.rest && IsFalse(*group.rest));
    p.groups.push_back(group);
  }
  for (const std::string& k : p.declared) p.extra_key.excluded.push_back(k);
  for (const std::string& k : f.absent)
    if (!p.declared.count(k)) p.extra_key.excluded.push_back(k);
  if (names_none || names_enum) p.extras = false;
  return p;
}

Result<std::optional<Conj>> Model::ExtraConj(const ObjectPlan& p, const std::string& key) {
  using Out = std::optional<Conj>;
  if (!p.extras) return Out();
  auto ok = StringMatches(p.extra_key, key);
  if (!ok.ok()) return ok.status();
  if (!*ok) return Out();
  Conj c = p.extra_conj;
  std::vector<bool> matched(p.groups.size(), false);
  for (std::size_t t = 0; t < p.patterns.size(); ++t) {
    StringConstraint sc;
    sc.pattern = p.patterns[t].first;
    auto m = StringMatches(sc, key);
    if (!m.ok()) return m.status();
    if (*m) matched[p.pattern_group[t]] = true, c.push_back({p.patterns[t].second, 0});
  }
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    if (matched[g]) continue;
    if (!p.groups[g].rest_allowed) return Out();
    if (p.groups[g].rest) c.push_back({p.groups[g].rest, 0});
  }
  return Out(std::move(c));
}

ArrayPlan Model::PlanArray(const Facts& f) const {
  bool draft7 = s_.draft() == Draft::k7;
  ArrayPlan p;
  std::vector<std::pair<std::vector<const json*>, const json*>> per;
  std::size_t longest = 0;
  for (const json* j : f.arr) {
    std::vector<const json*> pre;
    const json* rest = nullptr;
    const json* items = Kw(*j, "items");
    if (draft7) {
      if (items && items->is_array()) {
        for (const json& x : *items) pre.push_back(&x);
        rest = Kw(*j, "additionalItems");
      } else {
        rest = items;
      }
    } else {
      if (const json* pi = Kw(*j, "prefixItems"); pi && pi->is_array())
        for (const json& x : *pi) pre.push_back(&x);
      rest = items ? items : UnevaluatedFallback(j, "unevaluatedItems");
    }
    longest = std::max(longest, pre.size());
    per.emplace_back(std::move(pre), rest);
  }
  p.prefix.resize(longest);
  for (std::size_t i = 0; i < longest; ++i) {
    for (auto& [pre, rest] : per) {
      if (i < pre.size()) {
        p.prefix[i].push_back({pre[i], 0});
      } else if (rest) {
        p.prefix[i].push_back({rest, 0});
      }
    }
  }
  for (auto& [pre, rest] : per)
    if (rest) p.rest.push_back({rest, 0});
  return p;
}

// ---- checking ----

namespace {
// A conjunction's nodes as bytes, field by field (Node has padding), in the order given.
void AppendConjBytes(const Conj& c, std::string* out) {
  for (const Node& n : c) {
    const auto addr = reinterpret_cast<std::uintptr_t>(n.j);
    out->append(reinterpret_cast<const char*>(&addr), sizeof(addr));
    out->append(reinterpret_cast<const char*>(&n.skip), sizeof(n.skip));
  }
}
// Past this many, the expansions kept are dropped (a bound on memory; they are recomputed). An
// expansion with its facts and object plan is a few KB: 200,000 of them held 680 MB while a
// real-world schema's overlapping oneOf (11 open-object branches, each negated in the others)
// was rendered up to its deadline; 20,000 hold about 300 MB, and the wild subsets' compiles and
// renders run no slower.
constexpr std::size_t kMaxExpansions = 20000;
}  // namespace

std::shared_ptr<Model::Expansion> Model::ExpandCached(const Conj& c) {
  std::string key;
  AppendConjBytes(c, &key);
  if (auto it = expansions_.find(key); it != expansions_.end()) return it->second;
  auto e = std::make_shared<Expansion>();
  e->flat = Expand(c);
  // A budget or the deadline running out is no answer about this conjunction: not kept.
  if (!e->flat.ok() && e->flat.status().code() == StatusCode::kResourceLimit) return e;
  if (expansions_.size() >= kMaxExpansions) expansions_.clear();
  expansions_.emplace(std::move(key), e);
  return e;
}

const Result<Facts>& Model::FactsOf(Expansion& e) {
  if (!e.facts) e.facts.emplace(BuildFacts(*e.flat));
  return *e.facts;
}

const Result<ObjectPlan>& Model::PlanOf(Expansion& e) {
  if (!e.plan) e.plan.emplace(PlanObject(*FactsOf(e)));
  return *e.plan;
}

Result<bool> Model::Check(const Conj& c, const json& v, int depth) {
  if (depth > 2000) {
    return Status(StatusCode::kResourceLimit, "schema evaluation nested too deeply",
                  c.empty() ? "" : Loc(c[0].j));
  }
  if (o_.deadline.Poll()) return o_.deadline.Error(c.empty() ? "" : Loc(c[0].j));
  CheckScope scope(this);
  // The answer does not depend on the order of the conjunction's nodes.
  Conj sorted = c;
  std::sort(sorted.begin(), sorted.end());
  std::string key;
  AppendConjBytes(sorted, &key);
  const auto addr = reinterpret_cast<std::uintptr_t>(&v);
  key.append(reinterpret_cast<const char*>(&addr), sizeof(addr));
  if (auto it = check_memo_.find(key); it != check_memo_.end()) return it->second;
  std::shared_ptr<Expansion> e = ExpandCached(c);
  if (!e->flat.ok()) return e->flat.status();
  const Flat& fl = *e->flat;
  Result<bool> r = false;
  if (fl.never) {
    r = false;
  } else if (fl.split >= 0) {
    for (const Conj& alt : Alternatives(fl)) {
      r = Check(alt, v, depth + 1);
      if (!r.ok() || *r) break;
    }
  } else {
    const Result<Facts>& f = FactsOf(*e);
    if (!f.ok()) return f.status();
    const ObjectPlan* plan = nullptr;
    if (v.is_object() && ((*f).types & kTObject)) {
      const Result<ObjectPlan>& p = PlanOf(*e);
      if (!p.ok()) return p.status();
      plan = &*p;
    }
    r = CheckFacts(*f, v, depth, plan);
  }
  if (r.ok()) check_memo_.emplace(std::move(key), *r);
  return r;
}

Result<bool> Model::CheckFacts(const Facts& f, const json& v, int depth, const ObjectPlan* plan) {
  if (!(f.types & TypeOf(v))) return false;
  auto eq = [&](const json& x) { return JsonEqual(x, v); };
  if (f.enum_vals && std::none_of(f.enum_vals->begin(), f.enum_vals->end(), eq)) return false;
  if (std::any_of(f.not_in.begin(), f.not_in.end(), eq)) return false;
  if (v.is_number()) {
    if (f.min) {
      int c = CompareNumbers(v, *f.min);
      if (c < 0 || (c == 0 && f.min_excl)) return false;
    }
    if (f.max) {
      int c = CompareNumbers(v, *f.max);
      if (c > 0 || (c == 0 && f.max_excl)) return false;
    }
    if (f.multiple_of && !IsMultipleOf(v, *f.multiple_of)) return false;
    for (const json& m : f.not_multiples)
      if (IsMultipleOf(v, m)) return false;
    return true;
  }
  if (v.is_string()) {
    return StringMatches(StringConstraintOf(f), v.get<std::string>());
  }
  if (v.is_object()) {
    std::optional<Result<ObjectPlan>> own;
    if (plan == nullptr) {
      own.emplace(PlanObject(f));
      if (!own->ok()) return own->status();
      plan = &**own;
    }
    const ObjectPlan* p = plan;
    if (p->never) return false;
    auto n = static_cast<std::int64_t>(v.size());
    if (n < f.min_props || (f.max_props && n > *f.max_props)) return false;
    for (const std::string& r : f.required)
      if (!v.contains(r)) return false;
    for (auto& [k, val] : v.items()) {
      auto at = p->member_index.find(k);
      const Member* m = at == p->member_index.end() ? nullptr : &p->members[at->second];
      Result<bool> r = false;
      if (m != nullptr) {
        if (m->forbidden) return false;
        r = Check(m->conj, val, depth + 1);
      } else {
        auto c = ExtraConj(*p, k);
        if (!c.ok()) return c.status();
        if (!*c) return false;
        r = Check(**c, val, depth + 1);
      }
      if (!r.ok() || !*r) return r;
    }
    for (const json* some : f.some_members) {
      bool found = false;
      for (auto& [k, val] : v.items()) {
        LOCKSTEP_ASSIGN_OR_RETURN(bool in, KeyInClass(*some, k));
        if (!in) continue;
        LOCKSTEP_ASSIGN_OR_RETURN(found, Check(WitnessConj(*some), val, depth + 1));
        if (found) break;
      }
      if (!found) return false;
    }
    return true;
  }
  if (v.is_array()) {
    auto n = static_cast<std::int64_t>(v.size());
    if (n < f.min_items || (f.max_items && n > *f.max_items)) return false;
    ArrayPlan p = PlanArray(f);
    for (std::size_t i = 0; i < v.size(); ++i) {
      auto r = Check(i < p.prefix.size() ? p.prefix[i] : p.rest, v[i], depth + 1);
      if (!r.ok() || !*r) return r;
    }
    if (f.unique) {
      for (std::size_t i = 0; i < v.size(); ++i)
        for (std::size_t j = i + 1; j < v.size(); ++j)
          if (JsonEqual(v[i], v[j])) return false;
    }
    for (const Facts::Contains& c : f.contains) {
      std::int64_t matches = 0;
      for (const json& item : v) {
        auto r = Check({{c.schema, 0}}, item, depth + 1);
        if (!r.ok()) return r;
        matches += *r;
      }
      if (matches < c.min || (c.max && matches > *c.max)) return false;
    }
    return true;
  }
  return true;
}

Result<bool> Model::KeyInClass(const json& some, const std::string& key) {
  if (const json* key_not = Kw(some, "keyNot")) {
    const json& k = key_values_.try_emplace(key, key).first->second;
    LOCKSTEP_ASSIGN_OR_RETURN(bool holds, Check({{key_not, 0}}, k));
    return !holds;
  }
  return StringMatches(ClassKeys(some), key);
}

Result<std::vector<StringConstraint>> Model::WitnessKeyClasses(const json& some) {
  std::vector<StringConstraint> out;
  const json* key_not = Kw(some, "keyNot");
  if (!key_not) {
    out.push_back(ClassKeys(some));
    return out;
  }
  // The strings propertyNames rejects: its negation over strings, one class per alternative.
  LOCKSTEP_ASSIGN_OR_RETURN(const json* neg, Negate(key_not));
  const json* strings = MakeSynth(json{{"type", "string"}}, Loc(key_not));
  LOCKSTEP_RETURN_IF_ERROR(ForEachStringAlternative(
      {{neg, 0}, {strings, 0}}, "the negation of propertyNames", Loc(key_not),
      [&](Facts& nf) -> Status {
        if (nf.enum_vals) {
          return Status(StatusCode::kUnsupported,
                        "the negation of propertyNames is a list of names (enum or const)",
                        Loc(key_not));
        }
        StringConstraint sc;
        MergeNameStrings(nf, sc);
        out.push_back(std::move(sc));
        return Status::Ok();
      }));
  return out;
}

Result<std::optional<std::vector<json>>> Model::FiniteValues(const Conj& c, int depth) {
  using Out = std::optional<std::vector<json>>;
  if (depth > 50) return Out();
  auto fl = Expand(c);
  if (!fl.ok()) return fl.status();
  if (fl->never) return Out(std::vector<json>{});
  std::vector<json> out;
  auto add = [&](const json& x) {
    if (std::none_of(out.begin(), out.end(), [&](const json& y) { return JsonEqual(x, y); }))
      out.push_back(x);
  };
  if (fl->split >= 0) {
    for (const Conj& alt : Alternatives(*fl)) {
      auto r = FiniteValues(alt, depth + 1);
      if (!r.ok()) return r.status();
      if (!*r) return Out();
      for (const json& x : **r) add(x);
    }
    return Out(out);
  }
  auto f = BuildFacts(*fl);
  if (!f.ok()) return f.status();
  std::vector<json> cands;
  if (f->enum_vals) {
    cands = *f->enum_vals;
  } else if ((f->types & ~(kTNull | kTBool)) == 0) {
    cands = {json(nullptr), json(false), json(true)};
  } else {
    return Out();
  }
  for (const json& x : cands) {
    auto ok = CheckFacts(*f, x, depth);
    if (!ok.ok()) return ok.status();
    if (*ok) add(x);
  }
  return Out(out);
}

// ---- string terminals, evaluated on their IR ----

Result<bool> Model::StringMatches(const StringConstraint& c, const std::string& s) {
  auto n = static_cast<std::int64_t>(CodePoints(s));
  if (n < c.min_length || (c.max_length && n > *c.max_length)) return false;
  if (std::count(c.excluded.begin(), c.excluded.end(), s)) return false;
  // Each further pattern and format on its own: s must match every one of also_* and none of
  // not_*.
  auto each = [&](const std::vector<std::string>& list, bool format, bool want) -> Result<bool> {
    for (const std::string& x : list) {
      StringConstraint one;
      (format ? one.format : one.pattern) = x;
      LOCKSTEP_ASSIGN_OR_RETURN(bool m, StringMatches(one, s));
      if (m != want) return false;
    }
    return true;
  };
  for (const auto& [list, format, want] :
       {std::tuple(&c.also_patterns, false, true), std::tuple(&c.not_patterns, false, false),
        std::tuple(&c.also_formats, true, true), std::tuple(&c.not_formats, true, false)}) {
    LOCKSTEP_ASSIGN_OR_RETURN(bool ok, each(*list, format, want));
    if (!ok) return false;
  }
  if (c.format && *c.format == "regex") {
    // (No automaton: the pattern syntax is checked as the validator checks it.)
    if (!IsEcmaPattern(s)) return false;
    StringConstraint rest;
    rest.pattern = c.pattern;
    return StringMatches(rest, s);
  }
  if (!c.pattern && !c.format) return true;
  std::string key = c.pattern.value_or("") + '\0' + c.format.value_or("") + (c.pattern ? "p" : "") +
                    (c.format ? "f" : "");
  auto& slot = scratch_[key];
  if (!slot) {
    slot = std::make_unique<Scratch>();
    StringConstraint only;
    only.pattern = c.pattern;
    only.format = c.format;
    auto e = AddStringExpr(&slot->g, only, o_.lexical);
    if (e.ok()) {
      slot->e = *e;
    } else {
      slot->status = e.status();
    }
  }
  if (!slot->status.ok()) {
    if (slot->status.code() == StatusCode::kUnsatisfiable) return false;
    return slot->status;
  }
  std::string text = RenderJsonString(s);
  auto ends = Ends(slot->g, slot->e, text, 0, 0);
  return ends.count(text.size()) > 0;
}

std::set<std::size_t> Model::Ends(const grammar::Grammar& g, grammar::ExprId id,
                                  const std::string& t, std::size_t pos, int depth) {
  using grammar::ExprKind;
  std::set<std::size_t> out;
  if (depth > 200) return out;
  const grammar::Expr& e = g.expr(id);
  auto run_dfa = [&](const ByteDfa& dfa) {
    StateId s = dfa.start;
    if (s == ByteDfa::kDead) return;
    if (dfa.IsAccepting(s)) out.insert(pos);
    for (std::size_t i = pos; i < t.size(); ++i) {
      s = dfa.Step(s, static_cast<std::uint8_t>(t[i]));
      if (s == ByteDfa::kDead) return;
      if (dfa.IsAccepting(s)) out.insert(i + 1);
    }
  };
  switch (e.kind) {
    case ExprKind::kEmpty:
      out.insert(pos);
      break;
    case ExprKind::kLiteral:
      if (t.compare(pos, e.text.size(), e.text) == 0) out.insert(pos + e.text.size());
      break;
    case ExprKind::kCharClass: {
      if (pos >= t.size()) break;
      auto c = static_cast<unsigned char>(t[pos]);
      std::size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      if (pos + len > t.size()) break;
      std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
      for (std::size_t i = 1; i < len; ++i)
        cp = (cp << 6) | (static_cast<unsigned char>(t[pos + i]) & 0x3F);
      for (const auto& r : e.ranges) {
        if (cp >= static_cast<std::uint32_t>(r.lo) && cp <= static_cast<std::uint32_t>(r.hi)) {
          out.insert(pos + len);
          break;
        }
      }
      break;
    }
    case ExprKind::kRuleRef:
      return Ends(g, g.rule(e.rule).body, t, pos, depth + 1);
    case ExprKind::kSequence: {
      std::set<std::size_t> cur = {pos};
      for (grammar::ExprId c : e.children) {
        std::set<std::size_t> next;
        for (std::size_t p : cur) {
          auto r = Ends(g, c, t, p, depth + 1);
          next.insert(r.begin(), r.end());
        }
        cur = std::move(next);
        if (cur.empty()) break;
      }
      return cur;
    }
    case ExprKind::kChoice:
      for (grammar::ExprId c : e.children) {
        auto r = Ends(g, c, t, pos, depth + 1);
        out.insert(r.begin(), r.end());
      }
      break;
    case ExprKind::kRepeat: {
      std::set<std::size_t> cur = {pos};
      if (e.min == 0) out.insert(pos);
      for (std::int64_t k = 1; e.max == grammar::Expr::kUnbounded || k <= e.max; ++k) {
        std::set<std::size_t> next;
        for (std::size_t p : cur) {
          auto r = Ends(g, e.children[0], t, p, depth + 1);
          next.insert(r.begin(), r.end());
        }
        if (next.empty() || (next == cur && k > e.min)) break;
        cur = std::move(next);
        if (k >= e.min) {
          std::size_t before = out.size();
          out.insert(cur.begin(), cur.end());
          if (out.size() == before && k > e.min + 1 && k > static_cast<std::int64_t>(t.size()) + 1)
            break;
        }
        if (k > static_cast<std::int64_t>(t.size()) + e.min + 2) break;
      }
      break;
    }
    case ExprKind::kLexeme: {
      auto& dfa = lexeme_dfas_[e.text];
      if (!dfa) {
        auto d = CompileRegexToDfa(e.text);
        dfa = std::make_shared<ByteDfa>(d.ok() ? std::move(*d) : ByteDfa{});
      }
      run_dfa(*dfa);
      break;
    }
    case ExprKind::kByteDfa:
      if (e.dfa) run_dfa(*e.dfa);
      break;
    case ExprKind::kSpecialToken:
      break;
  }
  return out;
}

}  // namespace lockstep::schema::internal
