#include "layers/pool.h"

#include "autograd/ops.h"

namespace nnlab {

namespace {

Pool2dOptions checked(const char* layer, Pool2dOptions o) {
  NNLAB_CHECK(o.kernel > 0 && o.stride >= 0 && o.padding >= 0 && 2 * o.padding <= o.kernel, layer,
              ": need kernel ≥ 1, stride ≥ 0 (0 = kernel) and 0 ≤ padding ≤ kernel/2, got kernel ", o.kernel,
              ", stride ", o.stride, ", padding ", o.padding);
  if (o.stride == 0) o.stride = o.kernel;
  return o;
}

std::string describe_pool(const char* layer, const Pool2dOptions& o) {
  return std::string(layer) + "(kernel_size=" + std::to_string(o.kernel) + ", stride=" + std::to_string(o.stride) +
         ", padding=" + std::to_string(o.padding) + ")";
}

}  // namespace

MaxPool2d::MaxPool2d(Pool2dOptions options) : options_(checked("MaxPool2d", options)) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, options_.kernel, options_.stride, options_.padding);
}

std::string MaxPool2d::describe() const { return describe_pool("MaxPool2d", options_); }

Tensor MaxPool2d::forward_fused(const Tensor& x, const Epilogue& epilogue) {
  NNLAB_CHECK(epilogue.kind != Epilogue::Kind::ReluMaxPool, "MaxPool2d: a max-pool epilogue needs a convolution");
  if (epilogue.none()) return forward(x);
  return max_pool2d_relu(x, options_.kernel, options_.stride, options_.padding);
}

AvgPool2d::AvgPool2d(Pool2dOptions options) : options_(checked("AvgPool2d", options)) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, options_.kernel, options_.stride, options_.padding);
}

std::string AvgPool2d::describe() const { return describe_pool("AvgPool2d", options_); }

AdaptiveAvgPool2d::AdaptiveAvgPool2d(int64_t output_size) {
  NNLAB_CHECK(output_size == 1, "AdaptiveAvgPool2d: only output size 1 (global average pooling) is supported, got ",
              output_size);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d_1x1(x); }

}  // namespace nnlab
