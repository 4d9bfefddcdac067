// The CPU's bf16 products (`--math bf16`, devices/cpu/gemm_bf16.h) against its float32 ones,
// both through Backend::gemm, the entry every Linear layer and matmul takes: the three products
// of the zoo's Linear layers at batch 64 (forward NT, dx NN, dW TN) and 1024³.
// GFLOP/s, best of 5 runs of `reps` calls, and the largest difference between the two results.
// Build after the library (the command in one line), run on an idle machine with AVX-512 BF16:
//   g++ -O3 -march=x86-64-v3 -fopenmp -std=c++17 -I. scripts/bench_gemm_bf16.cpp build/libnnlab_devices.a
//       build/libnnlab_core.a -I/usr/include/x86_64-linux-gnu/openblas-openmp
//       -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas /usr/lib/libxsmm.a -ldl -lpthread -o bench_gemm_bf16
//   ./bench_gemm_bf16 [reps] [threads]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/tensor.h"
#include "devices/cpu/gemm_bf16.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"
#include "scripts/bench_gemm_support.h"

namespace {

struct Product {
  const char* name;
  bool trans_a, trans_b;
  int64_t m, n, k;
};

nnlab::Tensor random_matrix(int64_t rows, int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(rows * cols);
  for (float& x : v) x = u(rng);
  return nnlab::Tensor::from_vector(v, {rows, cols});
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nnlab;
  if (!cpu::gemm_bf16_available()) {
    std::fprintf(stderr, "no bf16 products here: %s\n", cpu::gemm_bf16_unavailable_reason().c_str());
    return 1;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 200;
  set_cpu_threads(argc > 2 ? std::atoi(argv[2]) : 0);
  std::printf("%d threads\n", cpu_threads());
  const Product shapes[] = {{"mlp fc1 fwd", false, true, 64, 256, 784},    {"mlp fc1 dW", true, false, 256, 784, 64},
                            {"mlp fc2 fwd", false, true, 64, 128, 256},    {"mlp fc2 dx", false, false, 64, 256, 128},
                            {"cnn f1 fwd", false, true, 64, 128, 3136},    {"cnn f1 dW", true, false, 128, 3136, 64},
                            {"cifar f1 fwd", false, true, 64, 512, 4096},  {"cifar f1 dx", false, false, 64, 4096, 512},
                            {"cifar f1 dW", true, false, 512, 4096, 64},   {"1024³", false, false, 1024, 1024, 1024}};
  Backend& be = backend_for(Device::cpu());
  for (const Product& s : shapes) {
    const Tensor a = s.trans_a ? random_matrix(s.k, s.m, 1) : random_matrix(s.m, s.k, 1);
    const Tensor b = s.trans_b ? random_matrix(s.n, s.k, 2) : random_matrix(s.k, s.n, 2);
    Tensor fp32 = Tensor::zeros({s.m, s.n}), bf16 = Tensor::zeros({s.m, s.n});
    const auto product = [&](Tensor& c) { be.gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a, b, 0.0, c); };
    const int calls = s.m * s.n * s.k > 100'000'000 ? 5 : reps;
    const double strict = bench::gflops(s, calls, [&] { product(fp32); });
    cpu::set_cpu_bf16_products(true);
    const double rounded = bench::gflops(s, calls, [&] { product(bf16); });
    cpu::set_cpu_bf16_products(false);
    std::printf("%-13s %c%c %4ld × %4ld × %4ld   fp32 %6.1f GFLOP/s   bf16 %6.1f   largest difference %.2g\n", s.name,
                s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', long(s.m), long(s.n), long(s.k), strict, rounded,
                bench::largest_difference(fp32.to_vector<float>(), bf16.to_vector<float>()));
  }
}
