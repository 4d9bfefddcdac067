#include "optim/make_optimizer.h"

namespace nnlab {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, std::vector<Tensor> params) {
  if (c.name == "sgd") return std::make_unique<SGD>(std::move(params), SgdOptions{c.lr, c.momentum, 0.0, c.weight_decay, c.nesterov});
  const AdamOptions adam{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay};
  if (c.name == "adam") return std::make_unique<Adam>(std::move(params), adam);
  if (c.name == "adamw") return std::make_unique<AdamW>(std::move(params), adam);
  fail("unknown optimizer '", c.name, "'; choose sgd, adam or adamw");
}

}  // namespace nnlab
