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
  // "MaxPool2d(kernel_size=2, stride=2, padding=0)"
  std::string describe() const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

// A MaxPool2d and the ReLU next to it as one op (max_pool2d_relu): what Sequential runs for
// either order of the pair, since relu(maxpool(x)) = maxpool(relu(x)). Not a layer of the
// model file: it has no parameters, and the model keeps the two layers it was built from.
class MaxPool2dReLU : public Module {
 public:
  explicit MaxPool2dReLU(const MaxPool2d& pool) : options_(pool.options()) {}
  Tensor forward(const Tensor& x) override;
  // "MaxPool2d(kernel_size=2, stride=2, padding=0) + ReLU()"
  std::string describe() const override;

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
