// Finiteness checks for the numerical-fault machinery (shared/DESIGN.md, "Numerical
// faults"). Not differentiable: they look at values (activations, gradients) and raise a
// flag, they never produce a tensor that enters the graph.
#include "autograd/ops.h"
#include "core/error.h"
#include "devices/registry.h"

namespace nnlab {

// flag: int32 scalar on x's device; raised (set to 1, never cleared) when any element of x
// is NaN or ±inf. Runs on the device with no read-back, so a step can call it freely.
void raise_if_not_finite(const Tensor& x, Tensor& flag) {
  NNLAB_CHECK(flag.defined() && flag.dtype() == DType::Int32 && flag.numel() == 1,
              "raise_if_not_finite: the flag must be an int32 scalar");
  NNLAB_CHECK(flag.device() == x.device(), "raise_if_not_finite: the flag lives on ", flag.device().str(),
              " but the tensor on ", x.device().str(), "; put both on one device");
  if (x.numel() == 0) return;
  backend_for(x.device()).check_finite(x, flag);
}

// Reads the answer back: synchronises with the device (for --check-numerics and tests).
bool all_finite(const Tensor& x) {
  Tensor flag = Tensor::zeros({}, DType::Int32, x.device());
  raise_if_not_finite(x, flag);
  return flag.item() == 0;
}

}  // namespace nnlab
