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
  // What forward() runs: the children in the order added, except that a MaxPool2d and a ReLU
  // next to each other (either order) run as one MaxPool2dReLU, named "pool1+relu1" after
  // both. max is monotonic, so
  //   maxpool(relu(x)) = relu(maxpool(x))
  // exactly, and the gradients are equal too (the same window winner receives dy, masked by
  // the same sign test); the fused op makes one pass over the data where the pair made two,
  // forward and backward. Likewise a Linear or Conv2d and the ReLU after it run as one
  // LinearReLU or Conv2dReLU ("fc1+relu1"): the max taken as the output is written, and
  // backward the ReLU's mask and the bias gradient in one pass (a ReLU with a max-pool after it goes to the pool). `explain`
  // walks this order as well; `--check-numerics` runs the children one by one, so that a fault
  // is named at its own layer.
  const std::vector<Child>& run_order() const { return run_order_; }
  std::string describe() const override;
  size_t size() const { return children().size(); }

 private:
  std::vector<Child> run_order_;  // rebuilt by add()
};

}  // namespace nnlab
