// The 2×2, stride 2, unpadded max-pool in AVX-512 for float32: rows of up to 16 outputs one
// vector at a time, and planes of short rows several rows to a vector. Included only by
// pool2d_cpu.cpp, into the unnamed namespace of its cpu::avx512 build (nothing in its AVX2
// build), where overload resolution prefers these to its portable templates.
#pragma once
#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "devices/cpu/dispatch.h"
#include "devices/cpu/even_odd.h"
#include "devices/cpu/pool2d.h"

namespace nnlab::cpu::NNLAB_ISA {
namespace {

// The same two 2×2 kernels for float32 with 512-bit vectors, chosen over pool2d_cpu.cpp's templates
// by overload resolution (an exact non-template match wins). A row of up to 16 outputs is one
// step: masked loads read exactly the row's 2q inputs and masked stores write exactly its q
// outputs, so no row needs a scalar tail or spills into its neighbours. The candidates are
// compared in the same order with the same NaN rule, so results match pool2d_cpu.cpp's loops
// bit for bit. Float64 (the gradchecks) keeps the portable loops, which the tests then cover too.
//
// A window's left cells are a row's even elements, its right cells the odd ones: even_odd.h's
// load_even_odd and store_even_odd move 32 cells of a row into and out of those two vectors.

// Candidate v at flat indices at: taken when greater than the best so far, or a NaN.
inline void challenge(__m512 v, __m512i at, __m512& best, __m512i& best_at) {
  const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  best = _mm512_mask_mov_ps(best, take, v);
  best_at = _mm512_mask_mov_epi32(best_at, take, at);
}

// The fused ReLU (Pool2dGeometry::relu) after the windows' max, as relu_of_window in
// pool2d_cpu.cpp: 0 and no winner (−1) where the max is not positive or is a NaN.
inline void relu_of_windows(__m512& best, __m512i& best_at) {
  const __mmask16 keep = _mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ);
  best = _mm512_maskz_mov_ps(keep, best);
  best_at = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), keep, best_at);
}

// One plane: x (h, w) → y, argmax (p, q), 16 outputs of a row at a time.
void maxpool_2x2_plane(const Pool2dGeometry& g, const float* xp, float* yp, int32_t* ap) {
  const __m512i twice_lane = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i one = _mm512_set1_epi32(1), row = _mm512_set1_epi32(static_cast<int32_t>(g.w));
  for (int64_t i = 0; i < g.p; ++i)
    for (int64_t j0 = 0; j0 < g.q; j0 += 16) {
      const int64_t outputs = std::min<int64_t>(16, g.q - j0);
      const float* top = xp + 2 * i * g.w + 2 * j0;
      __m512 top_left, top_right, bottom_left, bottom_right;
      load_even_odd(top, 2 * outputs, top_left, top_right);
      load_even_odd(top + g.w, 2 * outputs, bottom_left, bottom_right);
      const __m512i top_at =
          _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(2 * i * g.w + 2 * j0)), twice_lane);
      const __m512i bottom_at = _mm512_add_epi32(top_at, row);
      __m512 best = top_left;
      __m512i best_at = top_at;
      challenge(top_right, _mm512_add_epi32(top_at, one), best, best_at);
      challenge(bottom_left, bottom_at, best, best_at);
      challenge(bottom_right, _mm512_add_epi32(bottom_at, one), best, best_at);
      if (g.relu) relu_of_windows(best, best_at);
      _mm512_mask_storeu_ps(yp + i * g.q + j0, first_lanes(outputs), best);
      _mm512_mask_storeu_epi32(ap + i * g.q + j0, first_lanes(outputs), best_at);
    }
}

