// The Winograd input transform with the channels in the lanes, for the filter gradient
// (conv2d_winograd_cpu.cpp): V[ξ] comes out as a (tiles × channels) matrix, so that
//   S[ξ] (k × c) += Z[ξ] (k × tiles) · V[ξ] (tiles × c)
// is a plain NN product, with no transpose of V and no dot products along the tiles.
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
#include <cstring>

#include "devices/cpu/conv2d_winograd_planes.h"
#include "devices/cpu/transpose_blocks.h"

namespace nnlab::cpu::NNLAB_ISA {

// 16 float32 channels: one AVX-512 register, two AVX2 ones.
constexpr long kChannelLanes = 16;
typedef float ChannelVector __attribute__((vector_size(kChannelLanes * sizeof(float))));

// Whole blocks of 16 channels, and rows that the register transposes take whole.
inline bool channel_lanes_fit(long channels, const Tiling& t) {
  return channels % kChannelLanes == 0 && t.w % kChannelLanes == 0;
}

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

// Vectors move by memcpy (one unaligned vector load or store), never by value through a
// function: a 64-byte vector argument or result has no agreed ABI where AVX-512 is not compiled in.
inline void load_channels(const float* from, ChannelVector& v) { std::memcpy(&v, from, sizeof v); }
inline void store_channels(float* to, const ChannelVector& v) { std::memcpy(to, &v, sizeof v); }

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
      ChannelVector d[n][n], u[n][n];  // the tile, then Bᵀ d
      for (int r = 0; r < n; ++r)
        for (int j = 0; j < n; ++j) load_channels(from + (r * cols + j) * kChannelLanes, d[r][j]);
      for (int b = 0; b < n; ++b) Tile::data(&d[0][b], n, &u[0][b], n);  // Bᵀ d: each column
      for (int a = 0; a < n; ++a) {                                        // (Bᵀ d) B: each row
        ChannelVector row[n];
        Tile::data(u[a], 1, row, 1);
        for (int b = 0; b < n; ++b) store_channels(to + (n * a + b) * stride, row[b]);
      }
    }
}

}  // namespace nnlab::cpu::NNLAB_ISA
