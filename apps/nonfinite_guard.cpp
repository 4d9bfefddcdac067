#include "apps/nonfinite_guard.h"

#include <limits>
#include <utility>

#include "autograd/ops.h"
#include "core/error.h"

namespace nnlab {

namespace {
// The flag's source codes: the loss, or the gradient of parameter i as i + 1.
constexpr int32_t kLossSource = 0;
}  // namespace

NonFiniteGuard::NonFiniteGuard(Device device, std::vector<std::string> parameter_names, int64_t steps_per_epoch,
                               int64_t epochs)
    : flag_(make_nonfinite_flag(device)),
      parameter_names_(std::move(parameter_names)),
      steps_per_epoch_(steps_per_epoch) {
  NNLAB_CHECK(steps_per_epoch >= 1, "NonFiniteGuard: an epoch needs at least one step");
  constexpr int64_t kMaxStep = std::numeric_limits<int32_t>::max();
  NNLAB_CHECK(epochs <= kMaxStep / steps_per_epoch, "--epochs ", epochs, " × ", steps_per_epoch,
              " steps per epoch is more than the ", kMaxStep,
              " steps the non-finite check can number; use fewer --epochs or a larger --batch");
}

NonFiniteMark NonFiniteGuard::loss_mark(int64_t step) const {
  return NonFiniteMark{static_cast<int32_t>(step), kLossSource};
}

void NonFiniteGuard::check_gradients(const std::vector<Tensor>& params, int64_t step) {
  NNLAB_CHECK(params.size() == parameter_names_.size(), "check_gradients: ", params.size(), " parameters, but ",
              parameter_names_.size(), " names");
  std::vector<Tensor> gradients;
  for (const Tensor& p : params) gradients.push_back(p.grad());
  raise_if_any_not_finite(gradients, flag_, gradient_marks(step));
}

std::vector<NonFiniteMark> NonFiniteGuard::gradient_marks(int64_t step) const {
  std::vector<NonFiniteMark> marks;
  for (size_t i = 0; i < parameter_names_.size(); ++i)
    marks.push_back(NonFiniteMark{static_cast<int32_t>(step), static_cast<int32_t>(i + 1)});
  return marks;
}

std::string NonFiniteGuard::describe_step(int64_t step) const {
  // Every epoch has steps_per_epoch_ steps, so global step s (1-based) is step
  // (s − 1) mod S + 1 of epoch ⌊(s − 1) / S⌋ + 1.
  const int64_t epoch = (step - 1) / steps_per_epoch_ + 1, in_epoch = (step - 1) % steps_per_epoch_ + 1;
  return "step " + std::to_string(step) + " (epoch " + std::to_string(epoch) + ", step " + std::to_string(in_epoch) +
         " of " + std::to_string(steps_per_epoch_) + ")";
}

std::string NonFiniteGuard::fault() const {
  const NonFiniteMark m = read_nonfinite_flag(flag_);
  if (m.step == 0) return "";
  if (m.source == kLossSource) return "the loss became NaN or infinite at " + describe_step(m.step);
  const size_t i = static_cast<size_t>(m.source - 1);
  const std::string name = i < parameter_names_.size() ? parameter_names_[i] : "parameter " + std::to_string(i);
  return "the gradient of " + name + " became NaN or infinite at " + describe_step(m.step) +
         " although the loss was finite";
}

}  // namespace nnlab
