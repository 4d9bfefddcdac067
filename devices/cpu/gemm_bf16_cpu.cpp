// bf16 matrix products on AVX-512 BF16 (gemm_bf16.h says what and why): packing, the 8 × 32
// register block, and the loops around it. Compiled for AVX-512 BF16 (CMakeLists.txt), so all
// of it lives in namespace cpu::avx512 and runs only after gemm_bf16_mode.cpp (compiled for
// the baseline, safe on any CPU) has found the instructions.
#include "devices/cpu/gemm_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "devices/cpu/threads.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#include <immintrin.h>
#define NNLAB_BF16_INSTRUCTIONS 1
#endif

namespace nnlab::cpu::avx512 {

#if defined(NNLAB_BF16_INSTRUCTIONS)

namespace {

using Pair = uint32_t;  // two bf16 of consecutive k: the even one in the low half

constexpr long kRows = 8;            // rows of C in one register block
constexpr long kPanel = 32;          // columns of C in one register block: two vectors of 16
constexpr long kDepthBlock = 1024;   // pairs of k per packed panel: 1024 · 32 pairs = 128 KB in L2
constexpr double kParallelFlops = 4e6;  // below this a second thread costs more than it saves

__mmask16 first_lanes(long count) {
  return count >= 16 ? __mmask16(0xffff) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1u);
}

// 32 floats of one row (count of them real, the rest zero) → 16 pairs, in order.
__m512i pairs_along(const float* x, long count) {
  const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(count), x);
  const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(count - 16), x + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // bf16 0…15 from lo, 16…31 from hi
}

// Two rows of 16 floats (k = 2p and 2p + 1) → 16 pairs (even[j], odd[j]).
__m512i pairs_across(__m512 even, __m512 odd) {
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(odd, even);  // bf16 0…15 even, 16…31 odd
  return _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), both);
}

