// Float32 GEMM on libxsmm (Debian's libxsmm-dev): matrix-product kernels generated at run
// time for the running CPU's instruction set, for the small products nnlab's layers make.
//
// Why: a training step of the mlp or lenet5 is a dozen products of a batch of 64 rows with
// a few hundred columns. On one Zen 5 core, measured with scripts/bench_libxsmm.cpp, OpenBLAS
// (its Haswell kernels, as OPENBLAS_CORETYPE pins them here) ran them at 100–120 GFLOP/s and
// libxsmm's generated AVX-512 code at 235–260, slightly above nnlab's own small_gemm. libxsmm
// also serves the AVX2 path (cpu_isa.h): it then generates AVX2 code.
//
// What it covers: row-major C (m × n) = op(A) · op(B) + beta · C with alpha 1 and beta 0 or 1.
//   NN, TN   libxsmm directly (libxsmm is column-major: row-major C = op(A)·op(B) is
//            column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so B goes first)
//   NT, TT   B is transposed into a scratch buffer first (its JIT has no transposed first
//            operand), or for NT with beta 0, when that moves fewer floats, A in and the
//            result out (Cᵀ = B·Aᵀ); the copies cost a fraction of what the faster product saves
// Threads: the rows of C are split among the OpenMP threads, each a smaller product with the
// same k; for a given thread count results repeat bit for bit, but the kernel generated for
// fewer rows may round differently in the last place (measured: the 64 × 400 × 120 NN product
// on one thread and on two, tests/test_linear_backward.cpp). Inside a parallel region the
// product runs on the calling thread. A B over 1 MB with a C at least 4× wider than tall runs
// instead in fixed chunks of 128 columns of C that the threads share out (the weight of a
// large Linear layer, read once, a chunk at a time in the L2 cache); the chunks do not depend
// on the thread count, nor do their bits.
#pragma once
#include <cstdint>

namespace nnlab::cpu {

// True when libxsmm computed the product; false when this shape or these scalars are not its
// (the caller then uses OpenBLAS), or nnlab was built without libxsmm.
bool libxsmm_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  const float* b, float beta, float* c);

// For callers that spread the chunks of several products over the threads at once (a Linear
// layer's two backward products, gemm_cpu.cpp): how many column chunks libxsmm_gemm runs
// C (m × n) = op(A) · B (+ beta · C) in, B not transposed (0 where it runs it otherwise, or
// not at all); and chunk `chunk` of them, on the calling thread, as libxsmm_gemm computes it.
int64_t libxsmm_column_chunks(bool trans_a, int64_t m, int64_t n, int64_t k, float beta);
bool libxsmm_gemm_chunk(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta,
                        float* c, int64_t chunk);

}  // namespace nnlab::cpu
