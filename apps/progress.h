// Training progress for one epoch. On a terminal: one line redrawn in place, at most ten
// times a second,
//   epoch 1/5 [#####.....] 412/938 loss 0.5123 31000 img/s ETA 0:12
// Otherwise (a pipe, a log file): a plain line every `log_interval` steps and at the last.
//
// The trainer asks due(step) before reading the loss back from the device, so a terminal
// costs at most ten read-backs a second and a log file one per log interval.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace nnlab {

class EpochProgress {
 public:
  EpochProgress(int64_t epoch, int64_t epochs, int64_t steps, int64_t log_interval, bool terminal,
                std::FILE* out = stdout);
  // A resumed epoch starts after `step` steps taken earlier; the ETA counts only this run's.
  void skip_to(int64_t step) { first_step_ = step; }
  // Whether step (1-based) should be shown.
  bool due(int64_t step) const;
  // Shows step with the epoch's mean loss so far and its images per second.
  void show(int64_t step, double mean_loss, double images_per_second);
  // Clears the live line (terminal only), so the epoch summary starts on a clean line.
  void finish();

  // "0:07", "12:34", "1:02:03"
  static std::string format_duration(double seconds);
  // The text of one update, without a line ending.
  std::string line(int64_t step, double mean_loss, double images_per_second, double elapsed) const;

 private:
  using Clock = std::chrono::steady_clock;
  int64_t epoch_, epochs_, steps_, log_interval_;
  int64_t first_step_ = 0;
  bool terminal_;
  std::FILE* out_;
  Clock::time_point start_, last_draw_;
  bool drawn_ = false;
  size_t last_width_ = 0;
};

}  // namespace nnlab
