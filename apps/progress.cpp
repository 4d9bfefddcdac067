#include "apps/progress.h"

#include <algorithm>
#include <cmath>

namespace nnlab {

namespace {
constexpr double kRedrawSeconds = 0.1;  // at most ten redraws a second on a terminal
constexpr int kBarWidth = 20;
}  // namespace

EpochProgress::EpochProgress(int64_t epoch, int64_t epochs, int64_t steps, int64_t log_interval, bool terminal,
                             std::FILE* out)
    : epoch_(epoch),
      epochs_(epochs),
      steps_(steps),
      log_interval_(std::max<int64_t>(log_interval, 1)),
      terminal_(terminal),
      out_(out),
      start_(Clock::now()),
      last_draw_(start_) {}

bool EpochProgress::due(int64_t step) const {
  if (step == steps_) return true;
  if (!terminal_) return step % log_interval_ == 0;
  return std::chrono::duration<double>(Clock::now() - last_draw_).count() >= kRedrawSeconds;
}

std::string EpochProgress::format_duration(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(0.0, std::isfinite(seconds) ? seconds : 0.0)));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

std::string EpochProgress::line(int64_t step, double mean_loss, double images_per_second, double elapsed) const {
  char buf[256];
  if (!terminal_) {
    std::snprintf(buf, sizeof buf, "  epoch %lld/%lld  step %lld/%lld  loss %.4f  %.0f img/s",
                  static_cast<long long>(epoch_), static_cast<long long>(epochs_), static_cast<long long>(step),
                  static_cast<long long>(steps_), mean_loss, images_per_second);
    return buf;
  }
  const int filled = steps_ > 0 ? static_cast<int>(kBarWidth * step / steps_) : kBarWidth;
  const std::string bar = std::string(filled, '#') + std::string(kBarWidth - filled, '.');
  // ETA: the remaining steps at this run's mean time per step.
  const int64_t done = step - first_step_;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(steps_ - step) : 0.0;
  std::snprintf(buf, sizeof buf, "epoch %lld/%lld [%s] %lld/%lld loss %.4f %.0f img/s ETA %s",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(),
                static_cast<long long>(step), static_cast<long long>(steps_), mean_loss, images_per_second,
                format_duration(eta).c_str());
  return buf;
}

void EpochProgress::show(int64_t step, double mean_loss, double images_per_second) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const std::string text = line(step, mean_loss, images_per_second, elapsed);
  if (terminal_) {
    // Pad with spaces over the rest of a longer previous line.
    const size_t pad = last_width_ > text.size() ? last_width_ - text.size() : 0;
    std::fprintf(out_, "\r%s%*s", text.c_str(), static_cast<int>(pad), "");
    last_width_ = text.size();
    drawn_ = true;
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
  last_draw_ = Clock::now();
}

void EpochProgress::finish() {
  if (!terminal_ || !drawn_) return;
  std::fprintf(out_, "\r%*s\r", static_cast<int>(last_width_), "");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace nnlab
