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
constexpr double kStopFactor = 1.5;     // the max-thread half stops past 1.5x the 1-thread half
constexpr double kChangeFactor = 2.0;   // a hold ends early when steps take 2x the probe's time

}  // namespace

ThreadGovernor::ThreadGovernor(ThreadGovernorOptions options)
    : o_(options), threads_(1), hold_(options.hold) {
  NNLAB_CHECK(o_.max_threads >= 2, "ThreadGovernor: needs at least 2 threads to choose from, got ", o_.max_threads);
  NNLAB_CHECK(o_.probe_steps >= 1 && o_.hold >= 1 && o_.max_hold >= o_.hold,
              "ThreadGovernor: probe_steps and hold must be >= 1 and max_hold >= hold");
  left_ = o_.warmup_steps;
  if (left_ <= 0) start_probe();
}

void ThreadGovernor::start_probe() {
  phase_ = Phase::probe_one;
  threads_ = 1;
  left_ = o_.probe_steps;
  samples_.clear();
  ++probes_;
}

int ThreadGovernor::after_step(double seconds) {
  switch (phase_) {
    case Phase::warmup:
      if (--left_ <= 0) start_probe();
      break;
    case Phase::probe_one:
      samples_.push_back(seconds);
      if (--left_ <= 0) {
        one_thread_step_ = median(samples_);
        samples_.clear();
        phase_ = Phase::probe_max;
        threads_ = o_.max_threads;
        left_ = o_.probe_steps;
      }
      break;
    case Phase::probe_max: {
      samples_.push_back(seconds);
      --left_;
      const double budget = kStopFactor * one_thread_step_ * static_cast<double>(o_.probe_steps);
      if (sum(samples_) > budget) {
        decide(1, one_thread_step_, sum(samples_) / static_cast<double>(samples_.size()), true);
      } else if (left_ <= 0) {
        const double max_step = median(samples_);
        decide(max_step < one_thread_step_ ? o_.max_threads : 1, one_thread_step_, max_step, false);
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

void ThreadGovernor::decide(int threads, double one_thread_step, double max_thread_step, bool stopped_early) {
  if (chosen_ == threads)
    hold_ = std::min(o_.max_hold, 2 * hold_);
  else
    hold_ = o_.hold;
  if (chosen_ != 0 && chosen_ != threads) ++changes_;
  const int before = chosen_;
  chosen_ = threads;
  chosen_step_ = threads == 1 ? one_thread_step : max_thread_step;
  const std::string max_text = std::to_string(o_.max_threads) + " threads";
  decision_ = (threads == 1 ? "1 thread" : max_text) + ": a step took " + milliseconds(one_thread_step) +
              " with 1 thread and " + milliseconds(max_thread_step) + " with " + max_text +
              (stopped_early ? " (" + std::to_string(samples_.size()) + " step(s) tried; other programs are using the cores)"
                             : "") +
              (before == threads ? "; unchanged" : "");
  phase_ = Phase::hold;
  threads_ = threads;
  left_ = hold_;
  samples_.clear();
}

}  // namespace nnlab
