// Winograd convolution kernels of the CPU backend (conv2d_winograd_cpu.cpp), run where the
// plan (conv2d_plan.h) says Winograd, with the plan's output tile.
#pragma once
#include "devices/cpu/conv2d_plan.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/isa_kernels.h"

// The filter gradient takes db (k), or null: the bias gradient too, each plane of dy summed as
// the transform reads it, as bias_backward sums (bias_lanes.h), so with its bits.
// forward_maxpool: the forward, each output plane then max-pooled (2×2, stride 2, unpadded,
// with pool.relu) as it leaves the transform: y and argmax as maxpool2d_forward's; the
// convolution's own output is never stored.
// *_unpool: the backward of that convolution: dy and argmax the pool's (n, k, p/2, q/2), each
// plane of the convolution's dy made from them (the pool's backward) as the kernels read it.
#define NNLAB_WINOGRAD_KERNELS(X)                                                                                    \
  X(winograd_forward,                                                                                                \
    (const Conv2dGeometry& g, WinogradTile tile, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,      \
     bool relu),                                                                                                     \
    (g, tile, x, w, b, y, relu))                                                                                     \
  X(winograd_forward_maxpool,                                                                                        \
    (const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool, const Tensor& x, const Tensor& w,      \
     const Tensor* b, Tensor& y, Tensor& argmax),                                                                    \
    (g, tile, pool, x, w, b, y, argmax))                                                                             \
  X(winograd_backward_data, (const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& w, Tensor& dx), \
    (g, tile, dy, w, dx))                                                                                            \
  X(winograd_backward_filter,                                                                                        \
    (const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db),        \
    (g, tile, dy, x, dw, db))                                                                                        \
  X(winograd_backward_data_unpool,                                                                                   \
    (const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool, const Tensor& dy, const Tensor& argmax, \
     const Tensor& w, Tensor& dx),                                                                                   \
    (g, tile, pool, dy, argmax, w, dx))                                                                              \
  X(winograd_backward_filter_unpool,                                                                                 \
    (const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool, const Tensor& dy, const Tensor& argmax, \
     const Tensor& x, Tensor& dw, Tensor* db),                                                                       \
    (g, tile, pool, dy, argmax, x, dw, db))

namespace nnlab::cpu {

// Below this many input or output channels the transforms cost more than the saved flops
// (the cnn's first layer has one input channel): im2col + sgemm stays faster.
constexpr int64_t kWinogradMinChannels = 8;

// Which float32 calls run their transforms with 16 channels in the lanes
// (conv2d_winograd_channels.h): those whose input has whole blocks of 16 channels in rows of
// whole 16s (the register transposes' blocks), and, for the forward and the data gradient,
// whose output channels are whole blocks too (the filter gradient's output is the filters).
// The forward and the data gradient only with AVX-512: with AVX2's two registers a vector and
// 8 × 8 transposes, cifar-cnn's pooled c2 data gradient took 1.16–1.17 of the plane layout's
// time (c3's 0.82–0.93, c4's 0.97–0.99).
constexpr int64_t kWinogradChannelLanes = 16;
inline bool winograd_channel_lanes(ConvDirection direction, const Conv2dGeometry& g, DType dtype) {
  const auto whole = [](int64_t v) { return v % kWinogradChannelLanes == 0; };
  if (dtype != DType::Float32) return false;
  const bool avx512 = cpu_isa() == CpuIsa::avx512;
  switch (direction) {
    case ConvDirection::Forward: return avx512 && whole(g.c) && whole(g.w) && whole(g.k);
    case ConvDirection::BackwardData: return avx512 && whole(g.k) && whole(g.q) && whole(g.c);  // from dy to dx
    case ConvDirection::BackwardFilter: return whole(g.c) && whole(g.w);
  }
  return false;
}
// The filter gradient's output-gradient transform as well (with AVX-512, dy's channels and rows
// in whole 16s, beside its input's); a pooled dy needs pooled_channel_block_fits besides.
inline bool winograd_output_grad_channel_lanes(const Conv2dGeometry& g, DType dtype) {
  return winograd_channel_lanes(ConvDirection::BackwardFilter, g, dtype) && cpu_isa() == CpuIsa::avx512 &&
         g.k % kWinogradChannelLanes == 0 && g.q % kWinogradChannelLanes == 0;
}

NNLAB_WINOGRAD_KERNELS(NNLAB_ISA_DECLARE)

}  // namespace nnlab::cpu
