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
// Vectorisation: outputs are done kLanes columns at a time (one vector: 16 in AVX-512, 8 in
// AVX2) for kBlock output channels and two rows at once, so 2 × kBlock vectors of
// accumulators stay in registers: one input vector per row and (ci, ri, si) is used kBlock
// times, one weight twice. The filter gradient pairs two neighbouring taps the same way, so
// each dy vector is used twice. AVX2's 16 registers hold 12 accumulators: one row or one tap
// at a time where two would not fit. For rows narrower than
// kLanes and k a multiple of kLanes (lenet5's second layer), the forward and the filter
// gradient put the output channels in the lanes instead (conv2d_direct_channels_cpu.cpp), so
// no lane computes a missing column; the input gradient of a batch of at least 16 images puts
// the images in the lanes (conv2d_direct_images_cpu.cpp), so no lane meets the border's zeros.
// Rows of `in` are long enough that a chunk of an output row narrower than kLanes may read
// past the row's end (zeros); those lanes are never stored.
//
// Threads: each thread takes its even share of the images, then what another has left
// (balanced_loops.h), each image in the running thread's workspace; the filter gradient keeps
// partial sums (one per lane) per fixed run of images, added in run and lane order, so for a
// given thread count results repeat bit for bit.
//
// Compiled once per instruction set (cpu_isa.h), into cpu::avx2 and cpu::avx512; the AVX-512
// build prefers 512-bit vectors (CMakeLists.txt). The shapes it serves (direct_applies) are
// chosen in conv2d_cpu.cpp.
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "devices/cpu/conv2d_direct_layout.h"
#include "devices/cpu/pool2d.h"

namespace nnlab::cpu::NNLAB_ISA {

namespace {

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
      if constexpr (2 * kB <= kAccumulators)
        for (; y + 2 <= p; y += 2)
          correlate_rows<T, 2, kB>(in, b, wblock, ob, r, s, block_bias, block_out, p, q, y, x0);
      for (; y < p; ++y) correlate_rows<T, 1, kB>(in, b, wblock, ob, r, s, block_bias, block_out, p, q, y, x0);
    }
  }
}

// The filter gradient of kTaps neighbouring taps (si, si + 1, …) of one input channel and
// filter row, for kB output channels, summed over the plane:
//   out[t][o][lane] += Σ_y Σ_chunks dy[o, y, x] · in[y, x + t]     (x = chunk + lane)
// Each dy vector loaded is used by kTaps taps, each input vector by kB channels: kTaps · kB
// accumulator vectors stay in registers.
// row0: in at (y = 0, column si)   g0: dy of the block (kB, p, qp)   out: kTaps × kB × kLanes
template <typename T, int kTaps, long kB>
void filter_taps(const T* row0, long stride, const T* g0, long p, long qp, T* out) {
  T acc[kTaps][kB][kLanes] = {};
  for (long y = 0; y < p; ++y) {
    const T* row = row0 + y * stride;
    const T* g = g0 + y * qp;
    for (long x0 = 0; x0 < qp; x0 += kLanes)
      for (int t = 0; t < kTaps; ++t)
        for (long o = 0; o < kB; ++o) {
#pragma omp simd
          for (long l = 0; l < kLanes; ++l) acc[t][o][l] += g[o * p * qp + x0 + l] * row[t + x0 + l];
        }
  }
  for (int t = 0; t < kTaps; ++t)
    for (long o = 0; o < kB; ++o)
      for (long l = 0; l < kLanes; ++l) out[(t * kB + o) * kLanes + l] += acc[t][o][l];
}

// Taps per filter_taps pass for kB channels: two where 2 · kB accumulators fit (AVX-512 for
// 6 or 8 channels, AVX2 for 6), else one. On lenet5's first layer (6 channels,
// scripts/bench_conv.cpp) AVX2 takes 0.110 ms with two against 0.131–0.140 with one; AVX-512
// 0.077–0.079 against 0.075–0.077, and 3 or 4 taps were no faster (0.072–0.075).
template <long kB>
constexpr int most_taps() {
  return 2 * kB <= kAccumulators ? 2 : 1;
}

