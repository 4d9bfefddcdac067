// A Linear or Conv2d layer and the ReLU after it, fused (linear and conv2d with a ReLU
// epilogue): fuse_epilogues' pairing, and the fused ops against the two ops one by
// one, bit for bit, forward and backward, on every CPU kernel path and both instruction sets;
// the fused ReLU-and-bias gradient kernel against its two kernels.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/threads.h"
#include "devices/kernel_log.h"
#include "devices/registry.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/fuse_epilogues.h"
#include "layers/linear.h"
#include "layers/pool.h"
#include "layers/sequential.h"
#include "conv_support.h"
#include "cpu_paths_support.h"
#include "run_order_support.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::check_paths_seen;
using nnlab_test::for_each_cpu_isa;
using nnlab_test::random_tensor;
using nnlab_test::run_order_names;

namespace {

constexpr uint64_t kReluFusionSeed = 77;

// One model's parameters' gradients, in registration order, as doubles.
std::vector<std::vector<double>> gradients_of(const Module& model) {
  std::vector<std::vector<double>> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<double>());
  return grads;
}

void drop_gradients(Module& model) {
  for (Tensor p : model.parameters()) p.set_grad(Tensor());
}

}  // namespace

TEST_CASE("fuse_epilogues runs a Linear and the ReLU after it as one op", "[linear][layers]") {
  Sequential mlp;
  mlp.add("fc1", std::make_shared<Linear>(12, 8)).add("relu1", std::make_shared<ReLU>());
  mlp.add("fc2", std::make_shared<Linear>(8, 6)).add("relu2", std::make_shared<ReLU>());
  mlp.add("fc3", std::make_shared<Linear>(6, 3));
  // Nothing is fused until the pass runs.
  CHECK(run_order_names(mlp) == std::vector<std::string>{"fc1", "relu1", "fc2", "relu2", "fc3"});
  CHECK(fuse_epilogues(mlp) == 2);
  CHECK(run_order_names(mlp) == std::vector<std::string>{"fc1+relu1", "fc2+relu2", "fc3"});
  CHECK(mlp.run_order()[0].describe() == "Linear(in_features=12, out_features=8, bias=true) + ReLU()");
  CHECK(mlp.parameters().size() == 6);  // the children and their parameters stay as built
  CHECK(mlp.describe().find("fuse_epilogues ran these groups as one op each:\n  fc1+relu1: Linear") != std::string::npos);

  // A ReLU with a max-pool after it goes to the pool (pooled, it is a quarter the size); a ReLU
  // after anything else stays a ReLU.
  Sequential mixed;
  mixed.add("fc", std::make_shared<Linear>(4, 4)).add("relu1", std::make_shared<ReLU>());
  mixed.add("pool", std::make_shared<MaxPool2d>(2)).add("relu2", std::make_shared<ReLU>());
  fuse_epilogues(mixed);
  CHECK(run_order_names(mixed) == std::vector<std::string>{"fc", "pool+relu1", "relu2"});

  // cifar-cnn's pattern: conv, ReLU, conv, ReLU, pool (the second conv takes the pool and its
  // ReLU: test_conv_pool_fusion.cpp).
  Sequential cnn;
  cnn.add("c1", std::make_shared<Conv2d>(3, 8, 3, 1, 1)).add("relu1", std::make_shared<ReLU>());
  cnn.add("c2", std::make_shared<Conv2d>(8, 8, 3, 1, 1)).add("relu2", std::make_shared<ReLU>());
  cnn.add("pool1", std::make_shared<MaxPool2d>(2));
  fuse_epilogues(cnn);
  CHECK(run_order_names(cnn) == std::vector<std::string>{"c1+relu1", "c2+pool1+relu2"});
  CHECK(cnn.run_order()[0].describe() ==
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)) + ReLU()");
}

