// Linear (Dense): y = x · Wᵀ + b, W: (out_features, in_features), b: (out_features).
#pragma once
#include "layers/module.h"

namespace nnlab {

struct LinearOptions {
  int64_t in_features, out_features;
  bool bias = true;
};

class Linear : public Module {
 public:
  explicit Linear(LinearOptions options);
  Linear(int64_t in_features, int64_t out_features) : Linear(LinearOptions{in_features, out_features}) {}
  Tensor forward(const Tensor& x) override;
  Tensor forward_fused(const Tensor& x, const Epilogue& epilogue) override;  // a ReLU
  std::string describe() const override;
  void reset_parameters(uint64_t seed, uint32_t& next_stream) override;
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  LinearOptions options_;
  Tensor weight_, bias_;
};

}  // namespace nnlab