// Filter taps si, si + 1, … s − 1 of one row: kTaps at a time while they last, then fewer.
template <typename T, long kB, int kTaps = most_taps<kB>()>
void filter_row(const T* row0, long stride, const T* g0, long p, long qp, long si, long s, T* out) {
  for (; si + kTaps <= s; si += kTaps) filter_taps<T, kTaps, kB>(row0 + si, stride, g0, p, qp, out + si * kB * kLanes);
  if constexpr (kTaps > 1) filter_row<T, kB, kTaps - 1>(row0, stride, g0, p, qp, si, s, out);
}

// in: bordered x (c, p + r − 1, stride)   dy: (k_padded, p, qp) with zeros past q and past k
// lanes: (k blocks, c, r, s, kB, kLanes), accumulated (summed over lanes at the end)
template <typename T, long kB>
void filter_sum(const T* in, const Bordered& b, const T* dy, long kblocks, long p, long qp, long r, long s,
                T* lanes) {
  for (long kb = 0; kb < kblocks; ++kb)
    for (long ci = 0; ci < b.channels; ++ci)
      for (long ri = 0; ri < r; ++ri) {
        const T* row0 = in + (ci * b.rows + ri) * b.stride;
        const T* g0 = dy + kb * kB * p * qp;
        T* out = lanes + (((kb * b.channels + ci) * r + ri) * s) * kB * kLanes;
        filter_row<T, kB>(row0, b.stride, g0, p, qp, 0, s, out);
      }
}

}  // namespace

namespace {

// The row layout's forward, image by image. Unpooled: y (n, k, p, q), floored when relu, each
// image as soon as it is written. Pooled (pool set): y and argmax (n, k, p/2, q/2), the 2×2
// max-pool (with its ReLU) of each image's planes while they are still in the L1 cache; the
// convolution's own output (1.2 MB at lenet5's first layer) lives only in a per-thread plane set.
template <typename T>
void forward_rows(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu,
                  const Pool2dGeometry* pool, Tensor* argmax) {
  const Bordered border = bordered(g.c, g.p, g.q, g.r, g.s, g.pad_h, g.h);
  const long image = g.k * g.p * g.q, slot_floats = border.size() + (pool ? image : 0);
  Tensor work = Tensor::empty({omp_get_max_threads() * slot_floats}, x.dtype(), x.device());
  const T *x_data = x.data<T>(), *bias = b && b->defined() ? b->data<T>() : nullptr;
  T *y_data = y.data<T>(), *ws = work.data<T>();
  int32_t* winners = pool ? argmax->data<int32_t>() : nullptr;
  with_channel_block(g.k, [&](auto block) {
    constexpr long kB = decltype(block)::value;
    const Tensor packed = pack_weights<T, kB>(w, g.k, g.c, g.r, g.s, false);
    for_each_image(g.n, g.k * g.p * g.q * g.c * g.r * g.s, [&](long i, int slot) {
      T* in = ws + slot * slot_floats;
      copy_bordered(x_data + i * g.c * g.h * g.w, g.w, g.pad_w, border, in);
      T* out = pool ? in + border.size() : y_data + i * image;
      correlate<T, kB>(in, border, packed.data<T>(), g.k, g.r, g.s, bias, out, g.p, g.q);
      if (relu) relu_in_place(out, image);
      if (!pool) return;
      const long pooled = pool->p * pool->q;
      for (long o = 0; o < g.k; ++o)
        maxpool_2x2_one_plane(*pool, out + o * g.p * g.q, y_data + (i * g.k + o) * pooled,
                              winners + (i * g.k + o) * pooled);
    });
  });
}

}  // namespace

// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q)
// relu: y = max(0, y), each image's output as soon as it is written, still in the cache (in the
// channel layout, each image after the whole batch is written).
void direct_forward(const Conv2dGeometry& g, DirectLayout layout, const Tensor& x, const Tensor& w, const Tensor* b,
                    Tensor& y, bool relu) {
  dispatch_float("conv2d_forward", x, [&](auto tag) {
    using T = decltype(tag);
    if (layout == DirectLayout::ChannelLanes) {
      const Bordered border = bordered(g.c, g.p, g.q, g.r, g.s, g.pad_h, g.h);
      channel_forward(g, border, x, w, b, y);
      const long image = g.k * g.p * g.q;
      if (relu) for_each_image(g.n, image, [&](long i, int) { relu_in_place(y.data<T>() + i * image, image); });
      return;
    }
    forward_rows<T>(g, x, w, b, y, relu, nullptr, nullptr);
  });
}

// pool: a 2×2, stride 2, unpadded max-pool of the whole output, with its ReLU (pool.relu);
// y, argmax (n, k, p/2, q/2) as maxpool2d_forward's. The row layout only (the plan's `pools`).
void direct_forward_maxpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& x, const Tensor& w,
                            const Tensor* b, Tensor& y, Tensor& argmax) {
  dispatch_float("conv2d_forward", x, [&](auto tag) {
    using T = decltype(tag);
    forward_rows<T>(g, x, w, b, y, false, &pool, &argmax);
  });
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
void direct_backward_data(const Conv2dGeometry& g, DirectLayout layout, const Tensor& dy, const Tensor& w, Tensor& dx) {
  dispatch_float("conv2d_backward_data", dy, [&](auto tag) {
    using T = decltype(tag);
    // dy bordered by r − 1 − pad, read as (k, h + r − 1, …)
    if (layout == DirectLayout::ImageLanes) return images_backward_data(g, dy, w, dx);
    const Bordered border = bordered(g.k, g.h, g.w, g.r, g.s, g.r - 1 - g.pad_h, g.p);
    Tensor work = Tensor::empty({omp_get_max_threads() * border.size()}, dy.dtype(), dy.device());
    const T* dy_data = dy.data<T>();
    T *dx_data = dx.data<T>(), *ws = work.data<T>();
    with_channel_block(g.c, [&](auto block) {
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

namespace {

// The row layout's filter gradient (and bias gradient, db set). Pooled (pool set): dy and
// argmax are a 2×2 max-pool's (n, k, p/2, q/2), and each image's dy planes are routed to their
// winners in a per-thread plane set as the image is reached: the convolution's dy (1.2 MB at
// lenet5's first layer) is never stored, nor read back.
template <typename T>
void backward_filter_rows(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db,
                          const Pool2dGeometry* pool, const Tensor* argmax) {
  const Bordered border = bordered(g.c, g.p, g.q, g.r, g.s, g.pad_h, g.h);
  const long pq = g.p * g.q;
  Tensor sums = db ? Tensor::empty({g.n * g.k * kBiasSums}, dy.dtype(), dy.device()) : Tensor();
  T* sum_data = db ? sums.data<T>() : nullptr;
  with_channel_block(g.k, [&](auto block) {
    constexpr long kB = decltype(block)::value;
    const long kblocks = (g.k + kB - 1) / kB, qp = round_up(g.q, kLanes);
    const long dy_size = kblocks * kB * g.p * qp, lane_size = kblocks * g.c * g.r * g.s * kB * kLanes;
    const long unpooled_size = pool ? g.k * pq : 0, slot_floats = border.size() + dy_size + unpooled_size;
    const long work_per_image = g.k * g.p * g.q * g.c * g.r * g.s;
    const bool parallel = images_in_parallel(g.n, work_per_image);
    const long runs = summing_runs(g.n, parallel);  // one set of lanes each (balanced_loops.h)
    Tensor work = Tensor::empty({omp_get_max_threads() * slot_floats}, x.dtype(), x.device());
    Tensor lanes = Tensor::zeros({runs * lane_size}, x.dtype(), x.device());
    const T *x_data = x.data<T>(), *dy_data = dy.data<T>();
    const int32_t* winners = pool ? argmax->data<int32_t>() : nullptr;
    T *ws = work.data<T>(), *acc = lanes.data<T>(), *dw_data = dw.data<T>();
    for_each_run(g.n, runs, parallel, [&](long i, int slot, long run) {
      T* in = ws + slot * slot_floats;
      T* grad = in + border.size();
      copy_bordered(x_data + i * g.c * g.h * g.w, g.w, g.pad_w, border, in);
      // This image's dy planes (k, p, q): dy's own, or the pool's routed to their winners.
      const T* planes = dy_data + i * g.k * pq;
      if (pool) {
        T* unpooled = grad + dy_size;
        const long pooled = pool->p * pool->q;
        for (long o = 0; o < g.k; ++o)
          maxpool_2x2_one_plane_backward(*pool, dy_data + (i * g.k + o) * pooled, winners + (i * g.k + o) * pooled,
                                         unpooled + o * pq);
        planes = unpooled;
      }
      // dy[i] with zero columns up to qp and zero channels up to kblocks · kB.
      const Bordered dyb{kblocks * kB, g.p, qp, 0, g.p};
      std::fill(grad, grad + dy_size, T(0));
      for (long o = 0; o < g.k; ++o)
        for (long y = 0; y < g.p; ++y) {
          const T* from = planes + (o * g.p + y) * g.q;
          std::copy(from, from + g.q, grad + (o * dyb.rows + y) * dyb.stride);
        }
      if (sum_data)  // the planes just copied, from the cache
        image_bias_sums<T, false>(planes, nullptr, nullptr, g.k, pq, sum_data + i * g.k * kBiasSums);
      filter_sum<T, kB>(in, border, grad, kblocks, g.p, qp, g.r, g.s, acc + run * lane_size);
    });
    // dw[o, ci, ri, si] = Σ_run Σ_lane lanes[run][o / kB][ci][ri][si][o % kB][lane]
    const long crs = g.c * g.r * g.s;
    for (long o = 0; o < g.k; ++o)
      for (long j = 0; j < crs; ++j) {
        T sum = T(0);
        for (long run = 0; run < runs; ++run) {
          const T* l = acc + run * lane_size + (((o / kB) * crs + j) * kB + o % kB) * kLanes;
          for (long v = 0; v < kLanes; ++v) sum += l[v];
        }
        dw_data[o * crs + j] = sum;
      }
  });
  if (db) bias_from_image_sums(sum_data, g.n, g.k, db->data<T>());
}

}  // namespace

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)  db: (k) or null
void direct_backward_filter(const Conv2dGeometry& g, DirectLayout layout, const Tensor& dy, const Tensor& x, Tensor& dw,
                            Tensor* db) {
  dispatch_float("conv2d_backward_filter", dy, [&](auto tag) {
    using T = decltype(tag);
    if (layout == DirectLayout::ChannelLanes) {
      const Bordered border = bordered(g.c, g.p, g.q, g.r, g.s, g.pad_h, g.h);
      return channel_backward_filter(g, border, dy, x, dw, db);
    }
    if (layout == DirectLayout::ImageLanes) return images_backward_filter(g, dy, x, dw, db, nullptr, nullptr);
    backward_filter_rows<T>(g, dy, x, dw, db, nullptr, nullptr);
  });
}

// The backward of direct_forward_maxpool's convolution for its weights and bias: dy and argmax
// the pool's (n, k, p/2, q/2). The row or image-lane layout.
void direct_backward_filter_unpool(const Conv2dGeometry& g, DirectLayout layout, const Pool2dGeometry& pool,
                                   const Tensor& dy, const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db) {
  dispatch_float("conv2d_backward_filter", dy, [&](auto tag) {
    using T = decltype(tag);
    if (layout == DirectLayout::ImageLanes) return images_backward_filter(g, dy, x, dw, db, &pool, &argmax);
    backward_filter_rows<T>(g, dy, x, dw, db, &pool, &argmax);
  });
}

}  // namespace nnlab::cpu::NNLAB_ISA
