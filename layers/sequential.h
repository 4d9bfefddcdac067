// Sequential: children run in order; each is registered under the name given, so the
// parameters read as in the PyTorch twin ("fc1.weight", "c1.bias").
#pragma once
#include "layers/module.h"

namespace nnlab {

class Sequential : public Module {
 public:
  using Child = std::pair<std::string, std::shared_ptr<Module>>;

  Sequential& add(const std::string& name, std::shared_ptr<Module> layer);
  Tensor forward(const Tensor& x) override;
  // The children in the order forward() runs them: the order added, except that a ReLU
  // directly followed by a MaxPool2d runs after it. max is monotonic, so
  //   maxpool(relu(x)) = relu(maxpool(x))
  // exactly, and the gradients are equal too (the same window winner receives dy, masked
  // by the same sign test), but the ReLU then reads and writes a quarter of the data, forward
  // and backward. `explain` and `--check-numerics` walk this order as well.
  std::vector<Child> run_order() const;
  std::string describe() const override;
  size_t size() const { return children().size(); }
};

}  // namespace nnlab
