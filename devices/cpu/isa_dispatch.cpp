// The kernels compiled once per instruction set (CMakeLists.txt, NNLAB_ISA_SOURCES), and the
// one place that calls the set cpu_isa() chose: cpu::avx512 (x86-64-v4) or cpu::avx2 (the
// library's x86-64-v3 baseline). The choice is made once (cpu_isa.h); each call here reads it
// back, a load and a predictable branch beside kernels that run for microseconds or more. The
// choosers come from each family's list (isa_kernels.h); the pooling kernels are the backend's
// own methods, below.
//
//   family        file                      what AVX-512 changes
//   small_gemm    small_gemm_cpu.cpp        register-blocked 512-bit loops (AVX2: OpenBLAS)
//   pooling       pool2d_cpu.cpp            the 2×2 max-pool in 512-bit vectors
//   direct conv   conv2d_direct_cpu.cpp     its loops in 512-bit vectors
//   winograd      conv2d_winograd_cpu.cpp   its products (small_gemm) and masked row tails
#include "devices/bf16_widening.h"
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

// Each family header's list, one chooser per kernel (isa_kernels.h).
NNLAB_SMALL_GEMM_KERNELS(NNLAB_ISA_FORWARD)
NNLAB_DIRECT_KERNELS(NNLAB_ISA_FORWARD)
NNLAB_WINOGRAD_KERNELS(NNLAB_ISA_FORWARD)

}  // namespace cpu

void CpuBackend::maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax) {
  if (bf16::widened(*this, &CpuBackend::maxpool2d_forward, g, x, y, argmax)) return;
  NNLAB_LOG_KERNEL("maxpool2d_forward", x);  // nnlab explain: record the call
  use_avx512() ? cpu::avx512::maxpool2d_forward(g, x, y, argmax) : cpu::avx2::maxpool2d_forward(g, x, y, argmax);
}

void CpuBackend::maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  if (bf16::widened(*this, &CpuBackend::maxpool2d_backward, g, dy, argmax, dx)) return;
  NNLAB_LOG_KERNEL("maxpool2d_backward", dy);  // nnlab explain: record the call
  use_avx512() ? cpu::avx512::maxpool2d_backward(g, dy, argmax, dx) : cpu::avx2::maxpool2d_backward(g, dy, argmax, dx);
}

void CpuBackend::avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y) {
  if (bf16::widened(*this, &CpuBackend::avgpool2d_forward, g, x, y)) return;
  NNLAB_LOG_KERNEL("avgpool2d_forward", x);  // nnlab explain: record the call
  use_avx512() ? cpu::avx512::avgpool2d_forward(g, x, y) : cpu::avx2::avgpool2d_forward(g, x, y);
}

void CpuBackend::avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx) {
  if (bf16::widened(*this, &CpuBackend::avgpool2d_backward, g, dy, dx)) return;
  NNLAB_LOG_KERNEL("avgpool2d_backward", dy);  // nnlab explain: record the call
  use_avx512() ? cpu::avx512::avgpool2d_backward(g, dy, dx) : cpu::avx2::avgpool2d_backward(g, dy, dx);
}

}  // namespace nnlab
