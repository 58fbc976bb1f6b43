// Exactness harness for grammar constraints: the fast token mask of a Matcher against a
// brute-force mask that tries every vocabulary id on the matcher itself (AcceptToken, then
// Rollback), along seeded random walks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"

namespace lockstep::testing {

using Mask = std::vector<std::uint32_t>;

// One GrammarCompiler per vocabulary name (Vocabulary::Load), kept for the whole test binary.
const GrammarCompiler& CompilerFor(const std::string& vocab);

// Every id tried on `m` (which is left unchanged): allowed iff AcceptToken succeeds.
Mask BruteForceMask(Matcher& m);

// The brute-force mask to compare with `fast`, the matcher's own mask at the same state. At full
// scale it is BruteForceMask(m). At a reduced LOCKSTEP_TEST_SCALE (below 1: the sanitizer run,
// which looks for memory and UB errors along these paths; exactness over the whole vocabulary
// is the full-scale run's) it tries a sample: every id of at most two bytes, the ids without
// bytes (EOS, specials) and one id in 16 of the rest, which ones rotating from call to call; an
// id not tried keeps `fast`'s bit. `tried`, when given, receives the ids tried.
Mask BruteForceMaskFor(Matcher& m, const Mask& fast, Mask* tried = nullptr);

// 16 at a reduced LOCKSTEP_TEST_SCALE, 1 (every id) at full scale.
int BruteForceStride();
std::vector<TokenId> AllowedIds(const Mask& mask);

struct WalkStats {
  long steps = 0;
  long over = 0;    // ids the fast mask allows and brute force rejects
  long under = 0;   // ids brute force allows and the fast mask rejects
  long walks = 0;
  long completed = 0;  // walks that ended with EOS
  long dead_ends = 0;  // states before termination where brute force allows no id at all
  std::string first_mismatch;  // description of the first mismatch, for the failure message
  std::string first_dead_end;  // the text of the first dead end

  bool Exact() const { return over == 0 && under == 0 && dead_ends == 0; }
  // "N steps, N walks (N ended with EOS), N over, N under, N dead ends".
  std::string Summary() const;
  // The first mismatch and the first dead end, for a failure message.
  std::string Failure() const;
};

// Random walks from the start state: at each step compares the masks, then picks an allowed
// token (half the time one with punctuation, to move through the grammar's structure; past
// `target_len` tokens EOS whenever allowed). A walk ends at EOS or 3 * target_len tokens.
WalkStats ExactnessWalks(const std::shared_ptr<const CompiledGrammar>& grammar, long steps,
                         std::uint64_t seed, int target_len = 40);

}  // namespace lockstep::testing