// One plane: dy, argmax (p, q) → dx (h, w), both input rows of 16 windows at a time.
void maxpool_2x2_plane_backward(const Pool2dGeometry& g, const float* dyp, const int32_t* ap, float* dxp) {
  const __m512i twice_lane = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i one = _mm512_set1_epi32(1);
  for (int64_t i = 0; i < g.p; ++i) {
    for (int64_t j0 = 0; j0 < g.q; j0 += 16) {
      const int64_t outputs = std::min<int64_t>(16, g.q - j0);
      const __m512 dy = _mm512_maskz_loadu_ps(first_lanes(outputs), dyp + i * g.q + j0);
      const __m512i arg = _mm512_maskz_loadu_epi32(first_lanes(outputs), ap + i * g.q + j0);
      for (int half = 0; half < 2; ++half) {  // the windows' top, then bottom input row
        const int64_t row_at = (2 * i + half) * g.w + 2 * j0;
        const __m512i left_at = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(row_at)), twice_lane);
        const __m512 left = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(arg, left_at), dy);  // dy where it won
        const __m512 right = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(arg, _mm512_add_epi32(left_at, one)), dy);
        store_even_odd(dxp + row_at, 2 * outputs, left, right);
      }
    }
    if (g.w % 2) dxp[(2 * i) * g.w + g.w - 1] = dxp[(2 * i + 1) * g.w + g.w - 1] = 0.0f;  // in no window
  }
  if (g.h % 2) std::fill(dxp + (g.h - 1) * g.w, dxp + g.h * g.w, 0.0f);
}

// Planes of short rows (q ≤ 8 outputs, e.g. lenet5's second pool: 10 × 10 → 5 × 5) would fill
// at most half a vector a row; a 2×2 pool over even h and w instead takes G = ⌊16 / q⌋ output
// rows at a time. With h = 2p the planes follow one another row pair after row pair, so output
// row R of the whole tensor (all planes) reads input rows 2R and 2R + 1, at x + 2R·w: the G rows'
// top input rows are G segments of w = 2q cells, 2w apart. Lane L of the 32 cells of the top
// rows (L < 2qG) reads segment L / 2q, at x + 2R·w + L + 2q·(L / 2q): one masked load per
// segment and half vector, each lane reading its own address, and load_even_odd's permutes
// then give even[l] = top-left and odd[l] = top-right of output l = g·q + j. The G·q outputs
// and their argmaxes are consecutive in y. Windows are compared in the same order as the
// other loops, so the results are the same bits.
struct RowGroups {
  int64_t rows_per_group, q, w, p;
  __mmask16 segment[16][2];  // the lanes of segment g in the low and high half of 32
  __m512i lane_row, lane_column;  // g and j of lane l = g·q + j

  explicit RowGroups(const Pool2dGeometry& g) : rows_per_group(16 / g.q), q(g.q), w(g.w), p(g.p) {
    alignas(64) int32_t row[16], column[16];
    for (int l = 0; l < 16; ++l) row[l] = static_cast<int32_t>(l / q), column[l] = static_cast<int32_t>(l % q);
    lane_row = _mm512_load_si512(row);
    lane_column = _mm512_load_si512(column);
    for (int64_t s = 0; s < rows_per_group; ++s) {
      const uint32_t lanes = ((uint32_t(1) << (2 * q)) - 1) << (2 * q * s);  // within 32: 2q·G ≤ 32
      segment[s][0] = __mmask16(lanes & 0xFFFF);
      segment[s][1] = __mmask16(lanes >> 16);
    }
  }
  // Index in its plane of the top-left cell of each output of the group at global row r0.
  __m512i top_left_at(int64_t r0) const {
    const __m512i plane_row = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(r0 % p)), lane_row);
    __m512i i = plane_row;  // the row within its plane: a group may run into the next plane(s)
    for (int64_t k = 1; k * p <= p + rows_per_group - 2; ++k)  // i < p + G − 1: as many wraps as it can take
      i = _mm512_mask_sub_epi32(i, _mm512_cmpge_epi32_mask(i, _mm512_set1_epi32(static_cast<int32_t>(p))), i,
                                _mm512_set1_epi32(static_cast<int32_t>(p)));
    return _mm512_add_epi32(_mm512_mullo_epi32(i, _mm512_set1_epi32(static_cast<int32_t>(2 * w))),
                            _mm512_add_epi32(lane_column, lane_column));
  }
};

// The 32 cells of `rows` segments starting at row0 (see above) as even and odd lanes.
inline void load_segments(const RowGroups& rg, const float* row0, int64_t rows, __m512& even, __m512& odd) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  for (int64_t s = 0; s < rows; ++s) {
    const float* at = row0 + 2 * rg.q * s;  // lane L reads at[L]
    lo = _mm512_mask_loadu_ps(lo, rg.segment[s][0], at);
    hi = _mm512_mask_loadu_ps(hi, rg.segment[s][1], at + 16);
  }
  const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  even = _mm512_permutex2var_ps(lo, even_lanes, hi);
  odd = _mm512_permutex2var_ps(lo, _mm512_add_epi32(even_lanes, _mm512_set1_epi32(1)), hi);
}

