// bf16 ops on CUDA against the CPU's (docs/precision.md): the native bf16 kernels (a Linear
// layer's products, bias and ReLU; ReLU, sigmoid and tanh) and the widened ones (convolutions,
// pools, adds) give each output within one bf16 step of the CPU's. Both round every output
// once; what may differ is the order of a float32 sum, which can send a value to the
// neighbouring bf16 number, so the tolerance is bf16's relative step, 2⁻⁷.
#include "gpu/gpu_support.h"

#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

constexpr double kBf16Step = 0x1p-7;

// A bf16 tensor from fresh values, on the host, requiring a gradient.
Tensor bf16_input(const Shape& shape) {
  Tensor t = fresh_tensor(shape).to(DType::BFloat16);
  t.set_requires_grad(true);
  return t;
}

// Runs `op` on the inputs on each device, seeds its backward with the same bf16 gradient, and
// compares the outputs and every input's gradient.
void require_same_on_both(const std::string& what, const std::vector<Tensor>& inputs,
                          const std::function<Tensor(const std::vector<Tensor>&)>& op) {
  std::vector<Tensor> on_device;
  for (const Tensor& t : inputs) {
    Tensor d = on_gpu(t.detach());
    d.set_requires_grad(true);
    on_device.push_back(d);
  }
  const Tensor y_cpu = op(inputs), y_gpu = op(on_device);
  REQUIRE(y_cpu.dtype() == DType::BFloat16);
  REQUIRE(y_gpu.dtype() == DType::BFloat16);
  require_allclose(y_gpu.to_vector<double>(), y_cpu.to_vector<double>(), kBf16Step, 1e-6, what + ": output");
  const Tensor seed = fresh_tensor(y_cpu.shape()).to(DType::BFloat16);
  y_cpu.backward(seed);
  y_gpu.backward(on_gpu(seed));
  for (size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE(on_device[i].grad().defined());
    CHECK(on_device[i].grad().dtype() == DType::BFloat16);
    require_allclose(on_device[i].grad().to_vector<double>(), inputs[i].grad().to_vector<double>(), kBf16Step, 1e-5,
                     what + ": gradient of input " + std::to_string(i));
  }
}

}  // namespace

TEST_CASE("gpu: a Linear layer in bf16 matches the CPU's, with and without its ReLU", "[gpu][precision]") {
  for (const Epilogue& e : {Epilogue{}, Epilogue::relu()}) {
    require_same_on_both("linear" + e.describe(), {bf16_input({33, 70}), bf16_input({20, 70}), bf16_input({20})},
                         [&](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2], e); });
  }
}

TEST_CASE("gpu: elementwise ops in bf16 match the CPU's", "[gpu][precision]") {
  require_same_on_both("relu", {bf16_input({1000})}, [](const std::vector<Tensor>& t) { return relu(t[0]); });
  require_same_on_both("tanh", {bf16_input({1000})}, [](const std::vector<Tensor>& t) { return nnlab::tanh(t[0]); });
  require_same_on_both("sigmoid", {bf16_input({1000})}, [](const std::vector<Tensor>& t) { return sigmoid(t[0]); });
  require_same_on_both("add", {bf16_input({8, 50}), bf16_input({50})},
                       [](const std::vector<Tensor>& t) { return add(t[0], t[1]); });
}

TEST_CASE("gpu: convolutions and pools in bf16 match the CPU's", "[gpu][precision]") {
  for (const Epilogue& e : {Epilogue{}, Epilogue::relu(), Epilogue::relu_max_pool(2)}) {
    require_same_on_both("conv2d" + e.describe(),
                         {bf16_input({3, 4, 10, 10}), bf16_input({6, 4, 3, 3}), bf16_input({6})},
                         [&](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2], 1, 1, e); });
  }
  require_same_on_both("max_pool2d", {bf16_input({2, 3, 8, 8})},
                       [](const std::vector<Tensor>& t) { return max_pool2d(t[0], 2); });
  require_same_on_both("avg_pool2d", {bf16_input({2, 3, 8, 8})},
                       [](const std::vector<Tensor>& t) { return avg_pool2d(t[0], 2); });
}
