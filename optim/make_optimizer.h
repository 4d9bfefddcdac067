// Builds an optimizer by name, as the command line and the zoo recipes name them.
#pragma once
#include <memory>
#include <string>

#include "optim/optimizer.h"

namespace nnlab {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adam | adamw
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::vector<Tensor> params);

}  // namespace nnlab
