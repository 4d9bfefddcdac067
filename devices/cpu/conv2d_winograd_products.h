// The Winograd kernels' per-position matrix products (conv2d_winograd_cpu.cpp), each run on
// the calling thread inside the chunks' parallel region.
//
// Only files compiled once per instruction set include this header (see cpu_isa.h).
#pragma once
#include <cblas.h>

#include "devices/cpu/gemm_libxsmm.h"
#include "devices/cpu/small_gemm.h"
#include "devices/cpu/transpose_blocks.h"

namespace nnlab::cpu::NNLAB_ISA {

// The per-position products: float32 through libxsmm's generated kernels where it has one
// (gemm_libxsmm.h; on one thread, inside the chunks' parallel region), else small_gemm.h's
// register-blocked loops; float64 (gradcheck) through OpenBLAS. On one Zen 5 core
// (scripts/bench_libxsmm.cpp) libxsmm ran cifar-cnn's 32 × 256 × 32 at 259 GFLOP/s against
// small_gemm's 238, its 64 × 128 × 64 at 260 against 249, the cnn's 64 × 147 × 32 at 236
// against 220.
//   C (m × n)  = A (m × k) · B (k × n)
inline void product(long m, long n, long k, const float* a, const float* b, float* c) {
  if (!libxsmm_gemm(false, false, m, n, k, 1.0f, a, b, 0.0f, c)) small_gemm_nn(m, n, k, a, b, c, false);
}
inline void product(long m, long n, long k, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0, a, int(k), b, int(n), 0.0, c,
              int(n));
}
//   C (m × n) += A (m × t) · B (n × t)ᵀ
// The filter gradient's product: its inner dimension is a chunk's tiles (128 on cifar-cnn's
// 16 × 16 layers), short for dot products along it (small_gemm_nt), which end in a 16-lane sum
// per element of C. Where each float of B feeds at least 2 · 64 flops, B goes into `scratch`
// as t × n first (transpose_blocks.h) and libxsmm runs the product as NN, an outer product
// per tile: on two Zen 5 threads (scripts/bench_conv.cpp) cifar-cnn's c3 filter gradient 1.25 →
// 1.06 ms, c4 2.39 → 2.06 ms; its c2 (m = 32, t = 256) 10% slower in one trial and no faster in
// another, so there the dot products stay.
// AVX2 has no small_gemm_nt (it would be OpenBLAS), so there every product is transposed.
// This serves the shapes whose channels or rows do not fill 16-wide lanes (the cnn's 14×14
// layer, resnet8's 8×8 ones) and float64; the others build V as (tiles × c) in the first place
// (conv2d_winograd_channels.h) and sum through add_product_nn.
#if defined(__AVX512F__)
constexpr long kTransposeMinRows = 64;
#else
constexpr long kTransposeMinRows = 1;
#endif
inline void add_product_nt(long m, long n, long t, const float* a, const float* b, float* c, float* scratch) {
  if (m >= kTransposeMinRows) {
    transpose_matrix(b, n, t, t, scratch, n);
    if (libxsmm_gemm(false, false, m, n, t, 1.0f, a, scratch, 1.0f, c)) return;
  }
  small_gemm_nt(m, n, t, a, b, c, n, true, nullptr, false);
}
inline void add_product_nt(long m, long n, long t, const double* a, const double* b, double* c, double*) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(t), 1.0, a, int(t), b, int(t), 1.0, c,
              int(n));
}
//   C (m × n) += A (m × t) · B (t × n)   the same sum with B's channels innermost
//                                        (conv2d_winograd_channels.h)
inline void add_product_nn(long m, long n, long t, const float* a, const float* b, float* c) {
  if (!libxsmm_gemm(false, false, m, n, t, 1.0f, a, b, 1.0f, c)) small_gemm_nn(m, n, t, a, b, c, true);
}
inline void add_product_nn(long m, long n, long t, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(t), 1.0, a, int(t), b, int(n), 1.0, c,
              int(n));
}

//   C (m × n) = beta · C + A (t × m)ᵀ · B (t × n)   beta 0 or 1: the filter gradient's sum with
//                                                   both operands' channels innermost
inline void product_tn(long m, long n, long t, const float* a, const float* b, float beta, float* c) {
  if (!libxsmm_gemm(true, false, m, n, t, 1.0f, a, b, beta, c))
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(m), int(n), int(t), 1.0f, a, int(m), b, int(n), beta, c,
                int(n));
}

}  // namespace nnlab::cpu::NNLAB_ISA