TEST_CASE("linear with a ReLU epilogue equals linear then relu bit for bit, forward and backward", "[linear][ops]") {
  struct Case {
    int64_t n, in, out;
    bool bias;
  };
  // The mlp's first layer (AVX-512's dot-product route; with AVX2 libxsmm's product, then the
  // bias and the ReLU as passes), an odd small one, one without a bias.
  const std::vector<Case> cases = {{64, 784, 256, true}, {5, 7, 9, true}, {6, 33, 17, false}};
  const CpuIsa saved_isa = cpu_isa();
  for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512}) {
    if (!cpu_supports(isa)) continue;
    for (const Case& c : cases)
      for (DType dtype : {DType::Float32, DType::Float64})
        for (int threads : {1, 2}) {
          INFO(cpu_isa_name(isa) << ": " << c.n << "×" << c.in << " → " << c.out << (c.bias ? " bias " : " no bias ")
                                 << (dtype == DType::Float32 ? "float32" : "float64") << ", " << threads << " threads");
          set_cpu_isa(isa);
          set_cpu_threads(threads);
          Linear layer(LinearOptions{c.in, c.out, c.bias});
          layer.initialize(kReluFusionSeed);
          layer.to(dtype);
          Sequential fused;
          fused.add("fc", std::shared_ptr<Linear>(&layer, [](Linear*) {})).add("relu", std::make_shared<ReLU>());
          fuse_epilogues(fused);
          REQUIRE(run_order_names(fused) == std::vector<std::string>{"fc+relu"});

          Tensor x = random_tensor({c.n, c.in}, kReluFusionSeed, 1, dtype);
          x.set_requires_grad(true);
          const Tensor dy = random_tensor({c.n, c.out}, kReluFusionSeed, 2, dtype);

          Tensor y_fused = fused.forward(x);
          y_fused.backward(dy);
          const std::vector<double> dx_fused = x.grad().to_vector<double>();
          const auto param_grads_fused = gradients_of(layer);

          x.set_grad(Tensor());
          drop_gradients(layer);
          Tensor y_plain = relu(layer.forward(x));
          y_plain.backward(dy);

          const std::vector<double> y_values = y_fused.to_vector<double>();
          CHECK(y_values == y_plain.to_vector<double>());
          CHECK(dx_fused == x.grad().to_vector<double>());
          CHECK(param_grads_fused == gradients_of(layer));
          size_t zeros = 0;  // the ReLU did cut: some outputs are 0, some not
          for (double v : y_values) zeros += v == 0.0;
          CHECK(zeros > 0);
          CHECK(zeros < y_values.size());
        }
  }
  set_cpu_isa(saved_isa);
  set_cpu_threads(0);
}

TEST_CASE("linear with a ReLU epilogue gives a NaN sum 0, as relu does, and no gradient through it", "[linear][ops]") {
  const Tensor w = Tensor::from_vector(std::vector<float>{1, 1, 1, -1}, {2, 2});
  const Tensor b = Tensor::from_vector(std::vector<float>{0, 0}, {2});
  Tensor x = Tensor::from_vector(std::vector<float>{std::numeric_limits<float>::quiet_NaN(), 1, 2, 1}, {2, 2});
  x.set_requires_grad(true);
  Tensor y = linear(x, w, b, Epilogue::relu());
  CHECK(y.to_vector<float>() == std::vector<float>{0, 0, 3, 1});
  y.backward(Tensor::full({2, 2}, 1.0));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0, 0, 2, 0});
}

TEST_CASE("conv2d with a ReLU epilogue equals conv2d then relu bit for bit on every CPU kernel path", "[conv2d][ops]") {
  struct Case {
    int64_t n, c, hw, k, kernel, stride, pad;
  };
  // cifar-cnn's c1 (direct), c2 (Winograd F(4×4)) and c3 (F(2×2)) on fewer images; lenet5's c1
  // (5 × 5); a stride of 2 (im2col + GEMM).
  const std::vector<Case> cases = {{4, 3, 32, 32, 3, 1, 1}, {2, 32, 32, 32, 3, 1, 1}, {4, 32, 16, 64, 3, 1, 1},
                                   {4, 1, 28, 6, 5, 1, 2},  {3, 4, 11, 5, 3, 2, 1}};
  std::set<std::string> kernels;
  set_cpu_threads(2);
  for_each_cpu_isa([&](CpuIsa isa) {
    for (const Case& c : cases)
      for (DType dtype : {DType::Float32, DType::Float64}) {
        INFO(cpu_isa_name(isa) << ": " << c.n << "×" << c.c << "×" << c.hw << "² → " << c.k << ", " << c.kernel
                               << "×" << c.kernel << " stride " << c.stride << " pad " << c.pad << ", "
                               << (dtype == DType::Float32 ? "float32" : "float64"));
        Tensor x = random_tensor({c.n, c.c, c.hw, c.hw}, kReluFusionSeed, 5, dtype);
        Tensor w = random_tensor({c.k, c.c, c.kernel, c.kernel}, kReluFusionSeed, 6, dtype);
        Tensor b = random_tensor({c.k}, kReluFusionSeed, 7, dtype);
        for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
        Tensor y_fused;
        {
          KernelLogScope log;  // which kernels ran
          y_fused = conv2d(x, w, b, c.stride, c.stride, c.pad, c.pad, Epilogue::relu());
          for (const KernelCall& call : take_kernel_calls()) kernels.insert(call.family);
        }
        const Tensor dy = random_tensor(y_fused.shape(), kReluFusionSeed, 8, dtype);
        y_fused.backward(dy);
        std::vector<std::vector<double>> fused_grads, plain_grads;
        for (Tensor* t : {&x, &w, &b}) {
          fused_grads.push_back(t->grad().to_vector<double>());
          t->set_grad(Tensor());
        }
        Tensor y_plain = relu(conv2d(x, w, b, c.stride, c.stride, c.pad, c.pad));
        y_plain.backward(dy);
        for (Tensor* t : {&x, &w, &b}) plain_grads.push_back(t->grad().to_vector<double>());
        CHECK(y_fused.to_vector<double>() == y_plain.to_vector<double>());
        CHECK(fused_grads == plain_grads);
      }
  });
  set_cpu_threads(0);
  check_paths_seen(kernels, {"direct", "winograd", "im2col"});
}

