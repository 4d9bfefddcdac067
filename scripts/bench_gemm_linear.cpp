// The Linear layers' forward product Y = X · Wᵀ (gemm NT: batch × out × in, W stored out × in)
// on the machine's threads, two ways (devices/cpu/gemm_cpu.cpp):
//   nnlab     Backend::gemm's AVX-512 route: small_gemm_nt's blocks of dot products along in,
//             the threads taking blocks of Y's columns; no copies
//   libxsmm   libxsmm's outer-product kernels, after X and Y (or W) are transposed into copies
//             (gemm_libxsmm.cpp)
// GFLOP/s, best of 5 runs of `reps` calls, and the largest difference between the two results.
// Shapes: the forward products of mlp, lenet5, cnn and cifar-cnn at batch 64.
// Build after the library (the command in one line), run on an idle machine:
//   g++ -O3 -march=x86-64-v3 -fopenmp -std=c++17 -I. scripts/bench_gemm_linear.cpp build/libnnlab_devices.a
//       build/libnnlab_core.a -I/usr/include/x86_64-linux-gnu/openblas-openmp
//       -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas /usr/lib/libxsmm.a -ldl -lpthread -o bench_gemm_linear
//   ./bench_gemm_linear [reps] [threads]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/tensor.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/gemm_libxsmm.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"
#include "scripts/bench_gemm_support.h"

namespace {

struct Product {
  const char* name;
  int64_t m, n, k;
};

std::vector<float> random_values(int64_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nnlab;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 500;
  set_cpu_threads(argc > 2 ? std::atoi(argv[2]) : 0);
  std::printf("%d threads, %s kernels\n", cpu_threads(), cpu_isa_name(cpu_isa()));
  const Product shapes[] = {{"mlp fc1", 64, 256, 784},   {"mlp fc2", 64, 128, 256},      {"mlp fc3", 64, 10, 128},
                          {"lenet5 f1", 64, 120, 400}, {"lenet5 f2", 64, 84, 120},     {"cnn f1", 64, 128, 3136},
                          {"cifar-cnn f1", 64, 512, 4096}, {"cifar-cnn f2", 64, 10, 512}};
  Backend& cpu = backend_for(Device::cpu());
  for (const Product& s : shapes) {
    const std::vector<float> a = random_values(s.m * s.k, 1), b = random_values(s.n * s.k, 2);
    const Tensor ta = Tensor::from_vector(a, {s.m, s.k}), tb = Tensor::from_vector(b, {s.n, s.k});
    Tensor tc = Tensor::zeros({s.m, s.n});
    std::vector<float> by_libxsmm(s.m * s.n);
    const double dots = bench::gflops(s, reps, [&] { cpu.gemm(false, true, s.m, s.n, s.k, 1.0, ta, tb, 0.0, tc); });
    const double xsmm = bench::gflops(s, reps, [&] {
      cpu::libxsmm_gemm(false, true, s.m, s.n, s.k, 1.0f, a.data(), b.data(), 0.0f, by_libxsmm.data());
    });
    std::printf("%-13s forward NT %4ld × %4ld × %4ld   nnlab %6.1f GFLOP/s   libxsmm %6.1f   largest difference %.2g\n",
                s.name, long(s.m), long(s.n), long(s.k), dots, xsmm,
                bench::largest_difference(tc.to_vector<float>(), by_libxsmm));
  }
}
