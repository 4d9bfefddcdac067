// A Conv2d followed by a max-pool and its ReLU, fused (conv2d with a max-pool + ReLU epilogue):
// fuse_epilogues' grouping, and the fused op against the ops one by one, bit
// for bit, forward and backward, on the CPU's Winograd path (which pools each output plane as
// it leaves the transform, and routes the pool's gradient plane by plane as its backward
// kernels read it) and the paths that run the two kernels, under both instruction sets.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "devices/cpu/threads.h"
#include "devices/kernel_log.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/fuse_epilogues.h"
#include "layers/pool.h"
#include "layers/sequential.h"
#include "cpu_paths_support.h"
#include "run_order_support.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::check_paths_seen;
using nnlab_test::for_each_cpu_isa;
using nnlab_test::random_tensor;
using nnlab_test::run_order_names;

constexpr uint64_t kPoolFusionSeed = 83;

// body(setting, dtype) for 1 and 2 threads, each instruction set this CPU has, float32 and
// float64; setting names the first three for INFO. The default thread count comes back after.
template <typename Body>
void for_each_setting(Body&& body) {
  for (int threads : {1, 2})
    for_each_cpu_isa([&](CpuIsa isa) {
      set_cpu_threads(threads);
      for (DType dtype : {DType::Float32, DType::Float64})
        body(std::string(cpu_isa_name(isa)) + ", " + std::to_string(threads) + " threads, " + dtype_name(dtype) +
                 ": ",
             dtype);
    });
  set_cpu_threads(0);
}

TEST_CASE("fuse_epilogues runs a Conv2d, a max-pool and its ReLU as one op", "[conv2d][pool2d][layers]") {
  // cifar-cnn's pattern (conv, ReLU, conv, ReLU, pool) and the other order of the pair
  Sequential cifar;
  cifar.add("c1", std::make_shared<Conv2d>(3, 8, 3, 1, 1)).add("relu1", std::make_shared<ReLU>());
  cifar.add("c2", std::make_shared<Conv2d>(8, 8, 3, 1, 1)).add("relu2", std::make_shared<ReLU>());
  cifar.add("pool1", std::make_shared<MaxPool2d>(2));
  CHECK(fuse_epilogues(cifar) == 2);
  CHECK(run_order_names(cifar) == std::vector<std::string>{"c1+relu1", "c2+pool1+relu2"});
  CHECK(cifar.run_order()[1].describe() ==
        "Conv2d(8, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)) + MaxPool2d(kernel_size=2, stride=2, "
        "padding=0) + ReLU()");
  CHECK(cifar.parameters().size() == 4);  // the children and their parameters stay as built

  Sequential pool_first;
  pool_first.add("c", std::make_shared<Conv2d>(4, 4, 3)).add("pool", std::make_shared<MaxPool2d>(3, 2, 1));
  pool_first.add("relu", std::make_shared<ReLU>());
  fuse_epilogues(pool_first);
  CHECK(run_order_names(pool_first) == std::vector<std::string>{"c+pool+relu"});

  // A pool without a ReLU beside it stays a pool.
  Sequential no_relu;
  no_relu.add("c", std::make_shared<Conv2d>(4, 4, 3)).add("pool", std::make_shared<MaxPool2d>(2));
  fuse_epilogues(no_relu);
  CHECK(run_order_names(no_relu) == std::vector<std::string>{"c", "pool"});
}

