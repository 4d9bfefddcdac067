// Winograd convolution on the CPU: the 3×3, stride-1 convolutions of the zoo with at least
// kWinogradMinChannels channels in and out (the cnn's second layer, most of cifar-cnn and
// resnet8), in F(2×2, 3×3) or F(4×4, 3×3) (conv2d_winograd_tiles.h has both algorithms'
// matrices; conv2d_cpu.cpp chooses per layer). The CUDA twin of this choice is cuDNN's own
// algorithm search (conv2d_cuda.cu), which may pick its Winograd kernels itself.
//
// Why: an m × m block of outputs of a 3×3 filter costs 9m² multiply-adds per channel pair
// directly, but only n² = (m + 2)² in Winograd's minimal filtering algorithm:
//   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A          d: n × n input tile, g: 3×3 filter, Y: m × m
// Summed over input channels, each of the n² tile positions ξ becomes one matrix product:
//   M[ξ] (k × tiles) = U[ξ] (k × c) · V[ξ] (c × tiles),  U = G g Gᵀ,  V = Bᵀ d B,
// so 2.25× (m = 2) or 4× (m = 4) fewer flops go through n² small matrix products
// (small_gemm.h), plus cheap transforms.
//
// The three directions:
//   forward          y  = the product above, then Aᵀ M A per tile (+ bias)
//   backward data    dx = the same forward convolution of dy with the filter rotated by 180°
//                         and its in/out channels swapped, padding 2 − pad (stride 1)
//   backward filter  L = ⟨dy, y⟩ is bilinear in (g, d), so ∂L/∂g = Gᵀ [ Σ_tiles (A dY Aᵀ) ⊙ (Bᵀ d B) ] G:
//                    S[ξ] (k × c) = Σ Z[ξ] (k × tiles) · V[ξ]ᵀ (tiles × c),  Z = A dY Aᵀ,
//                    then dW = Gᵀ S G per (k, c)
// Output tiles that hang over the bottom or right edge (p or q not a multiple of m) are
// computed and their extra outputs dropped in the forward; in the filter gradient their dY
// cells count as zero.
//
// Threads: images go in chunks sized so one chunk's transformed tiles stay in a core's L2
// cache; each thread takes its even share of the chunks, then what another has left
// (balanced_loops.h), and runs their products single-threaded. Every output element comes
// from one chunk in a fixed order; the filter gradient sums fixed runs of chunks into partials
// of their own, added in run order, so for a given thread count results repeat bit for bit.
//
// Compiled once per instruction set (cpu_isa.h), into cpu::avx2 and cpu::avx512, each with its
// own small_gemm and lane vectors; which shapes it serves (winograd_applies) and with which
// tile (winograd_tile) is decided in conv2d_cpu.cpp.
#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "devices/cpu/balanced_loops.h"
#include "devices/cpu/bias_lanes.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/conv2d_winograd_channels.h"
#include "devices/cpu/conv2d_winograd_convolve.h"
#include "devices/cpu/conv2d_winograd_planes.h"
#include "devices/cpu/conv2d_winograd_pooled.h"
#include "devices/cpu/conv2d_winograd_products.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/pool2d.h"
#include "devices/cpu/small_gemm.h"

