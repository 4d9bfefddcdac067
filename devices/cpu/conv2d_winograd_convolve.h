// The Winograd forward convolution of conv2d_winograd_cpu.cpp, which its data gradient runs
// too (a forward convolution of dy with the rotated filters): how the images go in chunks,
// where the input planes come from and where the outputs go (a tensor, or a 2×2 max-pool on
// either side), and the convolution itself in the plane layout (conv2d_winograd_planes.h) and
// with the channels in the lanes (conv2d_winograd_channels.h).
//
// Only files compiled once per instruction set include this header (see even_odd.h).
#pragma once
#include <omp.h>

#include <algorithm>
#include <numeric>
#include <type_traits>

#include "core/tensor.h"
#include "devices/cpu/balanced_loops.h"
#include "devices/cpu/conv2d_winograd_channels.h"
#include "devices/cpu/conv2d_winograd_planes.h"
#include "devices/cpu/conv2d_winograd_pooled.h"
#include "devices/cpu/conv2d_winograd_products.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/pool2d.h"

namespace nnlab::cpu::NNLAB_ISA {

constexpr long kChunkBytes = 1L << 20;  // transformed tiles of one chunk: about a core's L2
constexpr long kProductBlock = 32;      // columns of small_gemm.h's register blocks

// Images per chunk: as many as keep `positions` transformed values per tile and channel
// (`channels` of them, in and out) within kChunkBytes, then evened out so that every thread
// gets as many chunks (7 chunks on 2 threads would leave one thread a chunk to run alone).
// Where several images fit, their count is rounded down so that the chunk's tiles fill whole
// 32-column blocks of small_gemm.h's products: 3 images of 16 tiles (F(4×4) on 16×16) would
// leave a third of the second block idle, 2 fill one.
inline long chunk_images(long n, long positions, long channels, long tiles_per_image, long bytes_per_float) {
  const long image_bytes = std::max(1L, positions * channels * tiles_per_image * bytes_per_float);
  const long fit = std::clamp(kChunkBytes / image_bytes, 1L, n);
  const long threads = omp_get_max_threads(), chunks = (n + fit - 1) / fit;
  const long even_chunks = (chunks + threads - 1) / threads * threads;
  const long even = (n + even_chunks - 1) / even_chunks;
  const long whole_blocks = kProductBlock / std::gcd(kProductBlock, tiles_per_image);  // images per 32k tiles
  return std::max(1L, even >= whole_blocks ? even / whole_blocks * whole_blocks : even);
}

// Where a kernel's input planes come from: a tensor (n, channels, h, w) itself, or, pooled (pool
// set), a 2×2 max-pool's gradient and winners (n, channels, h/2, w/2), each plane routed to its
// winners (the pool's backward) into a scratch plane as the kernel reaches it, or, where every
// cell is in a window, straight into the transform's phase planes (conv2d_winograd_pooled.h):
// the unpooled gradient is never stored.
template <typename T>
struct InputPlanes {
  const T* x;
  const Pool2dGeometry* pool = nullptr;
  const int32_t* argmax = nullptr;
  // Plane `at` (= image · channels + channel) of `plane_floats` floats.
  const T* plane(long at, long plane_floats, T* scratch) const {
    if (!pool) return x + at * plane_floats;
    const long pooled = pool->p * pool->q;
    maxpool_2x2_one_plane_backward(*pool, x + at * pooled, argmax + at * pooled, scratch);
    return scratch;
  }
};

// V[ξ][ch][tile] for images [first, first + count) of x (n, channels, h, w); tiles numbered
// image-major, then row-major within the chunk; V[ξ] starts at v + ξ · matrix_stride.
// plane_scratch: h × w floats for a pooled source.
template <typename Tile, typename T>
void transform_inputs(const InputPlanes<T>& x, long channels, const Tiling& t, long first, long count, T* scratch,
                      T* plane_scratch, T* v) {
  const long tiles = count * t.per_plane(), stride = matrix_stride(channels, tiles);
  const bool pooled_phases = std::is_same_v<T, float> && x.pool && pooled_planes_fit(t.h, t.w, x.pool->p, x.pool->q);
  const auto transform = [&](long ch, long i) {
    const long at = (first + i) * channels + ch;
    T* to = v + ch * tiles + i * t.per_plane();
    if constexpr (std::is_same_v<T, float>) {
      if (pooled_phases) {  // the phase planes straight from the pool's gradient
        const long pooled = x.pool->p * x.pool->q;
        place_pooled_plane<Tile::m>(x.x + at * pooled, x.argmax + at * pooled, t.h, t.w, t.pad_h, t.pad_w, t, scratch);
        return transform_placed_input<Tile>(t, scratch, to, stride);
      }
    }
    transform_input_plane<Tile>(x.plane(at, t.h * t.w, plane_scratch), t, scratch, to, stride);
  };
  for_each_plane<T>(t, count, channels, transform);
}

// Where the forward's output planes go: y (n, cout, p, q) itself, or, pooled (pool set), one
// plane at a time through a scratch plane into the 2×2 max-pool's y and argmax (n, cout, p/2,
// q/2): the unpooled output is never stored.
template <typename T>
struct OutputPlanes {
  T* y;
  const Pool2dGeometry* pool = nullptr;
  int32_t* argmax = nullptr;
};

// The forward convolution of x (n, cin, h, w) to y (n, cout, p, q) with transformed
// filters u (n² × cout × cin) and an optional bias — shared by forward and backward data;
// relu (forward only): each plane floored at 0 as soon as it is written.
template <typename Tile, typename T>
void winograd_convolve(DType dtype, const InputPlanes<T>& x, long n, long cin, const Tiling& t, const T* u, long cout,
                       const T* bias, OutputPlanes<T> out, bool relu) {
  constexpr int positions = Tile::n * Tile::n;
  const long chunk = chunk_images(n, positions, cin + cout, t.per_plane(), sizeof(T));
  const long chunks = (n + chunk - 1) / chunk, threads = omp_get_max_threads();
  const bool parallel = threads > 1 && chunks > 1;
  const long chunk_tiles = chunk * t.per_plane(), plane_floats = t.p * t.q;
  const long pooled_floats = out.pool ? out.pool->p * out.pool->q : 0;
  const long slot_floats = positions * (matrix_stride(cin, chunk_tiles) + matrix_stride(cout, chunk_tiles)) +
                           scratch_floats(t) + (out.pool ? plane_floats : 0) + (x.pool ? t.h * t.w : 0);
  Tensor workspace = Tensor::empty({(parallel ? threads : 1) * slot_floats}, dtype, Device::cpu());
  T* ws = static_cast<T*>(workspace.raw_data());
  for_each_item(chunks, parallel, [&](long ck, int slot) {  // each chunk writes outputs of its own
    const long first = ck * chunk, count = std::min(chunk, n - first), tiles = count * t.per_plane();
    const long v_stride = matrix_stride(cin, tiles), m_stride = matrix_stride(cout, tiles);
    T* v = ws + slot * slot_floats;        // n² × cin × tiles
    T* m = v + positions * v_stride;       // n² × cout × tiles
    T* padded = m + positions * m_stride;  // zero border, see place_plane
    T* pool_plane = padded + scratch_floats(t);  // the plane on its way to the pool
    T* unpooled = pool_plane + (out.pool ? plane_floats : 0);  // an input plane from the pool's gradient
    std::fill(padded, padded + scratch_floats(t), T(0));
    transform_inputs<Tile>(x, cin, t, first, count, padded, unpooled, v);
    for (int xi = 0; xi < positions; ++xi)
      product(cout, tiles, cin, u + xi * cout * cin, v + xi * v_stride, m + xi * m_stride);
    for (long i = 0; i < count; ++i)
      for (long co = 0; co < cout; ++co) {
        const long at = (first + i) * cout + co;
        T* plane = out.pool ? pool_plane : out.y + at * plane_floats;
        const T b = bias ? bias[co] : T(0);
        transform_output_plane<Tile>(m + co * tiles + i * t.per_plane(), m_stride, t, b, plane);
        if (relu) relu_in_place(plane, plane_floats);
        if (out.pool)
          maxpool_2x2_one_plane(*out.pool, plane, out.y + at * pooled_floats, out.argmax + at * pooled_floats);
      }
  });
}

// winograd_convolve with the channels in the lanes (conv2d_winograd_channels.h), float32, for
// the calls winograd_channel_lanes (conv2d_winograd.h) names: each image's 16-channel groups of
// input planes are placed in a zero-bordered block of 16-channel pixels (16 × 16 register
// transposes) and transformed with one vector per tile cell; V[ξ] (tiles × cin) · U[ξ]
// (cin × cout) leaves M with the output channels innermost, and the output transform builds 16
// planes at a time. u: n² × cin × cout. The same transforms, products and order of sums as
// winograd_convolve, so the same bits, without splitting each plane into its columns mod m.
// Against winograd_convolve on two Zen 5 threads (2026-12-02, alternated, medians): cifar-cnn's
// forward c2 0.73–0.85 of its time, c3 0.88–0.99, c4 0.92–1.02; the data gradient, pooled c2
// 0.91–0.96, c3 0.80–0.88, pooled c4 0.87–0.94. The matrices keep slack between them
// (channel_matrix_stride): a first prototype with V[ξ] and M[ξ] a power of two apart (c2: 8 KB),
// whose 36 stores of a tile fall in one cache set, ran c2's forward at 1.13 of the plane
// layout's time, with the slack 0.84.
template <typename Tile>
void winograd_convolve_channels(const InputPlanes<float>& x, long n, long cin, const Tiling& t, const float* u,
                                long cout, const float* bias, OutputPlanes<float> out, bool relu) {
  constexpr int positions = Tile::n * Tile::n;
  const long chunk = chunk_images(n, positions, cin + cout, t.per_plane(), sizeof(float));
  const long chunks = (n + chunk - 1) / chunk, threads = omp_get_max_threads();
  const bool parallel = threads > 1 && chunks > 1;
  const long chunk_tiles = chunk * t.per_plane(), in_floats = t.h * t.w, out_floats = t.p * t.q;
  const long pooled_floats = out.pool ? out.pool->p * out.pool->q : 0, block_floats = channel_block_floats(t);
  const long matrices =
      positions * (channel_matrix_stride(chunk_tiles, cin) + channel_matrix_stride(chunk_tiles, cout));
  const long slot_floats = matrices + block_floats + staged_row_floats(t) +
                           (out.pool ? kChannelLanes * out_floats : 0) +
                           (x.pool ? kChannelLanes * in_floats : 0);
  const long slots = parallel ? threads : 1;
  // A pool's gradient straight into the block, where it fits; else unpooled plane by plane.
  const bool pooled_cells = x.pool && pooled_channel_block_fits(t, x.pool->p, x.pool->q);
  Tensor workspace = Tensor::empty({slots * slot_floats}, DType::Float32, Device::cpu());
  float* ws = workspace.data<float>();
  for (long sl = 0; sl < slots; ++sl) {  // each slot's block: its border stays zero
    float* block = ws + sl * slot_floats + matrices;
    std::fill(block, block + block_floats, 0.0f);
  }
  for_each_item(chunks, parallel, [&](long ck, int slot) {  // each chunk writes outputs of its own
    const long first = ck * chunk, count = std::min(chunk, n - first), tiles = count * t.per_plane();
    const long v_stride = channel_matrix_stride(tiles, cin), m_stride = channel_matrix_stride(tiles, cout);
    float* v = ws + slot * slot_floats;                                // n² × tiles × cin
    float* m = v + positions * channel_matrix_stride(chunk_tiles, cin);  // n² × tiles × cout
    float* block = ws + slot * slot_floats + matrices;
    float* staged = block + block_floats;
    float* pool_planes = staged + staged_row_floats(t);  // 16 planes on their way to the pool
    // 16 planes from the pool's gradient, or its cells (place_pooled_channel_block: half as many floats)
    float* unpooled = pool_planes + (out.pool ? kChannelLanes * out_floats : 0);
    for (long i = 0; i < count; ++i)
      for (long c0 = 0; c0 < cin; c0 += kChannelLanes) {
        const long at = (first + i) * cin + c0;
        if (pooled_cells) {
          const long pooled = x.pool->p * x.pool->q;
          place_pooled_channel_block(x.x + at * pooled, x.argmax + at * pooled, x.pool->p, x.pool->q, t, unpooled,
                                     block);
        } else if (x.pool) {
          for (long l = 0; l < kChannelLanes; ++l) x.plane(at + l, in_floats, unpooled + l * in_floats);
          place_channel_block(unpooled, t, block);
        } else {
          place_channel_block(x.x + at * in_floats, t, block);
        }
        input_transform_channels<Tile>(block, t, i * t.per_plane(), cin, c0, v, v_stride);
      }
    for (int xi = 0; xi < positions; ++xi)
      product(tiles, cout, cin, v + xi * v_stride, u + xi * cin * cout, m + xi * m_stride);
    for (long i = 0; i < count; ++i)
      for (long c0 = 0; c0 < cout; c0 += kChannelLanes) {
        const long at = (first + i) * cout + c0;
        float* planes = out.pool ? pool_planes : out.y + at * out_floats;
        output_transform_channels<Tile>(m, m_stride, cout, c0, i * t.per_plane(), t, bias ? bias + c0 : nullptr, relu,
                                        staged, planes);
        if (out.pool)
          for (long l = 0; l < kChannelLanes; ++l)
            maxpool_2x2_one_plane(*out.pool, pool_planes + l * out_floats, out.y + (at + l) * pooled_floats,
                                  out.argmax + (at + l) * pooled_floats);
      }
  });
}

}  // namespace nnlab::cpu::NNLAB_ISA
