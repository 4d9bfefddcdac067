// Gradient check: compares the engine's gradients with central finite differences,
//   ∂L/∂x_i ≈ (L(x + eps·e_i) − L(x − eps·e_i)) / (2·eps),
// in float64, where L = Σ f(inputs) ⊙ r for a fixed random r (so non-scalar outputs are
// checked in every direction at once). The tests run it for every op.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace nnlab {

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  std::string report;  // the first mismatches: input, element, analytic, numeric
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// inputs: float64 CPU tensors; those with requires_grad are checked.
GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-6, double rtol = 1e-4);

}  // namespace nnlab
