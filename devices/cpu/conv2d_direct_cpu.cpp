// Direct convolution on the CPU for layers with few input channels (conv2d_direct.h):
// lenet5's two layers, and the forward of the 3-channel first layers of cifar-cnn and resnet8.
// Chosen by conv2d_cpu.cpp; the CUDA twin of this choice is cuDNN's own algorithm search
// (conv2d_cuda.cu).
//
// Why: with c·r·s = 25…150 values per receptive field, im2col + sgemm copies every input
// value r·s times and then runs GEMMs too shallow (k = c·r·s) and too narrow (m = 6 or 16
// output channels) for OpenBLAS to reach its rate. Here the input stays where it is: each
// output row is a sum of shifted input rows times scalar weights, a vector loop.
//
// Every direction is one of two loops over a zero-bordered copy `in` (ci, rows, stride) of
// the image:
//   correlate:   out[o, y, x] = bias[o] + Σ_ci Σ_ri Σ_si w[o, ci, ri, si] · in[ci, y + ri, x + si]
//   filter_sum:  dw[o, ci, ri, si]    += Σ_y Σ_x   dy[o, y, x] · in[ci, y + ri, x + si]
//   forward          y  = correlate(x bordered by pad, w)
//   backward data    dx = correlate(dy bordered by r − 1 − pad, w rotated by 180° with in and
//                         out channels swapped): dx[c, y, x] = Σ_o Σ_ri Σ_si w[o, c, ri, si] ·
//                         dy[o, y + pad − ri, x + pad − si], stride 1
//   backward filter  dw = Σ_images filter_sum(x bordered by pad, dy)
//
// Vectorisation: outputs are done kLanes columns at a time for kBlock output channels and two
// rows at once, so 2 × kBlock vectors of accumulators stay in registers: one input vector per
// row and (ci, ri, si) is used kBlock times, one weight twice. The filter gradient pairs two
// neighbouring taps the same way, so each dy vector is used twice. For rows narrower than
// kLanes and k a multiple of kLanes (lenet5's second layer), the filter gradient puts the
// output channels in the lanes instead (channel_taps), so no lane computes a missing column.
// Rows of `in` are long enough that a chunk of an output row narrower than kLanes may read
// past the row's end (zeros); those lanes are never stored.
//
// Threads: images are spread over the OpenMP threads (static schedule), each with its own
// workspace; the filter gradient keeps per-thread partial sums (one per lane) that are added
// in thread and lane order, so for a given thread count results repeat bit for bit.
//
// Compiled once per instruction set (cpu_isa.h), into cpu::avx2 and cpu::avx512; the AVX-512
// build prefers 512-bit vectors (CMakeLists.txt), so a 16-column chunk is one vector there and
// two in AVX2. The shapes it serves (direct_applies) are chosen in conv2d_cpu.cpp.
#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "devices/cpu/conv2d_direct.h"
#include "devices/cpu/dispatch.h"

