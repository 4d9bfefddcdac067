// The direct convolution's input and filter gradients with the batch's images in the vector
// lanes, for layers whose other layouts waste lanes on them: the input gradient of lenet5's
// second layer (6 → 16 channels, 5 × 5, 14 × 14 inputs) and the filter gradient of its first
// are the zoo's.
//
//   dx[c, Y, X] = Σ_o Σ_ri Σ_si w[o, c, ri, si] · dy[o, Y − ri + pad_h, X − si + pad_w]
//                 over the taps whose dy index lies inside the (p, q) plane
//
// Why: the row layout (conv2d_direct_cpu.cpp) computes this as a correlation of dy bordered
// with r − 1 zeros, a vector of output columns at a time. For lenet5's 10 × 10 dy and 14 × 14
// dx, 6 of every 16 lanes' taps in a row read the border's zeros and 2 of 16 lanes lie past
// the row: 62% of its multiply-adds count. With one image per lane instead, every lane of a
// pixel meets the same taps, so the loops run over exactly the taps inside the plane.
//
// Each group of kLanes images is copied into a (k, p + 2, q, kLanes) buffer first (one zero
// row above and below every plane, see gradient_pixels), the gradient is computed into a
// (c, h, w, kLanes) buffer, and that is copied out to the images' (c, h, w) planes. A pixel
// keeps kRows × kB accumulator vectors (two dx rows, kB input channels) in registers: each tap
// loads two dy vectors and kB weights for 2 · kB multiply-adds.
//
// The filter gradient of a first layer (lenet5's c1: 1 → 6 channels, 5 × 5, 28 × 28 outputs)
// takes the same layout: its rows of 28 filled 28 of the row layout's 32 lanes, and each image
// plane reloaded its dy for every tap pair. With the images in the lanes, every lane of every
// multiply-add counts, and a pixel's dy vector serves kTaps taps, its input vector kB channels:
//
//   dw[o, ci, ri, si] = Σ_images Σ_y Σ_x dy[o, y, x] · x[ci, y + ri − pad_h, x + si − pad_w]
//
// Each lane sums its own image over the plane; the lanes, then the groups, are added in order
// at the end.
//
// Threads: the groups are spread over the OpenMP threads; every dx value is one sum in a fixed
// order, and every dw value a sum of the groups' sums in group order, so results do not depend
// on the thread count. Compiled once per instruction set,
// like the other direct layouts (kLanes images: 16 in AVX-512, 8 in AVX2). The CUDA side has
// no twin of this file: there cuDNN picks its own algorithm per layer (conv2d_cuda.cu).
#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "devices/cpu/conv2d_direct_layout.h"
#include "devices/cpu/pool2d.h"
#include "devices/cpu/transpose_blocks.h"

