// The training loop's numerical-fault detection (docs/design.md, "Numerical faults"): one
// non-finite flag (core/nonfinite.h) on the device, raised by the loss kernel and by a check
// of every parameter's gradient after the backward pass, each marked with the step it belongs
// to. The optimizer skips its update while the flag is raised, and nothing here waits for the
// device except fault(), which the trainer calls once per log interval and before a save.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/nonfinite.h"
#include "core/tensor.h"

namespace nnlab {

class NonFiniteGuard {
 public:
  // parameter_names: the optimizer's parameters in its order, for the messages. Every step
  // of the run's `epochs` must have a number that fits the flag's int32.
  NonFiniteGuard(Device device, std::vector<std::string> parameter_names, int64_t steps_per_epoch, int64_t epochs);

  Tensor& flag() { return flag_; }
  // The mark the loss kernel of global step `step` (1-based) stores when the loss is not finite.
  NonFiniteMark loss_mark(int64_t step) const;
  // Raises the flag, marked with `step` and the parameter, when a gradient holds a NaN or ±inf
  // (one device pass per parameter, no read-back). params: the optimizer's, in its order.
  void check_gradients(const std::vector<Tensor>& params, int64_t step);
  // The marks check_gradients stores, one per parameter: for an optimizer that checks the
  // gradients itself as it steps (Optimizer::step_checked).
  std::vector<NonFiniteMark> gradient_marks(int64_t step) const;
  // Reads the flag back (synchronises). "" while it is not raised; otherwise what went bad and
  // where: "the loss became NaN or infinite at step 7 (epoch 1, step 7 of 16)".
  std::string fault() const;
  // "step 7 (epoch 1, step 7 of 16)": the global step and its place in its epoch.
  std::string describe_step(int64_t step) const;

 private:
  Tensor flag_;
  std::vector<std::string> parameter_names_;
  int64_t steps_per_epoch_;
};

}  // namespace nnlab
