// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_(params, max_norm, 2).
#pragma once
#include <vector>

#include "core/tensor.h"

namespace nnlab {

// total = √(Σ_params Σ_i grad_i²) over every parameter that has a gradient; when
// c = max_norm / (total + 1e-6) is below 1, every gradient is scaled by c in place.
// Returns total (the norm before clipping); 0 when no parameter has a gradient.
//
// The squared sums are computed on the gradients' device into one small buffer, which is read
// back once per call (one host synchronisation: the returned norm needs it anyway).
// As in PyTorch, c < 1 also when total lies just below max_norm (within the 1e-6). Unlike
// PyTorch, a non-finite total leaves the gradients untouched (PyTorch multiplies them by NaN):
// the caller sees the returned norm, and the non-finite flag keeps the optimizer from stepping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace nnlab
