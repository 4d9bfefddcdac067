// libxsmm (Debian's libxsmm-dev: matrix products JIT-generated for the running CPU) against
// OpenBLAS and nnlab's small_gemm, one core, on the products nnlab runs (issue 23: measure
// before writing more kernels by hand). Row-major, as nnlab stores tensors:
//   Linear, batch b, weight W (out × in):  forward   Y  = X · Wᵀ     gemm NT  (b × out × in)
//                                          data      dX = dY · W     gemm NN  (b × in × out)
//                                          weight    dW = dYᵀ · X    gemm TN  (out × in × b)
//   Winograd per-position products (bench_small_gemm.cpp's shapes):  NN
// libxsmm is column-major: row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so
// each call passes B first. GFLOP/s, best of 5 runs of `reps` calls; "-" where libxsmm's JIT
// gives no kernel for the shape. Largest difference from OpenBLAS's result beside it.
// Build after the library (the command in one line), run on an idle machine:
//   g++ -O3 -march=x86-64-v3 -fopenmp -std=c++17 -I. scripts/bench_libxsmm.cpp build/libnnlab_devices.a
//       build/libnnlab_core.a -I/usr/include/x86_64-linux-gnu/openblas-openmp
//       -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas /usr/lib/libxsmm.a -ldl -lpthread -o bench_libxsmm
//   OMP_NUM_THREADS=1 ./bench_libxsmm [reps]
#include <cblas.h>
#include <libxsmm.h>

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

enum class Op { nn, nt, tn };

struct Product {
  long m, n, k;  // row-major C (m × n) = op(A) (m × k) · op(B) (k × n)
  Op op;
  const char* what;
};


const char* op_name(Op op) { return op == Op::nn ? "NN" : op == Op::nt ? "NT" : "TN"; }

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 2000;
  libxsmm_init();
  const Product products[] = {
      {64, 256, 784, Op::nt, "mlp fc1 forward"},      {64, 784, 256, Op::nn, "mlp fc1 data"},
      {256, 784, 64, Op::tn, "mlp fc1 weight"},       {64, 128, 256, Op::nt, "mlp fc2 forward"},
      {64, 256, 128, Op::nn, "mlp fc2 data"},         {128, 256, 64, Op::tn, "mlp fc2 weight"},
      {64, 120, 400, Op::nt, "lenet5 f1 forward"},    {64, 400, 120, Op::nn, "lenet5 f1 data"},
      {120, 400, 64, Op::tn, "lenet5 f1 weight"},     {64, 84, 120, Op::nt, "lenet5 f2 forward"},
      {64, 147, 32, Op::nn, "winograd cnn c2 fwd"},   {32, 147, 64, Op::nn, "winograd cnn c2 data"},
      {32, 256, 32, Op::nn, "winograd cifar 32x32"},  {64, 128, 64, Op::nn, "winograd cifar 64->64"},
      {64, 128, 3136, Op::nt, "cnn f1 forward"},      {128, 64, 3136, Op::nn, "cnn f1 forward, W·Xᵀ"},
      {64, 3136, 128, Op::nn, "cnn f1 data"},         {128, 3136, 64, Op::tn, "cnn f1 weight"},
      {512, 64, 4096, Op::nn, "cifar f1 forward, W·Xᵀ"}, {64, 4096, 512, Op::nn, "cifar f1 data"},
      {512, 4096, 64, Op::tn, "cifar f1 weight"},
  };
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::printf("%-24s %-3s %14s %9s %9s %9s   (GFLOP/s, one core; largest difference from OpenBLAS)\n", "product",
              "op", "m x n x k", "openblas", "libxsmm", "small");
  for (const Product& p : products) {
    // Stored shapes: A is m × k (or k × m for TN), B is k × n (or n × k for NT).
    std::vector<float> a(p.m * p.k), b(p.k * p.n), c_blas(p.m * p.n), c_xsmm(p.m * p.n), c_small(p.m * p.n);
    for (auto* v : {&a, &b})
      for (float& x : *v) x = uniform(rng);
    const bool ta = p.op == Op::tn, tb = p.op == Op::nt;
    const long lda = ta ? p.m : p.k, ldb = tb ? p.k : p.n;
    const double blas = gflops(p, reps, [&] {
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, 1.0f,
                  a.data(), lda, b.data(), ldb, 0.0f, c_blas.data(), p.n);
    });
    // Column-major Cᵀ (n × m) = op(B)ᵀ (n × k) · op(A)ᵀ (k × m): B is the first operand.
    const int flags = (tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
    const libxsmm_blasint m = p.n, n = p.m, k = p.k, ld_first = ldb, ld_second = lda, ldc = p.n;
    const float alpha = 1.0f, beta = 0.0f;
    const libxsmm_smmfunction kernel =
        libxsmm_smmdispatch(m, n, k, &ld_first, &ld_second, &ldc, &alpha, &beta, &flags, nullptr);
    std::string xsmm = "-", xsmm_difference = "";
    if (kernel) {
      const double rate = gflops(p, reps, [&] { kernel(b.data(), a.data(), c_xsmm.data()); });
      char text[64];
      std::snprintf(text, sizeof(text), "%.1f", rate);
      xsmm = text;
      std::snprintf(text, sizeof(text), " libxsmm %.1e", largest_difference(c_blas, c_xsmm));
      xsmm_difference = text;
    }
    std::string small = "-", small_difference = "";
    if (p.op == Op::nn) {
      const double rate =
          gflops(p, reps, [&] { nnlab::cpu::small_gemm_nn(p.m, p.n, p.k, a.data(), b.data(), c_small.data(), false); });
      char text[64];
      std::snprintf(text, sizeof(text), "%.1f", rate);
      small = text;
      std::snprintf(text, sizeof(text), " small %.1e", largest_difference(c_blas, c_small));
      small_difference = text;
    }
    std::printf("%-24s %-3s %14s %9.1f %9s %9s  %s%s\n", p.what, op_name(p.op),
                (std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k)).c_str(), blas,
                xsmm.c_str(), small.c_str(), xsmm_difference.c_str(), small_difference.c_str());
  }
  libxsmm_finalize();
}
