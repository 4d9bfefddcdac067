#include "optim/optimizer.h"

namespace nnlab {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const Tensor& p : params_)
    NNLAB_CHECK(p.is_leaf() && p.requires_grad(), "optimizer: parameter ", p.describe(),
                " is not a leaf that requires a gradient");
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

}  // namespace nnlab
