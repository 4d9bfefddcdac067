// The direct convolution with the output channels in the vector lanes, for layers whose
// output rows would leave lanes of conv2d_direct_cpu.cpp's row layout idle: k a multiple of
// 16 output channels over rows that are not a multiple of 16 columns wide. lenet5's second
// layer (6 → 16 channels, 10 × 10 outputs) is the zoo's one: in the row layout each row of 10
// outputs fills 10 of 16 lanes, here every lane computes a wanted value.
//
// Forward, for one block of 16 output channels o0 … o0 + 15 and one output pixel (y, x):
//   out[o0 + l, y, x] = bias[o0 + l] + Σ_ci Σ_ri Σ_si w[o0 + l, ci, ri, si] · in[ci, y + ri, x + si]
// the same sum as the row layout's, with the roles swapped: the 16 weights of a tap are one
// vector, each input value is broadcast to all lanes. A tile of kRows × kCols pixels keeps
// kRows · kCols accumulator vectors in registers: each tap costs one weight load and
// kRows · kCols broadcasts for as many multiply-adds. The tile's width is chosen per layer to
// cover a row with the least overlap (10 columns: one tile of 10; 14: two of 7), the last
// tile of a row or of the plane overlapping its neighbour when the width does not divide
// (overlapping pixels are computed twice, identically). The finished tile is transposed into
// the (k, p, q) output plane by scalar stores: 16 · kRows · kCols of them against
// 16 · kRows · kCols · c · r · s multiply-adds.
//
// Filter gradient: the same layout, dy transposed to (p, q, k) so that one vector holds a
// pixel's 16 channel gradients, and every tap's accumulator sums dy · broadcast input
// (channel_taps below).
//
// The CUDA side has no twin of this file: there cuDNN picks its own algorithm per layer
// (conv2d_cuda.cu), as for the row layout. Compiled once per instruction set, like
// conv2d_direct_cpu.cpp: in AVX-512, 32 registers of 16 floats hold a tile of 2 × up to 12
// pixels; in AVX2 a 16-lane accumulator is two of the 16 registers, so the tile is 1 × up to
// 6 pixels (kChannelAccumulators).
#include <array>
#include <utility>

#include "devices/cpu/conv2d_direct_layout.h"

