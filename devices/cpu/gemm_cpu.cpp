// GEMM on the CPU, row-major, so the shapes read as written:
// C(m×n) = alpha · op(A)(m×k) · op(B)(k×n) + beta · C.
// Float32 products of a layer's size go to libxsmm's generated kernels (gemm_libxsmm.h: over
// twice OpenBLAS's rate on them here); the rest, and float64, to OpenBLAS's cblas_?gemm.
#include <cblas.h>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/gemm_libxsmm.h"
#include "devices/kernel_log.h"

namespace nnlab {

void CpuBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                      const Tensor& b, double beta, Tensor& c) {
  NNLAB_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), "gemm: dtypes differ: ", a.describe(), ", ",
              b.describe(), ", ", c.describe());
  NNLAB_CHECK(a.numel() >= m * k && b.numel() >= k * n && c.numel() >= m * n, "gemm ", m, "×", n, "×", k,
              ": buffers too small: ", a.describe(), ", ", b.describe(), ", ", c.describe());
  if (m == 0 || n == 0) return;
  KernelTiming timing;  // for nnlab explain: the record below gets the product's time
  if (k == 0) {  // an empty sum: C = beta·C (BLAS rejects the leading dimension 0 a k of 0 gives)
    cpu::dispatch_float("gemm", c, [&](auto t) {
      using T = decltype(t);
      T* cp = c.data<T>();
      for (int64_t i = 0; i < m * n; ++i) cp[i] = beta == 0.0 ? T(0) : static_cast<T>(beta) * cp[i];
    });
    return;
  }
  // Leading dimension = the stored row length.
  const auto lda = static_cast<int>(trans_a ? m : k), ldb = static_cast<int>(trans_b ? k : n);
  const auto ldc = static_cast<int>(n);
  const std::string shape = std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " " + dims_text({m, n, k});
  if (a.dtype() == DType::Float32 &&
      cpu::libxsmm_gemm(trans_a, trans_b, m, n, k, static_cast<float>(alpha), a.data<float>(), b.data<float>(),
                        static_cast<float>(beta), c.data<float>())) {
    if (kernel_log_enabled()) timing.attach(record_kernel("libxsmm", shape));  // nnlab explain: which call ran
    return;
  }
  if (kernel_log_enabled())
    timing.attach(record_kernel(a.dtype() == DType::Float64 ? "cblas_dgemm" : "cblas_sgemm", shape));
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if (a.dtype() == DType::Float32) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                static_cast<float>(alpha), a.data<float>(), lda, b.data<float>(), ldb, static_cast<float>(beta),
                c.data<float>(), ldc);
  } else if (a.dtype() == DType::Float64) {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                a.data<double>(), lda, b.data<double>(), ldb, beta, c.data<double>(), ldc);
  } else {
    fail("gemm: the CPU kernel takes float32 or float64, got ", a.describe());
  }
}

}  // namespace nnlab
