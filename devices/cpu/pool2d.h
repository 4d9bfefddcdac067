// The pooling kernels of the CPU backend (pool2d_cpu.cpp), compiled once per instruction set
// (cpu_isa.h); CpuBackend's pooling methods call the chosen set's (isa_dispatch.cpp).
//   x: (n, c, h, w)  y, argmax: (n, c, p, q)  argmax int32, the flat index r·w + s of the winner
#pragma once
#include "devices/backend.h"
#include "devices/cpu/isa_kernels.h"

#define NNLAB_POOL_KERNELS(X)                                                                                         \
  X(maxpool2d_forward, (const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax), (g, x, y, argmax))       \
  X(maxpool2d_backward, (const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx),                 \
    (g, dy, argmax, dx))                                                                                              \
  X(avgpool2d_forward, (const Pool2dGeometry& g, const Tensor& x, Tensor& y), (g, x, y))                              \
  X(avgpool2d_backward, (const Pool2dGeometry& g, const Tensor& dy, Tensor& dx), (g, dy, dx))

// One h × w plane of the 2×2, stride 2, unpadded max-pool (g's n and c unused), and its
// backward: what the pooled Winograd and direct convolutions run on each output plane they
// make, and on each plane of the gradient they read (each set calls its own).
#define NNLAB_POOL_PLANE_KERNELS(X)                                                                                   \
  X(maxpool_2x2_one_plane, (const Pool2dGeometry& g, const float* x, float* y, int32_t* argmax), ())                   \
  X(maxpool_2x2_one_plane, (const Pool2dGeometry& g, const double* x, double* y, int32_t* argmax), ())                 \
  X(maxpool_2x2_one_plane_backward, (const Pool2dGeometry& g, const float* dy, const int32_t* argmax, float* dx), ())   \
  X(maxpool_2x2_one_plane_backward, (const Pool2dGeometry& g, const double* dy, const int32_t* argmax, double* dx), ())

namespace nnlab::cpu {

NNLAB_POOL_KERNELS(NNLAB_ISA_DECLARE_OWN)
NNLAB_POOL_PLANE_KERNELS(NNLAB_ISA_DECLARE_OWN)

}  // namespace nnlab::cpu
