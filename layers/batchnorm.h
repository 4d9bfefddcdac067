// BatchNorm2d (PyTorch's torch.nn.BatchNorm2d, affine, tracking running statistics):
//   parameters  "weight" (γ, init 1), "bias" (β, init 0)                 shape (c)
//   buffers     "running_mean" (0), "running_var" (1)                    shape (c)
//               "num_batches_tracked" (int32 scalar, +1 per training forward)
// Training normalises with the batch's statistics and updates the running ones with
// momentum; eval() normalises with the running ones.
#pragma once
#include "layers/module.h"

namespace nnlab {

struct BatchNorm2dOptions {
  int64_t num_features;
  double eps = 1e-5;
  double momentum = 0.1;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(BatchNorm2dOptions options);
  explicit BatchNorm2d(int64_t num_features) : BatchNorm2d(BatchNorm2dOptions{num_features}) {}
  Tensor forward(const Tensor& x) override;
  // "BatchNorm2d(32, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
  std::string describe() const override;
  // γ = 1, β = 0, running statistics and counter reset; draws nothing.
  void reset_parameters(uint64_t seed, uint32_t& next_stream) override;

  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }
  Tensor& running_mean() { return running_mean_; }
  Tensor& running_var() { return running_var_; }
  Tensor& num_batches_tracked() { return num_batches_tracked_; }

 private:
  BatchNorm2dOptions options_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

}  // namespace nnlab
