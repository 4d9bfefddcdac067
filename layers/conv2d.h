// Conv2d: y = W ⋆ x + b (PyTorch's torch.nn.Conv2d with dilation 1 and one group).
// W: (out_channels, in_channels, kernel_h, kernel_w), b: (out_channels).
#pragma once
#include "layers/module.h"
#include "layers/pool.h"

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

// A Conv2d and the ReLU after it as one op (conv2d_relu): what Sequential runs for the pair.
// It owns nothing: the parameters stay the Conv2d's, under its name.
class Conv2dReLU : public Module {
 public:
  explicit Conv2dReLU(std::shared_ptr<Conv2d> conv) : conv_(std::move(conv)) {}
  Tensor forward(const Tensor& x) override;
  // "Conv2d(3, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)) + ReLU()"
  std::string describe() const override;

 private:
  std::shared_ptr<Conv2d> conv_;
};

// A Conv2d, then a max-pool and its ReLU (either order) as one op (conv2d_max_pool2d_relu):
// what Sequential runs for the three. It owns nothing, like Conv2dReLU.
class Conv2dMaxPoolReLU : public Module {
 public:
  Conv2dMaxPoolReLU(std::shared_ptr<Conv2d> conv, const MaxPool2d& pool)
      : conv_(std::move(conv)), pool_(pool.options()) {}
  Tensor forward(const Tensor& x) override;
  // "Conv2d(32, 32, …) + MaxPool2d(kernel_size=2, stride=2, padding=0) + ReLU()"
  std::string describe() const override;

 private:
  std::shared_ptr<Conv2d> conv_;
  Pool2dOptions pool_;
};

}  // namespace nnlab
