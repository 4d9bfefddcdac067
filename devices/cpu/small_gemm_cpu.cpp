// The register-blocked products declared and explained in small_gemm.h. Compiled once per
// instruction set (cpu_isa.h): the AVX-512 build, namespace cpu::avx512, runs the loops below;
// the baseline's, cpu::avx2, calls OpenBLAS.
#include "devices/cpu/small_gemm.h"

#include <cblas.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "devices/cpu/even_odd.h"

namespace nnlab::cpu::NNLAB_ISA {

#if defined(__AVX512F__)
namespace {

// C rows [0, MR) × 32 columns (masks m0, m1 for the two 16-wide halves) [+]= A · B.
// a: MR rows, stride lda; b: k rows, stride ldb; c: stride ldc.
template <int MR>
inline void gemm_nn_block(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                          __mmask16 m0, __mmask16 m1, bool accumulate) {
  __m512 left[MR], right[MR];  // C[i][0..15], C[i][16..31]
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    left[i] = accumulate ? _mm512_maskz_loadu_ps(m0, c + i * ldc) : _mm512_setzero_ps();
    right[i] = accumulate ? _mm512_maskz_loadu_ps(m1, c + i * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b + p * ldb), b1 = _mm512_maskz_loadu_ps(m1, b + p * ldb + 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 aip = _mm512_set1_ps(a[i * lda + p]);
      left[i] = _mm512_fmadd_ps(aip, b0, left[i]);
      right[i] = _mm512_fmadd_ps(aip, b1, right[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm512_mask_storeu_ps(c + i * ldc, m0, left[i]);
    _mm512_mask_storeu_ps(c + i * ldc + 16, m1, right[i]);
  }
}

// The shuffles of the tree below, written as their masked forms with every lane selected: the
// plain intrinsics start from an undefined vector, which GCC 12 reports as uninitialised.
inline __m512 interleave_low(__m512 x, __m512 y) { return _mm512_mask_unpacklo_ps(x, 0xFFFF, x, y); }
inline __m512 interleave_high(__m512 x, __m512 y) { return _mm512_mask_unpackhi_ps(x, 0xFFFF, x, y); }
inline __m512 interleave_low_pairs(__m512 x, __m512 y) {
  const __m512d a = _mm512_castps_pd(x), b = _mm512_castps_pd(y);
  return _mm512_castpd_ps(_mm512_mask_unpacklo_pd(a, 0xFF, a, b));
}
inline __m512 interleave_high_pairs(__m512 x, __m512 y) {
  const __m512d a = _mm512_castps_pd(x), b = _mm512_castps_pd(y);
  return _mm512_castpd_ps(_mm512_mask_unpackhi_pd(a, 0xFF, a, b));
}
template <int Lanes128>  // picks 128-bit lanes: two from x, then two from y
inline __m512 pick_quarters(__m512 x, __m512 y) { return _mm512_mask_shuffle_f32x4(x, 0xFFFF, x, y, Lanes128); }

// Lane e of the result = Σ over the 16 lanes of s[e]: 8 + 4 + 2 + 1 pair combinations instead
// of 16 separate reductions. Within each 128-bit lane, interleaving two vectors and adding
// the halves leaves 2 partial sums of each; interleaving pairs of those leaves 4 sums side by
// side (s[4r] … s[4r + 3]) in every 128-bit lane; two rounds of 128-bit shuffles add the lanes.
inline __m512 sum_lanes_of_16(const __m512 s[16]) {
  __m512 pairs[8];
#pragma GCC unroll 8
  for (int q = 0; q < 8; ++q)
    pairs[q] = _mm512_add_ps(interleave_low(s[2 * q], s[2 * q + 1]), interleave_high(s[2 * q], s[2 * q + 1]));
  __m512 quads[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r)
    quads[r] = _mm512_add_ps(interleave_low_pairs(pairs[2 * r], pairs[2 * r + 1]),
                             interleave_high_pairs(pairs[2 * r], pairs[2 * r + 1]));
  const __m512 q01 = _mm512_add_ps(pick_quarters<0x44>(quads[0], quads[1]), pick_quarters<0xEE>(quads[0], quads[1]));
  const __m512 q23 = _mm512_add_ps(pick_quarters<0x44>(quads[2], quads[3]), pick_quarters<0xEE>(quads[2], quads[3]));
  return _mm512_add_ps(pick_quarters<0x88>(q01, q23), pick_quarters<0xDD>(q01, q23));
}

// C rows [0, MR) × columns [0, NR) [+]= A · Bᵀ over t. a: MR rows, b: NR rows, both stride ld*.
template <int MR, int NR>
inline void gemm_nt_block(int64_t t, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                          bool accumulate, const float* bias, bool relu) {
  __m512 dot[MR * NR];
#pragma GCC unroll 16
  for (int e = 0; e < MR * NR; ++e) dot[e] = _mm512_setzero_ps();
  for (int64_t p = 0; p < t; p += 16) {
    const __mmask16 live = first_lanes(t - p);
    __m512 bj[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) bj[j] = _mm512_maskz_loadu_ps(live, b + j * ldb + p);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_maskz_loadu_ps(live, a + i * lda + p);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) dot[i * NR + j] = _mm512_fmadd_ps(ai, bj[j], dot[i * NR + j]);
    }
  }
  __m512 all[16];  // dot products past MR × NR are zero
#pragma GCC unroll 16
  for (int e = 0; e < 16; ++e) all[e] = e < MR * NR ? dot[e] : _mm512_setzero_ps();
  alignas(64) float sums[16];
  _mm512_store_ps(sums, sum_lanes_of_16(all));
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float sum = bias ? sums[i * NR + j] + bias[j] : sums[i * NR + j];
      if (relu) sum = sum > 0.0f ? sum : 0.0f;  // as the ReLU kernel: NaN gives 0
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + sum : sum;
    }
}

// Rows [0, MR) of C, every column: 4-column blocks, then single columns.
template <int MR>
inline void gemm_nt_rows(int64_t n, int64_t t, const float* a, const float* b, float* c, int64_t ldc, bool accumulate,
                         const float* bias, bool relu) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    gemm_nt_block<MR, 4>(t, a, t, b + j * t, t, c + j, ldc, accumulate, bias ? bias + j : nullptr, relu);
  for (; j < n; ++j)
    gemm_nt_block<MR, 1>(t, a, t, b + j * t, t, c + j, ldc, accumulate, bias ? bias + j : nullptr, relu);
}

}  // namespace
#endif

