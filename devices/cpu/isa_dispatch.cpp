// The kernels compiled once per instruction set (CMakeLists.txt, NNLAB_ISA_SOURCES), and the
// one place that calls the set cpu_isa() chose: cpu::avx512 (x86-64-v4) or cpu::avx2 (the
// library's x86-64-v3 baseline). The choice is made once (cpu_isa.h); each call here reads it
// back, a load and a predictable branch beside kernels that run for microseconds or more.
//
//   family        file                      what AVX-512 changes
//   small_gemm    small_gemm_cpu.cpp        register-blocked 512-bit loops (AVX2: OpenBLAS)
//   pooling       pool2d_cpu.cpp            the 2×2 max-pool in 512-bit vectors
//   direct conv   conv2d_direct_cpu.cpp     its loops in 512-bit vectors
//   winograd      conv2d_winograd_cpu.cpp   its products (small_gemm) and masked row tails
#include "devices/cpu/conv2d_direct.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/pool2d.h"
#include "devices/cpu/small_gemm.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {
// Whether the AVX-512 kernels run. (A build without them, not for x86-64, still compiles the
// cpu::avx512 files, for its own CPU: cpu_isa() never picks them there.)
bool use_avx512() { return cpu_isa() == CpuIsa::avx512; }
}  // namespace

namespace cpu {

void small_gemm_nn(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c, bool accumulate) {
  use_avx512() ? avx512::small_gemm_nn(m, n, k, a, b, c, accumulate) : avx2::small_gemm_nn(m, n, k, a, b, c, accumulate);
}

void small_gemm_nt(int64_t m, int64_t n, int64_t t, const float* a, const float* b, float* c, int64_t ldc,
                   bool accumulate, const float* column_bias, bool relu) {
  use_avx512() ? avx512::small_gemm_nt(m, n, t, a, b, c, ldc, accumulate, column_bias, relu)
               : avx2::small_gemm_nt(m, n, t, a, b, c, ldc, accumulate, column_bias, relu);
}

void direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                    bool relu) {
  use_avx512() ? avx512::direct_forward(g, x, w, b, y, relu) : avx2::direct_forward(g, x, w, b, y, relu);
}

void direct_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  use_avx512() ? avx512::direct_backward_data(g, dy, w, dx) : avx2::direct_backward_data(g, dy, w, dx);
}

void direct_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db) {
  use_avx512() ? avx512::direct_backward_filter(g, dy, x, dw, db) : avx2::direct_backward_filter(g, dy, x, dw, db);
}

void direct_forward_maxpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& x, const Tensor& w,
                            const Tensor* b, Tensor& y, Tensor& argmax) {
  use_avx512() ? avx512::direct_forward_maxpool(g, pool, x, w, b, y, argmax)
               : avx2::direct_forward_maxpool(g, pool, x, w, b, y, argmax);
}

void direct_backward_filter_unpool(const Conv2dGeometry& g, const Pool2dGeometry& pool, const Tensor& dy,
                                   const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db) {
  use_avx512() ? avx512::direct_backward_filter_unpool(g, pool, dy, argmax, x, dw, db)
               : avx2::direct_backward_filter_unpool(g, pool, dy, argmax, x, dw, db);
}

void winograd_forward(const Conv2dGeometry& g, WinogradTile tile, const Tensor& x, const Tensor& w, const Tensor* b,
                      Tensor& y, bool relu) {
  use_avx512() ? avx512::winograd_forward(g, tile, x, w, b, y, relu)
               : avx2::winograd_forward(g, tile, x, w, b, y, relu);
}

void winograd_forward_maxpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                              const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, Tensor& argmax) {
  use_avx512() ? avx512::winograd_forward_maxpool(g, tile, pool, x, w, b, y, argmax)
               : avx2::winograd_forward_maxpool(g, tile, pool, x, w, b, y, argmax);
}

void winograd_backward_data_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                   const Tensor& dy, const Tensor& argmax, const Tensor& w, Tensor& dx) {
  use_avx512() ? avx512::winograd_backward_data_unpool(g, tile, pool, dy, argmax, w, dx)
               : avx2::winograd_backward_data_unpool(g, tile, pool, dy, argmax, w, dx);
}

void winograd_backward_filter_unpool(const Conv2dGeometry& g, WinogradTile tile, const Pool2dGeometry& pool,
                                     const Tensor& dy, const Tensor& argmax, const Tensor& x, Tensor& dw, Tensor* db) {
  use_avx512() ? avx512::winograd_backward_filter_unpool(g, tile, pool, dy, argmax, x, dw, db)
               : avx2::winograd_backward_filter_unpool(g, tile, pool, dy, argmax, x, dw, db);
}

void winograd_backward_data(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& w,
                            Tensor& dx) {
  use_avx512() ? avx512::winograd_backward_data(g, tile, dy, w, dx) : avx2::winograd_backward_data(g, tile, dy, w, dx);
}

void winograd_backward_filter(const Conv2dGeometry& g, WinogradTile tile, const Tensor& dy, const Tensor& x,
                              Tensor& dw, Tensor* db) {
  use_avx512() ? avx512::winograd_backward_filter(g, tile, dy, x, dw, db)
               : avx2::winograd_backward_filter(g, tile, dy, x, dw, db);
}

}  // namespace cpu

void CpuBackend::maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax) {
  NNLAB_LOG_KERNEL("maxpool2d_forward", x);  // nnlab explain: record the call
  use_avx512() ? cpu::avx512::maxpool2d_forward(g, x, y, argmax) : cpu::avx2::maxpool2d_forward(g, x, y, argmax);
}

void CpuBackend::maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  NNLAB_LOG_KERNEL("maxpool2d_backward", dy);  // nnlab explain: record the call
  use_avx512() ? cpu::avx512::maxpool2d_backward(g, dy, argmax, dx) : cpu::avx2::maxpool2d_backward(g, dy, argmax, dx);
}

void CpuBackend::avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y) {
  NNLAB_LOG_KERNEL("avgpool2d_forward", x);  // nnlab explain: record the call
  use_avx512() ? cpu::avx512::avgpool2d_forward(g, x, y) : cpu::avx2::avgpool2d_forward(g, x, y);
}

void CpuBackend::avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx) {
  NNLAB_LOG_KERNEL("avgpool2d_backward", dy);  // nnlab explain: record the call
  use_avx512() ? cpu::avx512::avgpool2d_backward(g, dy, dx) : cpu::avx2::avgpool2d_backward(g, dy, dx);
}

}  // namespace nnlab
