// Internals of the JSON Schema compiler shared by its files: the conjunction model (a set of
// schema nodes that apply in place to one instance), its expansion into merged facts, and the
// instance checker that mirrors the compiled semantics (enum filtering, RenderInstance).
// Private to automata/schema_compile*.cc.
#pragma once

#include <functional>
#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <span>
#include <vector>

#include "automata/schema/schema_compile.h"

namespace lockstep::schema::internal {

using json = nlohmann::json;

// Instance types as bits; "number" is kTInt | kTFrac.
enum : std::uint8_t {
  kTNull = 1,
  kTBool = 2,
  kTObject = 4,
  kTArray = 8,
  kTString = 16,
  kTInt = 32,
  kTFrac = 64,
  kTNumber = kTInt | kTFrac,
  kTAll = 127,
};

// Keywords of a node already accounted for elsewhere in the conjunction.
enum : std::uint16_t {
  kSkipRef = 1,      // $ref / $ls:node targets are in the conjunction
  kSkipAllOf = 2,    // allOf members are in the conjunction
  kSkipRewrite = 4,  // not / oneOf / if / dependent* are rewritten into the conjunction
  kSkipAnyOf = 8,    // the anyOf was split on
  kSkipExpanded = kSkipRef | kSkipAllOf | kSkipRewrite,
};

struct Node {
  const json* j = nullptr;
  std::uint16_t skip = 0;
  bool operator<(const Node& o) const { return j != o.j ? j < o.j : skip < o.skip; }
  bool operator==(const Node& o) const { return j == o.j && skip == o.skip; }
};
using Conj = std::vector<Node>;

// A conjunction after expansion: never, or leaves with at most one pending anyOf to split on.
struct Flat {
  bool never = false;
  std::vector<Node> leaves;
  int split = -1;  // index in leaves of the node whose anyOf is split
};

// The keywords of the leaves merged per instance type.
struct Facts {
  std::uint8_t types = kTAll;
  std::optional<std::vector<json>> enum_vals;
  std::vector<json> not_in;
  // numbers
  std::optional<json> min, max;
  bool min_excl = false, max_excl = false;
  std::optional<json> multiple_of;
  std::vector<json> not_multiples;  // $ls:notMultipleOf (a negated multipleOf): none of these
  std::string num_loc;
  // strings
  std::int64_t min_len = 0;
  std::optional<std::int64_t> max_len;
  std::optional<std::string> pattern;
  std::vector<std::string> also_patterns;  // more patterns the string must match (allOf)
  std::vector<std::string> not_patterns;   // patterns it must match none of (`not: {pattern}`)
  std::optional<std::string> format;
  std::vector<std::string> also_formats;  // more formats the string must have (allOf)
  std::vector<std::string> not_formats;   // formats it must have none of (`not: {format}`)
  std::string str_loc;
  // objects
  std::vector<const json*> obj;
  std::vector<std::string> required;
  std::set<std::string> absent;
  std::int64_t min_props = 0;
  std::optional<std::int64_t> max_props;
  // $ls:someMember values (negated additionalProperties, patternProperties, propertyNames): the
  // object needs, for each, at least one member whose key is in its class and whose value
  // satisfies its "value" (see Model::NegateMemberClass).
  std::vector<const json*> some_members;
  // arrays
  std::vector<const json*> arr;
  std::int64_t min_items = 0;
  std::optional<std::int64_t> max_items;
  bool unique = false;
  std::string unique_loc;
  // contains keywords (with their minContains / maxContains): each counts the items that
  // satisfy its subschema.
  struct Contains {
    const json* schema = nullptr;  // the contains subschema
    const json* owner = nullptr;   // the subschema holding the keyword
    std::int64_t min = 1;
    std::optional<std::int64_t> max;
  };
  std::vector<Contains> contains;
};

// The string keywords of `f` as one constraint (without f.not_in: callers that exclude values
// add them).
inline StringConstraint StringConstraintOf(const Facts& f) {
  StringConstraint sc;
  sc.min_length = f.min_len;
  sc.max_length = f.max_len;
  sc.pattern = f.pattern;
  sc.also_patterns = f.also_patterns;
  sc.not_patterns = f.not_patterns;
  sc.format = f.format;
  sc.also_formats = f.also_formats;
  sc.not_formats = f.not_formats;
  return sc;
}

struct Member {
  std::string key;
  bool required = false;
  bool forbidden = false;
  Conj conj;
};

struct ObjectPlan {
  bool never = false;
  std::vector<Member> members;  // declared order
  std::set<std::string> declared;
  std::unordered_map<std::string, std::size_t> member_index;  // key -> index in members
  bool extras = true;
  StringConstraint extra_key;
  bool extra_key_none = false;  // propertyNames admits no name outside the declared ones
  Conj extra_conj;
  // patternProperties, of one or more merged subschemas (groups): an extra key takes
  // extra_conj and, per group, the subschema of every pattern of that group it matches;
  // matching none of a group's, that group's rest (its additionalProperties, or none), and is
  // not allowed when that is false.
  std::vector<std::pair<std::string, const json*>> patterns;
  std::vector<std::size_t> pattern_group;  // per pattern: its group
  struct PatternGroup {
    const json* rest = nullptr;
    bool rest_allowed = true;
  };
  std::vector<PatternGroup> groups;
  std::string loc;
};

struct ArrayPlan {
  std::vector<Conj> prefix;
  Conj rest;
};

class Model {
 public:
  Model(const Schema& s, const SchemaCompileOptions& o) : s_(s), o_(o) {}

