// bf16 ops on CUDA against the CPU's (docs/precision.md): CUDA's own bf16 paths (a Linear layer
// in cuBLASLt, convolutions in cuDNN, pools, BatchNorm, elementwise and bias kernels) give each
// output within one bf16 step of the CPU's, which widens every op to float32. Both round every
// output once; what may differ is the order of a float32 sum, which can send a value to the
// neighbouring bf16 number, so the tolerance is bf16's relative step, 2⁻⁷.
#include "gpu/gpu_support.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "cli_support.h"
#include "devices/kernel_log.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/sequential.h"

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

// Each of `families` is in the log on bf16 data. A widened call runs on float32 copies, as every
// CPU call does, so the one on bf16 data is CUDA's own bf16 kernel.
void require_bf16_calls(const std::vector<KernelCall>& calls, const std::vector<std::string>& families) {
  for (const std::string& family : families) {
    INFO(family);
    CHECK(std::any_of(calls.begin(), calls.end(), [&](const KernelCall& c) {
      return c.family == family && Catch::endsWith(c.detail, " bf16");
    }));
  }
}

}  // namespace

// With a bias, forward and backward are one cuBLASLt call each on the bf16 tensors (the bias
// and ReLU, or the bias gradient, in its epilogue); without one, cuBLAS's plain product.
TEST_CASE("gpu: a Linear layer in bf16 matches the CPU's, with and without its ReLU", "[gpu][precision]") {
  for (const Epilogue& e : {Epilogue{}, Epilogue::relu()}) {
    std::vector<KernelCall> calls;
    {
      KernelLogScope log;
      require_same_on_both("linear" + e.describe(), {bf16_input({33, 70}), bf16_input({20, 70}), bf16_input({20})},
                           [&](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2], e); });
      calls = take_kernel_calls();
    }
    std::vector<std::string> families;
    for (const KernelCall& c : calls) families.push_back(c.family);
    INFO(Catch::Detail::stringify(families));
    const auto has = [&](const std::string& f) { return std::count(families.begin(), families.end(), f) == 1; };
    CHECK(has(!e.none() ? "cublasLtMatmul (bf16 storage, bias+relu)" : "cublasLtMatmul (bf16 storage, bias)"));
    CHECK(has("cublasLtMatmul (bf16 storage, bias gradient)"));
  }
  require_same_on_both("linear without a bias", {bf16_input({9, 30}), bf16_input({7, 30})},
                       [&](const std::vector<Tensor>& t) { return linear(t[0], t[1], Tensor()); });
}

TEST_CASE("gpu: elementwise ops in bf16 match the CPU's", "[gpu][precision]") {
  require_same_on_both("relu", {bf16_input({1000})}, [](const std::vector<Tensor>& t) { return relu(t[0]); });
  require_same_on_both("tanh", {bf16_input({1000})}, [](const std::vector<Tensor>& t) { return nnlab::tanh(t[0]); });
  require_same_on_both("sigmoid", {bf16_input({1000})}, [](const std::vector<Tensor>& t) { return sigmoid(t[0]); });
  std::vector<KernelCall> calls;
  {
    KernelLogScope log;
    require_same_on_both("add", {bf16_input({8, 50}), bf16_input({50})},
                         [](const std::vector<Tensor>& t) { return add(t[0], t[1]); });
    require_same_on_both("mul", {bf16_input({6, 40}), bf16_input({6, 40})},
                         [](const std::vector<Tensor>& t) { return mul(t[0], t[1]); });
    // the same Philox mask on both devices, survivors scaled by 1/(1 − p) and rounded once
    require_same_on_both("dropout", {bf16_input({7, 33})},
                         [](const std::vector<Tensor>& t) { return dropout(t[0], 0.3, 5, 2, true); });
    calls = take_kernel_calls();
  }
  require_bf16_calls(calls, {"binary_forward add", "binary_backward add", "binary_forward mul", "binary_backward mul",
                             "dropout_forward", "dropout_backward"});
}

