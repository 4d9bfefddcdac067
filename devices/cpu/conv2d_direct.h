// Direct convolution kernels of the CPU backend for layers with few input channels
// (conv2d_direct_cpu.cpp), run where conv2d_cpu.cpp's choose_conv_algorithm picks them (the
// shapes direct_applies() accepts): lenet5's two layers, the forward of cifar-cnn's and
// resnet8's first.
#pragma once
#include "devices/cpu/conv2d_algorithm.h"

namespace nnlab::cpu {

// Up to this many input channels a receptive field (c·r·s values) is too shallow for a GEMM
// to pay for its im2col copy and packing: lenet5's 6-channel 5×5 layer is the largest served.
constexpr int64_t kDirectMaxChannels = 7;
// Below this many values per receptive field (the cnn's 1-channel 3×3 layer) im2col copies
// little and its GEMM keeps up; measured, see direct_applies.
constexpr int64_t kDirectMinTaps = 25;

// Output columns per vector chunk and output channels per pass of the loops (one 512-bit or
// two 256-bit vectors of float32, eight channels' accumulators in registers).
constexpr long kDirectLanes = 16;
constexpr long kDirectBlock = 8;

// Stride 1, padding smaller than the filter, at most kDirectMaxChannels input channels and at
// least kDirectMinTaps values per receptive field. The filter gradient only for at most 8
// output channels or planes of at most 256 outputs: it reloads dy for every filter tap, and
// for many channels over large planes im2col + sgemm was faster (scripts/bench_conv.cpp,
// docs/benchmarks-history.md).
bool direct_applies(const Conv2dGeometry& g, ConvDirection direction);
// How the direct loops lay out a direction's work, for `nnlab explain`.
const char* direct_method(const Conv2dGeometry& g, ConvDirection direction);
// The filter gradient of layers whose output channels fill whole vectors (a multiple of 16)
// over rows that are not a multiple of a vector puts the channels in the lanes
// (conv2d_direct_channels_cpu.cpp); so does the forward, where the plane has at least two rows.
bool channel_layout_pays(const Conv2dGeometry& g);
bool channel_forward_pays(const Conv2dGeometry& g);
// The input gradient puts the batch's images in the lanes (conv2d_direct_images_cpu.cpp)
// where a batch fills whole vectors of them and 16 images' planes fit in 1 MB.
bool images_layout_pays(const Conv2dGeometry& g);
// The filter gradient does too for at most 8 output channels outside the channel layout (a
// first layer: lenet5's c1), where a batch fills whole vectors of images and a thread's buffers
// stay within 1 MB.
bool images_filter_pays(const Conv2dGeometry& g);

// The kernels of the instruction set cpu_isa() chose (isa_dispatch.cpp). The filter gradient
// takes db (k), or null: the bias gradient too, from the per-image copies of dy it makes anyway,
// summed as bias_backward sums (bias_lanes.h), so with its bits.
void direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                    bool relu);
void direct_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx);
void direct_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db);
// A 2×2 max-pool (with its ReLU) after a row-layout convolution (neither channel_forward_pays
// nor, backward, channel_layout_pays): the forward pools each image's planes as it makes them
// (y, argmax: maxpool2d_forward's), the filter gradient routes the pool's dy (n, k, p/2, q/2) to
// the winners image by image; the convolution's output and its gradient are never stored.
void direct_forward_maxpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& x, const Tensor& w,
                            const Tensor* b, Tensor& y, Tensor& argmax);
void direct_backward_filter_unpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& dy,
                                   const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db);

// Each instruction set's own (conv2d_direct_cpu.cpp, compiled once per set).
namespace avx2 {
void direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                    bool relu);
void direct_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx);
void direct_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db);
void direct_forward_maxpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& x, const Tensor& w,
                            const Tensor* b, Tensor& y, Tensor& argmax);
void direct_backward_filter_unpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& dy,
                                   const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db);
}  // namespace avx2
namespace avx512 {
void direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                    bool relu);
void direct_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx);
void direct_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db);
void direct_forward_maxpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& x, const Tensor& w,
                            const Tensor* b, Tensor& y, Tensor& argmax);
void direct_backward_filter_unpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& dy,
                                   const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db);
}  // namespace avx512

}  // namespace nnlab::cpu