  const Schema& schema() const { return s_; }
  const SchemaCompileOptions& options() const { return o_; }
  std::vector<RelaxedKeyword>& relaxed() { return relaxed_; }
  // Lenient mode: records `st` as a relaxed keyword and returns true (the caller then drops the
  // constraint, accepting a superset); strict: false (the caller returns `st`).
  bool Relax(const Status& st) {
    // (An error because the deadline passed is never relaxed: it is no answer about the keyword.)
    if (!o_.lenient || o_.deadline.PassedNow()) return false;
    relaxed_.push_back({st.location(), st.message() + " (dropped)"});
    return true;
  }

  std::string Loc(const json* j) const;
  // Loc(j), computed once per node and kept for the Model's life (a conjunction's nodes are
  // sorted by location each time one is compiled).
  const std::string& CachedLoc(const json* j);
  std::string KwLoc(const json* j, const std::string& kw) const {
    return Loc(j) + JsonPointerSegmentOf(kw);
  }
  static std::string JsonPointerSegmentOf(const std::string& kw);

  Result<Flat> Expand(const Conj& in);
  // The alternatives of a split flat conjunction.
  std::vector<Conj> Alternatives(const Flat& f) const;
  Result<Facts> BuildFacts(const Flat& f);
  Result<ObjectPlan> PlanObject(const Facts& f);
  // Walks the alternatives `start` splits into (anyOf, oneOf, if/then/else, a negated allOf),
  // at most 64 expansions (past them kResourceLimit at `loc`: "`what` splits into more than 64
  // alternatives"), and calls `leaf` with the facts of each alternative that allows strings; a
  // non-ok status from `leaf` stops the walk and is returned.
  Status ForEachStringAlternative(Conj start, std::string_view what, const std::string& loc,
                                  const std::function<Status(Facts&)>& leaf);
  // A propertyNames union (`fl` split): the names its alternatives with finitely many names
  // allow, and at most one other alternative's class of strings.
  struct NameUnion {
    std::vector<std::string> names;
    std::optional<Facts> cls;
    bool two_classes = false;  // a second class: not one StringConstraint
  };
  Result<NameUnion> PropertyNamesUnion(const json* pn, const std::string& loc);
  // The propertyNames of an object's subschemas, merged: no name at all (`none`), a list of the
  // names allowed (`names`, intersected), a class of strings (`cls`), and the names a union
  // allows besides that class (`union_names`; only when that propertyNames is the object's only
  // one). Unions that no StringConstraint holds are kUnsupported (relaxed: dropped).
  struct MergedNames {
    bool none = false;
    std::optional<std::vector<std::string>> names;
    StringConstraint cls;
    std::set<std::string> union_names;
  };
  Result<MergedNames> MergePropertyNames(const Facts& f);
  ArrayPlan PlanArray(const Facts& f) const;
  // The conjunction a declared or extra key's value must satisfy.
  Result<Conj> PropConj(const Facts& f, const std::string& key);
  // Per object subschema of `f`, the keywords that give a key's value its subschemas, looked up
  // once for the many keys of one object: `properties` and `patternProperties` (objects, or
  // null), and `rest`, additionalProperties or else an unevaluatedProperties fallback.
  struct PropSource {
    const json* j;
    const json* props;
    const json* patterns;
    const json* rest;
  };
  std::vector<PropSource> PropSources(const Facts& f) const;
  Result<Conj> PropConj(std::span<const PropSource> sources, const std::string& key);
  // The items' conjunction (the rest of the array) with contains keyword `i` or its negation.
  Conj ContainsConj(const Facts& f, std::size_t i, bool negated);
  // unevaluatedProperties / unevaluatedItems of `j` used as a plain fallback (no allOf / $ref
  // next to it; with them it is rewritten by the annotations they produce); nullptr if none.
  const json* UnevaluatedFallback(const json* j, const char* kw) const;
  // The conjunction for the value of a key outside the declared names; nullopt: not allowed.
  Result<std::optional<Conj>> ExtraConj(const ObjectPlan& p, const std::string& key);

