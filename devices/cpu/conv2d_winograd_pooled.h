// Winograd's transforms of a 2×2 max-pool's gradient (conv2d_winograd_cpu.cpp, the pooled
// layers' backward), made straight from the pool's gradient g and winners (p/2 × q/2 each; a
// winner is a flat index r·q + s into the p × q plane, −1 where the fused ReLU zeroed the
// window) instead of from the plane the pool's backward would write: cell (r, s) of that
// plane is g at its window where it won, zero elsewhere. The same values go through the same
// transforms, so the same bits, without the plane written and read back.
//   place_pooled_plane            the data gradient's phase planes (as place_plane)
//   output_grad_transform_pooled  the filter gradient's Z = A dY Aᵀ (as output_grad_transform)
//
// Only files compiled once per instruction set include this header (see even_odd.h).
#pragma once
#include <cstdint>

#include "devices/cpu/conv2d_winograd_planes.h"

namespace nnlab::cpu::NNLAB_ISA {

// Whether the plane (h × w) is the pool's whole output: every cell in one window.
inline bool pooled_planes_fit(long h, long w, long pooled_h, long pooled_w) {
  return h == 2 * pooled_h && w == 2 * pooled_w;
}

// place_plane's phase planes of the h × w plane the pool's backward would make, row by row:
// L windows give 2L cells (each window's gradient and winner twice, interleave), kept where
// the winner is the cell. For planes pooled_planes_fit accepts.
template <int m>
void place_pooled_plane(const float* g, const int32_t* winners, long h, long w, long top, long left,
                        const Tiling& t, float* phases) {
  constexpr long L = kVectorLanes<float>;
  static_assert(m % 2 == 0, "whole windows per vector pair");
  const long cols = phase_cols(t), planes = phase_floats(t), windows = w / 2;
  Vector<int32_t> lane;
  for (long l = 0; l < L; ++l) lane[l] = int32_t(l);
  for (long r = 0; r < h; ++r) {
    const float* grad = g + r / 2 * windows;
    const int32_t* won = winners + r / 2 * windows;
    float* to[m];  // as place_plane
    for (int j = 0; j < m; ++j) to[j] = phases + (left + j) % m * planes + (top + r) * cols + (left + j) / m;
    for (long i = 0; i < w; i += m * L) {
      Vector<float> block[m], phase[m];
      for (int b = 0; b < m; b += 2) {  // cells i + b·L … i + (b + 2)·L − 1: windows from (i + b·L) / 2
        const long cell = i + b * L, first = cell / 2;
        Vector<float> gv = load_first(grad + first, windows - first), g_lo, g_hi;
        Vector<int32_t> wv = load_first(won + first, windows - first), w_lo, w_hi;
        interleave(gv, gv, g_lo, g_hi);
        interleave(wv, wv, w_lo, w_hi);
        const Vector<int32_t> at = int32_t(r * w + cell) + lane;
        block[b] = w_lo == at ? g_lo : Vector<float>{};
        block[b + 1] = w_hi == at + int32_t(L) ? g_hi : Vector<float>{};
      }
      split_phases<m>(block, phase);
      for (int j = 0; j < m; ++j) store_first(to[j] + i / m, phase[j], (w - i - j + m - 1) / m);
    }
  }
}

// Z = A dY Aᵀ of the plane: an m × m output tile covers (m/2)² whole windows, so the tile is
// made in registers and goes through output_grad_transform's A e Aᵀ (store_grad_tiles).
// F(2×2): a tile is one window, a vector one row's L windows. F(4×4): a tile takes two windows
// from each of two pooled rows, which come apart into their even and odd columns
// (deinterleave); a vector holds L tiles of one row (2L windows), or, paired on a 16-wide
// plane, L/2 tiles of each of two rows. For float rows of tiles that fill whole vectors, or
// whole halves where paired (pooled_tiles_fit).
inline bool pooled_tiles_fit(const Tiling& t, long pooled_h, long pooled_w) {
  constexpr long L = kVectorLanes<float>;
  const bool whole = t.m == 2 ? t.tw % L == 0 : pairs_rows<float>(t) ? t.tw == L / 2 : t.tw % L == 0;
  return whole && pooled_planes_fit(t.p, t.q, pooled_h, pooled_w);
}

inline void output_grad_transform_pooled_f2(const float* g, const int32_t* winners, const Tiling& t, float* out,
                                            long stride) {
  constexpr int m = WinogradF2::m;
  constexpr long L = kVectorLanes<float>;
  Vector<int32_t> left;  // a window's left column, lane by lane: 2·l
  for (long l = 0; l < L; ++l) left[l] = int32_t(m * l);
  for (long ty = 0; ty < t.th; ++ty)
    for (long tx = 0; tx < t.tw; tx += L) {
      const long at = ty * t.tw + tx;
      const Vector<float> grad = load(g + at);
      const Vector<int32_t> won = load(winners + at), corner = int32_t(m * (ty * t.q + tx)) + left;
      Vector<float> e[m][m];  // the dY tiles
      for (int r = 0; r < m; ++r)
        for (int j = 0; j < m; ++j) e[r][j] = won == corner + int32_t(r * t.q + j) ? grad : Vector<float>{};
      float* const to[2] = {out + at, out + at};
      store_grad_tiles<WinogradF2, false>(e, to, true, stride);
    }
}

template <bool paired>
void output_grad_transform_pooled_f4(const float* g, const int32_t* winners, const Tiling& t, float* out,
                                     long stride) {
  constexpr int m = WinogradF4::m;
  constexpr long L = kVectorLanes<float>;
  const long windows = t.q / 2;  // a pooled row
  for_each_group<paired, float>(t, [&](TileAt lower, TileAt upper, bool upper_inside) {
    Vector<int32_t> corner;  // each lane's tile's top-left cell, a flat index into the plane
    for (long l = 0; l < L; ++l) {
      const TileAt& at = paired && l >= L / 2 ? upper : lower;
      corner[l] = int32_t(m * (at.ty * t.q + at.tx + (paired ? l % (L / 2) : l)));
    }
    Vector<float> e[m][m];  // the dY tiles
    for (int a = 0; a < 2; ++a) {  // the tiles' upper, then lower windows: pooled row 2·ty + a
      const long lo = (2 * lower.ty + a) * windows + 2 * lower.tx;
      const long hi = paired ? (2 * upper.ty + a) * windows + 2 * upper.tx : lo + L;
      Vector<float> grad[2];  // windows 2·tx and 2·tx + 1 of each lane's tile
      Vector<int32_t> won[2];
      deinterleave(load(g + lo), load(g + hi), grad[0], grad[1]);
      deinterleave(load(winners + lo), load(winners + hi), won[0], won[1]);
      for (int r = 2 * a; r < 2 * a + 2; ++r)
        for (int j = 0; j < m; ++j)
          e[r][j] = won[j / 2] == corner + int32_t(r * t.q + j) ? grad[j / 2] : Vector<float>{};
    }
    float* const to[2] = {out + lower.ty * t.tw + lower.tx, out + upper.ty * t.tw + upper.tx};
    store_grad_tiles<WinogradF4, paired>(e, to, upper_inside, stride);
  });
}

inline void output_grad_transform_pooled(const float* g, const int32_t* winners, const Tiling& t, float* out,
                                         long stride) {
  if (t.m == 2) return output_grad_transform_pooled_f2(g, winners, t, out, stride);
  if (pairs_rows<float>(t)) return output_grad_transform_pooled_f4<true>(g, winners, t, out, stride);
  output_grad_transform_pooled_f4<false>(g, winners, t, out, stride);
}

}  // namespace nnlab::cpu::NNLAB_ISA
