// Winograd convolution kernels of the CPU backend (conv2d_winograd_cpu.cpp), run where
// conv2d_cpu.cpp's choose_conv_algorithm picks them (the shapes winograd_applies() accepts),
// with the output tile winograd_tile() picks.
#pragma once
#include "devices/backend.h"

namespace nnlab::cpu {

// Below this many input or output channels the transforms cost more than the saved flops
// (the cnn's first layer has one input channel): im2col + sgemm stays faster.
constexpr int64_t kWinogradMinChannels = 8;

// 3×3 filter, stride 1, padding at most 2, and enough channels.
bool winograd_applies(const Conv2dGeometry& g);

// The two algorithms (conv2d_winograd_tiles.h): outputs per tile side. Which one a layer runs
// in which direction is conv2d_algorithm.h's winograd_tile.
enum class WinogradTile { F2x2 = 2, F4x4 = 4 };
// Its name for the kernel log: "F(4×4,3×3)".
const char* winograd_tile_name(WinogradTile tile);

// The kernels of the instruction set cpu_isa() chose (isa_dispatch.cpp). The filter gradient
// takes db (k), or null: the bias gradient too, each plane of dy summed as the transform reads
// it, as bias_backward sums (bias_lanes.h), so with its bits.
void winograd_forward(const Conv2dGeometry& g, WinogradTile tile, const Tensor& x, const Tensor& w, const Tensor* b,
                      Tensor& y, bool relu);
// The forward, each output plane then max-pooled (2×2, stride 2, unpadded, with pool.relu) as
// it leaves the transform: y and argmax as maxpool2d_forward's; the convolution's own output
// is never stored (Backend::conv2d_maxpool_relu_forward).
void winograd_forward_maxpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                              const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, Tensor& argmax);
void winograd_backward_data(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& w, Tensor& dx);
void winograd_backward_filter(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& x,
                              Tensor& dw, Tensor* db);
// The backward of winograd_forward_maxpool's convolution: dy and argmax the pool's (n, k, p/2,
// q/2), each plane of the convolution's dy made from them (the pool's backward) as the kernels
// read it, never stored (Backend::conv2d_maxpool_relu_backward).
void winograd_backward_data_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                   const Tensor& dy, const Tensor& argmax, const Tensor& w, Tensor& dx);
void winograd_backward_filter_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                     const Tensor& dy, const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db);

// Each instruction set's own (conv2d_winograd_cpu.cpp, compiled once per set).
namespace avx2 {
void winograd_forward(const Conv2dGeometry& g, WinogradTile tile, const Tensor& x, const Tensor& w, const Tensor* b,
                      Tensor& y, bool relu);
void winograd_forward_maxpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                              const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, Tensor& argmax);
void winograd_backward_data(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& w, Tensor& dx);
void winograd_backward_filter(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& x,
                              Tensor& dw, Tensor* db);
void winograd_backward_data_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                   const Tensor& dy, const Tensor& argmax, const Tensor& w, Tensor& dx);
void winograd_backward_filter_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                     const Tensor& dy, const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db);
}  // namespace avx2
namespace avx512 {
void winograd_forward(const Conv2dGeometry& g, WinogradTile tile, const Tensor& x, const Tensor& w, const Tensor* b,
                      Tensor& y, bool relu);
void winograd_forward_maxpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                              const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, Tensor& argmax);
void winograd_backward_data(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& w, Tensor& dx);
void winograd_backward_filter(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& x,
                              Tensor& dw, Tensor* db);
void winograd_backward_data_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                   const Tensor& dy, const Tensor& argmax, const Tensor& w, Tensor& dx);
void winograd_backward_filter_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                     const Tensor& dy, const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db);
}  // namespace avx512

}  // namespace nnlab::cpu
