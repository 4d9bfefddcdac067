// A Linear layer's two backward products in one call (Backend::linear_products): on two CPU
// threads both run at once, one per thread, whole, or as one list of their column chunks shared
// by the threads, so the bits must be those of the two gemm calls on one thread (split over
// two, libxsmm's row blocks give other bits in the last place),
// on the zoo's shapes (libxsmm's row blocks and column chunks, OpenBLAS past libxsmm's limits)
// and odd ones; products too small to pair run as the two gemm calls.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "devices/cpu/threads.h"
#include "devices/kernel_log.h"
#include "devices/registry.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::random_tensor;

TEST_CASE("the CPU's paired Linear backward products equal the two gemm calls on one thread", "[linear][gemm]") {
  struct Shape3 {
    int64_t n, out, in;
  };
  // mlp fc2, lenet5 f1 and f2, cifar-cnn f1 (its 8 MB weight: libxsmm's column chunks), odd sizes,
  // and one past libxsmm's largest side (OpenBLAS).
  const std::vector<Shape3> shapes = {{64, 128, 256}, {64, 120, 400}, {64, 84, 120}, {64, 512, 4096},
                                      {37, 29, 301},  {3, 4100, 64}};
  Backend& cpu = backend_for(Device::cpu());
  for (const Shape3& s : shapes) {
    INFO("n " << s.n << ", out " << s.out << ", in " << s.in);
    const Tensor dz = random_tensor({s.n, s.out}, 5, 1, DType::Float32);
    const Tensor x = random_tensor({s.n, s.in}, 5, 2, DType::Float32);
    const Tensor w = random_tensor({s.out, s.in}, 5, 3, DType::Float32);
    set_cpu_threads(1);
    Tensor dx_one = Tensor::empty({s.n, s.in}), dw_one = Tensor::empty({s.out, s.in});
    cpu.gemm(false, false, s.n, s.in, s.out, 1.0, dz, w, 0.0, dx_one);
    cpu.gemm(true, false, s.out, s.in, s.n, 1.0, dz, x, 0.0, dw_one);
    set_cpu_threads(2);
    Tensor dx = Tensor::empty({s.n, s.in}), dw = Tensor::empty({s.out, s.in});
    std::vector<std::string> families;
    {
      KernelLogScope log;
      cpu.linear_products(dz, x, w, &dx, &dw);
      for (const KernelCall& call : take_kernel_calls()) families.push_back(call.family);
    }
    const bool paired = 2.0 * double(s.n) * double(s.out) * double(s.in) >= 1e6;
    CHECK((families == std::vector<std::string>{"linear_backward"}) == paired);
    CHECK(dx.to_vector<float>() == dx_one.to_vector<float>());
    CHECK(dw.to_vector<float>() == dw_one.to_vector<float>());
    // One gradient alone: the gemm call itself.
    Tensor dw_only = Tensor::empty({s.out, s.in}), dw_apart = Tensor::empty({s.out, s.in});
    cpu.linear_products(dz, x, w, nullptr, &dw_only);
    cpu.gemm(true, false, s.out, s.in, s.n, 1.0, dz, x, 0.0, dw_apart);
    CHECK(dw_only.to_vector<float>() == dw_apart.to_vector<float>());
  }
  set_cpu_threads(0);
}
