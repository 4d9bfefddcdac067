// The pooling kernels of the CPU backend (pool2d_cpu.cpp), compiled once per instruction set
// (cpu_isa.h); CpuBackend's pooling methods call the chosen set's (isa_dispatch.cpp).
//   x: (n, c, h, w)  y, argmax: (n, c, p, q)  argmax int32, the flat index r·w + s of the winner
#pragma once
#include "devices/backend.h"

namespace nnlab::cpu {

namespace avx2 {
void maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax);
// One h × w plane of the 2×2, stride 2, unpadded max-pool (g's n and c unused), and its
// backward: what the pooled Winograd convolution (conv2d_winograd_cpu.cpp) runs on each output
// plane it makes, and on each plane of the gradient it reads.
void maxpool_2x2_one_plane(const Pool2dGeometry& g, const float* x, float* y, int32_t* argmax);
void maxpool_2x2_one_plane(const Pool2dGeometry& g, const double* x, double* y, int32_t* argmax);
void maxpool_2x2_one_plane_backward(const Pool2dGeometry& g, const float* dy, const int32_t* argmax, float* dx);
void maxpool_2x2_one_plane_backward(const Pool2dGeometry& g, const double* dy, const int32_t* argmax, double* dx);
void maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx);
void avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y);
void avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx);
}  // namespace avx2

namespace avx512 {
void maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax);
void maxpool_2x2_one_plane(const Pool2dGeometry& g, const float* x, float* y, int32_t* argmax);
void maxpool_2x2_one_plane(const Pool2dGeometry& g, const double* x, double* y, int32_t* argmax);
void maxpool_2x2_one_plane_backward(const Pool2dGeometry& g, const float* dy, const int32_t* argmax, float* dx);
void maxpool_2x2_one_plane_backward(const Pool2dGeometry& g, const double* dy, const int32_t* argmax, double* dx);
void maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx);
void avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y);
void avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx);
}  // namespace avx512

}  // namespace nnlab::cpu