namespace nnlab::cpu::NNLAB_ISA {

namespace {

// The filter gradient's Z[ξ] of plane `at` of dY (p × q, t's output) into z (see
// output_grad_transform), and with `sum` its bias sums (bias_lanes.h). pooled_tiles (float rows of
// tiles that cover whole windows, pooled_tiles_fit and pooled_bias_fits): both straight from
// the pool's gradient and winners; otherwise from the plane, unpooled into `unpooled` first.
template <typename Tile, typename T>
void transform_dy_plane(const InputPlanes<T>& dy, long at, const Tiling& t, bool pooled_tiles, T* sum, T* padded_dy,
                        T* unpooled, T* z, long z_stride) {
  if constexpr (std::is_same_v<T, float>) {
    if (pooled_tiles) {
      const long pooled = dy.pool->p * dy.pool->q;
      const float *grad = dy.x + at * pooled;
      const int32_t* winners = dy.argmax + at * pooled;
      if (sum) pooled_plane_bias_lanes(grad, winners, t.p, t.q, sum, sum[kBiasLanes]);
      return output_grad_transform_pooled(grad, winners, t, z, z_stride);
    }
  }
  const T* plane = dy.plane(at, t.p * t.q, unpooled);
  if (sum) plane_bias_lanes<T, false>(plane, nullptr, nullptr, t.p * t.q, sum, sum[kBiasLanes]);
  transform_output_grad_plane<Tile>(plane, t, padded_dy, z, z_stride);
}

// Runs body(WinogradF2{}) or body(WinogradF4{}): the algorithm `tile` names.
template <typename Body>
void with_tile(WinogradTile tile, Body body) {
  if (tile == WinogradTile::F4x4)
    body(WinogradF4{});
  else
    body(WinogradF2{});
}

}  // namespace

namespace {

// x: (n, c, h, w)  w: (k, c, 3, 3)  b: (k) or null  y: (n, k, p, q)   (relu: y = max(0, y))
// pool: y (n, k, p/2, q/2) and argmax instead, each output plane max-pooled (2×2)
void forward_planes(const Conv2dGeometry& g, WinogradTile tile, const Tensor& x, const Tensor& w, const Tensor* b,
                    Tensor& y, bool relu, const Pool2dGeometry* pool, Tensor* argmax) {
  dispatch_float("conv2d_forward (winograd)", x, [&](auto tag) {
    using T = decltype(tag);
    with_tile(tile, [&](auto tile_tag) {
      using Tile = decltype(tile_tag);
      Tensor ut = Tensor::empty({Tile::n * Tile::n * g.k * g.c}, x.dtype(), Device::cpu());
      const T* w_data = w.data<T>();
      T* u = ut.data<T>();
      const Tiling t = tiling(Tile::m, g.h, g.w, g.pad_h, g.pad_w);
      const T* b_data = b && b->defined() ? b->data<T>() : nullptr;
      const OutputPlanes<T> out{y.data<T>(), pool, pool ? argmax->data<int32_t>() : nullptr};
      if constexpr (std::is_same_v<T, float>) {
        if (winograd_channel_lanes(ConvDirection::Forward, g, DType::Float32)) {
          const long c = g.c, k = g.k;
          transform_filters<Tile>(  // U[ξ][ci][co]: filter j = ci · k + co
              k * c, [w_data, c, k](long j, int i) { return w_data[((j % k) * c + j / k) * 9 + i]; }, u, k * c);
          return winograd_convolve_channels<Tile>(InputPlanes<T>{x.data<T>()}, g.n, c, t, u, k, b_data, out, relu);
        }
      }
      transform_filters<Tile>(  // U[ξ][co][ci]: filter j = co · c + ci, stored in that order
          g.k * g.c, [w_data](long j, int i) { return w_data[j * 9 + i]; }, u, g.k * g.c);
      winograd_convolve<Tile>(x.dtype(), InputPlanes<T>{x.data<T>()}, g.n, g.c, t, u, g.k, b_data, out, relu);
    });
  });
}

}  // namespace

void winograd_forward(const Conv2dGeometry& g, WinogradTile tile, const Tensor& x, const Tensor& w, const Tensor* b,
                      Tensor& y, bool relu) {
  forward_planes(g, tile, x, w, b, y, relu, nullptr, nullptr);
}

// pool: a 2×2, stride 2, unpadded max-pool with its ReLU (pool.relu); y, argmax (n, k, p/2, q/2)
void winograd_forward_maxpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                              const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, Tensor& argmax) {
  forward_planes(g, tile, x, w, b, y, false, &pool, &argmax);
}

