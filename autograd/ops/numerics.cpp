// Finiteness checks for the numerical-fault machinery (docs/design.md, "Numerical
// faults"; the flag's layout is in core/nonfinite.h). Not differentiable: they look at values
// (activations, gradients) and raise a flag, they never produce a tensor that enters the graph.
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "devices/registry.h"

namespace nnlab {

Tensor make_nonfinite_flag(Device device) { return Tensor::zeros({kNonFiniteFlagSize}, DType::Int32, device); }

void check_nonfinite_flag(const char* op, const Tensor& flag, Device device, NonFiniteMark mark) {
  NNLAB_CHECK(flag.defined() && flag.dtype() == DType::Int32 && flag.numel() == kNonFiniteFlagSize, op,
              ": the non-finite flag must be an int32 tensor of ", kNonFiniteFlagSize,
              " elements (make_nonfinite_flag)");
  NNLAB_CHECK(flag.device() == device, op, ": the non-finite flag lives on ", flag.device().str(),
              " but the tensor on ", device.str(), "; put both on one device");
  NNLAB_CHECK(mark.step >= 1, op, ": a non-finite mark needs a step >= 1 (0 means 'not raised'), got ",
              mark.step);
}

// Runs on the device with no read-back, so a training step can call it freely.
void raise_if_not_finite(const Tensor& x, Tensor& flag, NonFiniteMark mark) {
  check_nonfinite_flag("raise_if_not_finite", flag, x.device(), mark);
  if (x.numel() == 0) return;
  backend_for(x.device()).check_finite(x, flag, mark);
}

NonFiniteMark read_nonfinite_flag(const Tensor& flag) {
  check_nonfinite_flag("read_nonfinite_flag", flag, flag.device(), NonFiniteMark{});
  const std::vector<int32_t> v = flag.to_vector<int32_t>();  // synchronises
  return NonFiniteMark{v[0], v[1]};
}

void raise_if_any_not_finite(const std::vector<Tensor>& xs, Tensor& flag, const std::vector<NonFiniteMark>& marks,
                             const Tensor* step_number) {
  NNLAB_CHECK(xs.size() == marks.size(), "raise_if_any_not_finite: ", xs.size(), " tensors but ", marks.size(),
              " marks");
  std::vector<Tensor> checked;
  std::vector<NonFiniteMark> checked_marks;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].defined() || xs[i].numel() == 0) continue;
    check_nonfinite_flag("raise_if_any_not_finite", flag, xs[i].device(), marks[i]);
    NNLAB_CHECK(checked.empty() || xs[i].device() == checked[0].device(), "raise_if_any_not_finite: tensors on ",
                checked.empty() ? "" : checked[0].device().str(), " and ", xs[i].device().str(),
                "; check each device's tensors in a list of their own");
    checked.push_back(xs[i]);
    checked_marks.push_back(marks[i]);
  }
  if (!checked.empty()) backend_for(checked[0].device()).check_finite_all(checked, flag, checked_marks, step_number);
}

// Reads the answer back: synchronises with the device (for --check-numerics and tests).
bool all_finite(const Tensor& x) {
  Tensor flag = make_nonfinite_flag(x.device());
  raise_if_not_finite(x, flag);
  return read_nonfinite_flag(flag).step == 0;
}

}  // namespace nnlab
