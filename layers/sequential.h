// Sequential: children run in order; each is registered under the name given, so the
// parameters read as in the PyTorch twin ("fc1.weight", "c1.bias").
#pragma once
#include "layers/module.h"

namespace nnlab {

class Sequential : public Module {
 public:
  Sequential& add(const std::string& name, std::shared_ptr<Module> layer);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;
  size_t size() const { return children().size(); }
};

}  // namespace nnlab
