// GEMM on CUDA through cuBLAS, float32.
//
// The row-major trick: nnlab stores matrices row-major, cuBLAS reads them column-major. A
// row-major m×n matrix C occupies memory exactly like the column-major n×m matrix Cᵀ. So
//     C = op(A) · op(B)   (row-major)   ⇔   Cᵀ = op(B)ᵀ · op(A)ᵀ   (column-major)
// and we ask cuBLAS for Cᵀ (n×m, leading dimension n) with the operands swapped: first B
// (which cuBLAS sees as Bᵀ, so the same transpose flag applies), then A. No data moves.
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

// C(m×n) = alpha · op(A)(m×k) · op(B)(k×n) + beta · C
void CudaBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                       const Tensor& b, double beta, Tensor& c) {
  cuda::require_f32("gemm", a);
  NNLAB_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), "gemm: dtypes differ: ", a.describe(), ", ",
              b.describe(), ", ", c.describe());
  NNLAB_CHECK(a.numel() >= m * k && b.numel() >= k * n && c.numel() >= m * n, "gemm ", m, "×", n, "×", k,
              ": buffers too small: ", a.describe(), ", ", b.describe(), ", ", c.describe());
  if (m == 0 || n == 0) return;
  cuda::Context& ctx = *ctx_;
  const bool tf32 = cuda_math_tf32();
  if (tf32 != ctx.cublas_tf32) {  // strict float32 unless TF32 was asked for explicitly
    NNLAB_CUBLAS_CHECK(cublasSetMathMode(ctx.cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    ctx.cublas_tf32 = tf32;
  }
  // Row lengths as stored (row-major leading dimensions) are cuBLAS's column-major ones.
  const int lda = static_cast<int>(trans_a ? m : k), ldb = static_cast<int>(trans_b ? k : n);
  const int ldc = static_cast<int>(n);
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  if (kernel_log_enabled())  // nnlab explain: the call as the row-major product it computes
    record_kernel(tf32 ? "cublasSgemm (tf32)" : "cublasSgemm",
                  std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " " + dims_text({m, n, k}));
  NNLAB_CUBLAS_CHECK(cublasSgemm(ctx.cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha_f,
                                 cuda::ptr<float>(b), ldb, cuda::ptr<float>(a), lda, &beta_f, cuda::ptr<float>(c),
                                 ldc));
}

}  // namespace nnlab