namespace {

// dy: (n, k, p, q)  w: (k, c, 3, 3)  dx: (n, c, h, w)
// dx[ci] = Σ_co dy[co] ⋆ rot180(w[co, ci]) with padding 2 − pad: a forward convolution
// from k channels to c.
// pool: dy and argmax are a 2×2 max-pool's (n, k, p/2, q/2), each plane of the convolution's dy
// made from them as it is read.
void backward_data_planes(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& w, Tensor& dx,
                          const Pool2dGeometry* pool, const Tensor* argmax) {
  dispatch_float("conv2d_backward_data (winograd)", dy, [&](auto tag) {
    using T = decltype(tag);
    with_tile(tile, [&](auto tile_tag) {
      using Tile = decltype(tile_tag);
      Tensor ut = Tensor::empty({Tile::n * Tile::n * g.c * g.k}, dy.dtype(), Device::cpu());
      const T* w_data = w.data<T>();
      T* u = ut.data<T>();
      const long k = g.k, c = g.c;
      const Tiling t = tiling(Tile::m, g.p, g.q, 2 - g.pad_h, 2 - g.pad_w);
      const InputPlanes<T> planes{dy.data<T>(), pool, pool ? argmax->data<int32_t>() : nullptr};
      if constexpr (std::is_same_v<T, float>) {
        if (winograd_channel_lanes(ConvDirection::BackwardData, g, DType::Float32)) {
          transform_filters<Tile>(  // U[ξ][co][ci] of the rotated filters: j = co · c + ci, tap i ← 8 − i
              k * c, [w_data](long j, int i) { return w_data[j * 9 + 8 - i]; }, u, c * k);
          return winograd_convolve_channels<Tile>(planes, g.n, k, t, u, c, nullptr, OutputPlanes<T>{dx.data<T>()},
                                                  false);
        }
      }
      transform_filters<Tile>(  // U[ξ][ci][co] of the rotated filters: j = ci · k + co, tap i ← 8 − i
          k * c, [w_data, k, c](long j, int i) { return w_data[((j % k) * c + j / k) * 9 + 8 - i]; }, u, c * k);
      winograd_convolve<Tile>(dy.dtype(), planes, g.n, g.k, t, u, g.c, (const T*)nullptr, OutputPlanes<T>{dx.data<T>()},
                              false);
    });
  });
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, 3, 3)  db: (k) or null
// pool: as backward_data_planes.
void backward_filter_planes(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& x, Tensor& dw,
                            Tensor* db, const Pool2dGeometry* pool, const Tensor* argmax) {
  dispatch_float("conv2d_backward_filter (winograd)", dy, [&](auto tag) {
    using T = decltype(tag);
    with_tile(tile, [&](auto tile_tag) {
      using Tile = decltype(tile_tag);
      constexpr int positions = Tile::n * Tile::n;
      const Tiling t = tiling(Tile::m, g.h, g.w, g.pad_h, g.pad_w);
      const long chunk = chunk_images(g.n, positions, g.c + g.k, t.per_plane(), sizeof(T));
      const long chunks = (g.n + chunk - 1) / chunk, threads = omp_get_max_threads();
      const bool parallel = threads > 1 && chunks > 1;
      const long slots = parallel ? threads : 1, kc = g.k * g.c;
      const long runs = summing_runs(chunks, parallel);  // one partial S each (balanced_loops.h)
      const long chunk_tiles = chunk * t.per_plane();
      // V[ξ] as (tiles × c), channels in the lanes, where float32 channels and rows fit.
      const bool channel_lanes = winograd_channel_lanes(ConvDirection::BackwardFilter, g, x.dtype());
      // Z[ξ] and the bias sums straight from a pool's gradient and winners, where they fit.
      const bool pooled_tiles = std::is_same_v<T, float> && pool && pooled_tiles_fit(t, pool->p, pool->q) &&
                                (!db || pooled_bias_fits(g.p, g.q));
      // dY's Z[ξ] as (tiles × k) too, with AVX-512, where V is and dY's channels and rows fit:
      // dY's 16 planes (or the pool's gradient, where it fits) into a block of 16-channel cells,
      // and S[ξ] = Z[ξ]ᵀ · V[ξ]. Against Z from the planes on two Zen 5 threads (2026-12-02,
      // alternated, medians): cifar-cnn's c3 0.67–0.78 of the time, the pooled c4 0.88–0.93, the
      // pooled c2 1.00–1.02 (whose pooled plane transform fills whole vectors already).
      const Tiling dy_t{t.m, g.p, g.q, 0, 0, g.p, g.q, t.th, t.tw};
      const bool dy_lanes = winograd_output_grad_channel_lanes(g, x.dtype()) &&
                            (!pool || (pooled_channel_block_fits(dy_t, pool->p, pool->q) &&
                                       (!db || pooled_bias_fits(g.p, g.q))));
      const long block_floats = (channel_lanes ? channel_block_floats(t) : 0) +
                                (dy_lanes ? channel_block_floats(dy_t) + (pool ? 8 * g.p * g.q : 0) : 0);
      const long v_floats = channel_lanes ? channel_matrix_stride(chunk_tiles, g.c) : matrix_stride(g.c, chunk_tiles);
      const long z_floats = dy_lanes ? channel_matrix_stride(chunk_tiles, g.k) : matrix_stride(g.k, chunk_tiles);
      const long used = positions * (v_floats + z_floats) + 2 * scratch_floats(t) +
                        (channel_lanes ? 0 : chunk_tiles * g.c) + (pool ? g.p * g.q : 0) + block_floats;
      const long slot_floats = (used + kChannelLanes - 1) / kChannelLanes * kChannelLanes;  // 64-byte aligned slots
      Tensor workspace = Tensor::empty({slots * slot_floats}, x.dtype(), Device::cpu());
      // With channel lanes a run's first chunk writes its partial (beta 0), so none is zeroed.
      Tensor partial = channel_lanes ? Tensor::empty({runs * positions * kc}, x.dtype(), Device::cpu())
                                     : Tensor::zeros({runs * positions * kc}, x.dtype(), Device::cpu());
      Tensor sums = db ? Tensor::empty({g.n * g.k * kBiasSums}, dy.dtype(), Device::cpu()) : Tensor();
      const T* x_data = x.data<T>();
      const InputPlanes<T> dy_planes{dy.data<T>(), pool, pool ? argmax->data<int32_t>() : nullptr};
      T *ws = workspace.data<T>(), *part = partial.data<T>(), *sum_data = db ? sums.data<T>() : nullptr;
      for (long sl = 0; sl < slots; ++sl) {  // each slot's channel block: its border stays zero
        T* block = ws + (sl + 1) * slot_floats - block_floats;
        std::fill(block, block + block_floats, T(0));
      }
      // Chunk ck on workspace slot `slot`: S[ξ] (k × c) += Z[ξ] · V[ξ]ᵀ into s (= with `opens`,
      // a run's first chunk, where channel lanes leave s unzeroed).
      const auto filter_chunk = [&](long ck, long slot, T* s, bool opens) {
        const long first = ck * chunk, count = std::min(chunk, g.n - first), tiles = count * t.per_plane();
        const long v_stride = channel_lanes ? channel_matrix_stride(tiles, g.c) : matrix_stride(g.c, tiles);
        const long z_stride = dy_lanes ? channel_matrix_stride(tiles, g.k) : matrix_stride(g.k, tiles);
        T* v = ws + slot * slot_floats;      // n² × c × tiles (channel lanes: n² × tiles × c)
        T* z = v + positions * v_stride;     // n² × k × tiles
        T* padded_x = z + positions * z_stride;  // zero borders, see place_plane
        T* padded_dy = padded_x + scratch_floats(t);
        // one V[ξ]ᵀ (tiles × c; none with channel lanes), then a plane of dy from the pool's gradient
        T* v_transposed = padded_dy + scratch_floats(t);
        T* unpooled = v_transposed + (channel_lanes ? 0 : chunk_tiles * g.c);
        std::fill(padded_x, padded_x + 2 * scratch_floats(t), T(0));
        if constexpr (std::is_same_v<T, float>) {
          if (channel_lanes) {
            float* block = ws + (slot + 1) * slot_floats - block_floats;
            for (long i = 0; i < count; ++i)
              for (long c0 = 0; c0 < g.c; c0 += kChannelLanes) {
                place_channel_block(x_data + ((first + i) * g.c + c0) * g.h * g.w, t, block);
                input_transform_channels<Tile>(block, t, i * t.per_plane(), g.c, c0, v, v_stride);
              }
          }
          if (dy_lanes) {
            float* block = ws + (slot + 1) * slot_floats - block_floats + channel_block_floats(t);
            float* cells = block + channel_block_floats(dy_t);
            const long pooled = pool ? pool->p * pool->q : 0;
            for (long i = 0; i < count; ++i)
              for (long k0 = 0; k0 < g.k; k0 += kChannelLanes) {
                const long at = (first + i) * g.k + k0;
                for (long l = 0; l < kChannelLanes && sum_data; ++l) {  // the bias sums, as transform_dy_plane
                  float* sum = sum_data + (at + l) * kBiasSums;
                  if (pool)
                    pooled_plane_bias_lanes(dy_planes.x + (at + l) * pooled, dy_planes.argmax + (at + l) * pooled,
                                            g.p, g.q, sum, sum[kBiasLanes]);
                  else
                    plane_bias_lanes<float, false>(dy_planes.x + (at + l) * g.p * g.q, nullptr, nullptr, g.p * g.q,
                                                   sum, sum[kBiasLanes]);
                }
                if (pool)
                  place_pooled_channel_block(dy_planes.x + at * pooled, dy_planes.argmax + at * pooled, pool->p,
                                             pool->q, dy_t, cells, block);
                else
                  place_channel_block(dy_planes.x + at * g.p * g.q, dy_t, block);
                output_grad_transform_channels<Tile>(block, dy_t, i * t.per_plane(), g.k, k0, z, z_stride);
              }
            for (int xi = 0; xi < positions; ++xi)  // S[ξ] (k × c) = Z[ξ]ᵀ · V[ξ], both (tiles × channels)
              product_tn(g.k, g.c, tiles, z + xi * z_stride, v + xi * v_stride, opens ? 0.0f : 1.0f, s + xi * kc);
            return;
          }
        }
        if (!channel_lanes)
          transform_inputs<Tile>(InputPlanes<T>{x_data}, g.c, t, first, count, padded_x, static_cast<T*>(nullptr), v);
        const auto transform_dy = [&](long co, long i) {
          const long at = (first + i) * g.k + co;
          transform_dy_plane<Tile>(dy_planes, at, t, pooled_tiles, sum_data ? sum_data + at * kBiasSums : nullptr,
                                   padded_dy, unpooled, z + co * tiles + i * t.per_plane(), z_stride);
        };
        for_each_plane<T>(t, count, g.k, transform_dy);
        for (int xi = 0; xi < positions; ++xi) {
          if (channel_lanes && opens)  // V[ξ] is already (tiles × c)
            product(g.k, g.c, tiles, z + xi * z_stride, v + xi * v_stride, s + xi * kc);
          else if (channel_lanes)
            add_product_nn(g.k, g.c, tiles, z + xi * z_stride, v + xi * v_stride, s + xi * kc);
          else
            add_product_nt(g.k, g.c, tiles, z + xi * z_stride, v + xi * v_stride, s + xi * kc, v_transposed);
        }
      };
      for_each_run(chunks, runs, parallel, [&](long ck, int slot, long run) {
        filter_chunk(ck, slot, part + run * positions * kc, ck == run_start(run, chunks, runs));
      });
      // The partials added into the first in run order, each a contiguous pass (reading all of
      // them per weight was 128 streams of loads at 8 runs: 1.4 ms of cifar-cnn's step), then
      // dW = Gᵀ S G.
      add_partials(part, positions * kc, runs);
      T* dw_data = dw.data<T>();
      filter_grad_tiles<Tile>(kc, part, kc, dw_data);
      if (db) bias_from_image_sums(sum_data, g.n, g.k, db->data<T>());
    });
  });
}

}  // namespace

void winograd_backward_data(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& w,
                            Tensor& dx) {
  backward_data_planes(g, tile, dy, w, dx, nullptr, nullptr);
}

void winograd_backward_filter(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& x,
                              Tensor& dw, Tensor* db) {
  backward_filter_planes(g, tile, dy, x, dw, db, nullptr, nullptr);
}

// dy, argmax: the 2×2 max-pool's (n, k, p/2, q/2); the convolution's dy is never stored.
void winograd_backward_data_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                   const Tensor& dy, const Tensor& argmax, const Tensor& w, Tensor& dx) {
  backward_data_planes(g, tile, dy, w, dx, &pool, &argmax);
}

void winograd_backward_filter_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                     const Tensor& dy, const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db) {
  backward_filter_planes(g, tile, dy, x, dw, db, &pool, &argmax);
}

}  // namespace nnlab::cpu::NNLAB_ISA
