// Learning-rate schedules: step decay, cosine annealing, linear warm-up (alone or before a
// cosine), and one-cycle with its momentum cycling — PyTorch's values (torch.optim.lr_scheduler
// in 1.13: StepLR, CosineAnnealingLR, LinearLR + SequentialLR, OneCycleLR).
//
// Convention: one clock, the optimizer step.
//   A schedule is a pure function of s = 0, 1, 2, ..., the number of optimizer steps already
//   taken. The training loop calls `schedule.apply(optimizer, s)` right before the s-th
//   `optimizer.step()`. `lr_at(s)` is the lr PyTorch's scheduler holds after s calls of
//   `scheduler.step()`, so the classes below are PyTorch's schedulers stepped once per batch,
//   with every length (step_size, t_max, warm-up, total_steps) counted in optimizer steps.
//   `make_schedule` turns the CLI's epoch-based recipes into steps: StepLR's step size is
//   given in epochs (so the lr drops exactly at epoch boundaries, as PyTorch's per-epoch
//   StepLR), while cosine and one-cycle run smoothly over all total_steps.
//   Because a schedule holds no state beyond its options, a checkpoint needs only the step.
//
// Closed forms replace PyTorch's recursive updates (lr ← lr · factor); on PyTorch's own
// fixtures they agree within 1e-12 relative (checked in tests/test_schedule.cpp).
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace nnlab {

class Optimizer;

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  // The learning rate for optimizer step `step` (0-based).
  virtual double lr_at(int64_t step) const = 0;
  // The momentum (SGD) or β1 (Adam) for that step; NaN when the schedule leaves it alone.
  virtual double momentum_at(int64_t step) const;
  virtual std::string describe() const = 0;
  // Steps 0 … steps_defined() − 1 have an lr; a later one throws (one-cycle's end). Most
  // schedules go on for ever.
  virtual int64_t steps_defined() const { return std::numeric_limits<int64_t>::max(); }
  // Sets the optimizer's lr (and momentum, when the schedule cycles it) for step `step`.
  void apply(Optimizer& optimizer, int64_t step) const;
};

// A fixed lr (the "none" schedule).
class ConstantLR : public LrSchedule {
 public:
  explicit ConstantLR(double lr);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double lr_;
};

// lr = base · γ^⌊s / step_size⌋   (torch StepLR)
class StepLR : public LrSchedule {
 public:
  StepLR(double base_lr, int64_t step_size, double gamma);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_lr_;
  int64_t step_size_;
  double gamma_;
};

// lr = η_min + (base − η_min) · (1 + cos(π s / T_max)) / 2   (torch CosineAnnealingLR; like
// PyTorch it keeps following the cosine, back up, if stepped past T_max)
class CosineAnnealingLR : public LrSchedule {
 public:
  CosineAnnealingLR(double base_lr, int64_t t_max, double eta_min);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_lr_;
  int64_t t_max_;
  double eta_min_;
};

// Linear warm-up, then another schedule (torch LinearLR + SequentialLR, milestone = warm-up):
//   s < W:  lr = b · (f + (1 − f) · s / W),  b = after.lr_at(0), f = start_factor
//   s ≥ W:  lr = after.lr_at(s − W)
// As in PyTorch, the warm-up reaches f + (1 − f)(W − 1)/W of b at its last step; b itself is
// the first lr of the following schedule.
class LinearWarmup : public LrSchedule {
 public:
  LinearWarmup(double start_factor, int64_t warmup_steps, std::unique_ptr<LrSchedule> after);
  double lr_at(int64_t step) const override;
  double momentum_at(int64_t step) const override;
  std::string describe() const override;
  int64_t steps_defined() const override;

 private:
  double start_factor_;
  int64_t warmup_steps_;
  std::unique_ptr<LrSchedule> after_;
};

struct OneCycleOptions {
  double max_lr = 0.1;
  double pct_start = 0.3;           // share of the steps spent rising to max_lr
  double div_factor = 25.0;         // initial lr = max_lr / div_factor
  double final_div_factor = 1e4;    // final lr = initial lr / final_div_factor
  bool cycle_momentum = true;
  double base_momentum = 0.85;      // momentum at the lr peak
  double max_momentum = 0.95;       // momentum at both ends
};

// torch OneCycleLR (two phases, cosine annealing). With e₁ = pct_start·N − 1 and e₂ = N − 1:
//   s ≤ e₁:  pct = s / e₁,  lr from initial → max,  momentum from max → base
//   s > e₁:  pct = (s − e₁)/(e₂ − e₁),  lr from max → final,  momentum from base → max
//   anneal(a, b, pct) = b + (a − b)/2 · (1 + cos(π·pct))
class OneCycleLR : public LrSchedule {
 public:
  OneCycleLR(const OneCycleOptions& options, int64_t total_steps);
  double lr_at(int64_t step) const override;
  double momentum_at(int64_t step) const override;
  std::string describe() const override;
  int64_t steps_defined() const override { return total_steps_ + 1; }

 private:
  // Which phase `step` is in and how far along it (0..1); throws past total_steps.
  void locate(int64_t step, bool& rising, double& pct) const;
  OneCycleOptions options_;
  int64_t total_steps_;
  double end_rise_, end_fall_;  // e₁, e₂ above
};

// The CLI's options. `lr` is the base lr, and the peak lr for "onecycle".
struct ScheduleOptions {
  double lr = 0.01;
  int64_t step_epochs = 1;           // step: multiply by gamma every step_epochs epochs
  double gamma = 0.1;
  double min_lr = 0.0;               // cosine, warmup-cosine: η_min
  int64_t warmup_steps = 0;          // warmup-cosine: 0 means one epoch (steps_per_epoch)
  double warmup_start_factor = 0.1;  // warmup-cosine: lr starts at this fraction of lr
  OneCycleOptions onecycle;          // onecycle (its max_lr is replaced by lr)
};

// name: "none", "step", "cosine", "warmup-cosine" or "onecycle". total_steps = epochs ×
// steps_per_epoch of the run. Bad names or options throw nnlab::Error saying what to change.
std::unique_ptr<LrSchedule> make_schedule(const std::string& name, const ScheduleOptions& options,
                                          int64_t total_steps, int64_t steps_per_epoch);

}  // namespace nnlab
