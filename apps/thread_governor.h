// How many CPU threads a training step should use when other programs may be busy on the
// same cores.
//
// Why: a step of a small model is many short parallel regions (one per op, forward and
// backward), each ending at a barrier where every thread of the team must arrive. On an idle
// machine that costs microseconds. When another program keeps the cores busy, the OS
// deschedules one of nnlab's threads now and then, and every barrier it has not reached
// waits for it to get a core back: a scheduler time slice, milliseconds. Measured on this
// project's 2-core machine beside a busy 2-thread program, an mlp step took 72 ms with 2
// threads and under 1 ms with 1 thread (docs/benchmarks-history.md). One thread has no barriers.
//
// What: the governor measures instead of guessing. It climbs a ladder of thread counts (1, 2,
// 4, 8, ... and the pool's size: 1 and 2 on two cores, 1, 2, 4, 8, 16 on sixteen), times a few
// steps at each, keeps the fastest, and checks again later:
//   probe      `probe_steps` steps at 1 thread, then up the ladder `probe_steps` steps a rung.
//              A rung stops early once its time already exceeds 1.5x the best rung's whole
//              half (under contention that is its first step, so a probe costs one slow
//              step, not several), and the climb ends at the first rung no faster than the
//              best below it: more threads than that only add barriers (a step's parallel
//              loops are short, and their speed-up flattens before it falls)
//   hold       the fastest count for `hold` steps; a probe that confirms the choice doubles
//              the hold (up to max_hold), so on a steady machine probes become rare
// The first steps (warm-up, untimed) run at 1 thread: on a busy machine a step at all threads
// can take 100x one at 1 thread (measured: 100 ms against 0.6 ms for the mlp), so the
// governor risks such a step only once per probe.
//   re-probe   after the hold, or at once when the median of the last 4 steps is over twice
//              the time the probe measured for the chosen count (load came or went)
// "Median" and "time" here are per step: a rung's median, and for a stopped rung the mean of
// the steps it tried.
// It only advises: the caller applies the count (host_cpu::set_threads). Pure logic, so the
// mechanism is tested with made-up step times (tests/test_thread_governor.cpp), and it lives
// with its one user, the trainer, rather than in the CPU backend: it times steps, not cores.
//
// Results: nnlab's sums are split over threads, so a run whose thread count changes is not
// bit-identical to one that keeps it. `--threads N` pins the count (no governor) for runs
// that must repeat bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nnlab {

struct ThreadGovernorOptions {
  int max_threads = 2;         // the pool's size: all cores by default
  int physical_cores = 0;      // the cores' physical count, a rung of its own where it is not one
  int warmup_steps = 2;        // first steps (allocations, cold caches) at 1 thread, not timed
  int probe_steps = 5;         // steps per half of a probe
  int64_t hold = 1024;         // steps between probes after a change
  int64_t max_hold = 16384;    // the hold doubles up to this while probes agree
};

class ThreadGovernor {
 public:
  explicit ThreadGovernor(ThreadGovernorOptions options);

  // The counts a probe may try, ascending: 1, the powers of two below max_threads, the
  // physical cores where fewer than max_threads (one thread a core before two), max_threads.
  static std::vector<int> ladder(int max_threads, int physical_cores = 0);

  // The thread count for the next step, given the wall time of the step just done.
  int after_step(double seconds);
  int threads() const { return threads_; }
  // The count the last probe chose (0 before the first): what a log reports, not the probes.
  int chosen() const { return chosen_; }
  // The last decision as a sentence (for the log), and how many times the count changed.
  const std::string& last_decision() const { return decision_; }
  int64_t changes() const { return changes_; }
  int64_t probes() const { return probes_; }

 private:
  enum class Phase { warmup, probe, hold };
  void start_probe();
  void next_rung();
  void decide(bool stopped_early);

  ThreadGovernorOptions o_;
  std::vector<int> ladder_;
  Phase phase_ = Phase::warmup;
  int threads_;
  int chosen_ = 0;              // count chosen by the last probe (0: none yet)
  int64_t left_ = 0;            // steps left in this phase (or rung)
  int64_t hold_;                // length of the current hold
  double chosen_step_ = 0;      // median step time the probe measured for chosen_
  size_t rung_ = 0;             // the ladder rung being probed
  size_t best_ = 0;             // the fastest rung so far in this probe
  std::vector<double> rung_steps_;  // this probe's step time per rung tried
  std::vector<double> samples_;     // this rung's step times, or the hold's last 4
  std::string decision_;
  int64_t changes_ = 0, probes_ = 0;
};

}  // namespace nnlab
