// SampleRegex: draws random strings from a regex by walking its RegexAst, independently of the
// NFA/DFA code, for the completeness and exactness tests of the regex and token layers; and
// ToRe2Pattern, which spells a pattern for RE2, the tests' oracle.
#pragma once

#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace lockstep {

// Returns a random string that fully matches `pattern`, or nullopt if the pattern does not
// parse or matches no string. Unbounded * and + (and {m,}) repeat min + [0, max_repeat_extra]
// times; bounded {m,n} draws from [m, min(n, m + max_repeat_extra)]; a class draws an ASCII
// member most of the time when it has one, else any member (so non-ASCII, non-BMP too).
std::optional<std::string> SampleRegex(std::string_view pattern, std::mt19937_64& rng,
                                       int max_repeat_extra = 3);

// Rewrites a pattern in our syntax into RE2 syntax with the same full-match language over valid
// UTF-8, for using RE2 as an oracle: \uXXXX, surrogate pairs and \u{X} become \x{X}; `.`, \s
// and \S spell out ECMA's sets; (?<name> becomes (?P<name>; [] and [^] become explicit ranges.
// nullopt for what has no simple RE2 spelling (\S inside a class) or a pattern we reject.
std::optional<std::string> ToRe2Pattern(std::string_view pattern);

}  // namespace lockstep