namespace nnlab::cpu::NNLAB_ISA {

namespace {

// dx rows Y … Y + kRows − 1 of pixel column X for the kB input channels whose weights are wp.
// The filter rows taken are those that meet a dy row inside the plane for some row of the
// pair; for the other row that dy row is one of the buffer's zero rows (at most one past
// either edge, hence one zero row on each side for kRows = 2).
// gdy: (k, p + 2, q, kLanes)   wp: (r, s, k, kB)   gdx: (c, h, w, kLanes)
template <typename T, int kRows, long kB>
void gradient_pixels(const Conv2dGeometry& g, const T* gdy, const T* wp, long cb, long Y, long X, T* gdx) {
  T acc[kRows][kB][kLanes] = {};
  const long ri_first = std::max(0L, Y + g.pad_h - g.p + 1), ri_last = std::min(g.r - 1, Y + kRows - 1 + g.pad_h);
  const long si_first = std::max(0L, X + g.pad_w - g.q + 1), si_last = std::min(g.s - 1, X + g.pad_w);
  const long plane = (g.p + 2) * g.q * kLanes;  // one channel of gdy
  for (long ri = ri_first; ri <= ri_last; ++ri)
    for (long si = si_first; si <= si_last; ++si) {
      // The pixel of dx row Y in gdy (padded row Y − ri + pad_h + 1), then one per channel o.
      const T* pixel = gdy + ((Y - ri + g.pad_h + 1) * g.q + X - si + g.pad_w) * kLanes;
      const T* wv = wp + (ri * g.s + si) * g.k * kB;
      for (long o = 0; o < g.k; ++o, pixel += plane, wv += kB) {
#pragma GCC unroll 8
        for (long j = 0; j < kB; ++j) {
          const T wj = wv[j];
#pragma GCC unroll 2
          for (int t = 0; t < kRows; ++t) {
#pragma omp simd
            for (long l = 0; l < kLanes; ++l) acc[t][j][l] += wj * pixel[t * g.q * kLanes + l];
          }
        }
      }
    }
  const long channels = std::min(kB, g.c - cb * kB);
  for (int t = 0; t < kRows; ++t)
    for (long j = 0; j < channels; ++j) {
      T* out = gdx + (((cb * kB + j) * g.h + Y + t) * g.w + X) * kLanes;
#pragma omp simd
      for (long l = 0; l < kLanes; ++l) out[l] = acc[t][j][l];
    }
}

// ---- moving kLanes images into the lanes and back ------------------------------------------
// Scalar copies, one element per load and store with a stride of kLanes floats, had cost 40%
// of the kernel's time on lenet5, so in AVX-512 float32 blocks of 16 × 16 are transposed in
// registers (transpose_blocks.h). AVX2's 8-lane permutes of two vectors take several
// instructions; there the scalar copies measured faster (0.157 against 0.172 ms on lenet5), as
// they are for float64 (gradient checks).

// to[at · kLanes + l] = from[l · stride + at] for at < count, l < images (zero lanes after):
// `images` planes of `count` values each, interleaved one value per lane.
// A count that is not a multiple of 16 but at least 16 ends with a block that overlaps the one
// before it (a row of 28: blocks at 0 and 12), writing its overlap twice, identically.
template <typename T>
void interleave_planes(const T* from, long stride, long images, long count, T* to) {
  long at = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>)
    for (; at < count && count >= 16; at += 16) {
      const long block = std::min(at, count - 16);
      __m512 rows[16];
      for (long l = 0; l < 16; ++l)
        rows[l] = l < images ? _mm512_loadu_ps(from + l * stride + block) : _mm512_setzero_ps();
      transpose_16x16(rows);
      for (long r = 0; r < 16; ++r) _mm512_storeu_ps(to + (block + r) * 16, rows[r]);
    }
#endif
  for (long l = 0; l < kLanes; ++l)
    for (long a = at; a < count; ++a) to[a * kLanes + l] = l < images ? from[l * stride + a] : T(0);
}

// The way back: to[l · stride + at] = from[at · kLanes + l] for at < count, l < images.
template <typename T>
void separate_planes(const T* from, long images, long count, T* to, long stride) {
  long at = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>)
    for (; at + 16 <= count; at += 16) {
      __m512 rows[16];
      for (long r = 0; r < 16; ++r) rows[r] = _mm512_loadu_ps(from + (at + r) * 16);
      transpose_16x16(rows);
      for (long l = 0; l < images; ++l) _mm512_storeu_ps(to + l * stride + at, rows[l]);
    }
#endif
  for (long l = 0; l < images; ++l)
    for (long a = at; a < count; ++a) to[l * stride + a] = from[a * kLanes + l];
}