// A 16 × 16 block of 32-bit values transposed in registers: round b swaps bit b of the row
// index with bit b of the column index (rows i and i + 2^b trade the lanes whose bit b differs).
void transpose_16x16(__m512i rows[16]) {
  alignas(64) static const int32_t kIndex[2][4][16] = {
      {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
       {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
       {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
       {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}},
      {{1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
       {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
       {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
       {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}}};
  for (int round = 0; round < 4; ++round) {
    const int d = 1 << round;
    const __m512i low = _mm512_load_si512(kIndex[0][round]), high = _mm512_load_si512(kIndex[1][round]);
    for (int i = 0; i < 16; ++i)
      if ((i & d) == 0) {
        const __m512i x = rows[i], y = rows[i + d];
        rows[i] = _mm512_permutex2var_epi32(x, low, y);       // row i keeps its even-bit lanes
        rows[i + d] = _mm512_permutex2var_epi32(x, high, y);  // row i + d gets the odd-bit ones
      }
  }
}

// ---- packing -------------------------------------------------------------------------------
// op(A) (m × k) → rows of `stride` pairs each (pair p of row i = op(A)[i][2p], [2p + 1]; zero
// past k). Rows [first, first + count).
void pack_rows_of_a(bool trans, const float* a, long lda, long m, long k, long first, long count, Pair* out,
                    long stride) {
  const long pairs = (k + 1) / 2;
  if (!trans) {  // row i is contiguous along k
    for (long i = first; i < first + count; ++i)
      for (long p = 0; p < stride; p += 16)
        _mm512_storeu_si512(out + i * stride + p, pairs_along(a + i * lda + 2 * p, std::min(k - 2 * p, 32L)));
    return;
  }
  // A is k × m: 16 rows of op(A) by 16 pairs at a time, made across A's rows and transposed.
  for (long i0 = first; i0 < first + count; i0 += 16) {
    const long rows = std::min(16L, first + count - i0);
    for (long p0 = 0; p0 < stride; p0 += 16) {
      __m512i block[16];
      for (int q = 0; q < 16; ++q) {
        const long even = 2 * (p0 + q), odd = even + 1;
        const __m512 e = even < k ? _mm512_maskz_loadu_ps(first_lanes(m - i0), a + even * lda + i0) : _mm512_setzero_ps();
        const __m512 o = odd < k ? _mm512_maskz_loadu_ps(first_lanes(m - i0), a + odd * lda + i0) : _mm512_setzero_ps();
        block[q] = p0 + q < pairs ? pairs_across(e, o) : _mm512_setzero_si512();  // lane = row
      }
      transpose_16x16(block);  // block[r]: lane = pair
      for (long r = 0; r < rows; ++r) _mm512_storeu_si512(out + (i0 + r) * stride + p0, block[r]);
    }
  }
}

// Columns [j0, j0 + 32) and pairs [p0, p0 + depth) of op(B) (k × n) → panel[(p − p0) · 32 + j]
// (zero past n and past k).
void pack_panel_of_b(bool trans, const float* b, long ldb, long n, long k, long j0, long p0, long depth, Pair* panel) {
  if (!trans) {  // row k of B is contiguous along the columns
    for (long p = 0; p < depth; ++p) {
      const long even = 2 * (p0 + p), odd = even + 1;
      for (int half = 0; half < 2; ++half) {
        const long j = j0 + 16 * half;
        const __mmask16 lanes = first_lanes(n - j);
        const __m512 e = _mm512_maskz_loadu_ps(lanes, b + even * ldb + j);
        const __m512 o = odd < k ? _mm512_maskz_loadu_ps(lanes, b + odd * ldb + j) : _mm512_setzero_ps();
        _mm512_storeu_si512(panel + p * kPanel + 16 * half, pairs_across(e, o));
      }
    }
    return;
  }
  // B is n × k: column j of op(B) is row j of B, contiguous along k; 16 columns × 16 pairs at a
  // time, transposed so that a pair's 16 columns are one vector.
  for (long q0 = 0; q0 < depth; q0 += 16)
    for (int half = 0; half < 2; ++half) {
      __m512i block[16];
      for (int c = 0; c < 16; ++c) {
        const long j = j0 + 16 * half + c, from = 2 * (p0 + q0);
        block[c] = j < n ? pairs_along(b + j * ldb + from, std::min(k - from, 32L)) : _mm512_setzero_si512();
      }
      transpose_16x16(block);  // block[q]: pair p0 + q0 + q, lane = column
      for (long q = 0; q < std::min(16L, depth - q0); ++q) _mm512_storeu_si512(panel + (q0 + q) * kPanel + 16 * half, block[q]);
    }
}

// ---- the register block ----------------------------------------------------------------------
//   C (R × 32, rows ldc apart; `lanes` masks the columns past n) [+]= A (R × depth pairs, rows
//   a_stride apart) · panel (depth pairs × 32)
//   then, in the last depth block, + bias (32 columns' worth, or null) and max(0, ·) when relu.
template <int R>
void block(long depth, const Pair* a, long a_stride, const Pair* panel, float* c, long ldc, __mmask16 lanes0,
           __mmask16 lanes1, bool accumulate, const float* bias, bool relu) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (long p = 0; p < depth; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel + p * kPanel);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + p * kPanel + 16);
    for (int r = 0; r < R; ++r) {
      const __m512bh pair = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * a_stride + p]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], pair, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], pair, b1);
    }
  }
  const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(lanes0, bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias ? _mm512_maskz_loadu_ps(lanes1, bias + 16) : _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    if (accumulate) {
      acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_maskz_loadu_ps(lanes0, row));
      acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_maskz_loadu_ps(lanes1, row + 16));
    }
    if (bias) {
      acc[r][0] = _mm512_add_ps(acc[r][0], bias0);
      acc[r][1] = _mm512_add_ps(acc[r][1], bias1);
    }
    // ReLU in the masked form with every lane set: the same instruction as _mm512_max_ps,
    // whose GCC 12 definition makes -Wmaybe-uninitialized warn about its placeholder operand.
    if (relu) {
      acc[r][0] = _mm512_maskz_max_ps(__mmask16(0xFFFF), acc[r][0], _mm512_setzero_ps());
      acc[r][1] = _mm512_maskz_max_ps(__mmask16(0xFFFF), acc[r][1], _mm512_setzero_ps());
    }
    _mm512_mask_storeu_ps(row, lanes0, acc[r][0]);
    _mm512_mask_storeu_ps(row + 16, lanes1, acc[r][1]);
  }
}

