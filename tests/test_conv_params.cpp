// A convolution's weight and bias gradients from one pass over dy (Backend::conv2d_backward with dw and db):
// the CPU's filter gradients sum each plane of dy for the bias as they read it (bias_lanes.h).
// Against bias_backward and the filter gradient alone one after the other, bit for bit, on every
// CPU kernel path, both instruction sets, one and two threads, float32 and float64.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/threads.h"
#include "devices/conv_impl.h"
#include "devices/kernel_log.h"
#include "devices/registry.h"
#include "conv_support.h"
#include "cpu_paths_support.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::check_paths_seen;
using nnlab_test::for_each_cpu_isa;
using nnlab_test::random_tensor;

namespace {

constexpr uint64_t kConvParamsSeed = 91;

Conv2dGeometry geometry(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t out = (hw + 2 * pad - kernel) / stride + 1;
  return Conv2dGeometry{n, c, hw, hw, k, kernel, kernel, stride, stride, pad, pad, out, out};
}

}  // namespace

TEST_CASE("the filter gradient's bias sums equal bias_backward bit for bit on every CPU path", "[conv2d]") {
  // lenet5's c1 (direct) and c2 (direct, channels in the lanes), cifar-cnn's c3 (Winograd) on
  // fewer images, cifar-cnn's c1 (im2col + small_gemm), a stride of 2 (im2col + OpenBLAS), one
  // image (fewer than the threads), planes not a multiple of the 32 lanes.
  const std::vector<Conv2dGeometry> cases = {geometry(4, 1, 28, 6, 5, 1, 2),  geometry(4, 6, 14, 16, 5, 1, 0),
                                             geometry(3, 32, 16, 64, 3, 1, 1), geometry(3, 3, 32, 32, 3, 1, 1),
                                             geometry(3, 5, 11, 7, 3, 2, 1),   geometry(1, 8, 9, 8, 3, 1, 1)};
  Backend& cpu = backend_for(Device::cpu());
  std::set<std::string> kernels;
  for_each_cpu_isa([&](CpuIsa isa) {
    for (const Conv2dGeometry& g : cases)
      for (DType dtype : {DType::Float32, DType::Float64})
        for (int threads : {1, 2}) {
          INFO(cpu_isa_name(isa) << ": " << g.n << "×" << g.c << "×" << g.h << "² → " << g.k << ", " << g.r << "×"
                                 << g.s << " stride " << g.stride_h << ", "
                                 << (dtype == DType::Float32 ? "float32" : "float64") << ", " << threads
                                 << " threads");
          set_cpu_threads(threads);
          const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, kConvParamsSeed, 1, dtype);
          const Tensor dy = random_tensor({g.n, g.k, g.p, g.q}, kConvParamsSeed, 2, dtype);
          Tensor dw = Tensor::empty({g.k, g.c, g.r, g.s}, dtype), db = Tensor::empty({g.k}, dtype);
          {
            KernelLogScope log;
            nnlab_test::conv_backward_filter(cpu, g, dy, x, dw, &db);
            for (const KernelCall& call : take_kernel_calls()) kernels.insert(call.family);
          }
          Tensor dw_plain = Tensor::empty(dw.shape(), dtype), db_plain = Tensor::empty({g.k}, dtype);
          cpu.bias_backward(dy, db_plain, g.p * g.q);
          nnlab_test::conv_backward_filter(cpu, g, dy, x, dw_plain);
          CHECK(dw.to_vector<double>() == dw_plain.to_vector<double>());
          CHECK(db.to_vector<double>() == db_plain.to_vector<double>());
          // Winograd's F(4×4) filter gradient, which auto does not choose, sums the same way.
          if (g.r == 3 && g.stride_h == 1 && g.c >= 8) {
            Tensor dw4 = Tensor::empty(dw.shape(), dtype), db4 = Tensor::empty({g.k}, dtype);
            cpu::winograd_backward_filter(g, cpu::WinogradTile::F4x4, dy, x, dw4, &db4);
            CHECK(db4.to_vector<double>() == db_plain.to_vector<double>());
          }
        }
  });
  // The reference loops leave the bias to bias_backward itself.
  set_conv_impl(ConvImpl::Reference);
  {
    const Conv2dGeometry g = cases[1];
    const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, kConvParamsSeed, 1, DType::Float32);
    const Tensor dy = random_tensor({g.n, g.k, g.p, g.q}, kConvParamsSeed, 2, DType::Float32);
    Tensor dw = Tensor::empty({g.k, g.c, g.r, g.s}), db = Tensor::empty({g.k}), db_plain = Tensor::empty({g.k});
    nnlab_test::conv_backward_filter(cpu, g, dy, x, dw, &db);
    cpu.bias_backward(dy, db_plain, g.p * g.q);
    CHECK(db.to_vector<float>() == db_plain.to_vector<float>());
  }
  set_conv_impl(ConvImpl::Auto);
  set_cpu_threads(0);
  check_paths_seen(kernels, {"direct", "winograd", "im2col+small_gemm", "im2col+blas"});
}

// Through autograd: a Conv2d whose weight and bias both need gradients takes the one call (no
// bias_backward of its own), and its gradients equal the three kernels run apart.
TEST_CASE("Conv2d's weight and bias gradients come from one call and equal the separate ops", "[conv2d]") {
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    Tensor x = random_tensor({4, 6, 14, 14}, kConvParamsSeed, 3, DType::Float32);
    Tensor w = random_tensor({16, 6, 5, 5}, kConvParamsSeed, 4, DType::Float32), b = random_tensor({16}, kConvParamsSeed, 5, DType::Float32);
    for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
    std::vector<std::string> families;
    {
      KernelLogScope log;
      const Tensor y = conv2d(x, w, b, 1, 1, 0, 0);
      y.backward(random_tensor(y.shape(), kConvParamsSeed, 6, DType::Float32));
      for (const KernelCall& call : take_kernel_calls()) families.push_back(call.family);
    }
    CHECK(std::count(families.begin(), families.end(), "bias_backward") == 0);
    const Conv2dGeometry g = geometry(4, 6, 14, 16, 5, 1, 0);
    const Tensor dy = random_tensor({4, 16, 10, 10}, kConvParamsSeed, 6, DType::Float32);
    Backend& cpu = backend_for(Device::cpu());
    Tensor db = Tensor::empty({16}), dw = Tensor::empty(w.shape()), dx = Tensor::empty(x.shape());
    cpu.bias_backward(dy, db, 100);
    nnlab_test::conv_backward_filter(cpu, g, dy, x, dw);
    nnlab_test::conv_backward_data(cpu, g, dy, w, dx);
    CHECK(b.grad().to_vector<float>() == db.to_vector<float>());
    CHECK(w.grad().to_vector<float>() == dw.to_vector<float>());
    CHECK(x.grad().to_vector<float>() == dx.to_vector<float>());
  }
  set_cpu_threads(0);
}
