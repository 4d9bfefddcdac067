// Micro-benchmark of devices/cpu/small_gemm.h against OpenBLAS on one core, on the Winograd
// per-position products of the cnn and cifar-cnn (and one odd shape): GFLOP/s of
//   nn: C (m × n) = A (m × k) · B (k × n)           (forward, backward data)
//   nt: C (m × k) += A (m × n) · B (k × n)ᵀ          (filter gradient; n plays the tiles)
// each repeated `reps` times, best of 5, with the largest difference from OpenBLAS's result.
// Build by hand after building the library (one command line), and run on an idle machine:
//   g++ -O3 -march=x86-64-v3 -fopenmp -std=c++17 -I. scripts/bench_small_gemm.cpp build/libnnlab_devices.a
//       build/libnnlab_core.a -I/usr/include/x86_64-linux-gnu/openblas-openmp
//       -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -o bench_small_gemm
//   OMP_NUM_THREADS=1 ./bench_small_gemm [reps]   (NNLAB_CPU_ISA=avx2 in front: the AVX2 kernels)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "devices/cpu/small_gemm.h"
#include "scripts/bench_gemm_support.h"

namespace {

using bench::gflops;
using bench::largest_difference;

struct Shape {
  long m, n, k;
  const char* what;
};


}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20000;
  const Shape shapes[] = {{64, 147, 32, "cnn c2 forward"},   {32, 147, 64, "cnn c2 backward data"},
                          {32, 256, 32, "cifar-cnn 32x32"},  {64, 128, 32, "cifar-cnn 32->64"},
                          {64, 128, 64, "cifar-cnn 64->64"}, {13, 37, 11, "odd"}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::printf("%-22s %10s %10s %10s %10s   (GFLOP/s, one core)\n", "m x n x k", "blas nn", "small nn", "blas nt",
              "small nt");
  for (const Shape& s : shapes) {
    std::vector<float> a(s.m * std::max(s.k, s.n)), b(s.k * s.n), bt(s.k * s.n);
    for (auto* v : {&a, &b, &bt})
      for (float& x : *v) x = uniform(rng);
    std::vector<float> c_blas(s.m * s.n), c_small(s.m * s.n), s_blas(s.m * s.k, 0.0f), s_small(s.m * s.k, 0.0f);
    const double blas_nn = gflops(s, reps, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f,
                  c_blas.data(), s.n);
    });
    const double small_nn =
        gflops(s, reps, [&] { nnlab::cpu::small_gemm_nn(s.m, s.n, s.k, a.data(), b.data(), c_small.data(), false); });
    // nt accumulates: compare one call each from zero, then time.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.m, s.k, s.n, 1.0f, a.data(), s.n, bt.data(), s.n, 0.0f,
                s_blas.data(), s.k);
    nnlab::cpu::small_gemm_nt(s.m, s.k, s.n, a.data(), bt.data(), s_small.data(), s.k, true, nullptr, false);
    const double nt_difference = largest_difference(s_blas, s_small);
    const double blas_nt = gflops(s, reps, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.m, s.k, s.n, 1.0f, a.data(), s.n, bt.data(), s.n, 1.0f,
                  s_blas.data(), s.k);
    });
    const double small_nt =
        gflops(s, reps,
               [&] { nnlab::cpu::small_gemm_nt(s.m, s.k, s.n, a.data(), bt.data(), s_small.data(), s.k, true, nullptr, false); });
    std::printf("%-22s %10.1f %10.1f %10.1f %10.1f   %s (largest difference nn %.1e, nt %.1e)\n",
                (std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k)).c_str(), blas_nn,
                small_nn, blas_nt, small_nt, s.what, largest_difference(c_blas, c_small), nt_difference);
  }
}
