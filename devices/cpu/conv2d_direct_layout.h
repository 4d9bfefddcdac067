// What the direct convolution's two layouts share (conv2d_direct_cpu.cpp: output columns in
// the vector lanes; conv2d_direct_channels_cpu.cpp: output channels in the lanes): the
// zero-bordered copy of an image, the packed weights and the loop over images. Included only
// by those two files, each compiled once per instruction set into cpu::NNLAB_ISA.
#pragma once
#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "devices/cpu/balanced_loops.h"
#include "devices/cpu/bias_lanes.h"
#include "devices/cpu/conv2d_direct.h"
#include "devices/cpu/dispatch.h"

namespace nnlab::cpu::NNLAB_ISA {

// The row layout's vectors: output columns per chunk, and how many vectors of accumulators a
// loop may keep (the rest of the registers hold its operands). In AVX2, 16 columns would be
// two of its 16 registers each, and two rows of 8 channels' accumulators would spill to
// memory: measured 3 to 4 times slower than one 8-column vector per accumulator.
#if defined(__AVX512F__)
constexpr long kLanes = 16;
constexpr int kAccumulators = 24;
#else
constexpr long kLanes = 8;
constexpr int kAccumulators = 12;
#endif
constexpr long kBlock = kDirectBlock;  // output channels per pass
// The channel layout's vectors: kDirectLanes (16) output channels, one 512-bit vector or two
// 256-bit ones (conv2d_direct_channels_cpu.cpp).
constexpr long kChannelLanes = kDirectLanes;
constexpr int kChannelAccumulators = kAccumulators * kLanes / kChannelLanes;  // of 16 lanes: 24 or 6

inline long round_up(long v, long m) { return (v + m - 1) / m * m; }

// A zero-bordered copy of `channels` planes (h, w): `top` and `left` zero rows and columns
// before the data, zeros after it up to (rows, stride); rows [top, top + data_rows) hold data.
struct Bordered {
  long channels, rows, stride, top, data_rows;
  long size() const { return channels * rows * stride; }
};

// Border for an output of (p, q) from a filter (r, s) over h data rows after `top` zero rows:
// rows = p + r − 1; every chunk of kLanes columns starting below q plus s − 1 more must lie
// inside a row.
inline Bordered bordered(long channels, long p, long q, long r, long s, long top, long h) {
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


// Channels per pass of a loop that keeps a block of channels' accumulators in registers: all
// of them for a layer with at most 6 (lenet5's first layer, and its second's input
// gradient), else blocks of kBlock. A block of 8 over 6 channels would compute 2 of every 8
// accumulators for nothing.
template <typename Body>
void with_channel_block(long channels, Body&& body) {
  if (channels <= 6)
    body(std::integral_constant<long, 6>{});
  else
    body(std::integral_constant<long, kBlock>{});
}

// Whether a loop over n images of `work_per_image` each is worth the threads.
inline bool images_in_parallel(long n, long work_per_image) {
  return omp_get_max_threads() > 1 && n > 1 && n * work_per_image > kParallelGrain;
}
// Runs body(i, slot) for every image, spread over the threads when there are enough (each its
// even share, then what another has left: balanced_loops.h): for images that write outputs of
// their own.
template <typename Body>
void for_each_image(long n, long work_per_image, Body&& body) {
  for_each_item(n, images_in_parallel(n, work_per_image), body);
}

// The two kernels of the channel layout (conv2d_direct_channels_cpu.cpp), for the geometries
// plan's ChannelLanes layout. b: the bordered layout of one image of x.
// x: (n, c, h, w)  w: (k, c, r, s)  bias: (k) or null  y: (n, k, p, q)
void channel_forward(const Conv2dGeometry& g, const Bordered& b, const Tensor& x, const Tensor& w, const Tensor* bias,
                     Tensor& y);
// The input gradient with the images in the lanes (conv2d_direct_images_cpu.cpp), for the
// plan's ImageLanes layout.
// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
void images_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx);
// The filter gradient with the images in the lanes, for the plan's ImageLanes layout
// accepts; pooled (pool set): dy and argmax a 2×2 max-pool's (n, k, p/2, q/2), routed to the
// winners group by group.
// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)  db: (k) or null
void images_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db,
                            const Pool2dGeometry* pool, const Tensor* argmax);
// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)
void channel_backward_filter(const Conv2dGeometry& g, const Bordered& b, const Tensor& dy, const Tensor& x,
                             Tensor& dw, Tensor* db);

}  // namespace nnlab::cpu::NNLAB_ISA
