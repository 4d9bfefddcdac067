// Dropout on CUDA, the twin of devices/cpu/dropout_cpu.cpp: the mask comes from the same
// Philox keys (seed, Dropout, stream, i) and the same integer test (keep iff draw ≥
// ⌊p·2³²⌋), so CPU and CUDA masks are bit-equal whatever the thread layout. Like the CPU,
// one thread computes one Philox block and uses all four of its words (elements 4b … 4b+3).
// T is float32 or bf16 (x·scale computed in float32 and rounded once as it is stored).
#include <cmath>

#include "core/bfloat16.h"
#include "core/philox.h"
#include "devices/bf16_widening.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// ⌊p·2³²⌋: exact in double, at most 2³² − 1 for p < 1 (hence 64-bit).
uint64_t keep_threshold(double p) { return static_cast<uint64_t>(std::floor(p * 4294967296.0)); }

// ---- kernels ----------------------------------------------------------------------------

// x, y: (n)  mask: uint8 (n); one thread per Philox block b (elements 4b … 4b+3)
// mask[i] = [philox_u32(seed, Dropout, stream, i) ≥ threshold];  y[i] = x[i] · mask[i] / (1 − p)
// With step_count (int32 scalar in device memory): stream = dropout_stream(stream, *step_count),
// read as the kernel runs, so a CUDA graph's replay draws the mask of its own step.
template <typename T>
__global__ void dropout_forward_kernel(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t threshold, float scale,
                                       uint64_t seed, uint32_t layer_stream, const int32_t* step_count) {
  const uint32_t purpose = static_cast<uint32_t>(RandomPurpose::Dropout);
  const uint32_t stream = step_count ? dropout_stream(layer_stream, *step_count) : layer_stream;
  NNLAB_GRID_STRIDE(b, (n + 3) / 4) {
    const PhiloxBlock draws = philox_block(seed, purpose, stream, static_cast<uint64_t>(b));
    for (int lane = 0; lane < 4 && 4 * b + lane < n; ++lane) {
      const int64_t i = 4 * b + lane;
      const bool keep = static_cast<uint64_t>(draws.v[lane]) >= threshold;
      mask[i] = keep ? 1 : 0;
      y[i] = T(keep ? float(x[i]) * scale : 0.0f);
    }
  }
}

// dy, dx: (n)  mask: uint8 (n)     dx[i] = dy[i] · mask[i] / (1 − p)
template <typename T>
__global__ void dropout_backward_kernel(const T* dy, const uint8_t* mask, float scale, T* dx, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) dx[i] = T(mask[i] ? float(dy[i]) * scale : 0.0f);
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------

void CudaBackend::dropout_forward(const Tensor& x, double p, uint64_t seed, uint32_t stream, const Tensor* step_count,
                                  Tensor& y, Tensor& mask) {
  const bool bf16_kernel = bf16::all({&x, &y});
  if (!bf16_kernel && bf16::widened(*this, &CudaBackend::dropout_forward, x, p, seed, stream, step_count, y, mask))
    return;
  NNLAB_LOG_KERNEL("dropout_forward", x);  // nnlab explain: record the call
  if (!bf16_kernel) cuda::require_f32("dropout_forward", x);
  check_dtype("dropout_forward", mask, DType::UInt8);
  if (step_count) check_device_counter("dropout_forward", "step count", *step_count, x.device());
  const int64_t n = x.numel();
  if (!n) return;
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  const int32_t* steps = step_count ? cuda::ptr<int32_t>(*step_count) : nullptr;
  if (bf16_kernel)
    cuda::launch("dropout_forward_kernel", dropout_forward_kernel<BFloat16>, cuda::grid_for(*ctx_, (n + 3) / 4),
                 cuda::kThreads, ctx_->stream, cuda::ptr<BFloat16>(x), cuda::ptr<BFloat16>(y),
                 cuda::ptr<uint8_t>(mask), n, keep_threshold(p), scale, seed, stream, steps);
  else
    cuda::launch("dropout_forward_kernel", dropout_forward_kernel<float>, cuda::grid_for(*ctx_, (n + 3) / 4),
                 cuda::kThreads, ctx_->stream, cuda::ptr<float>(x), cuda::ptr<float>(y), cuda::ptr<uint8_t>(mask), n,
                 keep_threshold(p), scale, seed, stream, steps);
}

void CudaBackend::dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx) {
  const bool bf16_kernel = bf16::all({&dy, &dx});
  if (!bf16_kernel && bf16::widened(*this, &CudaBackend::dropout_backward, dy, mask, p, dx)) return;
  NNLAB_LOG_KERNEL("dropout_backward", dy);  // nnlab explain: record the call
  if (!bf16_kernel) cuda::require_f32("dropout_backward", dy);
  const int64_t n = dy.numel();
  if (!n) return;
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  if (bf16_kernel)
    cuda::launch("dropout_backward_kernel", dropout_backward_kernel<BFloat16>, cuda::grid_for(*ctx_, n),
                 cuda::kThreads, ctx_->stream, cuda::ptr<BFloat16>(dy), cuda::ptr<uint8_t>(mask), scale,
                 cuda::ptr<BFloat16>(dx), n);
  else
    cuda::launch("dropout_backward_kernel", dropout_backward_kernel<float>, cuda::grid_for(*ctx_, n), cuda::kThreads,
                 ctx_->stream, cuda::ptr<float>(dy), cuda::ptr<uint8_t>(mask), scale, cuda::ptr<float>(dx), n);
}

}  // namespace nnlab
