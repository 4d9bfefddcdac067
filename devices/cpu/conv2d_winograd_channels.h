// The Winograd transforms with the channels in the lanes (conv2d_winograd_cpu.cpp): V[ξ] comes
// out as a (tiles × channels) matrix, so that the filter gradient's
//   S[ξ] (k × c) += Z[ξ] (k × tiles) · V[ξ] (tiles × c)
// is a plain NN product, with no transpose of V and no dot products along the tiles, and the
// forward's (and the data gradient's)
//   M[ξ] (tiles × k) = V[ξ] (tiles × c) · U[ξ] (c × k)
// leaves its outputs with the channels innermost too, for an output transform 16 channels at a
// time that ends in one transpose per row of outputs.
//
// Why: with tiles in the lanes (conv2d_winograd_planes.h) V[ξ] is (c × tiles), and the filter
// gradient's product Z · Vᵀ then either ran as dot products along the tiles, each ending in a
// horizontal sum (cifar-cnn's c2), or transposed every V[ξ] first. Here the transpose happens
// once, on the way in: 16 channels of one image are interleaved, row by row, into a
// zero-bordered block (16 × 16 register transposes, transpose_blocks.h), and every tile then
// reads n × n vectors of 16 channels, each one contiguous load, with no phase split and no
// lanes left idle at the end of a row.
//
// Only files compiled once per instruction set include this header (see even_odd.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/conv2d_winograd_planes.h"
#include "devices/cpu/transpose_blocks.h"