  // Does `v` satisfy the conjunction, under the compiled semantics. Results are memoised by
  // conjunction and value address while a CheckScope is open (Check opens one when none is),
  // and every conjunction is expanded once per Model (ExpandCached), so checking a value costs
  // one visit per (conjunction, sub-value) pair, not one per path through shared subschemas.
  // kResourceLimit, at the subschema being checked, once options().deadline has passed.
  Result<bool> Check(const Conj& c, const json& v, int depth = 0);
  // `plan`: PlanObject(f) when the caller has it.
  Result<bool> CheckFacts(const Facts& f, const json& v, int depth,
                          const ObjectPlan* plan = nullptr);
  Result<bool> StringMatches(const StringConstraint& c, const std::string& s);
  // Is `key` in the class of keys of the $ls:someMember value `some`.
  Result<bool> KeyInClass(const json& some, const std::string& key);
  // The same class as string constraints whose union it is (a negated propertyNames may split).
  Result<std::vector<StringConstraint>> WitnessKeyClasses(const json& some);
  // The value of `some` a witness member must satisfy.
  static Conj WitnessConj(const json& some) { return {{&some.at("value"), 0}}; }

  // Expand, BuildFacts and PlanObject of one conjunction (exactly as given: the order of its
  // nodes decides which anyOf is split first), each computed once per Model.
  struct Expansion {
    Result<Flat> flat = Status(StatusCode::kInternal, "not expanded");
    std::optional<Result<Facts>> facts;
    std::optional<Result<ObjectPlan>> plan;
  };
  std::shared_ptr<Expansion> ExpandCached(const Conj& c);
  const Result<Facts>& FactsOf(Expansion& e);
  const Result<ObjectPlan>& PlanOf(Expansion& e);
  // Keeps Check's results while it is open (the values checked must outlive it).
  class CheckScope {
   public:
    explicit CheckScope(Model* m) : m_(m) { ++m_->check_scopes_; }
    ~CheckScope() {
      if (--m_->check_scopes_ == 0) m_->check_memo_.clear();
    }
    CheckScope(const CheckScope&) = delete;
    CheckScope& operator=(const CheckScope&) = delete;

   private:
    Model* m_;
  };

  // The negation of a node as a synthetic node (shallow: subschemas are negated lazily).
  Result<const json*> Negate(const json* n);
  const json* MakeSynth(json j, const std::string& loc);
  json NodeRef(const json* n);

  // Finite set of values a conjunction admits, when it is small and known (uniqueItems).
  Result<std::optional<std::vector<json>>> FiniteValues(const Conj& c, int depth = 0);

 private:
  Result<const json*> Rewrite(const json* j, const char* kw);
  Result<const json*> RewriteUnevaluated(const json* j, const char* kw);