void small_gemm_nn(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c, bool accumulate) {
#if defined(__AVX512F__)
  for (int64_t i = 0; i < m;) {
    const int64_t rows = m - i >= 8 ? 8 : 1;  // 8-row blocks, then single rows
    for (int64_t j = 0; j < n; j += 32) {
      const __mmask16 m0 = first_lanes(n - j), m1 = first_lanes(n - j - 16);
      if (rows == 8)
        gemm_nn_block<8>(k, a + i * k, k, b + j, n, c + i * n + j, n, m0, m1, accumulate);
      else
        gemm_nn_block<1>(k, a + i * k, k, b + j, n, c + i * n + j, n, m0, m1, accumulate);
    }
    i += rows;
  }
#else
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a, int(k), b, int(n),
              accumulate ? 1.0f : 0.0f, c, int(n));
#endif
}

void small_gemm_nt(int64_t m, int64_t n, int64_t t, const float* a, const float* b, float* c, int64_t ldc,
                   bool accumulate, const float* column_bias, bool relu) {
#if defined(__AVX512F__)
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) gemm_nt_rows<4>(n, t, a + i * t, b, c + i * ldc, ldc, accumulate, column_bias, relu);
  for (; i < m; ++i) gemm_nt_rows<1>(n, t, a + i * t, b, c + i * ldc, ldc, accumulate, column_bias, relu);
#else
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(t), 1.0f, a, int(t), b, int(t),
              accumulate ? 1.0f : 0.0f, c, int(ldc));
  if (column_bias || relu)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float v = column_bias ? c[i * ldc + j] + column_bias[j] : c[i * ldc + j];
        c[i * ldc + j] = relu && !(v > 0.0f) ? 0.0f : v;
      }
#endif
}

}  // namespace nnlab::cpu::NNLAB_ISA
