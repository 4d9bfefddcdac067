// Conv2d: y = W ⋆ x + b (PyTorch's torch.nn.Conv2d with dilation 1 and one group).
// W: (out_channels, in_channels, kernel_h, kernel_w), b: (out_channels).
#pragma once
#include "layers/module.h"

namespace nnlab {

struct Conv2dOptions {
  int64_t in_channels, out_channels, kernel_h, kernel_w;
  int64_t stride = 1, padding = 0;  // the same in both directions
  bool bias = true;
};

class Conv2d : public Module {
 public:
  explicit Conv2d(Conv2dOptions options);
  // A square kernel: Conv2d(1, 32, 3, /*stride=*/1, /*padding=*/1).
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0)
      : Conv2d(Conv2dOptions{in_channels, out_channels, kernel, kernel, stride, padding}) {}
  Tensor forward(const Tensor& x) override;
  // A ReLU, or a max-pool and its ReLU (either order in the model: they commute).
  Tensor forward_fused(const Tensor& x, const Epilogue& epilogue) override;
  // "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))", as PyTorch prints it
  std::string describe() const override;
  void reset_parameters(uint64_t seed, uint32_t& next_stream) override;
  const Conv2dOptions& options() const { return options_; }
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  Conv2dOptions options_;
  Tensor weight_, bias_;
};

}  // namespace nnlab