// A bf16 model's logits go to the loss as they are: CUDA's softmax reads bf16 and writes a
// bf16 gradient, with the loss and the gradient's values those of the logits cast to float32
// (the same float32 arithmetic), and within float32's rounding of the CPU's.
TEST_CASE("gpu: cross-entropy reads bf16 logits as they are, loss in float32", "[gpu][precision]") {
  const Tensor host = fresh_tensor({12, 10}).to(DType::BFloat16);
  const Tensor labels = Tensor::from_vector<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 3}, {12});
  std::vector<KernelCall> calls;
  const auto run = [&](const Tensor& logits, bool widen_first) {
    Tensor z = logits.detach();
    z.set_requires_grad(true);
    const Tensor on = labels.to(z.device());
    KernelLogScope log;
    Tensor loss = cross_entropy(widen_first ? cast(z, DType::Float32) : z, on);
    loss.backward();
    if (!widen_first) calls = take_kernel_calls();
    REQUIRE(loss.dtype() == DType::Float32);
    REQUIRE(z.grad().dtype() == DType::BFloat16);
    return std::make_pair(loss.item(), z.grad().to_vector<double>());
  };
  const auto direct = run(on_gpu(host), false), widened = run(on_gpu(host), true), cpu = run(host, false);
  CHECK(direct.first == widened.first);
  CHECK(direct.second == widened.second);
  CHECK(direct.first == Approx(cpu.first).epsilon(1e-6));
  require_allclose(direct.second, cpu.second, kBf16Step, 1e-6, "the logits' gradient, CUDA against the CPU");
  run(on_gpu(host), false);
  require_bf16_calls(calls, {"softmax_xent_forward"});
}

TEST_CASE("gpu: convolutions and pools in bf16 match the CPU's", "[gpu][precision]") {
  std::vector<KernelCall> calls;
  {
    KernelLogScope log;
    for (const Epilogue& e : {Epilogue{}, Epilogue::relu(), Epilogue::relu_max_pool(2)}) {
      require_same_on_both("conv2d" + e.describe(),
                           {bf16_input({3, 4, 10, 10}), bf16_input({6, 4, 3, 3}), bf16_input({6})},
                           [&](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2], 1, 1, e); });
    }
    require_same_on_both("max_pool2d", {bf16_input({2, 3, 9, 9})},
                         [](const std::vector<Tensor>& t) { return max_pool2d(t[0], 3, 2, 1); });
    require_same_on_both("avg_pool2d", {bf16_input({2, 3, 9, 9})},
                         [](const std::vector<Tensor>& t) { return avg_pool2d(t[0], 3, 2, 1); });
    calls = take_kernel_calls();
  }
  require_bf16_calls(calls, {"relu_bias_backward", "maxpool2d_forward", "maxpool2d_backward", "avgpool2d_forward",
                             "avgpool2d_backward"});
}