using BlockFn = void (*)(long, const Pair*, long, const Pair*, float*, long, __mmask16, __mmask16, bool, const float*,
                         bool);
constexpr BlockFn kBlocks[kRows + 1] = {nullptr,  block<1>, block<2>, block<3>, block<4>,
                                        block<5>, block<6>, block<7>, block<8>};

// Packing space kept per thread and grown on demand: allocating it for every call (up to a few
// hundred KB, past malloc's mmap threshold) cost page faults on every product.
class PackBuffer {
 public:
  Pair* get(long count) {
    if (count > capacity_) {
      std::free(data_);
      const size_t bytes = (static_cast<size_t>(count) * sizeof(Pair) + 63) / 64 * 64;
      data_ = static_cast<Pair*>(std::aligned_alloc(64, bytes));
      capacity_ = data_ ? count : 0;
      if (!data_) throw std::bad_alloc();
    }
    return data_;
  }
  ~PackBuffer() { std::free(data_); }

 private:
  Pair* data_ = nullptr;
  long capacity_ = 0;
};

// The calling thread's: packed A, and the panels of all the threads it runs the product on.
// (Allocated before the parallel region: an allocation failing inside it could not be
// reported, the program would end without a word.)
struct PackSpace {
  PackBuffer a, panels;
};
PackSpace& pack_space() {
  thread_local PackSpace space;
  return space;
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc, const float* column_bias, bool relu) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty sum: C, its bias and ReLU
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float v = (accumulate ? c[i * ldc + j] : 0.0f) + (column_bias ? column_bias[j] : 0.0f);
        c[i * ldc + j] = relu ? std::max(v, 0.0f) : v;
      }
    return;
  }
  const long pairs = (k + 1) / 2, stride = (pairs + 15) / 16 * 16;  // a packed row: whole vectors
  const long column_panels = (n + kPanel - 1) / kPanel, depth_block = std::min<long>(pairs, kDepthBlock);
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const int threads = omp_in_parallel() || flops < kParallelFlops
                          ? 1
                          : static_cast<int>(std::min<long>(cpu_threads(), column_panels));
  const long panel_pairs = (depth_block + 16) * kPanel;
  Pair* pa = pack_space().a.get(m * stride);
  Pair* panel_base = pack_space().panels.get(threads * panel_pairs);
  const long row_blocks = (m + 15) / 16;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
#pragma omp for schedule(static)
    for (long rb = 0; rb < row_blocks; ++rb)
      pack_rows_of_a(trans_a, a, lda, m, k, rb * 16, std::min<long>(16, m - rb * 16), pa, stride);
    Pair* panel = panel_base + omp_get_thread_num() * panel_pairs;
#pragma omp for schedule(static)
    for (long jp = 0; jp < column_panels; ++jp) {
      const long j0 = jp * kPanel;
      const __mmask16 lanes0 = first_lanes(n - j0), lanes1 = first_lanes(n - j0 - 16);
      for (long p0 = 0; p0 < pairs; p0 += depth_block) {
        const long depth = std::min(depth_block, pairs - p0);
        pack_panel_of_b(trans_b, b, ldb, n, k, j0, p0, depth, panel);
        const bool last = p0 + depth == pairs;
        for (long i0 = 0; i0 < m; i0 += kRows) {
          const long rows = std::min<long>(kRows, m - i0);
          kBlocks[rows](depth, pa + i0 * stride + p0, stride, panel, c + i0 * ldc + j0, ldc, lanes0, lanes1,
                        accumulate || p0 > 0, last && column_bias ? column_bias + j0 : nullptr, last && relu);
        }
      }
    }
  }
}

#else  // no AVX-512 BF16 in this build: gemm_bf16_available() is false, nothing calls this

void gemm_bf16(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, bool, float*,
               int64_t, const float*, bool) {
  std::abort();
}

#endif

}  // namespace nnlab::cpu::avx512