namespace nnlab::cpu::NNLAB_ISA {

namespace {

constexpr int kTileRows = kChannelAccumulators >= 12 ? 2 : 1;
constexpr int kMaxTilePixels = kChannelAccumulators;

// The tile widths compiled; tile_columns() picks one per layer.
constexpr std::array<int, 10> kTileWidths = {12, 10, 8, 7, 6, 5, 4, 3, 2, 1};

// The width that covers a row of q outputs with the fewest computed-but-unwanted columns,
// the widest among equals; at least min(q, 5) wide, so each tap's weight vector is used by
// enough pixels, and at most what the registers hold.
int tile_columns(long q) {
  int best = 1;
  double best_use = 0;
  for (int width : kTileWidths) {
    if (width > q || width * kTileRows > kMaxTilePixels || width < std::min<long>(q, 5)) continue;
    const long tiles = (q + width - 1) / width;
    const double use = double(q) / double(tiles * width);
    if (use > best_use) best = width, best_use = use;
  }
  return best;
}

// One tile: kTileRows rows from y0 and kCols columns from x0 of the output plane, for the
// 16 output channels whose packed weights start at wblock.
// in: bordered x (c, p + r − 1, stride)   wblock: (c, r, s, kChannelLanes)   out: (k, p, q) at channel o0
template <typename T, int kCols>
void channel_tile(const T* in, const Bordered& b, const T* wblock, long r, long s, const T* bias, T* out, long p,
                  long q, long y0, long x0) {
  T acc[kTileRows][kCols][kChannelLanes] = {};
  for (long ci = 0; ci < b.channels; ++ci)
    for (long ri = 0; ri < r; ++ri) {
      const T* row = in + (ci * b.rows + y0 + ri) * b.stride + x0;
      const T* wv = wblock + (ci * r + ri) * s * kChannelLanes;
      for (long si = 0; si < s; ++si, wv += kChannelLanes)
        for (int t = 0; t < kTileRows; ++t)
          for (int u = 0; u < kCols; ++u) {
            const T v = row[t * b.stride + u + si];
#pragma omp simd
            for (long l = 0; l < kChannelLanes; ++l) acc[t][u][l] += v * wv[l];
          }
    }
  for (long l = 0; l < kChannelLanes; ++l) {
    const T add = bias ? bias[l] : T(0);
    for (int t = 0; t < kTileRows; ++t)
      for (int u = 0; u < kCols; ++u) out[(l * p + y0 + t) * q + x0 + u] = acc[t][u][l] + add;
  }
}

// One image's output, every block of 16 channels, tiles over the plane.
template <typename T, int kCols>
void channel_correlate(const T* in, const Bordered& b, const T* packed, long k, long r, long s, const T* bias,
                       T* out, long p, long q) {
  const long taps = b.channels * r * s;
  for (long o0 = 0; o0 < k; o0 += kChannelLanes)
    for (long y = 0; y < p; y += kTileRows)
      for (long x = 0; x < q; x += kCols)
        channel_tile<T, kCols>(in, b, packed + o0 * taps, r, s, bias ? bias + o0 : nullptr, out + o0 * p * q, p, q,
                               std::min(y, p - kTileRows), std::min<long>(x, q - kCols));
}

// Calls body with the tile width as a compile-time constant.
template <typename Body, size_t... I>
void with_tile_columns(int width, Body&& body, std::index_sequence<I...>) {
  ((kTileWidths[I] == width ? body(std::integral_constant<int, kTileWidths[I]>{}) : void()), ...);
}

template <typename T>
void channel_forward_typed(const Conv2dGeometry& g, const Bordered& b, const Tensor& x, const Tensor& w,
                           const Tensor* bias, Tensor& y) {
  Tensor work = Tensor::empty({omp_get_max_threads() * b.size()}, x.dtype(), x.device());
  const Tensor packed = pack_weights<T, kChannelLanes>(w, g.k, g.c, g.r, g.s, false);
  const T *x_data = x.data<T>(), *bias_data = bias && bias->defined() ? bias->data<T>() : nullptr;
  T *y_data = y.data<T>(), *ws = work.data<T>();
  bool ran = false;
  with_tile_columns(tile_columns(g.q), [&](auto width) {
    constexpr int kCols = decltype(width)::value;
    if constexpr (kCols * kTileRows <= kMaxTilePixels) {
      ran = true;
      for_each_image(g.n, g.k * g.p * g.q * g.c * g.r * g.s, [&](long i, int slot) {
        T* in = ws + slot * b.size();
        copy_bordered(x_data + i * g.c * g.h * g.w, g.w, g.pad_w, b, in);
        channel_correlate<T, kCols>(in, b, packed.data<T>(), g.k, g.r, g.s, bias_data,
                                    y_data + i * g.k * g.p * g.q, g.p, g.q);
      });
    }
  }, std::make_index_sequence<kTileWidths.size()>{});
  NNLAB_CHECK(ran, "conv2d_forward: no channel-layout tile compiled for rows of ", g.q, " columns");
}

// The filter gradient with the output channels in the vector lanes, for planes whose rows
// are narrower than kChannelLanes (lenet5's second layer: q = 10), where filter_taps would compute
// 6 of every 16 columns for nothing. Needs k a multiple of kChannelLanes:
//   out[ri][si][lane] += Σ_y Σ_x dy_transposed[y, x, o0 + lane] · in[y + ri, x + si]
// For each output position one vector of dy (kChannelLanes channels) meets kR · kS input values,
// each broadcast: kR · kS accumulator vectors stay in registers, kR · kS + 1 loads feed as
// many multiply-adds, and no lane is idle.
// in: one bordered input channel at filter row ri0   dy_transposed: dy of the image transposed to
// (p, q, k), at channel o0   out: kR × kS × kChannelLanes
template <typename T, int kR, int kS>
void channel_taps(const T* in, long stride, const T* dy_transposed, long p, long q, long k, T* out) {
  T acc[kR][kS][kChannelLanes] = {};
  for (long y = 0; y < p; ++y)
    for (long x = 0; x < q; ++x) {
      const T* g = dy_transposed + (y * q + x) * k;
      for (int ri = 0; ri < kR; ++ri)
        for (int si = 0; si < kS; ++si) {
          const T v = in[(y + ri) * stride + x + si];
#pragma omp simd
          for (long l = 0; l < kChannelLanes; ++l) acc[ri][si][l] += g[l] * v;
        }
    }
  for (int ri = 0; ri < kR; ++ri)
    for (int si = 0; si < kS; ++si)
      for (long l = 0; l < kChannelLanes; ++l) out[(ri * kS + si) * kChannelLanes + l] += acc[ri][si][l];
}

// One image's filter gradient in the channel layout, all k blocks, c channels and r rows;
// kRowsAtOnce filter rows per pass keep 9 or 10 accumulators (AVX2: 6 or 5, what its
// registers hold), enough independent sums to cover the multiply-add latency.
// in: bordered x (c, p + r − 1, stride)   dy_transposed: (p, q, k)
// lanes: (k / kChannelLanes, c, r, s, kChannelLanes)
template <typename T, int kS>
void channel_filter_sum(const T* in, const Bordered& b, const T* dy_transposed, const Conv2dGeometry& g, T* lanes) {
  constexpr int kRowsAtOnce = std::min(kS == 3 ? 3 : 2, kChannelAccumulators / kS);
  for (long o0 = 0; o0 < g.k; o0 += kChannelLanes)
    for (long ci = 0; ci < g.c; ++ci) {
      const T* plane = in + ci * b.rows * b.stride;
      T* out = lanes + ((o0 / kChannelLanes * g.c + ci) * g.r) * kS * kChannelLanes;
      long ri = 0;
      for (; ri + kRowsAtOnce <= g.r; ri += kRowsAtOnce)
        channel_taps<T, kRowsAtOnce, kS>(plane + ri * b.stride, b.stride, dy_transposed + o0, g.p, g.q, g.k,
                                         out + ri * kS * kChannelLanes);
      for (; ri < g.r; ++ri)
        channel_taps<T, 1, kS>(plane + ri * b.stride, b.stride, dy_transposed + o0, g.p, g.q, g.k, out + ri * kS * kChannelLanes);
    }
}

// direct_backward_filter in the channel layout: per image, a bordered copy of x and dy
// transposed to (p, q, k); partial sums of fixed runs of images added in run order
// (balanced_loops.h), so for a given thread count results repeat bit for bit.
template <typename T>
void channel_backward_filter_typed(const Conv2dGeometry& g, const Bordered& b, const Tensor& dy, const Tensor& x,
                                   Tensor& dw, Tensor* db) {
  const long pq = g.p * g.q, dyt_size = pq * g.k;
  const long lane_size = g.k * g.c * g.r * g.s;  // (k / kChannelLanes, c, r, s, kChannelLanes)
  const bool parallel = images_in_parallel(g.n, g.k * pq * g.c * g.r * g.s);
  const long runs = summing_runs(g.n, parallel);  // one set of lanes each (balanced_loops.h)
  Tensor work = Tensor::empty({omp_get_max_threads() * (b.size() + dyt_size)}, x.dtype(), x.device());
  Tensor lanes = Tensor::zeros({runs * lane_size}, x.dtype(), x.device());
  const T *x_data = x.data<T>(), *dy_data = dy.data<T>();
  T *ws = work.data<T>(), *acc = lanes.data<T>(), *dw_data = dw.data<T>();
  Tensor sums = db ? Tensor::empty({g.n * g.k * kBiasSums}, dy.dtype(), dy.device()) : Tensor();
  T* sum_data = db ? sums.data<T>() : nullptr;
  for_each_run(g.n, runs, parallel, [&](long i, int slot, long run) {
    T* in = ws + slot * (b.size() + dyt_size);
    T* transposed = in + b.size();
    copy_bordered(x_data + i * g.c * g.h * g.w, g.w, g.pad_w, b, in);
    const T* dyi = dy_data + i * g.k * pq;
    for (long o = 0; o < g.k; ++o)
      for (long j = 0; j < pq; ++j) transposed[j * g.k + o] = dyi[o * pq + j];
    if (sum_data) image_bias_sums<T, false>(dyi, nullptr, nullptr, g.k, pq, sum_data + i * g.k * kBiasSums);
    if (g.s == 3)
      channel_filter_sum<T, 3>(in, b, transposed, g, acc + run * lane_size);
    else
      channel_filter_sum<T, 5>(in, b, transposed, g, acc + run * lane_size);
  });
  // dw[o, ci, ri, si] = Σ_run lanes[run][o / kChannelLanes][ci][ri][si][o % kChannelLanes]
  const long crs = g.c * g.r * g.s;
  for (long o = 0; o < g.k; ++o)
    for (long j = 0; j < crs; ++j) {
      T sum = T(0);
      for (long run = 0; run < runs; ++run)
        sum += acc[run * lane_size + ((o / kChannelLanes) * crs + j) * kChannelLanes + o % kChannelLanes];
      dw_data[o * crs + j] = sum;
    }
  if (db) bias_from_image_sums(sum_data, g.n, g.k, db->data<T>());
}

}  // namespace

void channel_forward(const Conv2dGeometry& g, const Bordered& b, const Tensor& x, const Tensor& w, const Tensor* bias,
                     Tensor& y) {
  dispatch_float("conv2d_forward", x, [&](auto tag) { channel_forward_typed<decltype(tag)>(g, b, x, w, bias, y); });
}

void channel_backward_filter(const Conv2dGeometry& g, const Bordered& b, const Tensor& dy, const Tensor& x,
                             Tensor& dw, Tensor* db) {
  dispatch_float("conv2d_backward_filter", dy,
                 [&](auto tag) { channel_backward_filter_typed<decltype(tag)>(g, b, dy, x, dw, db); });
}

}  // namespace nnlab::cpu::NNLAB_ISA