namespace nnlab::cpu::NNLAB_ISA {

// 16 float32 channels: one AVX-512 register, two AVX2 ones.
constexpr long kChannelLanes = 16;
typedef float ChannelVector __attribute__((vector_size(kChannelLanes * sizeof(float))));

// Which calls take this path: winograd_channel_lanes (conv2d_winograd.h).
static_assert(kChannelLanes == kWinogradChannelLanes);

// Distance between the n² matrices V[ξ] (or M[ξ]) of rows × channels, channels in whole 16s:
// 16 floats of slack, so that the matrices are neither a power of two apart (cifar-cnn's c2:
// 64 tiles × 32 channels, 8 KB; a tile's n² stores then all fall in one cache set) nor off the
// 64-byte line a vector store fills.
// Against no slack on two Zen 5 threads (2026-12-02, alternated, medians): cifar-cnn's filter
// gradients 0.90–0.96 of the time (c2–c4), forwards and data gradients 0.84–0.92; against 8
// floats of slack 0.96–1.00.
inline long channel_matrix_stride(long rows, long channels) { return rows * channels + kChannelLanes; }

// One block: the tiles' padded rows (m·th + 2) × columns (m·tw + 2), 16 channels a cell.
inline long channel_block_cols(const Tiling& t) { return t.m * t.tw + 2; }
inline long channel_block_floats(const Tiling& t) {
  return (t.m * t.th + 2) * channel_block_cols(t) * kChannelLanes;
}

// Channels [c0, c0 + 16) of one image, x at its channel c0 (planes h × w, consecutive), into
// the block at padded row pad_h, column pad_w. Only the planes' own cells are written: the
// border, zeroed once per kernel call, stays zero.
inline void place_channel_block(const float* x, const Tiling& t, float* block) {
  const long cols = channel_block_cols(t);
  for (long r = 0; r < t.h; ++r)  // row r of 16 planes (16 × w) → w cells of 16 channels
    transpose_matrix(x + r * t.w, kChannelLanes, t.w, t.h * t.w,
                     block + ((r + t.pad_h) * cols + t.pad_w) * kChannelLanes, kChannelLanes);
}

// place_channel_block's block made from a 2×2 max-pool's gradient g and winners (16 channels'
// pooled planes, pooled_h × pooled_w each, consecutive) instead of from the unpooled planes
// (conv2d_winograd_pooled.h says why): both are transposed into 16-channel cells (the winners
// as raw 32-bit lanes), and each window's four cells are g where the winner is the cell, zero
// elsewhere. The same values as the unpooled planes', without writing and reading them.
// cells: 2 · pooled_h · pooled_w · 16 floats. For planes whose every cell is in a window, and
// windows in whole 16s (the register transposes' blocks: no element is moved one at a time).
inline bool pooled_channel_block_fits(const Tiling& t, long pooled_h, long pooled_w) {
  return t.h == 2 * pooled_h && t.w == 2 * pooled_w && pooled_h * pooled_w % kChannelLanes == 0;
}
// Vectors move by memcpy (one unaligned vector load or store), never by value through a
// function: a 64-byte vector argument or result has no agreed ABI where AVX-512 is not compiled in.
inline void load_channels(const float* from, ChannelVector& v) { std::memcpy(&v, from, sizeof v); }
inline void store_channels(float* to, const ChannelVector& v) { std::memcpy(to, &v, sizeof v); }

typedef int32_t ChannelIndices __attribute__((vector_size(kChannelLanes * sizeof(int32_t))));

inline void place_pooled_channel_block(const float* g, const int32_t* winners, long pooled_h, long pooled_w,
                                       const Tiling& t, float* cells, float* block) {
  const long windows = pooled_h * pooled_w, cols = channel_block_cols(t);
  float* grad = cells;                      // windows × 16
  float* won = cells + windows * kChannelLanes;  // windows × 16, int32 bits
  transpose_matrix(g, kChannelLanes, windows, windows, grad, kChannelLanes);
  transpose_matrix(reinterpret_cast<const float*>(winners), kChannelLanes, windows, windows, won, kChannelLanes);
  const ChannelVector zero = {};
  for (long r = 0; r < pooled_h; ++r)
    for (long s = 0; s < pooled_w; ++s) {
      const long at = (r * pooled_w + s) * kChannelLanes;
      ChannelVector value;
      ChannelIndices winner;
      load_channels(grad + at, value);
      std::memcpy(&winner, won + at, sizeof winner);
      for (long dr = 0; dr < 2; ++dr)
        for (long ds = 0; ds < 2; ++ds) {
          const long row = 2 * r + dr, col = 2 * s + ds;
          const ChannelIndices cell = ChannelIndices{} + int32_t(row * t.w + col);
          const ChannelVector kept = winner == cell ? value : zero;
          store_channels(block + ((row + t.pad_h) * cols + col + t.pad_w) * kChannelLanes, kept);
        }
    }
}

// The 2-D transform of one tile of 16-channel vectors: out = T · tile · Tᵀ, T the 1-D transform
// `apply` (a Tile member from conv2d_winograd_tiles.h, in → out values) on each column, then
// on each row.
template <int in, int out, typename Apply>
void transform_channel_tile(const ChannelVector (&tile)[in][in], Apply apply, ChannelVector (&result)[out][out]) {
  ChannelVector columns[out][in];  // T · tile
  for (int j = 0; j < in; ++j) apply(&tile[0][j], in, &columns[0][j], in);
  for (int a = 0; a < out; ++a) apply(columns[a], 1, result[a], 1);
}

// V = Bᵀ d B for every tile of the block's image, 16 channels at once: V[ξ] of tile
// (ty, tx) and channel c0 + l goes to v[ξ · stride + (first_tile + ty · tw + tx) · channels + c0 + l].
template <typename Tile>
void input_transform_channels(const float* block, const Tiling& t, long first_tile, long channels, long c0, float* v,
                              long stride) {
  constexpr int m = Tile::m, n = Tile::n;
  const long cols = channel_block_cols(t);
  for (long ty = 0; ty < t.th; ++ty)
    for (long tx = 0; tx < t.tw; ++tx) {
      const float* from = block + (m * ty * cols + m * tx) * kChannelLanes;
      float* to = v + (first_tile + ty * t.tw + tx) * channels + c0;
      ChannelVector d[n][n], u[n][n];  // the tile, then Bᵀ d B
      for (int r = 0; r < n; ++r)
        for (int j = 0; j < n; ++j) load_channels(from + (r * cols + j) * kChannelLanes, d[r][j]);
      transform_channel_tile(d, Tile::template data<ChannelVector>, u);
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) store_channels(to + (n * a + b) * stride, u[a][b]);
    }
}

