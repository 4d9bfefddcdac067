#include "layers/conv2d.h"

#include "autograd/ops.h"
#include "layers/init.h"
#include "layers/precision.h"

namespace nnlab {

Conv2d::Conv2d(Conv2dOptions o) : options_(o) {
  NNLAB_CHECK(o.in_channels > 0 && o.out_channels > 0, "Conv2d: channels must be positive, got ", o.in_channels,
              " -> ", o.out_channels);
  NNLAB_CHECK(o.kernel_h > 0 && o.kernel_w > 0, "Conv2d: kernel size must be positive, got ", o.kernel_h, "×",
              o.kernel_w);
  NNLAB_CHECK(o.stride > 0 && o.padding >= 0, "Conv2d: need stride ≥ 1 and padding ≥ 0, got stride ", o.stride,
              ", padding ", o.padding);
  weight_ = register_parameter("weight", Tensor::zeros({o.out_channels, o.in_channels, o.kernel_h, o.kernel_w}));
  if (o.bias) bias_ = register_parameter("bias", Tensor::zeros({o.out_channels}));
}

Tensor Conv2d::forward(const Tensor& x) { return forward_fused(x, Epilogue{}); }

// In x's dtype: with a bf16 x, on bf16 copies of the weights (layers/precision.h).
Tensor Conv2d::forward_fused(const Tensor& x, const Epilogue& epilogue) {
  return conv2d(x, compute_copy(weight_, x), compute_copy(bias_, x), options_.stride, options_.padding, epilogue);
}

std::string Conv2d::describe() const {
  auto pair = [](int64_t a, int64_t b) { return "(" + std::to_string(a) + ", " + std::to_string(b) + ")"; };
  const Conv2dOptions& o = options_;
  std::string s = "Conv2d(" + std::to_string(o.in_channels) + ", " + std::to_string(o.out_channels) +
                  ", kernel_size=" + pair(o.kernel_h, o.kernel_w) + ", stride=" + pair(o.stride, o.stride);
  if (o.padding != 0) s += ", padding=" + pair(o.padding, o.padding);  // PyTorch omits the default
  if (!o.bias) s += ", bias=False";
  return s + ")";
}

// PyTorch's default: W and b ~ U(±1/√fan_in) with fan_in = in_channels · kernel_h · kernel_w.
void Conv2d::reset_parameters(uint64_t seed, uint32_t& next_stream) {
  init_fan_in_uniform(weight_, options_.bias ? &bias_ : nullptr,
                      options_.in_channels * options_.kernel_h * options_.kernel_w, seed, next_stream);
}

}  // namespace nnlab