TEST_CASE("conv2d with a max-pool epilogue equals conv2d, then max_pool2d_relu, bit for bit", "[conv2d][pool2d][ops]") {
  struct Case {
    int64_t n, c, hw, k, pad, pool_kernel, pool_stride, w = 0;  // w: the width where not hw
  };
  // Winograd, pooled plane by plane: cifar-cnn's c2 (F(4×4) on 32×32: filter gradient tiles from
  // the pool's gradient, 8 tiles a row) and c4 (F(4×4) on 16×16: the same, rows paired), a 14×16
  // plane (F(2×2), tiles from the pool's gradient), the cnn's 14×14, an odd 9×9 plane (its last
  // row and column in no window). The two kernels one after the other: a 3×3 pool with stride
  // 2, and 3 input channels (the direct kernel).
  // With 16 channels and more, in and out, over rows of 16 and 32 (c2 and c4 at 16 channels):
  // the forward and the data gradient with the channels in the lanes, the latter's block made
  // from the pool's gradient (256 and 64 windows a plane), or, 24 windows (not whole 16s), from
  // unpooled planes.
  const std::vector<Case> cases = {{2, 8, 32, 8, 1, 2, 2},   {3, 16, 16, 12, 1, 2, 2}, {2, 8, 14, 8, 1, 2, 2, 16},
                                   {3, 8, 14, 16, 1, 2, 2},  {2, 8, 9, 8, 1, 2, 2},    {2, 8, 12, 8, 1, 3, 2},
                                   {3, 3, 16, 8, 1, 2, 2},   {2, 16, 32, 16, 1, 2, 2}, {3, 32, 16, 16, 1, 2, 2},
                                   {2, 16, 6, 16, 1, 2, 2, 16}};
  std::set<std::string> kernels;
  for_each_setting([&](const std::string& setting, DType dtype) {
    for (const Case& c : cases) {
      const int64_t width = c.w ? c.w : c.hw;
      INFO(setting << c.n << "×" << c.c << "×" << c.hw << "×" << width << " → " << c.k << " pad " << c.pad
                   << ", pool " << c.pool_kernel << " stride " << c.pool_stride);
      Tensor x = random_tensor({c.n, c.c, c.hw, width}, kPoolFusionSeed, 1, dtype);
      Tensor w = random_tensor({c.k, c.c, 3, 3}, kPoolFusionSeed, 2, dtype);
      Tensor b = random_tensor({c.k}, kPoolFusionSeed, 3, dtype);
      for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
      Tensor y_fused;
      {
        KernelLogScope log;  // which kernels ran
        y_fused = conv2d(x, w, b, 1, c.pad, Epilogue::relu_max_pool(c.pool_kernel, c.pool_stride, 0));
        for (const KernelCall& call : take_kernel_calls()) {
          kernels.insert(call.family);
          if (call.detail.find("16 channels in the lanes") != std::string::npos) kernels.insert("channel lanes, forward");
        }
      }
      const Tensor dy = random_tensor(y_fused.shape(), kPoolFusionSeed, 4, dtype);
      {
        KernelLogScope log;
        y_fused.backward(dy);
        for (const KernelCall& call : take_kernel_calls()) {
          kernels.insert(call.family);
          if (call.detail.find("conv2d bwd data") != std::string::npos &&
              call.detail.find("16 channels in the lanes") != std::string::npos)
            kernels.insert("channel lanes, data gradient");
        }
      }
      std::vector<std::vector<double>> fused_grads, plain_grads;
      for (Tensor* t : {&x, &w, &b}) {
        fused_grads.push_back(t->grad().to_vector<double>());
        t->set_grad(Tensor());
      }
      Tensor y_plain = max_pool2d_relu(conv2d(x, w, b, 1, c.pad), c.pool_kernel, c.pool_stride, 0);
      y_plain.backward(dy);
      for (Tensor* t : {&x, &w, &b}) plain_grads.push_back(t->grad().to_vector<double>());
      const std::vector<double> y_values = y_fused.to_vector<double>();
      CHECK(y_values == y_plain.to_vector<double>());
      CHECK(fused_grads == plain_grads);
      size_t zeros = 0;  // the ReLU did cut whole 2×2 windows (of 9 cells, hardly any): no gradient there
      for (double v : y_values) zeros += v == 0.0;
      if (c.pool_kernel == 2) CHECK(zeros > 0);
      CHECK(zeros < y_values.size());
    }
  });
  // The pooled Winograd kernels ran, forward and backward, and so did the two kernels of the
  // other cases.
  check_paths_seen(kernels, {"maxpool2d_forward (in the convolution)", "maxpool2d_backward (in the convolution)",
                             "winograd", "direct", "maxpool2d_forward", "maxpool2d_backward"});
  // The forward and the data gradient take the channel lanes with AVX-512 only.
  if (cpu_supports(CpuIsa::avx512)) check_paths_seen(kernels, {"channel lanes, forward", "channel lanes, data gradient"});
}