// The filter gradient's Z = A e Aᵀ for every tile of one image's output gradient, 16 channels
// at once: tile (ty, tx)'s m × m cells of 16 channels from `block` (the p × q planes placed as
// place_channel_block does, t the plane's tiling with no padding: the cells past the planes stay
// zero, as the filter gradient counts them), Z[ξ] of channel k0 + l to
// z[ξ · stride + (first_tile + ty · tw + tx) · channels + k0 + l]: (tiles × k) matrices.
template <typename Tile>
void output_grad_transform_channels(const float* block, const Tiling& t, long first_tile, long channels, long k0,
                                    float* z, long stride) {
  constexpr int m = Tile::m, n = Tile::n;
  const long cols = channel_block_cols(t);
  for (long ty = 0; ty < t.th; ++ty)
    for (long tx = 0; tx < t.tw; ++tx) {
      const float* from = block + (m * ty * cols + m * tx) * kChannelLanes;
      float* to = z + (first_tile + ty * t.tw + tx) * channels + k0;
      ChannelVector e[m][m], zt[n][n];  // the tile, then A e Aᵀ
      for (int r = 0; r < m; ++r)
        for (int j = 0; j < m; ++j) load_channels(from + (r * cols + j) * kChannelLanes, e[r][j]);
      transform_channel_tile(e, Tile::template output_grad<ChannelVector>, zt);
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) store_channels(to + (n * a + b) * stride, zt[a][b]);
    }
}

// One row of tiles' outputs as 16-channel pixels: m rows of m·tw cells.
inline long staged_row_floats(const Tiling& t) { return t.m * t.m * t.tw * kChannelLanes; }

// Y = Aᵀ M A (+ bias, then floored at 0 with relu) for every tile of one image, output channels
// [c0, c0 + 16) at once: M[ξ] of tile (ty, tx) and channel c0 + l at
// products[ξ · stride + (first_tile + ty · tw + tx) · channels + c0 + l]. The outputs go to 16
// consecutive p × q planes at `planes`; a row of tiles is built in `staged` (staged_row_floats)
// as 16-channel pixels, then each of its output rows inside the plane is transposed into the
// 16 planes (transpose_blocks.h). Outputs of tiles that hang over the edge are dropped.
// bias: 16 values or null.
template <typename Tile>
void output_transform_channels(const float* products, long stride, long channels, long c0, long first_tile,
                               const Tiling& t, const float* bias, bool relu, float* staged, float* planes) {
  constexpr int m = Tile::m, n = Tile::n;
  const long row_cells = m * t.tw;
  ChannelVector b = {}, zero = {};
  if (bias) load_channels(bias, b);
  for (long ty = 0; ty < t.th; ++ty) {
    for (long tx = 0; tx < t.tw; ++tx) {
      const float* from = products + (first_tile + ty * t.tw + tx) * channels + c0;
      ChannelVector s[n][n], y[m][m];  // the products, then Aᵀ s A
      for (int a = 0; a < n; ++a)
        for (int j = 0; j < n; ++j) load_channels(from + (n * a + j) * stride, s[a][j]);
      transform_channel_tile(s, Tile::template output<ChannelVector>, y);
      for (int a = 0; a < m; ++a)
        for (int j = 0; j < m; ++j) {
          ChannelVector out = y[a][j] + b;
          if (relu) out = out > zero ? out : zero;
          store_channels(staged + (a * row_cells + m * tx + j) * kChannelLanes, out);
        }
    }
    const long rows = std::min<long>(m, t.p - m * ty);
    for (long a = 0; a < rows; ++a)  // q cells of 16 channels → row m·ty + a of 16 planes
      transpose_matrix(staged + a * row_cells * kChannelLanes, t.q, kChannelLanes, kChannelLanes,
                       planes + (m * ty + a) * t.q, t.p * t.q);
  }
}

}  // namespace nnlab::cpu::NNLAB_ISA
