// Matrix transposes in 16 × 16 blocks held in registers, for the kernels that need one operand
// with its other index innermost: the direct convolution's images-in-the-lanes layout
// (conv2d_direct_images_cpu.cpp) and the Winograd filter gradient's products
// (conv2d_winograd_cpu.cpp).
//
// Why in registers: a transpose one element at a time writes with a stride and touches a new
// cache line with every element; it cost 40% of the images-in-the-lanes kernel on lenet5, and
// made the Winograd filter gradient's transposed products slower than the dot products they
// replaced. Float32: 16 × 16 blocks in AVX-512, four 8 × 8 blocks in AVX2 (for the
// images-in-the-lanes layout, which moves 8 images at a time in AVX2, the element-wise copies
// measured faster there: 0.157 against 0.172 ms on lenet5); float64 element by element.
//
// transpose_16x16: each of the 4 rounds swaps bit b of the row index with bit b of the column
// index: rows i and i + d (d = 2^b, bit b of i clear) exchange the columns whose bit b differs
// from the row's, one two-vector permute each:
//   low[j]  = j & d ? B[j − d] : A[j]      high[j] = j & d ? B[j] : A[j + d]
// (A = row i, B = row i + d; in the permute's indices, B's lanes are 16 … 31).
//
// Only files compiled once per instruction set include this header (see even_odd.h).
#pragma once
#include <cstdint>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#ifndef NNLAB_ISA
#error "transpose_blocks.h belongs to the kernels compiled once per instruction set (NNLAB_ISA)"
#endif

namespace nnlab::cpu::NNLAB_ISA {

#if defined(__AVX512F__)
struct PermuteIndices {
  alignas(64) int32_t low[4][16];
  alignas(64) int32_t high[4][16];
};

constexpr PermuteIndices permute_indices() {
  PermuteIndices p{};
  for (int round = 0; round < 4; ++round)
    for (int j = 0; j < 16; ++j) {
      const int d = 1 << round;
      p.low[round][j] = (j & d) ? 16 + j - d : j;
      p.high[round][j] = (j & d) ? 16 + j : j + d;
    }
  return p;
}

inline void transpose_16x16(__m512 rows[16]) {
  static constexpr PermuteIndices kIndices = permute_indices();
#pragma GCC unroll 4
  for (int round = 0; round < 4; ++round) {
    const int d = 1 << round;
    const __m512i low = _mm512_load_si512(kIndices.low[round]), high = _mm512_load_si512(kIndices.high[round]);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      if ((i & d) == 0) {
        const __m512 a = rows[i], b = rows[i + d];
        rows[i] = _mm512_permutex2var_ps(a, low, b);
        rows[i + d] = _mm512_permutex2var_ps(a, high, b);
      }
  }
}
#elif defined(__AVX2__)
// The 8 × 8 float32 block of AVX2 in three rounds: pairs of rows interleaved (unpack), pairs
// of pairs (shuffle), then 128-bit halves swapped across (permute2f128).
inline void transpose_8x8(__m256 rows[8]) {
  __m256 pairs[8], quads[8];
  for (int i = 0; i < 8; i += 2) {
    pairs[i] = _mm256_unpacklo_ps(rows[i], rows[i + 1]);
    pairs[i + 1] = _mm256_unpackhi_ps(rows[i], rows[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      quads[i + 2 * h] = _mm256_shuffle_ps(pairs[i + h], pairs[i + h + 2], _MM_SHUFFLE(1, 0, 1, 0));
      quads[i + 2 * h + 1] = _mm256_shuffle_ps(pairs[i + h], pairs[i + h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  for (int i = 0; i < 4; ++i) {
    rows[i] = _mm256_permute2f128_ps(quads[i], quads[i + 4], 0x20);
    rows[i + 4] = _mm256_permute2f128_ps(quads[i], quads[i + 4], 0x31);
  }
}
#endif

// to (cols × rows, row-major, rows of `to_stride`) = from (rows × cols, rows of `from_stride`)ᵀ.
// Whole 16 × 16 blocks in registers where the set has them (AVX-512, float32), the edges and
// every other case element by element in 16 × 16 tiles (both tiles stay in the L1 cache).
template <typename T>
void transpose_matrix(const T* from, long rows, long cols, long from_stride, T* to, long to_stride) {
  constexpr long kBlock = 16;
  for (long i0 = 0; i0 < rows; i0 += kBlock)
    for (long j0 = 0; j0 < cols; j0 += kBlock) {
#if defined(__AVX512F__)
      if constexpr (std::is_same_v<T, float>)
        if (i0 + kBlock <= rows && j0 + kBlock <= cols) {
          __m512 block[kBlock];
          for (long i = 0; i < kBlock; ++i) block[i] = _mm512_loadu_ps(from + (i0 + i) * from_stride + j0);
          transpose_16x16(block);
          for (long j = 0; j < kBlock; ++j) _mm512_storeu_ps(to + (j0 + j) * to_stride + i0, block[j]);
          continue;
        }
#elif defined(__AVX2__)
      if constexpr (std::is_same_v<T, float>)
        if (i0 + kBlock <= rows && j0 + kBlock <= cols) {
          for (long bi = 0; bi < kBlock; bi += 8)
            for (long bj = 0; bj < kBlock; bj += 8) {
              __m256 block[8];
              for (long i = 0; i < 8; ++i) block[i] = _mm256_loadu_ps(from + (i0 + bi + i) * from_stride + j0 + bj);
              transpose_8x8(block);
              for (long j = 0; j < 8; ++j) _mm256_storeu_ps(to + (j0 + bj + j) * to_stride + i0 + bi, block[j]);
            }
          continue;
        }
#endif
      const long i1 = i0 + kBlock < rows ? i0 + kBlock : rows, j1 = j0 + kBlock < cols ? j0 + kBlock : cols;
      for (long j = j0; j < j1; ++j)
        for (long i = i0; i < i1; ++i) to[j * to_stride + i] = from[i * from_stride + j];
    }
}

}  // namespace nnlab::cpu::NNLAB_ISA
