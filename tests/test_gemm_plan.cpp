// The row-major trick of the CUDA GEMM (devices/cuda/gemm_plan.h), checked without a GPU: the
// column-major call it plans, run by a plain column-major reference, must give the row-major
// product for every transpose pair, and its leading dimensions must satisfy BLAS's rule.
#include <catch2/catch.hpp>

#include <vector>

#include "devices/cuda/gemm_plan.h"

namespace {

using nnlab::cuda::ColumnMajorGemm;

// Column-major C(m×n) = alpha·op(A)·op(B) + beta·C, as the BLAS reference defines it; beta = 0
// never reads C.
void column_major_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                       int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double s = 0.0;
      for (int64_t l = 0; l < k; ++l) s += (ta ? a[l + i * lda] : a[i + l * lda]) * (tb ? b[j + l * ldb] : b[l + j * ldb]);
      c[i + j * ldc] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[i + j * ldc]);
    }
}

}  // namespace

TEST_CASE("the cuBLAS plan of a row-major GEMM matches the row-major product for every transpose pair",
          "[gemm][cuda]") {
  const int64_t m = 3, n = 5;
  for (int64_t k : {0, 1, 4})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        // Row-major op(A): m×k stored as (ta ? k×m : m×k); op(B): k×n stored as (tb ? n×k : k×n).
        std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
        for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5 + double(i) * 0.25;
        for (size_t i = 0; i < b.size(); ++i) b[i] = 1.0 - double(i) * 0.125;
        auto A = [&](int64_t i, int64_t l) { return ta ? a[size_t(l * m + i)] : a[size_t(i * k + l)]; };
        auto B = [&](int64_t l, int64_t j) { return tb ? b[size_t(j * k + l)] : b[size_t(l * n + j)]; };
        std::vector<double> c(static_cast<size_t>(m * n), 2.0), want(c.size());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (int64_t l = 0; l < k; ++l) s += A(i, l) * B(l, j);
            want[size_t(i * n + j)] = 1.5 * s + 0.5 * 2.0;
          }
        const ColumnMajorGemm p = nnlab::cuda::column_major_plan(ta, tb, m, n, k);
        INFO("k " << k << ", trans_a " << ta << ", trans_b " << tb);
        // BLAS: ld ≥ max(1, rows of the stored column-major operand).
        CHECK(p.ld_first >= std::max<int64_t>(1, p.trans_first ? p.k : p.m));
        CHECK(p.ld_second >= std::max<int64_t>(1, p.trans_second ? p.n : p.k));
        CHECK(p.ldc >= std::max<int64_t>(1, p.m));
        column_major_gemm(p.trans_first, p.trans_second, p.m, p.n, p.k, 1.5, b.data(), p.ld_first, a.data(),
                          p.ld_second, 0.5, c.data(), p.ldc);
        for (size_t i = 0; i < c.size(); ++i) REQUIRE(c[i] == Approx(want[i]).epsilon(1e-12));
      }
}