  // Negate's steps, on the negation of one node as it is built (schema_compile_model.cc).
  struct Negation;
  // The alternatives that negate keyword `k` (value `v`) of the node; the steps it tries return
  // false when `k` is not one of their keywords.
  void NegateKeyword(Negation& neg, const std::string& k, const json& v);
  // type, enum / const, bounds and lengths: the values of the same type outside them.
  bool NegateValueKeyword(Negation& neg, const std::string& k, const json& v);
  // required / absent names, properties, items, contains, dependencies: a member that fails.
  bool NegateMemberKeyword(Negation& neg, const std::string& k, const json& v);
  // $ls:node, anyOf, allOf, oneOf, not, if: through their subschemas and those negated.
  bool NegateApplicator(Negation& neg, const std::string& k, const json& v);
  // additionalProperties, patternProperties, propertyNames: some member in the keyword's class
  // fails it ($ls:someMember); $ls:someMember: every member of its class holds.
  void NegateMemberClass(Negation& neg, const std::string& k, const json& v);
  // uniqueItems, format, multipleOf, pattern and the keywords whose negation no grammar
  // expresses: RefuseNegation, unless the keyword asserts nothing there.
  void RefuseWithoutComplement(Negation& neg, const std::string& k, const json& v);
  // Lenient: keyword `kw` negated to true (a superset), recorded as relaxed; strict: the
  // negation's failure when it is the first.
  void RefuseNegation(Negation& neg, const std::string& kw, const std::string& why);
  // The negation of the subschema `sub` as one alternative (its error: the negation's failure).
  void NegateInto(Negation& neg, const json* sub);
  // {"not": sub}: `sub` negated only once that alternative is expanded.
  json LazyNot(const json* sub);

  // BuildFacts' steps: keyword `k` (value `v`) of `leaf` merged into `f`; false when `k` is not
  // one of the step's keywords; in strict mode an error when the merge would not be exact.
  Result<bool> MergeNumberFacts(Facts& f, const json* leaf, const std::string& k, const json& v);
  Result<bool> MergeStringFacts(Facts& f, const json* leaf, const std::string& k, const json& v);
  Status MergeMultipleOf(Facts& f, const json& v, const std::string& where);
  Result<bool> MergeOpenApiFormat(Facts& f, const json* leaf, const std::string& fmt);
  // *in_arr: the leaf constrains the items (planned from f.arr).
  Result<bool> MergeArrayFacts(Facts& f, const json* leaf, const std::string& k, const json& v,
                               bool* in_arr);
  // unevaluatedProperties / unevaluatedItems of `leaf` next to in-place applicators whose
  // annotations they would see: an error, or (lenient) the leaf's object or array keywords
  // dropped from `f`.
  Status DropUnevaluatedBesideApplicators(Facts& f, const json* leaf);
  void RegisterLocs(const json* j, const std::string& loc);
  // The facts of one oneOf branch for Disjoint; nullopt when it splits (no cheap test).
  Result<std::optional<Facts>> BranchFacts(const json* n);
  // Disjoint within the oneOf's own node: its `type` (ctx_types) and `required` (ctx_required)
  // hold for every instance the oneOf is asked about.
  Result<bool> Disjoint(const std::optional<Facts>& a, const std::optional<Facts>& b,
                        std::uint8_t ctx_types = kTAll,
                        const std::vector<std::string>& ctx_required = {});
  // Sound, cheap emptiness tests on the keywords of expanded leaves alone (a pending anyOf only
  // narrows the conjunction further): disjoint types, a property both required and absent (then
  // no object), enum / const values that the types or another enum exclude. Expand cuts such a
  // conjunction at once, before its alternatives are multiplied out: a oneOf of n object
  // branches that are not provably disjoint expands into n times the product of the negated
  // branches' alternatives, most of them of a type or a presence the branch excludes.
  bool Contradictory(const std::vector<const json*>& leaves) const;