TEST_CASE("the CPU's fused ReLU and bias gradient equals its two kernels on any thread count", "[linear][reduce]") {
  // Convolution planes (inner > 1: lanes and tails, 14 × 14 = 196 = 6 · 32 + 4) and Linear rows.
  Backend& cpu = backend_for(Device::cpu());
  for (const Shape& shape : {Shape{4, 8, 14, 14}, Shape{64, 32, 4, 4}, Shape{64, 256}})
    for (DType dtype : {DType::Float32, DType::Float64})
      for (int threads : {1, 2}) {
        INFO(shape.size() << "-d input, " << (dtype == DType::Float32 ? "float32" : "float64") << ", " << threads
                          << " threads");
        set_cpu_threads(threads);
        const int64_t c = shape[1], inner = shape.size() == 4 ? shape[2] * shape[3] : 1;
        const Tensor y = relu(random_tensor(shape, kReluFusionSeed, 3, dtype));
        const Tensor dy = random_tensor(shape, kReluFusionSeed, 4, dtype);
        Tensor dz = Tensor::empty(shape, dtype), db = Tensor::empty({c}, dtype);
        cpu.relu_bias_backward(y, dy, dz, &db, inner);
        Tensor dz_plain = Tensor::empty(shape, dtype), db_plain = Tensor::empty({c}, dtype);
        cpu.unary_backward(UnaryOp::Relu, y, y, dy, dz_plain);
        cpu.bias_backward(dz_plain, db_plain, inner);
        CHECK(dz.to_vector<double>() == dz_plain.to_vector<double>());
        CHECK(db.to_vector<double>() == db_plain.to_vector<double>());
      }
  set_cpu_threads(0);
}

// A first layer (its input needs no gradient): the ReLU epilogue's backward asks the backend for
// the weight and bias gradients alone (Backend::conv2d_backward, dx undefined), which the CPU's im2col path
// makes image by image without storing dz. Against the two kernels, bit for bit: cifar-cnn's
// first layer on few images, resnet8's, one image (fewer than the threads: images one at a
// time), a stride of 2 (OpenBLAS's product), with and without a bias.
TEST_CASE("a first layer's fused ReLU, bias and filter gradient equals its two kernels", "[conv2d][ops]") {
  struct Case {
    int64_t n, c, hw, k, stride;
  };
  const std::vector<Case> cases = {{4, 3, 32, 32, 1}, {3, 3, 32, 16, 1}, {1, 3, 20, 16, 1}, {3, 5, 11, 7, 2}};
  Backend& cpu = backend_for(Device::cpu());
  for_each_cpu_isa([&](CpuIsa isa) {
    for (const Case& c : cases)
      for (DType dtype : {DType::Float32, DType::Float64})
        for (int threads : {1, 2})
          for (bool with_bias : {true, false}) {
            INFO(cpu_isa_name(isa) << ": " << c.n << "×" << c.c << "×" << c.hw << "² → " << c.k << " stride "
                                   << c.stride << ", " << (dtype == DType::Float32 ? "float32" : "float64") << ", "
                                   << threads << " threads, " << (with_bias ? "bias" : "no bias"));
            set_cpu_threads(threads);
            const Tensor x = random_tensor({c.n, c.c, c.hw, c.hw}, kReluFusionSeed, 9, dtype);
            Tensor w = random_tensor({c.k, c.c, 3, 3}, kReluFusionSeed, 10, dtype);
            Tensor b = with_bias ? random_tensor({c.k}, kReluFusionSeed, 11, dtype) : Tensor();
            w.set_requires_grad(true);
            if (with_bias) b.set_requires_grad(true);
            // Through autograd: x needs no gradient, so the node takes the fused call.
            Tensor y;
            std::vector<std::string> kernels;
            {
              KernelLogScope log;
              y = conv2d(x, w, b, c.stride, c.stride, 1, 1, Epilogue::relu());
              const Tensor dy = random_tensor(y.shape(), kReluFusionSeed, 12, dtype);
              y.backward(dy);
              for (const KernelCall& call : take_kernel_calls()) kernels.push_back(call.family);
            }
            CHECK(std::none_of(kernels.begin(), kernels.end(),
                               [](const std::string& k) { return k.find("relu_bias_backward") != std::string::npos; }));
            const Tensor dy = random_tensor(y.shape(), kReluFusionSeed, 12, dtype);
            const Conv2dGeometry g{c.n, c.c, c.hw, c.hw, c.k, 3, 3, c.stride, c.stride, 1, 1, y.dim(2), y.dim(3)};
            Tensor dz = Tensor::empty(y.shape(), dtype), dw_plain = Tensor::empty(w.shape(), dtype);
            Tensor db_plain = Tensor::empty({c.k}, dtype);
            cpu.relu_bias_backward(y, dy, dz, with_bias ? &db_plain : nullptr, g.p * g.q);
            nnlab_test::conv_backward_filter(cpu, g, dz, x, dw_plain);
            CHECK(w.grad().to_vector<double>() == dw_plain.to_vector<double>());
            if (with_bias) CHECK(b.grad().to_vector<double>() == db_plain.to_vector<double>());
          }
  });
  set_cpu_threads(0);
}
