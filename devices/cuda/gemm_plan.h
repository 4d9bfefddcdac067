// The row-major trick as data: which column-major cuBLAS GEMM computes a row-major product.
// Kept apart from gemm_cuda.cu (and free of CUDA headers) so a CPU test checks it against a
// column-major reference for every transpose pair, without a GPU.
//
// A row-major m×n matrix C occupies memory exactly like the column-major n×m matrix Cᵀ, so
//     C = op(A) · op(B)   (row-major)   ⇔   Cᵀ = op(B)ᵀ · op(A)ᵀ   (column-major)
// and cuBLAS is asked for Cᵀ (n×m, leading dimension n) with the operands swapped: first B
// (which cuBLAS reads as Bᵀ, so the same transpose flag applies), then A. No data moves.
#pragma once
#include <algorithm>
#include <cstdint>

namespace nnlab::cuda {

struct ColumnMajorGemm {
  bool trans_first, trans_second;  // cuBLAS's transa, transb
  int64_t m, n, k;                 // cuBLAS's m, n, k
  int64_t ld_first, ld_second, ldc;
  bool first_is_b;  // always true: the first operand is B, the second A
};

// C(m×n) = op(A)(m×k) · op(B)(k×n), all row-major and contiguous. Valid for k = 0 too (every
// leading dimension stays ≥ 1), though the backends compute that empty product as C = beta·C
// without calling BLAS at all.
inline ColumnMajorGemm column_major_plan(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  // The stored row lengths are cuBLAS's leading dimensions; cuBLAS (and any BLAS) requires
  // ld ≥ max(1, rows of the stored column-major matrix).
  const int64_t lda = std::max<int64_t>(1, trans_a ? m : k), ldb = std::max<int64_t>(1, trans_b ? k : n);
  return {trans_b, trans_a, n, m, k, ldb, lda, std::max<int64_t>(1, n), true};
}

}  // namespace nnlab::cuda