  // The keywords Expand and Contradictory ask of every subschema they meet, found in one pass
  // over the subschema's members the first time it is met. An expansion asks each of its
  // subschemas about twenty keywords, and the same subschemas come back in thousands of
  // conjunctions: one map lookup per keyword each time was a third of the compile of
  // JsonSchemaStore's task.json (3,842 rules). Subschemas are never changed once made (the
  // schema's own, and MakeSynth's, kept in a deque), so their addresses are their identity.
  // (One compile's Model is used by one thread: the caches are not locked.)
  enum NodeKey : std::uint8_t {
    kKeyRef,
    kKeyDynamicRef,
    kKeyLsNode,
    kKeyAllOf,
    kKeyAnyOf,
    kKeyNot,
    kKeyOneOf,
    kKeyIf,
    kKeyDependentRequired,
    kKeyDependentSchemas,
    kKeyDependencies,
    kKeyUnevaluatedProperties,
    kKeyUnevaluatedItems,
    kKeyType,
    kKeyLsTypes,
    kKeyRequired,
    kKeyLsAbsent,
    kKeyEnum,
    kKeyConst,
    kKeyProperties,
    kNumNodeKeys
  };
  using NodeKeys = std::array<const json*, kNumNodeKeys>;
  // (All null for a `j` that is not an object.)
  const NodeKeys& KeysOf(const json* j) const;
  mutable std::unordered_map<const json*, NodeKeys> node_keys_;
  std::unordered_map<const json*, std::string> loc_cache_;

  const Schema& s_;
  SchemaCompileOptions o_;
  std::vector<RelaxedKeyword> relaxed_;
  std::deque<json> synth_;
  std::unordered_map<const json*, std::string> synth_loc_;
  std::vector<const json*> table_;
  std::unordered_map<const json*, int> table_index_;
  std::map<std::pair<const json*, std::string>, const json*> rewrite_cache_;
  std::unordered_map<const json*, const json*> negation_cache_;
  std::set<const json*> negating_;
  struct Scratch {
    grammar::Grammar g;
    grammar::ExprId e = -1;
    Status status;
  };
  std::map<std::string, std::unique_ptr<Scratch>> scratch_;
  std::map<std::string, std::shared_ptr<const ByteDfa>> lexeme_dfas_;
  std::map<std::string, int> dynamic_anchor_counts_;
  // ExpandCached: by the conjunction's bytes; dropped whole past kMaxExpansions entries.
  std::unordered_map<std::string, std::shared_ptr<Expansion>> expansions_;
  // Check: by the sorted conjunction's bytes and the value's address, while a scope is open.
  std::unordered_map<std::string, bool> check_memo_;
  int check_scopes_ = 0;
  // Keys checked as instances (propertyNames of a witness): one stable address per key, as
  // Check's memo requires.
  std::unordered_map<std::string, json> key_values_;
  bool UniqueDynamicAnchor(const json& target);

  friend bool IrMatch(Model*, const grammar::Grammar&, grammar::ExprId, const std::string&);
  std::set<std::size_t> Ends(const grammar::Grammar& g, grammar::ExprId e, const std::string& t,
                             std::size_t pos, int depth);
};

// Helpers on JSON values.
std::uint8_t TypeOf(const json& v);
std::uint8_t TypeBits(const json& type_keyword);
bool IsIntegral(const json& v);
using ::lockstep::schema::CompareNumbers;  // shared with the validator (json_schema.h)
using ::lockstep::schema::JsonEqual;
using ::lockstep::schema::IsMultipleOf;
using ::lockstep::schema::CodePoints;
using ::lockstep::schema::FormatKnown;
using ::lockstep::schema::IsOpenApiFormat;
using ::lockstep::schema::OpenApiIntegerRange;
// `first` is the first of a list of strings that all apply (patterns, formats), `more` the
// others: x is added once.
inline void AddApplying(std::optional<std::string>& first, std::vector<std::string>& more,
                        const std::string& x) {
  if (!first) {
    first = x;
  } else if (*first != x && std::find(more.begin(), more.end(), x) == more.end()) {
    more.push_back(x);
  }
}
// The least common multiple of two positive JSON numbers, exact in decimal (nullopt when too
// large).
std::optional<json> LcmOf(const json& a, const json& b);
// The value rendered under the formatting policy, in its own member order. `float_point`: a
// number held as a double with a zero fraction keeps it ("1.0"): in draft-04 it is no integer.
std::string RenderPlain(const json& v, int indent, int depth, bool float_point = false);
std::string RenderScalar(const json& v, bool float_point = false);
// "" when compact (indent < 0), else a newline and depth * indent spaces.
std::string Newline(int indent, int depth);

}  // namespace lockstep::schema::internal