// BatchNorm on bf16 activations with float32 γ, β and statistics, training and evaluation, on
// CUDA's own bf16 kernels: y and dx within a bf16 step of the CPU's, the running statistics and
// dγ, dβ (float32 sums of the same bf16 values) to float32 rounding.
TEST_CASE("gpu: BatchNorm on bf16 activations matches the CPU's, statistics in float32", "[gpu][precision]") {
  const Tensor x = fresh_tensor({4, 3, 5, 5}, 1.0, 3.0).to(DType::BFloat16), seed = fresh_tensor(x.shape());
  const Tensor gamma = fresh_tensor({3}, 0.5, 1.5), beta = fresh_tensor({3});
  const Tensor mean = fresh_tensor({3}), var = fresh_tensor({3}, 0.5, 1.5);
  struct Run {
    Tensor y, dx, dgamma, dbeta, mean, var;
  };
  const auto run = [&](Device d, bool training) {
    Tensor xd = x.to(d), g = gamma.to(d), b = beta.to(d), rm = mean.to(d), rv = var.to(d);
    for (Tensor* t : {&xd, &g, &b}) t->set_requires_grad(true);
    Tensor y = batch_norm2d(xd, g, b, rm, rv, training, 0.1, 1e-5);
    y.backward(seed.to(DType::BFloat16).to(d));
    return Run{y, xd.grad(), g.grad(), b.grad(), rm, rv};
  };
  for (bool training : {true, false}) {
    INFO((training ? "training" : "evaluation"));
    std::vector<KernelCall> calls;
    Run on_gpu_side;
    {
      KernelLogScope log;
      on_gpu_side = run(Device::cuda(0), training);
      calls = take_kernel_calls();
    }
    const Run on_cpu = run(Device::cpu(), training);
    CHECK(on_gpu_side.y.dtype() == DType::BFloat16);
    CHECK(on_gpu_side.dx.dtype() == DType::BFloat16);
    CHECK(on_gpu_side.dgamma.dtype() == DType::Float32);
    require_allclose(on_gpu_side.y.to_vector<double>(), on_cpu.y.to_vector<double>(), kBf16Step, 1e-6, "y");
    require_allclose(on_gpu_side.dx.to_vector<double>(), on_cpu.dx.to_vector<double>(), kBf16Step, 1e-4, "dx");
    for (const auto& [gpu_t, cpu_t, name] : {std::tuple{on_gpu_side.dgamma, on_cpu.dgamma, "dgamma"},
                                             std::tuple{on_gpu_side.dbeta, on_cpu.dbeta, "dbeta"},
                                             std::tuple{on_gpu_side.mean, on_cpu.mean, "running mean"},
                                             std::tuple{on_gpu_side.var, on_cpu.var, "running var"}})
      require_allclose(gpu_t.to_vector<double>(), cpu_t.to_vector<double>(), 1e-5, 1e-5, name);
    require_bf16_calls(calls, {training ? "batchnorm_forward_train" : "batchnorm_forward_eval"});
    if (training) require_bf16_calls(calls, {"batchnorm_backward"});
  }
}

