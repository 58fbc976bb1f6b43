#include "automata/cfg/position_worker.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "automata/cfg/cfg_grammar.h"
#include "lockstep/compiler.h"

namespace lockstep {

namespace {
// A slice of one grammar's work before the queue is looked at again.
constexpr double kSliceUs = 200;
// Fills running now, in the whole process (FillScope).
std::atomic<std::int32_t> g_fills{0};
// Set on a worker's thread: only there does YieldToFills wait.
thread_local bool t_is_worker = false;
}  // namespace

PositionWorker::FillScope::FillScope() { g_fills.fetch_add(1, std::memory_order_relaxed); }
PositionWorker::FillScope::~FillScope() { g_fills.fetch_sub(1, std::memory_order_relaxed); }

void PositionWorker::YieldToFills() {
  if (!t_is_worker) return;
  // Short sleeps: a fill takes a microsecond to a few hundred; the wait ends soon after the last.
  while (g_fills.load(std::memory_order_relaxed) > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Shared by the PositionWorker and its thread, so that the thread can end safely after the
// worker object was destroyed on it.
struct PositionWorker::State {
  struct Job {
    std::weak_ptr<const CompiledGrammar> grammar;
    const void* id;
  };
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<Job> jobs;
  bool stop = false;
  bool busy = false;
  std::thread::id thread_id;
};

void PositionWorker::Run(std::shared_ptr<State> st) {
  t_is_worker = true;
  // The lowest priority (nice 19, this thread only): a fill thread woken on the worker's core (a
  // host thread back from its model step) preempts it at once instead of waiting out its time
  // slice. Measured with a 1 ms step between fills (Snowplow sp_339): at normal priority, fills
  // of 2.2-2.7 ms wall clock whose CPU time was under 0.5 ms while the worker computed
  // positions; at nice 19 (or SCHED_IDLE) none over 0.4 ms. Not SCHED_IDLE: on a host whose
  // cores are all busy, a worker holding a store lock would wait longer for its turn, and fills
  // with it. Best effort: unchanged where it is not allowed.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
  for (;;) {
    std::shared_ptr<const CompiledGrammar> g;
    const void* id = nullptr;
    {
      std::unique_lock<std::mutex> lock(st->mu);
      st->wake.wait(lock, [&] { return st->stop || !st->jobs.empty(); });
      if (st->stop) return;
      g = st->jobs.front().grammar.lock();
      id = st->jobs.front().id;
      if (!g || CfgOf(*g) == nullptr) {
        st->jobs.pop_front();
        if (st->jobs.empty()) st->idle.notify_all();
        continue;
      }
      st->busy = true;
    }
    const bool more = CfgOf(*g)->BackgroundSlice(kSliceUs);
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (!more) {
        auto it = std::find_if(st->jobs.begin(), st->jobs.end(),
                               [&](const State::Job& j) { return j.id == id; });
        if (it != st->jobs.end()) st->jobs.erase(it);
      }
      st->busy = false;
      if (st->jobs.empty()) st->idle.notify_all();
    }
    // Outside the lock: the last reference may free the grammar and with it the trie that owns
    // this worker (whose destructor then runs here and takes the lock).
    g.reset();
  }
}

PositionWorker::PositionWorker() : state_(std::make_shared<State>()) {
  std::thread t(Run, state_);
  state_->thread_id = t.get_id();
  t.detach();
}

PositionWorker::~PositionWorker() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->stop = true;
  state_->jobs.clear();
  state_->wake.notify_all();
  if (std::this_thread::get_id() == state_->thread_id) return;  // ends after this slice
  // Not joined (the thread is detached so that it may outlive this object on its own thread):
  // wait until it is out of any slice. A slice holds a grammar, which holds the trie that owns
  // this worker, so none can be running here; the wait is for the loop's bookkeeping.
  state_->idle.wait(lock, [&] { return !state_->busy; });
}

void PositionWorker::Submit(std::weak_ptr<const CompiledGrammar> grammar, const void* id) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->stop) return;
  auto it = std::find_if(state_->jobs.begin(), state_->jobs.end(),
                         [&](const State::Job& j) { return j.id == id; });
  if (it != state_->jobs.end()) {
    if (it == state_->jobs.begin()) return;
    state_->jobs.erase(it);
  }
  state_->jobs.push_front({std::move(grammar), id});
  state_->wake.notify_one();
}

void PositionWorker::WaitIdle() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->idle.wait(lock, [&] { return state_->stop || (state_->jobs.empty() && !state_->busy); });
}

}  // namespace lockstep
