// Learning-rate schedules as closed forms of the optimizer step (see schedule.h for the clock).
// Each formula is written in the order of PyTorch's own closed forms
// (_get_closed_form_lr / OneCycleLR.get_lr), so the values agree to the last bits or nearly.
#include "optim/schedule.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "optim/optimizer.h"

namespace nnlab {

namespace {

constexpr double kPi = 3.14159265358979323846;

void check_step(const char* schedule, int64_t step) {
  NNLAB_CHECK(step >= 0, schedule, ": step must be non-negative, got ", step);
}

// Cosine from `start` (pct = 0) to `end` (pct = 1), as OneCycleLR._annealing_cos.
double anneal_cos(double start, double end, double pct) {
  const double cos_out = std::cos(kPi * pct) + 1.0;
  return end + (start - end) / 2.0 * cos_out;
}

}  // namespace

double LrSchedule::momentum_at(int64_t) const { return std::numeric_limits<double>::quiet_NaN(); }

void LrSchedule::apply(Optimizer& optimizer, int64_t step) const {
  optimizer.set_lr(lr_at(step));
  const double m = momentum_at(step);
  if (!std::isnan(m)) optimizer.set_momentum(m);
}

// ---- constant ------------------------------------------------------------------------------
ConstantLR::ConstantLR(double lr) : lr_(lr) {
  NNLAB_CHECK(std::isfinite(lr) && lr >= 0, "schedule none: lr must be a finite non-negative number, got ", lr);
}

double ConstantLR::lr_at(int64_t) const { return lr_; }

std::string ConstantLR::describe() const {
  std::ostringstream os;
  os << "constant(lr=" << lr_ << ")";
  return os.str();
}

// ---- step decay ----------------------------------------------------------------------------
StepLR::StepLR(double base_lr, int64_t step_size, double gamma)
    : base_lr_(base_lr), step_size_(step_size), gamma_(gamma) {
  NNLAB_CHECK(std::isfinite(base_lr) && base_lr >= 0, "schedule step: lr must be non-negative, got ", base_lr);
  NNLAB_CHECK(step_size > 0, "schedule step: step size must be at least 1 step, got ", step_size);
  NNLAB_CHECK(std::isfinite(gamma) && gamma > 0,
              "schedule step: gamma must be positive (0.1 divides the lr by 10), got ", gamma);
}

// lr = base · γ^⌊s / step_size⌋
double StepLR::lr_at(int64_t step) const {
  check_step("schedule step", step);
  return base_lr_ * std::pow(gamma_, static_cast<double>(step / step_size_));
}

std::string StepLR::describe() const {
  std::ostringstream os;
  os << "step(lr=" << base_lr_ << ", step_size=" << step_size_ << " steps, gamma=" << gamma_ << ")";
  return os.str();
}

// ---- cosine annealing ----------------------------------------------------------------------
CosineAnnealingLR::CosineAnnealingLR(double base_lr, int64_t t_max, double eta_min)
    : base_lr_(base_lr), t_max_(t_max), eta_min_(eta_min) {
  NNLAB_CHECK(std::isfinite(base_lr) && base_lr >= 0, "schedule cosine: lr must be non-negative, got ", base_lr);
  NNLAB_CHECK(t_max > 0, "schedule cosine: the annealing length T_max must be at least 1 step, got ", t_max);
  NNLAB_CHECK(std::isfinite(eta_min) && eta_min >= 0 && eta_min <= base_lr,
              "schedule cosine: the minimum lr must lie in [0, lr] = [0, ", base_lr, "], got ", eta_min);
}

// lr = η_min + (base − η_min) · (1 + cos(π s / T_max)) / 2
double CosineAnnealingLR::lr_at(int64_t step) const {
  check_step("schedule cosine", step);
  return eta_min_ +
         (base_lr_ - eta_min_) * (1.0 + std::cos(kPi * static_cast<double>(step) / static_cast<double>(t_max_))) / 2.0;
}

std::string CosineAnnealingLR::describe() const {
  std::ostringstream os;
  os << "cosine(lr=" << base_lr_ << ", t_max=" << t_max_ << " steps, min_lr=" << eta_min_ << ")";
  return os.str();
}

// ---- linear warm-up ------------------------------------------------------------------------
LinearWarmup::LinearWarmup(double start_factor, int64_t warmup_steps, std::unique_ptr<LrSchedule> after)
    : start_factor_(start_factor), warmup_steps_(warmup_steps), after_(std::move(after)) {
  NNLAB_CHECK(after_, "schedule warm-up: needs the schedule that follows it");
  NNLAB_CHECK(start_factor > 0 && start_factor <= 1, "schedule warm-up: start factor must lie in (0, 1], got ",
              start_factor);
  NNLAB_CHECK(warmup_steps > 0, "schedule warm-up: warm-up must last at least 1 step, got ", warmup_steps);
}

// s < W:  lr = b · (f + (1 − f) · s / W);   s ≥ W:  the following schedule at s − W
int64_t LinearWarmup::steps_defined() const {
  const int64_t after = after_->steps_defined();
  return after > std::numeric_limits<int64_t>::max() - warmup_steps_ ? after : after + warmup_steps_;
}

double LinearWarmup::lr_at(int64_t step) const {
  check_step("schedule warm-up", step);
  if (step >= warmup_steps_) return after_->lr_at(step - warmup_steps_);
  const double s = static_cast<double>(step), w = static_cast<double>(warmup_steps_);
  return after_->lr_at(0) * (start_factor_ + (1.0 - start_factor_) * s / w);
}

double LinearWarmup::momentum_at(int64_t step) const {
  return step >= warmup_steps_ ? after_->momentum_at(step - warmup_steps_) : LrSchedule::momentum_at(step);
}

std::string LinearWarmup::describe() const {
  std::ostringstream os;
  os << "warmup(start_factor=" << start_factor_ << ", steps=" << warmup_steps_ << ") then " << after_->describe();
  return os.str();
}

// ---- one-cycle -----------------------------------------------------------------------------
OneCycleLR::OneCycleLR(const OneCycleOptions& o, int64_t total_steps) : options_(o), total_steps_(total_steps) {
  NNLAB_CHECK(total_steps > 0, "schedule onecycle: total steps must be positive, got ", total_steps);
  NNLAB_CHECK(std::isfinite(o.max_lr) && o.max_lr > 0, "schedule onecycle: max lr must be positive, got ", o.max_lr);
  NNLAB_CHECK(o.div_factor > 0 && o.final_div_factor > 0, "schedule onecycle: div factors must be positive, got ",
              o.div_factor, " and ", o.final_div_factor);
  NNLAB_CHECK(o.pct_start > 0 && o.pct_start < 1, "schedule onecycle: pct_start must lie in (0, 1), got ",
              o.pct_start);
  // PyTorch's phase ends: e₁ = pct_start·N − 1, e₂ = N − 1 (a float, as in OneCycleLR).
  const double rise_steps = o.pct_start * static_cast<double>(total_steps);
  // e₁ ≤ 0 would make the warm-up empty (PyTorch then divides 0 by 0 and yields NaN). The test
  // is on the product alone, so a fused multiply-add cannot turn an exact 0 into 5e-17.
  NNLAB_CHECK(rise_steps > 1.0, "schedule onecycle: pct_start ", o.pct_start, " of ", total_steps,
              " steps leaves an empty warm-up phase (pct_start·total_steps must exceed 1); use more steps or a "
              "larger pct_start");
  end_rise_ = rise_steps - 1.0;
  end_fall_ = static_cast<double>(total_steps - 1);
  if (o.cycle_momentum)
    NNLAB_CHECK(o.base_momentum >= 0 && o.base_momentum <= o.max_momentum && o.max_momentum < 1,
                "schedule onecycle: momenta must satisfy 0 <= base_momentum <= max_momentum < 1, got ",
                o.base_momentum, " and ", o.max_momentum);
}

void OneCycleLR::locate(int64_t step, bool& rising, double& pct) const {
  check_step("schedule onecycle", step);
  NNLAB_CHECK(step <= total_steps_, "schedule onecycle: step ", step, " is past the ", total_steps_,
              " steps the schedule was built for; build it with the run's total number of steps");
  const double s = static_cast<double>(step);
  rising = s <= end_rise_;
  pct = rising ? s / end_rise_ : (s - end_rise_) / (end_fall_ - end_rise_);
}

double OneCycleLR::lr_at(int64_t step) const {
  bool rising = false;
  double pct = 0;
  locate(step, rising, pct);
  const double initial = options_.max_lr / options_.div_factor;
  const double final_lr = initial / options_.final_div_factor;
  return rising ? anneal_cos(initial, options_.max_lr, pct) : anneal_cos(options_.max_lr, final_lr, pct);
}

double OneCycleLR::momentum_at(int64_t step) const {
  if (!options_.cycle_momentum) return LrSchedule::momentum_at(step);
  bool rising = false;
  double pct = 0;
  locate(step, rising, pct);
  return rising ? anneal_cos(options_.max_momentum, options_.base_momentum, pct)
                : anneal_cos(options_.base_momentum, options_.max_momentum, pct);
}

std::string OneCycleLR::describe() const {
  std::ostringstream os;
  os << "onecycle(max_lr=" << options_.max_lr << ", total_steps=" << total_steps_
     << ", pct_start=" << options_.pct_start << ", div_factor=" << options_.div_factor
     << ", final_div_factor=" << options_.final_div_factor;
  if (options_.cycle_momentum)
    os << ", momentum " << options_.max_momentum << " -> " << options_.base_momentum << " -> "
       << options_.max_momentum;
  os << ")";
  return os.str();
}

// ---- factory -------------------------------------------------------------------------------
std::unique_ptr<LrSchedule> make_schedule(const std::string& name, const ScheduleOptions& o, int64_t total_steps,
                                          int64_t steps_per_epoch) {
  NNLAB_CHECK(total_steps > 0 && steps_per_epoch > 0, "schedule ", name,
              ": the run needs at least one step (total steps ", total_steps, ", steps per epoch ",
              steps_per_epoch, ")");
  if (name == "none") return std::make_unique<ConstantLR>(o.lr);
  if (name == "step") {
    NNLAB_CHECK(o.step_epochs > 0, "schedule step: the step size must be at least 1 epoch, got ", o.step_epochs);
    return std::make_unique<StepLR>(o.lr, o.step_epochs * steps_per_epoch, o.gamma);
  }
  if (name == "cosine") return std::make_unique<CosineAnnealingLR>(o.lr, total_steps, o.min_lr);
  if (name == "warmup-cosine") {
    NNLAB_CHECK(o.warmup_steps >= 0, "schedule warmup-cosine: warm-up steps must be non-negative, got ",
                o.warmup_steps);
    const int64_t warmup = o.warmup_steps > 0 ? o.warmup_steps : steps_per_epoch;
    NNLAB_CHECK(warmup < total_steps, "schedule warmup-cosine: a warm-up of ", warmup,
                " steps leaves nothing of the run's ", total_steps,
                " steps for the cosine; train for more epochs or shorten the warm-up");
    return std::make_unique<LinearWarmup>(o.warmup_start_factor, warmup,
                                          std::make_unique<CosineAnnealingLR>(o.lr, total_steps - warmup, o.min_lr));
  }
  if (name == "onecycle") {
    OneCycleOptions oc = o.onecycle;
    oc.max_lr = o.lr;
    return std::make_unique<OneCycleLR>(oc, total_steps);
  }
  fail("unknown schedule '", name, "': expected one of none, step, cosine, warmup-cosine, onecycle");
}

}  // namespace nnlab
