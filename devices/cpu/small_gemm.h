// Matrix products of the small, cache-resident float32 matrices that Winograd's 16 (or 36)
// per-position products need: M[ξ] = U[ξ] · V[ξ] (a few dozen rows and columns, a few hundred
// tiles), all row-major. The nt form also runs the Linear layers' forward pass Y = X · Wᵀ with
// AVX-512, each thread a block of Y's columns (gemm_cpu.cpp).
//
//   small_gemm_nn(m, n, k, a, b, c, accumulate):  C (m × n) [+]= A (m × k) · B (k × n)
//   small_gemm_nt(m, n, t, a, b, c, ldc, accumulate, column_bias, relu):
//                                                 C (m × n, rows ldc apart) [+]= A (m × t) · B (n × t)ᵀ
//                                                 (+ column_bias[j] on column j, when given;
//                                                 then max(0, ·) when relu, which needs accumulate false)
//
// Why not OpenBLAS: these products are too small for its packing to pay (a 64 × 147 × 32
// product is 0.6 MFLOP), and the machine's OPENBLAS_CORETYPE may pin it to 256-bit kernels.
// OpenBLAS's Haswell kernels reach 84–109 GFLOP/s on these shapes on one Zen 5 core; the
// register-blocked AVX-512 loops reach 203–230 (nn) and 170–196 (nt), out of the core's 247
// (docs/benchmarks-history.md, 2026-11-23 night). The AVX2 kernels (cpu_isa.h) call cblas_sgemm, whose
// Haswell kernels are as fast as 256-bit loops of our own would be.
//
// nn: an 8 × 32 block of C lives in 16 registers; each step p broadcasts A[i][p] for its 8 rows
// and multiplies two 16-wide vectors of B's row p. Columns past n are masked, so no tails.
// nt: both operands run along t, so a 4 × 4 block of C is 16 vector accumulators of partial
// dot products over t; at the end one shuffle tree adds all 16 across their lanes at once.
// Blocks at the right and bottom edges are 4 × 1, 1 × 4 or 1 × 1.
// Every C element is summed in a fixed order: results repeat bit for bit.
#pragma once
#include <cstdint>

#include "devices/cpu/isa_kernels.h"

// small_gemm_nt's column_bias may be null; relu needs accumulate false.
#define NNLAB_SMALL_GEMM_KERNELS(X)                                                                                  \
  X(small_gemm_nn, (int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c, bool accumulate),     \
    (m, n, k, a, b, c, accumulate))                                                                                  \
  X(small_gemm_nt,                                                                                                   \
    (int64_t m, int64_t n, int64_t t, const float* a, const float* b, float* c, int64_t ldc, bool accumulate,       \
     const float* column_bias, bool relu),                                                                           \
    (m, n, t, a, b, c, ldc, accumulate, column_bias, relu))

namespace nnlab::cpu {

NNLAB_SMALL_GEMM_KERNELS(NNLAB_ISA_DECLARE)

}  // namespace nnlab::cpu
