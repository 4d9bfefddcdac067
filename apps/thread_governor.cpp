#include "apps/thread_governor.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace nnlab {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f ms", 1e3 * seconds);
  return text;
}

constexpr size_t kRecent = 4;           // steps whose median is watched while holding
constexpr double kStopFactor = 1.5;     // a rung stops past 1.5x the best rung's whole time
constexpr double kChangeFactor = 2.0;   // a hold ends early when steps take 2x the probe's time

}  // namespace

std::vector<int> ThreadGovernor::ladder(int max_threads, int physical_cores) {
  std::vector<int> counts;
  for (int n = 1; n < max_threads; n *= 2) counts.push_back(n);
  if (physical_cores > 1 && physical_cores < max_threads) counts.push_back(physical_cores);
  counts.push_back(max_threads);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

ThreadGovernor::ThreadGovernor(ThreadGovernorOptions options)
    : o_(options), ladder_(ladder(std::max(options.max_threads, 1), options.physical_cores)), threads_(1), hold_(options.hold) {
  NNLAB_CHECK(o_.max_threads >= 2, "ThreadGovernor: needs at least 2 threads to choose from, got ", o_.max_threads);
  NNLAB_CHECK(o_.probe_steps >= 1 && o_.hold >= 1 && o_.max_hold >= o_.hold,
              "ThreadGovernor: probe_steps and hold must be >= 1 and max_hold >= hold");
  left_ = o_.warmup_steps;
  if (left_ <= 0) start_probe();
}

void ThreadGovernor::start_probe() {
  phase_ = Phase::probe;
  rung_ = best_ = 0;
  rung_steps_.clear();
  threads_ = ladder_[0];
  left_ = o_.probe_steps;
  samples_.clear();
  ++probes_;
}

// The rung just finished was timed (rung_steps_.back()): climb on while it beat the best.
void ThreadGovernor::next_rung() {
  const bool faster = rung_ == 0 || rung_steps_[rung_] < rung_steps_[best_];
  if (faster) best_ = rung_;
  if (!faster || rung_ + 1 == ladder_.size()) return decide(false);
  ++rung_;
  threads_ = ladder_[rung_];
  left_ = o_.probe_steps;
  samples_.clear();
}

int ThreadGovernor::after_step(double seconds) {
  switch (phase_) {
    case Phase::warmup:
      if (--left_ <= 0) start_probe();
      break;
    case Phase::probe: {
      samples_.push_back(seconds);
      --left_;
      const double budget = kStopFactor * (rung_ == 0 ? 0 : rung_steps_[best_]) * static_cast<double>(o_.probe_steps);
      if (rung_ > 0 && sum(samples_) > budget) {
        rung_steps_.push_back(sum(samples_) / static_cast<double>(samples_.size()));
        decide(true);
        break;
      }
      if (left_ <= 0) {
        rung_steps_.push_back(median(samples_));
        next_rung();
      }
      break;
    }
    case Phase::hold:
      samples_.push_back(seconds);
      if (samples_.size() > kRecent) samples_.erase(samples_.begin());
      if (--left_ <= 0 || (samples_.size() == kRecent && median(samples_) > kChangeFactor * chosen_step_)) {
        if (left_ > 0) {
          decision_ = "steps at " + std::to_string(threads_) + " thread(s) now take " + milliseconds(median(samples_)) +
                      ", over twice the " + milliseconds(chosen_step_) + " measured: measuring again";
          hold_ = o_.hold;  // the machine changed: the next confirmation starts the backoff anew
        }
        start_probe();
      }
      break;
  }
  return threads_;
}

// The probe ends: the best rung's count holds. The decision names every rung tried, e.g.
// "4 threads: a step took 1.00 ms with 1 thread, 0.55 ms with 2, 0.31 ms with 4, 0.33 ms with 8".
void ThreadGovernor::decide(bool stopped_early) {
  const int threads = ladder_[best_];
  if (chosen_ == threads)
    hold_ = std::min(o_.max_hold, 2 * hold_);
  else
    hold_ = o_.hold;
  if (chosen_ != 0 && chosen_ != threads) ++changes_;
  const int before = chosen_;
  chosen_ = threads;
  chosen_step_ = rung_steps_[best_];
  decision_ = std::to_string(threads) + (threads == 1 ? " thread" : " threads") + ": a step took " +
              milliseconds(rung_steps_[0]) + " with 1 thread";
  for (size_t k = 1; k < rung_steps_.size(); ++k)
    decision_ += (k + 1 == rung_steps_.size() ? " and " : ", ") + milliseconds(rung_steps_[k]) + " with " +
                 std::to_string(ladder_[k]) + (k + 1 == rung_steps_.size() ? " threads" : "");
  if (stopped_early)
    decision_ += " (" + std::to_string(samples_.size()) + " step(s) tried; other programs are using the cores)";
  if (before == threads) decision_ += "; unchanged";
  phase_ = Phase::hold;
  threads_ = threads;
  left_ = hold_;
  samples_.clear();
}

}  // namespace nnlab
