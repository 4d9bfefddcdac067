// BasicBlock: the two-convolution residual block of ResNet (He et al., 2016), named as
// torchvision's resnet.BasicBlock so its parameters read the same:
//   y = relu( bn2(conv2( relu(bn1(conv1(x))) )) + shortcut(x) )
// conv1 is 3×3 with the block's stride, conv2 3×3 stride 1, both padding 1 and without bias
// (the BatchNorm after each supplies it). shortcut(x) = x when the shape is kept, otherwise
// "downsample": a 1×1 convolution with the stride (no bias) and a BatchNorm.
#pragma once
#include <memory>

#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/sequential.h"

namespace nnlab {

class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride = 1);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;

 private:
  int64_t in_channels_, out_channels_, stride_;
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<Sequential> downsample_;  // null for the identity shortcut
};

}  // namespace nnlab
