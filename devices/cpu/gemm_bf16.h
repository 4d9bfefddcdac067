// Matrix products on bf16 inputs with float32 sums, on the CPU's AVX-512 BF16 instructions
// (`--math bf16` on the CPU; docs/cpu-kernels.md, "bf16 products").
//
// bf16 keeps float32's 8 exponent bits and 7 of its 23 mantissa bits: the top half of a float.
// A product A·B in "bf16 math" rounds every element of A and B to bf16 (to nearest, ties to
// even, as the GPU's tensor cores and cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF do), multiplies
// exactly (two 8-bit mantissas fit a float's 24) and sums in float32. The instruction doing it,
// VDPBF16PS, takes pairs: for each of the 16 float32 lanes of C,
//   c[j] += a[2j]·b[2j] + a[2j+1]·b[2j+1]
// so one instruction does 32 multiply-adds where a float32 FMA does 16. The operands are
// therefore packed with consecutive k in pairs: A row by row (pair p of row i = A[i][2p],
// A[i][2p+1]), B in panels of 32 columns, each pair p one 64-value slice (B[2p][j], B[2p+1][j]
// for j = 0…31). The kernel holds an 8 × 32 block of C in 16 registers; each pair p loads B's
// two vectors and broadcasts each of the 8 rows' pair of A.
//
// Sums: every element of C is summed over k in increasing pairs, in blocks of kDepthBlock, in
// one fixed order whatever the thread count, so results repeat bit for bit. VDPBF16PS flushes
// denormal inputs and results to zero and rounds its sums to nearest even.
//
// Threads: the columns of C, 32 at a time, are spread over the OpenMP threads; inside a parallel
// region the product runs on the calling thread.
//
// Two files: gemm_bf16_cpu.cpp holds the kernel, compiled for AVX-512 BF16 (CMakeLists.txt)
// and so in namespace cpu::avx512 like every AVX-512 kernel (scripts/check_isa.py proves no
// AVX-512 instruction lies elsewhere); gemm_bf16_mode.cpp, compiled for the baseline, finds
// the instructions, holds the switch and calls the kernel only where the CPU has them.
#pragma once
#include <cstdint>
#include <string>

namespace nnlab::cpu {

// Whether this build has the kernel and the running CPU the instructions (AVX-512 F, BW and
// BF16, with the OS saving the zmm registers).
bool gemm_bf16_available();
// Why not, in one sentence, where gemm_bf16_available() is false ("" where it is true).
std::string gemm_bf16_unavailable_reason();

// C (m × n, rows ldc apart) = op(A) (m × k) · op(B) (k × n) [+ C when accumulate], all row-major
// float32 in memory; op(A) = A (rows lda apart) or, with trans_a, the transpose of the k × m
// matrix A (rows lda apart); likewise B. The elements of A and B are rounded to bf16 first.
// Then, as C is stored: + column_bias[j] on column j (when given; a Linear layer's bias), and
// max(0, ·) when relu (the ReLU after it). Requires gemm_bf16_available().
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc, const float* column_bias = nullptr,
               bool relu = false);

namespace avx512 {
// The kernel itself (gemm_bf16_cpu.cpp), as gemm_bf16 below; only where gemm_bf16_available().
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc, const float* column_bias,
               bool relu);
}  // namespace avx512

// `--math bf16` on the CPU, process-wide (off by default): while on, CpuBackend::gemm sends its
// float32 products with alpha 1 and beta 0 or 1 here (every Linear layer's forward, dx and dW,
// and matmul); convolutions and everything else stay float32. Turning it on where
// gemm_bf16_available() is false throws nnlab::Error with the reason.
void set_cpu_bf16_products(bool on);
bool cpu_bf16_products();

// One float rounded to bf16 (nearest, ties to even; NaN stays NaN; a denormal to ±0) and widened
// back: the rounding the packing applies, for tests and reference loops.
float round_to_bf16_flushing(float x);

}  // namespace nnlab::cpu