// wp[cb][ri][si][o][j] = w[o, cb · kB + j, ri, si], zero past the last channel: the channels
// o of one tap, the innermost loop of gradient_pixels, lie one after another.
template <typename T, long kB>
Tensor pack_by_input_channel(const Conv2dGeometry& g, const Tensor& w) {
  const long blocks = (g.c + kB - 1) / kB, taps = g.r * g.s;
  Tensor result = Tensor::zeros({blocks * g.k * taps * kB}, w.dtype(), w.device());
  const T* from = w.data<T>();
  T* to = result.data<T>();
  for (long o = 0; o < g.k; ++o)
    for (long c = 0; c < g.c; ++c)
      for (long tap = 0; tap < taps; ++tap)
        to[(((c / kB) * taps + tap) * g.k + o) * kB + c % kB] = from[(o * g.c + c) * taps + tap];
  return result;
}

// ---- the filter gradient ---------------------------------------------------------------------

// Filter taps si0 … si0 + kTaps − 1 of input channel ci and filter row ri, for the kB output
// channels of gdy, summed over the plane into their lanes:
//   lanes[o][t][l] += Σ_y Σ_x gdy[o, y, x, l] · gx[ci, y + ri, x + si0 + t, l]
// gx: (c, p + r − 1, q + s − 1, kLanes) zero-bordered   gdy: (kB, p, q, kLanes)
// lanes: (kB, r · s, kLanes) of this ci, at tap ri · s + si0
template <typename T, long kB, int kTaps>
void filter_pixels(const Conv2dGeometry& g, const T* gx, const T* gdy, long ci, long ri, long si0, T* lanes) {
  T acc[kB][kTaps][kLanes] = {};
  const long cols = g.q + g.s - 1, plane = g.p * g.q * kLanes;
  for (long y = 0; y < g.p; ++y) {
    const T* xrow = gx + ((ci * (g.p + g.r - 1) + y + ri) * cols + si0) * kLanes;
    const T* drow = gdy + y * g.q * kLanes;
    for (long x = 0; x < g.q; ++x)
#pragma GCC unroll 8
      for (long o = 0; o < kB; ++o) {
        const T* d = drow + o * plane + x * kLanes;
#pragma GCC unroll 4
        for (int t = 0; t < kTaps; ++t) {
#pragma omp simd
          for (long l = 0; l < kLanes; ++l) acc[o][t][l] += d[l] * xrow[(x + t) * kLanes + l];
        }
      }
  }
  const long taps = g.r * g.s;
  for (long o = 0; o < kB; ++o)
    for (int t = 0; t < kTaps; ++t) {
      T* out = lanes + (o * taps + ri * g.s + si0 + t) * kLanes;
#pragma omp simd
      for (long l = 0; l < kLanes; ++l) out[l] += acc[o][t][l];
    }
}

// The most taps a pass may take: kB · kTaps accumulator vectors (6 · 4 in AVX-512, 6 · 2 in AVX2).
template <long kB>
constexpr int most_filter_taps() {
  return std::max(1, kAccumulators / int(kB));
}

// Taps si0 … s − 1 of a filter row in passes of at most `even` taps, as even as they come: a
// row of 5 as 3 + 2, not 4 + 1 (a pass of one tap loads a dy vector per multiply-add, and
// measured as slow as the pass of four).
template <typename T, long kB, int kTaps = most_filter_taps<kB>()>
void filter_row_taps(const Conv2dGeometry& g, const T* gx, const T* gdy, long ci, long ri, long si0, long even,
                     T* lanes) {
  if (kTaps <= even)
    for (; si0 + kTaps <= g.s; si0 += kTaps) filter_pixels<T, kB, kTaps>(g, gx, gdy, ci, ri, si0, lanes);
  if constexpr (kTaps > 1) filter_row_taps<T, kB, kTaps - 1>(g, gx, gdy, ci, ri, si0, even, lanes);
}

}  // namespace