namespace nnlab::cpu::NNLAB_ISA {

namespace {

constexpr long kLanes = kDirectLanes;  // output columns per chunk: one 16-float vector, or two of 8
constexpr long kBlock = kDirectBlock;  // output channels per pass

long round_up(long v, long m) { return (v + m - 1) / m * m; }

// A zero-bordered copy of `channels` planes (h, w): `top` and `left` zero rows and columns
// before the data, zeros after it up to (rows, stride); rows [top, top + data_rows) hold data.
struct Bordered {
  long channels, rows, stride, top, data_rows;
  long size() const { return channels * rows * stride; }
};

// Border for an output of (p, q) from a filter (r, s) over h data rows after `top` zero rows:
// rows = p + r − 1; every chunk of kLanes columns starting below q plus s − 1 more must lie
// inside a row.
Bordered bordered(long channels, long p, long q, long r, long s, long top, long h) {
  return {channels, p + r - 1, round_up(q, kLanes) + s - 1, top, h};
}

template <typename T>
void copy_bordered(const T* src, long w, long left, const Bordered& b, T* dst) {
  std::fill(dst, dst + b.size(), T(0));
  for (long c = 0; c < b.channels; ++c)
    for (long y = 0; y < b.data_rows; ++y) {
      const T* from = src + (c * b.data_rows + y) * w;
      std::copy(from, from + w, dst + (c * b.rows + y + b.top) * b.stride + left);
    }
}

// Weights regrouped for correlate, kB output channels innermost:
//   packed[block][i][ri][si][o] = w[block·kB + o, i, ri, si]                (forward)
//   packed[block][i][ri][si][o] = w[i, block·kB + o, r − 1 − ri, s − 1 − si]  (rotate: backward
//                                 data, whose outputs are the layer's c inputs and inputs its k outputs)
// zero for the channels past the last, so every block runs all kB accumulators.
template <typename T, long kB>
Tensor pack_weights(const Tensor& w, long k, long c, long r, long s, bool rotate) {
  const long out = rotate ? c : k, in = rotate ? k : c, blocks = (out + kB - 1) / kB;
  Tensor result = Tensor::zeros({blocks * in * r * s * kB}, w.dtype(), w.device());
  const T* w_data = w.data<T>();
  T* packed = result.data<T>();
  for (long o = 0; o < out; ++o)
    for (long i = 0; i < in; ++i)
      for (long ri = 0; ri < r; ++ri)
        for (long si = 0; si < s; ++si) {
          const T v = rotate ? w_data[((i * c + o) * r + (r - 1 - ri)) * s + (s - 1 - si)]
                             : w_data[((o * c + i) * r + ri) * s + si];
          packed[((((o / kB) * in + i) * r + ri) * s + si) * kB + o % kB] = v;
        }
  return result;
}

// kRows output rows (y, y + 1, …) of one chunk of kLanes columns at x0, for one block of
// kB output channels. Each weight loaded is used by kRows rows: with 2 and kB = 8, 16
// accumulator vectors stay in registers and the loop does 16 multiply-adds per 10 loads (one
// row alone: 8 per 9). A row narrower than kLanes stores only its q columns.
// Filter rows that would only meet zero rows of `in` (its top and bottom border, 4 of 5 rows
// at the edges of lenet5's input gradient) are skipped: their products are exact zeros.
template <typename T, int kRows, long kB>
void correlate_rows(const T* in, const Bordered& b, const T* wblock, long ob, long r, long s, const T* bias,
                    T* out, long p, long q, long y, long x0) {
  T acc[kRows][kB][kLanes] = {};
  const long ri_begin = std::max(0L, b.top - (y + kRows - 1)), ri_end = std::min(r, b.top + b.data_rows - y);
  for (long ci = 0; ci < b.channels; ++ci)
    for (long ri = ri_begin; ri < ri_end; ++ri) {
      const T* row = in + (ci * b.rows + y + ri) * b.stride + x0;
      const T* wv = wblock + (ci * r + ri) * s * kB;
      for (long si = 0; si < s; ++si, wv += kB)
        for (long o = 0; o < kB; ++o) {
          const T w = wv[o];
          for (int t = 0; t < kRows; ++t) {
#pragma omp simd
            for (long l = 0; l < kLanes; ++l) acc[t][o][l] += w * row[t * b.stride + si + l];
          }
        }
    }
  for (int t = 0; t < kRows; ++t)
    for (long o = 0; o < ob; ++o) {
      const T add = bias ? bias[o] : T(0);
      T* dst = out + (o * p + y + t) * q + x0;
      if (q >= kLanes) {
#pragma omp simd
        for (long l = 0; l < kLanes; ++l) dst[l] = acc[t][o][l] + add;
      } else {
        for (long l = 0; l < q; ++l) dst[l] = acc[t][o][l] + add;
      }
    }
}

// in: bordered (cin, p + r − 1, stride)   packed: as above   out: (cout, p, q)
template <typename T, long kB>
void correlate(const T* in, const Bordered& b, const T* packed, long cout, long r, long s, const T* bias, T* out,
               long p, long q) {
  const long taps = b.channels * r * s;
  for (long o0 = 0; o0 < cout; o0 += kB) {
    const T* wblock = packed + (o0 / kB) * taps * kB;
    const long ob = std::min(kB, cout - o0);
    const T* block_bias = bias ? bias + o0 : nullptr;
    T* block_out = out + o0 * p * q;
    for (long chunk = 0; chunk < q; chunk += kLanes) {
      // A row at least kLanes wide ends with a chunk that overlaps the one before it, so that
      // every store is a whole vector (the overlap is computed twice, identically).
      const long x0 = q >= kLanes ? std::min(chunk, q - kLanes) : 0;
      long y = 0;
      for (; y + 2 <= p; y += 2)
        correlate_rows<T, 2, kB>(in, b, wblock, ob, r, s, block_bias, block_out, p, q, y, x0);
      if (y < p) correlate_rows<T, 1, kB>(in, b, wblock, ob, r, s, block_bias, block_out, p, q, y, x0);
    }
  }
}

// Output channels per correlate pass: all of them for a layer with at most 6 (lenet5's first
// layer and its second's input gradient), else blocks of kBlock. A block of 8 over 6
// channels would compute 2 of every 8 accumulators for nothing.
template <typename Body>
void with_output_block(long out_channels, Body&& body) {
  if (out_channels <= 6)
    body(std::integral_constant<long, 6>{});
  else
    body(std::integral_constant<long, kBlock>{});
}

// The filter gradient of kTaps neighbouring taps (si, si + 1, …) of one input channel and
// filter row, for kBlock output channels, summed over the plane:
//   out[t][o][lane] += Σ_y Σ_chunks dy[o, y, x] · in[y, x + t]     (x = chunk + lane)
// Each dy vector loaded is used by kTaps taps: with 2, 16 accumulator vectors stay in
// registers and the loop does 16 multiply-adds per 10 loads (one tap alone: 8 per 9).
// row0: in at (y = 0, column si)   g0: dy of the block (kBlock, p, qp)   out: kTaps × kBlock × kLanes
template <typename T, int kTaps>
void filter_taps(const T* row0, long stride, const T* g0, long p, long qp, T* out) {
  T acc[kTaps][kBlock][kLanes] = {};
  for (long y = 0; y < p; ++y) {
    const T* row = row0 + y * stride;
    const T* g = g0 + y * qp;
    for (long x0 = 0; x0 < qp; x0 += kLanes)
      for (int t = 0; t < kTaps; ++t)
        for (long o = 0; o < kBlock; ++o) {
#pragma omp simd
          for (long l = 0; l < kLanes; ++l) acc[t][o][l] += g[o * p * qp + x0 + l] * row[t + x0 + l];
        }
  }
  for (int t = 0; t < kTaps; ++t)
    for (long o = 0; o < kBlock; ++o)
      for (long l = 0; l < kLanes; ++l) out[(t * kBlock + o) * kLanes + l] += acc[t][o][l];
}

// in: bordered x (c, p + r − 1, stride)   dy: (k_padded, p, qp) with zeros past q and past k
// lanes: (k blocks, c, r, s, kBlock, kLanes), accumulated (summed over lanes at the end)
template <typename T>
void filter_sum(const T* in, const Bordered& b, const T* dy, long kblocks, long p, long qp, long r, long s,
                T* lanes) {
  for (long kb = 0; kb < kblocks; ++kb)
    for (long ci = 0; ci < b.channels; ++ci)
      for (long ri = 0; ri < r; ++ri) {
        const T* row0 = in + (ci * b.rows + ri) * b.stride;
        const T* g0 = dy + kb * kBlock * p * qp;
        T* out = lanes + (((kb * b.channels + ci) * r + ri) * s) * kBlock * kLanes;
        long si = 0;
        for (; si + 2 <= s; si += 2) filter_taps<T, 2>(row0 + si, b.stride, g0, p, qp, out + si * kBlock * kLanes);
        if (si < s) filter_taps<T, 1>(row0 + si, b.stride, g0, p, qp, out + si * kBlock * kLanes);
      }
}

// The filter gradient with the output channels in the vector lanes, for planes whose rows
// are narrower than kLanes (lenet5's second layer: q = 10), where filter_taps would compute
// 6 of every 16 columns for nothing. Needs k a multiple of kLanes:
//   out[ri][si][lane] += Σ_y Σ_x dy_transposed[y, x, o0 + lane] · in[y + ri, x + si]
// For each output position one vector of dy (kLanes channels) meets kR · kS input values,
// each broadcast: kR · kS accumulator vectors stay in registers, kR · kS + 1 loads feed as
// many multiply-adds, and no lane is idle.
// in: one bordered input channel at filter row ri0   dy_transposed: dy of the image transposed to
// (p, q, k), at channel o0   out: kR × kS × kLanes
template <typename T, int kR, int kS>
void channel_taps(const T* in, long stride, const T* dy_transposed, long p, long q, long k, T* out) {
  T acc[kR][kS][kLanes] = {};
  for (long y = 0; y < p; ++y)
    for (long x = 0; x < q; ++x) {
      const T* g = dy_transposed + (y * q + x) * k;
      for (int ri = 0; ri < kR; ++ri)
        for (int si = 0; si < kS; ++si) {
          const T v = in[(y + ri) * stride + x + si];
#pragma omp simd
          for (long l = 0; l < kLanes; ++l) acc[ri][si][l] += g[l] * v;
        }
    }
  for (int ri = 0; ri < kR; ++ri)
    for (int si = 0; si < kS; ++si)
      for (long l = 0; l < kLanes; ++l) out[(ri * kS + si) * kLanes + l] += acc[ri][si][l];
}

// One image's filter gradient in the channel layout, all k blocks, c channels and r rows;
// kRowsAtOnce filter rows per pass keep 9 or 10 accumulators, enough independent sums to
// cover the multiply-add latency.
// in: bordered x (c, p + r − 1, stride)   dy_transposed: (p, q, k)   lanes: (k / kLanes, c, r, s, kLanes)
template <typename T, int kS>
void channel_filter_sum(const T* in, const Bordered& b, const T* dy_transposed, const Conv2dGeometry& g, T* lanes) {
  constexpr int kRowsAtOnce = kS == 3 ? 3 : 2;
  for (long o0 = 0; o0 < g.k; o0 += kLanes)
    for (long ci = 0; ci < g.c; ++ci) {
      const T* plane = in + ci * b.rows * b.stride;
      T* out = lanes + ((o0 / kLanes * g.c + ci) * g.r) * kS * kLanes;
      long ri = 0;
      for (; ri + kRowsAtOnce <= g.r; ri += kRowsAtOnce)
        channel_taps<T, kRowsAtOnce, kS>(plane + ri * b.stride, b.stride, dy_transposed + o0, g.p, g.q, g.k,
                                         out + ri * kS * kLanes);
      for (; ri < g.r; ++ri)
        channel_taps<T, 1, kS>(plane + ri * b.stride, b.stride, dy_transposed + o0, g.p, g.q, g.k, out + ri * kS * kLanes);
    }
}

// Runs body(i, slot) for every image, spread over the threads when there are enough.
template <typename Body>
void for_each_image(long n, long work_per_image, Body&& body) {
  const bool parallel = omp_get_max_threads() > 1 && n > 1 && n * work_per_image > kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (long i = 0; i < n; ++i) body(i, parallel ? omp_get_thread_num() : 0);
}

// direct_backward_filter in the channel layout: per image, a bordered copy of x and dy
// transposed to (p, q, k); per-thread partial sums added in thread order, so for a given
// thread count results repeat bit for bit.
template <typename T>
void channel_backward_filter(const Conv2dGeometry& g, const Bordered& b, const Tensor& dy, const Tensor& x,
                             Tensor& dw) {
  const long threads = omp_get_max_threads(), pq = g.p * g.q, dyt_size = pq * g.k;
  const long lane_size = g.k * g.c * g.r * g.s;  // (k / kLanes, c, r, s, kLanes)
  Tensor work = Tensor::empty({threads * (b.size() + dyt_size)}, x.dtype(), x.device());
  Tensor lanes = Tensor::zeros({threads * lane_size}, x.dtype(), x.device());
  const T *x_data = x.data<T>(), *dy_data = dy.data<T>();
  T *ws = work.data<T>(), *acc = lanes.data<T>(), *dw_data = dw.data<T>();
  for_each_image(g.n, g.k * pq * g.c * g.r * g.s, [&](long i, int slot) {
    T* in = ws + slot * (b.size() + dyt_size);
    T* transposed = in + b.size();
    copy_bordered(x_data + i * g.c * g.h * g.w, g.w, g.pad_w, b, in);
    const T* dyi = dy_data + i * g.k * pq;
    for (long o = 0; o < g.k; ++o)
      for (long j = 0; j < pq; ++j) transposed[j * g.k + o] = dyi[o * pq + j];
    if (g.s == 3)
      channel_filter_sum<T, 3>(in, b, transposed, g, acc + slot * lane_size);
    else
      channel_filter_sum<T, 5>(in, b, transposed, g, acc + slot * lane_size);
  });
  // dw[o, ci, ri, si] = Σ_thread lanes[thread][o / kLanes][ci][ri][si][o % kLanes]
  const long crs = g.c * g.r * g.s;
  for (long o = 0; o < g.k; ++o)
    for (long j = 0; j < crs; ++j) {
      T sum = T(0);
      for (long t = 0; t < threads; ++t) sum += acc[t * lane_size + ((o / kLanes) * crs + j) * kLanes + o % kLanes];
      dw_data[o * crs + j] = sum;
    }
}

}  // namespace

// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q)
void direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  dispatch_float("conv2d_forward", x, [&](auto tag) {
    using T = decltype(tag);
    const Bordered border = bordered(g.c, g.p, g.q, g.r, g.s, g.pad_h, g.h);
    Tensor work = Tensor::empty({omp_get_max_threads() * border.size()}, x.dtype(), x.device());
    const T *x_data = x.data<T>(), *bias = b && b->defined() ? b->data<T>() : nullptr;
    T *y_data = y.data<T>(), *ws = work.data<T>();
    with_output_block(g.k, [&](auto block) {
      constexpr long kB = decltype(block)::value;
      const Tensor packed = pack_weights<T, kB>(w, g.k, g.c, g.r, g.s, false);
      for_each_image(g.n, g.k * g.p * g.q * g.c * g.r * g.s, [&](long i, int slot) {
        T* in = ws + slot * border.size();
        copy_bordered(x_data + i * g.c * g.h * g.w, g.w, g.pad_w, border, in);
        correlate<T, kB>(in, border, packed.data<T>(), g.k, g.r, g.s, bias, y_data + i * g.k * g.p * g.q, g.p, g.q);
      });
    });
  });
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
void direct_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  dispatch_float("conv2d_backward_data", dy, [&](auto tag) {
    using T = decltype(tag);
    // dy bordered by r − 1 − pad, read as (k, h + r − 1, …)
    const Bordered border = bordered(g.k, g.h, g.w, g.r, g.s, g.r - 1 - g.pad_h, g.p);
    Tensor work = Tensor::empty({omp_get_max_threads() * border.size()}, dy.dtype(), dy.device());
    const T* dy_data = dy.data<T>();
    T *dx_data = dx.data<T>(), *ws = work.data<T>();
    with_output_block(g.c, [&](auto block) {
      constexpr long kB = decltype(block)::value;
      const Tensor packed = pack_weights<T, kB>(w, g.k, g.c, g.r, g.s, true);
      for_each_image(g.n, g.k * g.p * g.q * g.c * g.r * g.s, [&](long i, int slot) {
        T* in = ws + slot * border.size();
        copy_bordered(dy_data + i * g.k * g.p * g.q, g.q, g.s - 1 - g.pad_w, border, in);
        correlate<T, kB>(in, border, packed.data<T>(), g.c, g.r, g.s, static_cast<const T*>(nullptr),
                         dx_data + i * g.c * g.h * g.w, g.h, g.w);
      });
    });
  });
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)
void direct_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw) {
  dispatch_float("conv2d_backward_filter", dy, [&](auto tag) {
    using T = decltype(tag);
    const Bordered border = bordered(g.c, g.p, g.q, g.r, g.s, g.pad_h, g.h);
    if (channel_layout_pays(g)) return channel_backward_filter<T>(g, border, dy, x, dw);
    const long kblocks = (g.k + kBlock - 1) / kBlock, qp = round_up(g.q, kLanes);
    const long dy_size = kblocks * kBlock * g.p * qp, lane_size = kblocks * g.c * g.r * g.s * kBlock * kLanes;
    const long threads = omp_get_max_threads();
    Tensor work = Tensor::empty({threads * (border.size() + dy_size)}, x.dtype(), x.device());
    Tensor lanes = Tensor::zeros({threads * lane_size}, x.dtype(), x.device());
    const T *x_data = x.data<T>(), *dy_data = dy.data<T>();
    T *ws = work.data<T>(), *acc = lanes.data<T>(), *dw_data = dw.data<T>();
    for_each_image(g.n, g.k * g.p * g.q * g.c * g.r * g.s, [&](long i, int slot) {
      T* in = ws + slot * (border.size() + dy_size);
      T* grad = in + border.size();
      copy_bordered(x_data + i * g.c * g.h * g.w, g.w, g.pad_w, border, in);
      // dy[i] with zero columns up to qp and zero channels up to kblocks · kBlock.
      const Bordered dyb{kblocks * kBlock, g.p, qp, 0, g.p};
      std::fill(grad, grad + dy_size, T(0));
      for (long o = 0; o < g.k; ++o)
        for (long y = 0; y < g.p; ++y) {
          const T* from = dy_data + ((i * g.k + o) * g.p + y) * g.q;
          std::copy(from, from + g.q, grad + (o * dyb.rows + y) * dyb.stride);
        }
      filter_sum(in, border, grad, kblocks, g.p, qp, g.r, g.s, acc + slot * lane_size);
    });
    // dw[o, ci, ri, si] = Σ_thread Σ_lane lanes[thread][o / kBlock][ci][ri][si][o % kBlock][lane]
    const long crs = g.c * g.r * g.s;
    for (long o = 0; o < g.k; ++o)
      for (long j = 0; j < crs; ++j) {
        T sum = T(0);
        for (long t = 0; t < threads; ++t) {
          const T* l = acc + t * lane_size + (((o / kBlock) * crs + j) * kBlock + o % kBlock) * kLanes;
          for (long v = 0; v < kLanes; ++v) sum += l[v];
        }
        dw_data[o * crs + j] = sum;
      }
  });
}

}  // namespace nnlab::cpu::NNLAB_ISA
