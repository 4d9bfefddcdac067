// Dropout on the CPU. The mask is drawn from Philox keyed by (seed, Dropout, stream, i) and
// decided in integer arithmetic (keep iff draw ≥ ⌊p·2³²⌋), so the CUDA twin, drawing the
// same keys, produces the same mask bit for bit whatever its thread layout.
#include <cmath>

#include "core/philox.h"
#include "devices/bf16_widening.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// ⌊p·2³²⌋: exact in double (a power-of-two product, then floor), at most 2³² − 1 for p < 1.
uint64_t keep_threshold(double p) { return static_cast<uint64_t>(std::floor(p * 4294967296.0)); }

// x, y: n elements  mask: uint8 (n)
// mask[i] = [philox_u32(seed, Dropout, stream, i) ≥ threshold];  y[i] = x[i] · mask[i] · 1/(1 − p)
// One Philox call yields the four draws 4b … 4b+3 (philox_block), so the loop runs over
// blocks of four.
template <typename T>
void dropout_forward_typed(const Tensor& x, double p, uint64_t seed, uint32_t stream, const Tensor& y,
                           const Tensor& mask) {
  const T* x_data = static_cast<const T*>(x.raw_data());
  T* y_data = static_cast<T*>(y.raw_data());
  uint8_t* mask_data = static_cast<uint8_t*>(mask.raw_data());
  const uint64_t threshold = keep_threshold(p);
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const long n = static_cast<long>(x.numel());
  const long blocks = (n + 3) / 4;
  const uint32_t purpose = static_cast<uint32_t>(RandomPurpose::Dropout);
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain / 4)
  for (long b = 0; b < blocks; ++b) {
    const PhiloxBlock draws = philox_block(seed, purpose, stream, static_cast<uint64_t>(b));
    for (long lane = 0; lane < 4 && 4 * b + lane < n; ++lane) {
      const long i = 4 * b + lane;
      const bool keep = static_cast<uint64_t>(draws.v[lane]) >= threshold;
      mask_data[i] = keep ? 1 : 0;
      y_data[i] = keep ? x_data[i] * scale : T(0);
    }
  }
}

// dy, dx: n elements  mask: uint8 (n)     dx[i] = dy[i] · mask[i] · 1/(1 − p)
template <typename T>
void dropout_backward_typed(const Tensor& dy, const Tensor& mask, double p, const Tensor& dx) {
  const T* dy_data = static_cast<const T*>(dy.raw_data());
  const uint8_t* mask_data = static_cast<const uint8_t*>(mask.raw_data());
  T* dx_data = static_cast<T*>(dx.raw_data());
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const long n = static_cast<long>(dy.numel());
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
  for (long i = 0; i < n; ++i) dx_data[i] = mask_data[i] ? dy_data[i] * scale : T(0);
}

}  // namespace

void CpuBackend::dropout_forward(const Tensor& x, double p, uint64_t seed, uint32_t stream, const Tensor* step_count,
                                 Tensor& y, Tensor& mask) {
  if (bf16::widened(*this, &CpuBackend::dropout_forward, x, p, seed, stream, step_count, y, mask)) return;
  NNLAB_LOG_KERNEL("dropout_forward", x);  // nnlab explain: record the call
  if (step_count) check_device_counter("dropout_forward", "step count", *step_count, x.device());
  if (step_count) stream = dropout_stream(stream, *step_count->data<int32_t>());
  cpu::dispatch_float("dropout_forward", x, [&](auto t) {
    dropout_forward_typed<decltype(t)>(x, p, seed, stream, y, mask);
  });
}

void CpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx) {
  if (bf16::widened(*this, &CpuBackend::dropout_backward, dy, mask, p, dx)) return;
  NNLAB_LOG_KERNEL("dropout_backward", dy);  // nnlab explain: record the call
  cpu::dispatch_float("dropout_backward", dy, [&](auto t) { dropout_backward_typed<decltype(t)>(dy, mask, p, dx); });
}

}  // namespace nnlab
