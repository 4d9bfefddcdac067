#include "layers/linear.h"

#include "autograd/ops.h"
#include "layers/init.h"
#include "layers/precision.h"

namespace nnlab {

Linear::Linear(LinearOptions options) : options_(options) {
  NNLAB_CHECK(options.in_features > 0 && options.out_features > 0, "Linear: features must be positive, got ",
              options.in_features, " -> ", options.out_features);
  weight_ = register_parameter("weight", Tensor::zeros({options.out_features, options.in_features}));
  if (options.bias) bias_ = register_parameter("bias", Tensor::zeros({options.out_features}));
}

Tensor Linear::forward(const Tensor& x) { return forward_fused(x, Epilogue{}); }

// In x's dtype: with a bf16 x, on bf16 copies of the weights (layers/precision.h).
Tensor Linear::forward_fused(const Tensor& x, const Epilogue& epilogue) {
  return linear(x, compute_copy(weight_, x), compute_copy(bias_, x), epilogue);
}

std::string Linear::describe() const {
  return "Linear(in_features=" + std::to_string(options_.in_features) +
         ", out_features=" + std::to_string(options_.out_features) + ", bias=" + (options_.bias ? "true" : "false") +
         ")";
}

void Linear::reset_parameters(uint64_t seed, uint32_t& next_stream) {
  init_fan_in_uniform(weight_, options_.bias ? &bias_ : nullptr, options_.in_features, seed, next_stream);
}

}  // namespace nnlab
