// Global-norm gradient clipping. Like the optimizers' fused steps, it is part of the
// optimizer family that calls the kernel table directly (sum_squares, axpby).
#include "optim/clip.h"

#include <cmath>

#include "devices/registry.h"

namespace nnlab {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  NNLAB_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm: max_norm must be a positive number, got ",
              max_norm);
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;

  const Tensor& first = grads.front();
  for (const Tensor& g : grads) check_same_device("clip_grad_norm", {&first, &g});
  Backend& backend = backend_for(first.device());

  // partial: float64 (n_grads)   partial[k] = Σ_i grad_k[i]², one slot per gradient and one
  // read-back. float64 slots keep the kernels' double accumulation for float32 gradients too.
  const int64_t n = static_cast<int64_t>(grads.size());
  Tensor partial = Tensor::empty({n}, DType::Float64, first.device());
  for (int64_t k = 0; k < n; ++k) {
    Tensor slot = partial.rows(k, k + 1);
    backend.sum_squares(grads[static_cast<size_t>(k)], slot);
  }
  double sum = 0.0;
  for (double s : partial.to_vector<double>()) sum += s;
  const double total = std::sqrt(sum);

  // c = max_norm / (‖g‖ + 1e-6);  g ← c · g  when c < 1 (NaN compares false: left untouched)
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0)
    for (Tensor& g : grads) backend.axpby(coef, g, 0.0, g);
  return total;
}

}  // namespace nnlab
