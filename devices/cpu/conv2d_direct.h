// Direct convolution kernels of the CPU backend for layers with few input channels
// (conv2d_direct_cpu.cpp), run where the plan (conv2d_plan.h) says direct, in the plan's
// layout: lenet5's two layers, the forward of cifar-cnn's and resnet8's first.
#pragma once
#include "devices/cpu/conv2d_plan.h"
#include "devices/cpu/isa_kernels.h"

// layout: the plan's. The filter gradient takes db (k), or null: the bias gradient too, from
// the per-image copies of dy it makes anyway, summed as bias_backward sums (bias_lanes.h), so
// with its bits.
// forward_maxpool (row layout only): a 2×2 max-pool (with its ReLU) after the convolution, each
// image's planes pooled as they are made (y, argmax: maxpool2d_forward's).
// backward_filter_unpool (rows or image lanes): the pool's dy (n, k, p/2, q/2) routed to the
// winners image by image. The convolution's output and its gradient are never stored.
#define NNLAB_DIRECT_KERNELS(X)                                                                                      \
  X(direct_forward,                                                                                                  \
    (const Conv2dGeometry& g, DirectLayout layout, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,    \
     bool relu),                                                                                                     \
    (g, layout, x, w, b, y, relu))                                                                                   \
  X(direct_backward_data, (const Conv2dGeometry& g, DirectLayout layout, const Tensor& dy, const Tensor& w, Tensor& dx), \
    (g, layout, dy, w, dx))                                                                                          \
  X(direct_backward_filter,                                                                                          \
    (const Conv2dGeometry& g, DirectLayout layout, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db),      \
    (g, layout, dy, x, dw, db))                                                                                      \
  X(direct_forward_maxpool,                                                                                          \
    (const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& x, const Tensor& w, const Tensor* b,        \
     Tensor& y, Tensor& argmax),                                                                                     \
    (g, pool, x, w, b, y, argmax))                                                                                   \
  X(direct_backward_filter_unpool,                                                                                   \
    (const Conv2dGeometry& g, DirectLayout layout, const Pool2dGeometry& pool, const Tensor& dy,                    \
     const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db),                                                 \
    (g, layout, pool, dy, argmax, x, dw, db))

namespace nnlab::cpu {

// Up to this many input channels a receptive field (c·r·s values) is too shallow for a GEMM
// to pay for its im2col copy and packing: lenet5's 6-channel 5×5 layer is the largest served.
constexpr int64_t kDirectMaxChannels = 7;
// Below this many values per receptive field (the cnn's 1-channel 3×3 layer) im2col copies
// little and its GEMM keeps up.
constexpr int64_t kDirectMinTaps = 25;

// Output columns per vector chunk and output channels per pass of the loops (one 512-bit or
// two 256-bit vectors of float32, eight channels' accumulators in registers).
constexpr long kDirectLanes = 16;
constexpr long kDirectBlock = 8;

NNLAB_DIRECT_KERNELS(NNLAB_ISA_DECLARE)

}  // namespace nnlab::cpu
