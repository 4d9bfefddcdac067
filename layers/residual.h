// Residual: a block whose output is its input plus what its body makes of it (He et al., 2016),
//   y = activation( body(x) + shortcut(x) )
// where body is a chain of layers, shortcut(x) = x when the body keeps the shape, or a chain of
// its own (a "projection", typically a 1×1 convolution with the body's stride and a
// BatchNorm2d) when it does not, and activation is an optional parameter-free layer (ReLU in
// ResNet). The body's layers are children under their own names and the shortcut a Sequential
// under the name given, so torchvision's BasicBlock is
//   body      conv1 (3×3, stride s, no bias), bn1, relu, conv2 (3×3, no bias), bn2
//   shortcut  "downsample": 0 (1×1 conv, stride s, no bias), 1 (BatchNorm2d)
//   activation ReLU
// and its parameters read "conv1.weight", "downsample.0.weight", as torchvision's do.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "layers/sequential.h"

namespace nnlab {

class Residual : public Module {
 public:
  // shortcut and activation may be null (the identity and no activation).
  Residual(std::vector<Sequential::Child> body, std::string shortcut_name, std::shared_ptr<Sequential> shortcut,
           std::shared_ptr<Module> activation);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;

 private:
  std::vector<Sequential::Child> body_;
  std::string shortcut_name_;
  std::shared_ptr<Sequential> shortcut_;  // null for the identity shortcut
  std::shared_ptr<Module> activation_;    // null for none; not registered (it has no parameters)
};

}  // namespace nnlab
