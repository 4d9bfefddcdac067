#include "layers/residual.h"

#include "autograd/ops.h"

namespace nnlab {

BasicBlock::BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride)
    : in_channels_(in_channels), out_channels_(out_channels), stride_(stride) {
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(Conv2dOptions{in_channels, out_channels, 3, 3, stride, 1, false}));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(out_channels));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(Conv2dOptions{out_channels, out_channels, 3, 3, 1, 1, false}));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(out_channels));
  if (stride != 1 || in_channels != out_channels) {
    auto down = std::make_shared<Sequential>();
    down->add("0", std::make_shared<Conv2d>(Conv2dOptions{in_channels, out_channels, 1, 1, stride, 0, false}))
        .add("1", std::make_shared<BatchNorm2d>(out_channels));
    downsample_ = register_module("downsample", down);
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor h = relu(bn1_->forward(conv1_->forward(x)));
  h = bn2_->forward(conv2_->forward(h));
  const Tensor shortcut = downsample_ ? downsample_->forward(x) : x;
  return relu(add(h, shortcut));
}

std::string BasicBlock::describe() const {
  return "BasicBlock(" + std::to_string(in_channels_) + " -> " + std::to_string(out_channels_) +
         ", stride=" + std::to_string(stride_) + (downsample_ ? ", downsample=1x1 conv + BatchNorm2d" : "") + ")";
}

}  // namespace nnlab