TEST_CASE("conv2d's max-pool epilogue names a pool that does not fit the convolution's output", "[conv2d][pool2d][ops]") {
  const Tensor x = Tensor::zeros({1, 2, 4, 4}), w = Tensor::zeros({3, 2, 3, 3}), b = Tensor::zeros({3});
  CHECK_THROWS_WITH(conv2d(x, w, b, 1, 0, Epilogue::relu_max_pool(3)),
                    Catch::Contains("conv2d's max-pool: a 3×3 window with padding 0 does not fit input the "
                                    "convolution's output float32[1, 3, 2, 2]"));
}

TEST_CASE("conv2d's max-pool epilogue of a first layer (no input gradient) equals the ops one by one, bit for bit",
          "[conv2d][pool2d][ops]") {
  struct Case {
    int64_t n, c, hw, k, r, pad;
  };
  // The direct kernels, pooled image by image: lenet5's c1 (1 channel, 5×5, 28×28 → 6), an
  // odd 27×27 output (its last row and column in no window) with 3 channels; Winograd's filter
  // gradient alone: 8 channels, 3×3.
  // 20 images: the filter gradient with the images in the lanes (a partial second group).
  const std::vector<Case> cases = {{3, 1, 28, 6, 5, 2}, {2, 3, 27, 5, 5, 2}, {2, 8, 16, 8, 3, 1}, {20, 1, 28, 6, 5, 2}};
  std::set<std::string> kernels;
  for_each_setting([&](const std::string& setting, DType dtype) {
    for (const Case& c : cases) {
      INFO(setting << c.n << "×" << c.c << "×" << c.hw << "² → " << c.k << ", " << c.r << "×" << c.r << " pad "
                   << c.pad);
      const Tensor x = random_tensor({c.n, c.c, c.hw, c.hw}, kPoolFusionSeed, 5, dtype);
      Tensor w = random_tensor({c.k, c.c, c.r, c.r}, kPoolFusionSeed, 6, dtype);
      Tensor b = random_tensor({c.k}, kPoolFusionSeed, 7, dtype);
      w.set_requires_grad(true);
      b.set_requires_grad(true);
      Tensor y_fused;
      {
        KernelLogScope log;
        y_fused = conv2d(x, w, b, 1, c.pad, Epilogue::relu_max_pool(2, 2, 0));
        const Tensor dy = random_tensor(y_fused.shape(), kPoolFusionSeed, 8, dtype);
        y_fused.backward(dy);
        for (const KernelCall& call : take_kernel_calls()) kernels.insert(call.family);
      }
      const std::vector<double> w_fused = w.grad().to_vector<double>(), b_fused = b.grad().to_vector<double>();
      w.set_grad(Tensor());
      b.set_grad(Tensor());
      Tensor y_plain = max_pool2d_relu(conv2d(x, w, b, 1, c.pad), 2, 2, 0);
      y_plain.backward(random_tensor(y_plain.shape(), kPoolFusionSeed, 8, dtype));
      CHECK(y_fused.to_vector<double>() == y_plain.to_vector<double>());
      CHECK(w_fused == w.grad().to_vector<double>());
      CHECK(b_fused == b.grad().to_vector<double>());
      CHECK(!x.grad().defined());
    }
  });
  check_paths_seen(kernels, {"maxpool2d_forward (in the convolution)", "maxpool2d_backward (in the convolution)",
                             "winograd", "direct"});
  // No plain pool ran: every case was fused both ways.
  CHECK(kernels.count("maxpool2d_forward") == 0);
  CHECK(kernels.count("maxpool2d_backward") == 0);
}