// A bf16 convolution runs in cuDNN on the bf16 tensors themselves (the log names each call's
// data "bf16"; a widened one would convolve float32 copies), and rounds its output once, to
// nearest even, with the bias inside the float32 sum. One 3 × 3 window of ones, so each output
// is the sum of its filter's taps:
//   1 + 3·2⁻⁹ with no bias: bf16's step at 1 is 2⁻⁷, so it rounds up to 1 + 2⁻⁷ (a truncating
//   store would keep 1);
//   1 + 2⁻⁹ with the bias −1: 2⁻⁹ exactly when rounded once (rounding the product first to 1,
//   then adding the bias, would give 0).
TEST_CASE("gpu: a bf16 convolution runs in cuDNN in bf16 and rounds once, the bias inside", "[gpu][precision]") {
  const auto on_device_bf16 = [](const std::vector<float>& v, const Shape& s) {
    Tensor t = on_gpu(Tensor::from_vector(v, s).to(DType::BFloat16));
    t.set_requires_grad(true);
    return t;
  };
  std::vector<float> taps(18, 0.0f);
  taps[0] = 1.0f, taps[4] = 3.0f * 0x1p-9f;  // filter 0: 1 + 3·2⁻⁹
  taps[9] = 1.0f, taps[13] = 0x1p-9f;        // filter 1: 1 + 2⁻⁹
  const Tensor x = on_device_bf16(std::vector<float>(9, 1.0f), {1, 1, 3, 3});
  const Tensor w = on_device_bf16(taps, {2, 1, 3, 3}), b = on_device_bf16({0.0f, -1.0f}, {2});
  std::vector<KernelCall> calls;
  Tensor y;
  {
    KernelLogScope log;
    y = conv2d(x, w, b, 1, 0);
    y.backward(on_gpu(Tensor::full({1, 2, 1, 1}, 1.0, DType::BFloat16)));
    calls = take_kernel_calls();
  }
  CHECK(y.to_vector<double>() == std::vector<double>{1.0 + 0x1p-7, 0x1p-9});
  require_bf16_calls(calls, {"bias_broadcast", "cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                             "cudnnConvolutionBackwardFilter", "bias_backward"});
  // dx at the centre sums both filters' centre taps: 3·2⁻⁹ + 2⁻⁹ = 2⁻⁷, exact
  CHECK(x.grad().to_vector<double>()[4] == 0x1p-7);
  CHECK(x.grad().to_vector<double>()[0] == 2.0);
}

// A GPU without bf16 tensor cores (compute capability below 8.0; the simulator reports the one
// NNLAB_SIM_COMPUTE_CAPABILITY says) is refused for bf16 by every command, before any data is
// read and with nothing written, and still trains in float32.
TEST_CASE("gpu: --precision bf16 on a GPU without bf16 tensor cores is one clear refusal", "[gpu][precision][cli]") {
  if (!cuda_simulated()) {
    WARN("a real GPU reports its own compute capability; the refusal is checked on the simulator");
    return;
  }
  nnlab_test::ScopedEnv volta("NNLAB_SIM_COMPUTE_CAPABILITY", "7.0");
  const nnlab_test::TempDir dir("nnlab_bf16");
  const std::string metrics = dir / "m.jsonl";
  const char* why = "has compute capability 7.0; bf16 tensors need 8.0 or later (Ampere, Hopper)";
  const std::vector<std::string> commands = {
      "train --device cuda --model mlp --max-steps 1 --precision bf16 --metrics " + metrics,
      "compare --model mlp --devices cpu,cuda:precision=bf16 --max-steps 1 --metrics " + metrics,
      "explain --model mlp --batch 2 --device cuda --precision bf16"};
  for (const std::string& command : commands) {
    const nnlab_test::CliResult r = nnlab_test::run_cli(command);
    INFO(command << "\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find(why) != std::string::npos);
    CHECK(r.output.find("steps in") == std::string::npos);  // nothing trained
  }
  CHECK_FALSE(std::filesystem::exists(metrics));
  const nnlab_test::CliResult fp32 =
      nnlab_test::run_cli("train --device cuda --model mlp --max-steps 2 --test-images 64");
  INFO(fp32.output);
  CHECK(fp32.exit_code == 0);
}

// A bf16 model's weights go to their bf16 copies in one launch from its second forward on
// (WeightCopies), with the logits and gradients of the first forward's casts one by one; their
// gradients come back to float32 in one launch in every backward (the engine's leaf casts).
TEST_CASE("gpu: a bf16 model casts its weights in one launch, as one by one", "[gpu][precision]") {
  auto model = std::make_shared<Sequential>();
  model->add("f1", std::make_shared<Linear>(20, 30)).add("relu", std::make_shared<ReLU>());
  model->add("f2", std::make_shared<Linear>(30, 5));
  model->initialize(3);
  model->to(Device::cuda(0));
  model->set_compute_dtype(DType::BFloat16);
  const Tensor x = on_gpu(fresh_tensor({8, 20}));
  const auto step = [&](std::vector<KernelCall>* calls) {
    for (Tensor p : model->parameters()) p.set_grad(Tensor());
    KernelLogScope log;
    const Tensor logits = model->forward(x);
    sum(logits).backward();
    *calls = take_kernel_calls();
    std::vector<std::vector<double>> out{logits.to_vector<double>()};
    for (const Tensor& p : model->parameters()) out.push_back(p.grad().to_vector<double>());
    return out;
  };
  std::vector<KernelCall> first, second;
  const auto one_by_one = step(&first), in_one_call = step(&second);
  CHECK(in_one_call == one_by_one);
  // Backward casts the four gradients to float32 in one launch after the walk, in both steps.
  const auto details = [](const std::vector<KernelCall>& calls) {
    std::vector<std::string> out;
    for (const KernelCall& c : calls) {
      if (c.family != "cast_all") continue;
      out.push_back(c.detail);
      REQUIRE(c.launches.size() == 1);
      CHECK(c.launches[0].kernel == "cast_list_kernel");
    }
    return out;
  };
  CHECK(details(first) == std::vector<std::string>{"4 tensors to float32"});
  CHECK(details(second) == std::vector<std::string>{"4 tensors to bf16", "4 tensors to float32"});
}
