// States of a byte automaton that no token can tell apart.
//
// A grammar position of DFA state s (automata/cfg/cfg_grammar.h) is what walking every token of the
// vocabulary from s does: for each token, the run of the automaton over its bytes, where it
// dies and after which prefixes the rule may finish. Two states whose runs agree on every token
// have equal positions. A format automaton counts (`email`: 63 bytes per domain label, 253 for
// the domain) and is minimal, so no two of its 25k states accept the same language; but tokens
// are short: two states that differ only in how many more bytes the domain may take look the
// same to every token once both may take more than any token holds.
//
// The fold, for a rule with byte edges only:
//   - A(s): the bytes any path from s reads. A token's run from s dies at its first byte outside
//     A(s), so its fate is decided by its longest prefix within A(s); U(s): the longest such
//     prefix over the trie.
//   - Moore's refinement of the states by (may finish) with dead apart: after r rounds, two
//     states of one class agree on every word of up to r bytes. The states reading A are
//     decided at round min(R, U), with R chosen once per rule as the round of least cost. A
//     round looks only at the predecessors of the states whose class just changed (the only
//     ones that can part from their class), not at every row (RefineToRounds).
//   - The tokens whose prefix within A is longer than R (a few long ones: in Llama-3, runs of
//     '-' reach 96 bytes while no run of letters and digits is longer than 36) are compared
//     node by node: the status (dead, alive, may finish) of every trie node on their paths.
//     A round is counted as a pass over every state's row (an upper bound since the refinement
//     looks only near the splits; kept, so the rounds chosen are the same); a long token, a
//     walk of its trie path from every state reading A: R minimises the sum (`email` on
//     Llama-3: 26 rounds and 378 nodes per state; on Mistral: 16 rounds and none).
// States with equal alphabets, equal classes at their round and equal long-token statuses agree
// on every token: one position serves them all (`email`: 25,098 states fold into 1,817 on
// Llama-3, `hostname`: 24,916 into 2,254, `date-time`: 11,048 into 1,622; docs/grammars.md has
// the figures and costs).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "automata/cfg/cfg_program.h"
#include "automata/token/token_trie.h"

namespace lockstep {

// `states`: one rule's states in rank (state) order, a rule whose states have only byte edges
// (any other rule folds nothing); `finish[i]`: the rule may finish at states[i]. Returns per rank
// the rank of the first state of its fold (its own rank when it folds with no earlier state).
// Once `deadline` (when given) has passed: no fold (every rank its own), which is correct but not
// the answer to keep.
std::vector<std::int32_t> FoldStatesForTokens(const CfgProgram& p, std::span<const StateId> states,
                                              std::span<const std::uint8_t> finish,
                                              const TokenTrie& trie,
                                              const CompileDeadline* deadline = nullptr);

// The refinement inside the fold, exposed for its test: Moore's refinement of the n states of an
// automaton over k columns (`succ`: n * k successors, -1 dead), round 0 by `finish`, round r + 1
// by the round-r classes of a state and of its successors. decided[i] is state i's class at
// round round[i] (or at the round where the classes stop splitting, if earlier), as an id: two
// states decided at the same round are in one class iff their ids are equal. Each round looks
// only at the predecessors of the states whose class changed in the round before (a counter's
// states split off a few at a time, so most rounds touch few states). False once `deadline` (when
// given) has passed.
bool RefineToRounds(std::span<const std::int32_t> succ, std::int32_t n, std::int32_t k,
                    std::span<const std::uint8_t> finish, std::span<const std::int32_t> round,
                    const CompileDeadline* deadline, std::vector<std::int32_t>& decided);

}  // namespace lockstep
