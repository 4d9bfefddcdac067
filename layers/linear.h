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
  std::string describe() const override;
  void reset_parameters(uint64_t seed, uint32_t& next_stream) override;
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  LinearOptions options_;
  Tensor weight_, bias_;
};

// A Linear layer and the ReLU after it as one op (linear_relu): what Sequential runs for the
// pair. It owns nothing: the parameters stay the Linear's, under the Linear's name, and the
// model keeps the two layers it was built from.
class LinearReLU : public Module {
 public:
  explicit LinearReLU(std::shared_ptr<Linear> linear) : linear_(std::move(linear)) {}
  Tensor forward(const Tensor& x) override;
  // "Linear(in_features=784, out_features=256, bias=true) + ReLU()"
  std::string describe() const override;

 private:
  std::shared_ptr<Linear> linear_;
};

}  // namespace nnlab