// dy: (n, k, p, q) or, pooled (pool set), a 2×2 max-pool's (n, k, p/2, q/2) with its winners;
// x: (n, c, h, w)  dw: (k, c, r, s)  db: (k) or null
void images_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db,
                            const Pool2dGeometry* pool, const Tensor* argmax) {
  dispatch_float("conv2d_backward_filter", dy, [&](auto tag) {
    using T = decltype(tag);
    with_channel_block(g.k, [&](auto block) {
      constexpr long kB = decltype(block)::value;
      const long groups = (g.n + kLanes - 1) / kLanes, pq = g.p * g.q, hw = g.h * g.w;
      const long rows = g.p + g.r - 1, cols = g.q + g.s - 1, taps = g.r * g.s;
      const long gx_floats = g.c * rows * cols * kLanes, gdy_floats = kB * pq * kLanes;
      const long unpooled_floats = pool ? kLanes * g.k * pq : 0;
      const long lane_floats = kB * g.c * taps * kLanes;  // one group's sums
      const long threads = omp_get_max_threads();
      Tensor work = Tensor::empty({threads * (gx_floats + gdy_floats + unpooled_floats)}, dy.dtype(), dy.device());
      Tensor lanes = Tensor::zeros({groups * lane_floats}, dy.dtype(), dy.device());
      Tensor sums = db ? Tensor::empty({g.n * g.k * kBiasSums}, dy.dtype(), dy.device()) : Tensor();
      const T *x_data = x.data<T>(), *dy_data = dy.data<T>();
      const int32_t* winners = pool ? argmax->data<int32_t>() : nullptr;
      T *ws = work.data<T>(), *lane_data = lanes.data<T>(), *sum_data = db ? sums.data<T>() : nullptr;
      for_each_image(groups, kLanes * g.k * pq * g.c * taps, [&](long group, int slot) {
        T* gx = ws + slot * (gx_floats + gdy_floats + unpooled_floats);
        T* gdy = gx + gx_floats;
        const long first = group * kLanes, images = std::min(kLanes, g.n - first);
        // The group's dy planes, one image after another (k, p, q): dy's own, or the pool's
        // routed to their winners; the bias sums from them, image by image as bias_backward.
        const T* planes = dy_data + first * g.k * pq;
        if (pool) {
          T* unpooled = gdy + gdy_floats;
          const long pooled = pool->p * pool->q;
          for (long at = 0; at < images * g.k; ++at)
            maxpool_2x2_one_plane_backward(*pool, dy_data + (first * g.k + at) * pooled,
                                           winners + (first * g.k + at) * pooled, unpooled + at * pq);
          planes = unpooled;
        }
        if (sum_data)
          for (long i = 0; i < images; ++i)
            image_bias_sums<T, false>(planes + i * g.k * pq, nullptr, nullptr, g.k, pq,
                                      sum_data + (first + i) * g.k * kBiasSums);
        // x bordered by its padding (zeros only where no data goes), then dy, each with the
        // images in the lanes.
        for (long ci = 0; ci < g.c; ++ci) {
          T* plane = gx + ci * rows * cols * kLanes;
          std::fill(plane, plane + g.pad_h * cols * kLanes, T(0));
          for (long y = 0; y < g.h; ++y) {
            T* row = plane + (y + g.pad_h) * cols * kLanes;
            std::fill(row, row + g.pad_w * kLanes, T(0));
            interleave_planes(x_data + ((first * g.c + ci) * g.h + y) * g.w, g.c * hw, images, g.w,
                              row + g.pad_w * kLanes);
            std::fill(row + (g.pad_w + g.w) * kLanes, row + cols * kLanes, T(0));
          }
          std::fill(plane + (g.pad_h + g.h) * cols * kLanes, plane + rows * cols * kLanes, T(0));
        }
        for (long o = 0; o < g.k; ++o) interleave_planes(planes + o * pq, g.k * pq, images, pq, gdy + o * pq * kLanes);
        std::fill(gdy + g.k * pq * kLanes, gdy + gdy_floats, T(0));  // channels past k: zero
        T* group_lanes = lane_data + group * lane_floats;
        const long passes = (g.s + most_filter_taps<kB>() - 1) / most_filter_taps<kB>();
        const long even = (g.s + passes - 1) / passes;
        for (long ci = 0; ci < g.c; ++ci)
          for (long ri = 0; ri < g.r; ++ri)
            filter_row_taps<T, kB>(g, gx, gdy, ci, ri, 0, even, group_lanes + ci * kB * taps * kLanes);
      });
      // dw[o, ci, tap] = Σ_group Σ_lane lanes[group][ci][o][tap][lane], in that order
      T* dw_data = dw.data<T>();
      for (long o = 0; o < g.k; ++o)
        for (long ci = 0; ci < g.c; ++ci)
          for (long tap = 0; tap < taps; ++tap) {
            T sum = T(0);
            for (long group = 0; group < groups; ++group) {
              const T* l = lane_data + group * lane_floats + ((ci * kB + o) * taps + tap) * kLanes;
              for (long v = 0; v < kLanes; ++v) sum += l[v];
            }
            dw_data[(o * g.c + ci) * taps + tap] = sum;
          }
      if (db) bias_from_image_sums(sum_data, g.n, g.k, db->data<T>());
    });
  });
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
void images_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  dispatch_float("conv2d_backward_data", dy, [&](auto tag) {
    using T = decltype(tag);
    const long groups = (g.n + kLanes - 1) / kLanes;
    const long dy_floats = g.k * (g.p + 2) * g.q * kLanes, dx_floats = g.c * g.h * g.w * kLanes;
    const long threads = omp_get_max_threads();
    Tensor work = Tensor::empty({threads * (dy_floats + dx_floats)}, dy.dtype(), dy.device());
    const T* dy_data = dy.data<T>();
    T *dx_data = dx.data<T>(), *ws = work.data<T>();
    with_channel_block(g.c, [&](auto block) {
      constexpr long kB = decltype(block)::value;
      constexpr int kRows = 2 * kB <= kAccumulators ? 2 : 1;
      const Tensor packed = pack_by_input_channel<T, kB>(g, w);
      const T* wp = packed.data<T>();
      const long blocks = (g.c + kB - 1) / kB, plane_in = g.p * g.q, plane_out = g.h * g.w;
      for_each_image(groups, kLanes * g.k * plane_in * g.c * g.r * g.s, [&](long group, int slot) {
        T* gdy = ws + slot * (dy_floats + dx_floats);
        T* gdx = gdy + dy_floats;
        const long first = group * kLanes, images = std::min(kLanes, g.n - first);
        // dy of the group's images, one per lane, with a zero row above and below each plane
        // and zero lanes past the last image.
        for (long o = 0; o < g.k; ++o) {
          T* plane = gdy + o * (g.p + 2) * g.q * kLanes;
          std::fill(plane, plane + g.q * kLanes, T(0));
          interleave_planes(dy_data + (first * g.k + o) * plane_in, g.k * plane_in, images, plane_in,
                            plane + g.q * kLanes);
          std::fill(plane + (g.p + 1) * g.q * kLanes, plane + (g.p + 2) * g.q * kLanes, T(0));
        }
        for (long cb = 0; cb < blocks; ++cb) {
          const T* wblock = wp + cb * g.k * g.r * g.s * kB;
          long Y = 0;
          for (; Y + kRows <= g.h; Y += kRows)
            for (long X = 0; X < g.w; ++X) gradient_pixels<T, kRows, kB>(g, gdy, wblock, cb, Y, X, gdx);
          for (; Y < g.h; ++Y)
            for (long X = 0; X < g.w; ++X) gradient_pixels<T, 1, kB>(g, gdy, wblock, cb, Y, X, gdx);
        }
        for (long c = 0; c < g.c; ++c)
          separate_planes(gdx + c * plane_out * kLanes, images, plane_out, dx_data + (first * g.c + c) * plane_out,
                          g.c * plane_out);
      });
    });
  });
}

}  // namespace nnlab::cpu::NNLAB_ISA
