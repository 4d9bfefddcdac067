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
// What: the governor measures instead of guessing. It times a few steps with 1 thread and a
// few with all threads, keeps the faster, and checks again later:
//   probe      `probe_steps` steps at 1 thread, then up to `probe_steps` at max threads; the
//              max-thread half stops early once its time already exceeds 1.5x the whole
//              1-thread half (under contention that is its first step, so a probe costs
//              one slow step, not several)
//   hold       the faster count for `hold` steps; a probe that confirms the choice doubles
//              the hold (up to max_hold), so on a steady machine probes become rare
// The first steps (warm-up, untimed) run at 1 thread: on a busy machine a step at all threads
// can take 100x one at 1 thread (measured: 100 ms against 0.6 ms for the mlp), so the
// governor risks such a step only once per probe.
//   re-probe   after the hold, or at once when the median of the last 4 steps is over twice
//              the time the probe measured for the chosen count (load came or went)
// "Median" and "time" here are per step: a probe half's median, and for a stopped max-thread
// half the mean of the steps it tried.
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
  int warmup_steps = 2;        // first steps (allocations, cold caches) at 1 thread, not timed
  int probe_steps = 5;         // steps per half of a probe
  int64_t hold = 1024;         // steps between probes after a change
  int64_t max_hold = 16384;    // the hold doubles up to this while probes agree
};

class ThreadGovernor {
 public:
  explicit ThreadGovernor(ThreadGovernorOptions options);

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
  enum class Phase { warmup, probe_one, probe_max, hold };
  void start_probe();
  void decide(int threads, double one_thread_step, double max_thread_step, bool stopped_early);

  ThreadGovernorOptions o_;
  Phase phase_ = Phase::warmup;
  int threads_;
  int chosen_ = 0;              // count chosen by the last probe (0: none yet)
  int64_t left_ = 0;            // steps left in this phase
  int64_t hold_;                // length of the current hold
  double chosen_step_ = 0;      // median step time the probe measured for chosen_
  double one_thread_step_ = 0;  // median of the probe's 1-thread half
  std::vector<double> samples_; // this probe half's step times, or the hold's last 4
  std::string decision_;
  int64_t changes_ = 0, probes_ = 0;
};

}  // namespace nnlab
