// PositionWorker: the one background thread of a vocabulary (attached to its token trie, next to
// the positions its grammars share) that computes the positions of grammars after their first
// mask (CompileOptions::background_positions), so that a sequence rarely meets a position for the
// first time inside a fill. A host has idle cores while the model runs; this uses one.
//
// Grammars are queued by the Matcher after their first fill and moved to the front whenever a
// fill had to walk a position itself: the grammar being decoded now goes first. The worker takes
// the front grammar, runs one slice of its work (CfgGrammar::BackgroundSlice, about 200 µs) and
// looks at the queue again, so a new grammar waits at most one slice. It holds a grammar only
// weakly between slices: a grammar freed by its users is dropped from the queue.
#pragma once

#include <memory>

namespace lockstep {

class CompiledGrammar;

class PositionWorker {
 public:
  PositionWorker();
  // Stops the thread and joins it; on the worker's own thread (its last grammar reference
  // released there freed the vocabulary's trie) it is detached instead and ends by itself.
  ~PositionWorker();
  PositionWorker(const PositionWorker&) = delete;
  PositionWorker& operator=(const PositionWorker&) = delete;

  // Queues `grammar` at the front (or moves it there when queued already). `id` names the job
  // (the grammar's CfgGrammar); cheap, and called only on a first fill or a fill that walked.
  void Submit(std::weak_ptr<const CompiledGrammar> grammar, const void* id);
  // Blocks until the queue is empty and no slice is running (tests, benchmarks).
  void WaitIdle();

  // Fills come first. A fill (CfgSequence::Fill) holds a FillScope; while any is held in the
  // process, the workers wait before their next position (YieldToFills). A worker's walk runs
  // on another core but not for free: it competes with the fill for the shared cache and memory
  // (on this project's 2-core machine, back-to-back fills were 10-20% slower at the median with
  // the worker on, and their p99 up to twice). The worker gets the time between fills, which is
  // what a host leaves it while the model runs.
  class FillScope {
   public:
    FillScope();
    ~FillScope();
    FillScope(const FillScope&) = delete;
    FillScope& operator=(const FillScope&) = delete;
  };
  // On a worker's thread: returns once no fill is running (at once when none is). Elsewhere
  // (a fill, a compile's precompute): returns at once.
  static void YieldToFills();

 private:
  struct State;
  static void Run(std::shared_ptr<State> st);
  std::shared_ptr<State> state_;
};

}  // namespace lockstep