// The reverse: the even and odd lanes back into the segments' cells.
inline void store_segments(const RowGroups& rg, float* row0, int64_t rows, __m512 even, __m512 odd) {
  const __m512i lo_lanes = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512 lo = _mm512_permutex2var_ps(even, lo_lanes, odd);
  const __m512 hi = _mm512_permutex2var_ps(even, _mm512_add_epi32(lo_lanes, _mm512_set1_epi32(8)), odd);
  for (int64_t s = 0; s < rows; ++s) {
    float* at = row0 + 2 * rg.q * s;
    _mm512_mask_storeu_ps(at, rg.segment[s][0], lo);
    _mm512_mask_storeu_ps(at + 16, rg.segment[s][1], hi);
  }
}

bool row_groups_apply(const Pool2dGeometry& g) { return g.q <= 8 && g.h == 2 * g.p && g.w == 2 * g.q; }

// All n·c·p output rows, G at a time: x (n, c, h, w) → y, argmax (n, c, p, q).
void maxpool_2x2_row_groups(const Pool2dGeometry& g, const float* x, float* y, int32_t* arg) {
  const RowGroups rg(g);
  const int64_t rows = g.n * g.c * g.p, groups = (rows + rg.rows_per_group - 1) / rg.rows_per_group;
  const __m512i one = _mm512_set1_epi32(1), below = _mm512_set1_epi32(static_cast<int32_t>(g.w));
#pragma omp parallel for schedule(static) if (rows * g.q * 4 > kParallelGrain)
  for (int64_t group = 0; group < groups; ++group) {
    const int64_t r0 = group * rg.rows_per_group, count = std::min(rg.rows_per_group, rows - r0);
    const float* top = x + 2 * r0 * g.w;
    __m512 top_left, top_right, bottom_left, bottom_right;
    load_segments(rg, top, count, top_left, top_right);
    load_segments(rg, top + g.w, count, bottom_left, bottom_right);
    const __m512i top_at = rg.top_left_at(r0), bottom_at = _mm512_add_epi32(top_at, below);
    __m512 best = top_left;
    __m512i best_at = top_at;
    challenge(top_right, _mm512_add_epi32(top_at, one), best, best_at);
    challenge(bottom_left, bottom_at, best, best_at);
    challenge(bottom_right, _mm512_add_epi32(bottom_at, one), best, best_at);
    if (g.relu) relu_of_windows(best, best_at);
    _mm512_mask_storeu_ps(y + r0 * g.q, first_lanes(count * g.q), best);
    _mm512_mask_storeu_epi32(arg + r0 * g.q, first_lanes(count * g.q), best_at);
  }
}

// dy, argmax (n, c, p, q) → dx (n, c, h, w), G output rows at a time; every cell of dx is in
// one window (h, w even), so every cell is written.
void maxpool_2x2_row_groups_backward(const Pool2dGeometry& g, const float* dy, const int32_t* arg, float* dx) {
  const RowGroups rg(g);
  const int64_t rows = g.n * g.c * g.p, groups = (rows + rg.rows_per_group - 1) / rg.rows_per_group;
  const __m512i one = _mm512_set1_epi32(1);
#pragma omp parallel for schedule(static) if (rows * g.q * 4 > kParallelGrain)
  for (int64_t group = 0; group < groups; ++group) {
    const int64_t r0 = group * rg.rows_per_group, count = std::min(rg.rows_per_group, rows - r0);
    const __m512 gradient = _mm512_maskz_loadu_ps(first_lanes(count * g.q), dy + r0 * g.q);
    const __m512i winner = _mm512_maskz_loadu_epi32(first_lanes(count * g.q), arg + r0 * g.q);
    const __m512i top_at = rg.top_left_at(r0);
    for (int half = 0; half < 2; ++half) {  // the windows' top, then bottom input rows
      const __m512i left_at = _mm512_add_epi32(top_at, _mm512_set1_epi32(static_cast<int32_t>(half * g.w)));
      const __m512 left = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(winner, left_at), gradient);
      const __m512 right = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(winner, _mm512_add_epi32(left_at, one)), gradient);
      store_segments(rg, dx + (2 * r0 + half) * g.w, count, left, right);
    }
  }
}

}  // namespace
}  // namespace nnlab::cpu::NNLAB_ISA
#endif
