// Pooling layers, parameter-free wrappers of the pooling ops (PyTorch's MaxPool2d,
// AvgPool2d and AdaptiveAvgPool2d with output size 1).
#pragma once
#include "layers/module.h"

namespace nnlab {

// A square kernel × kernel window; stride 0 means stride = kernel (PyTorch's default).
struct Pool2dOptions {
  int64_t kernel;
  int64_t stride = 0;
  int64_t padding = 0;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Pool2dOptions options);
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0)
      : MaxPool2d(Pool2dOptions{kernel, stride, padding}) {}
  Tensor forward(const Tensor& x) override;
  // A ReLU (max_pool2d_relu), either side of the pool in the model: relu(maxpool(x)) = maxpool(relu(x)).
  Tensor forward_fused(const Tensor& x, const Epilogue& epilogue) override;
  // "MaxPool2d(kernel_size=2, stride=2, padding=0)"
  std::string describe() const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

// Averages include padded cells as zeros (count_include_pad=True).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Pool2dOptions options);
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0)
      : AvgPool2d(Pool2dOptions{kernel, stride, padding}) {}
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;

 private:
  Pool2dOptions options_;
};

// Global average pooling: (n, c, h, w) -> (n, c, 1, 1). Only output size 1 is supported.
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(int64_t output_size = 1);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override { return "AdaptiveAvgPool2d(output_size=(1, 1))"; }
};

}  // namespace nnlab
