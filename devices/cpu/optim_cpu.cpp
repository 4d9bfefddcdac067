// Fused optimizer steps on the CPU: one pass over each parameter tensor, PyTorch's update
// rules term for term (torch/optim/sgd.py, adam.py, adamw.py in 1.13).
#include <cmath>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {
bool skipped(const Tensor* skip_flag) {
  return skip_flag && skip_flag->defined() && *skip_flag->data<int32_t>() != 0;
}
}  // namespace

// g = grad + wd·p;  buf = first ? g : m·buf + (1 − dampening)·g;  g = nesterov ? g + m·buf : buf;  p −= lr·g
void CpuBackend::sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& hp,
                          bool first_step, const Tensor* skip_flag) {
  NNLAB_LOG_KERNEL("sgd_step", param);  // nnlab explain: record the call
  if (skipped(skip_flag)) return;
  cpu::dispatch_float("sgd_step", param, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(param.raw_data());
    const T* gr = static_cast<const T*>(grad.raw_data());
    T* buf = momentum_buf.defined() ? static_cast<T*>(momentum_buf.raw_data()) : nullptr;
    const T lr = static_cast<T>(hp.lr), m = static_cast<T>(hp.momentum), wd = static_cast<T>(hp.weight_decay);
    const T keep = static_cast<T>(1.0 - hp.dampening);
    const long n = static_cast<long>(param.numel());
    // One branch-free loop per case, so each vectorises.
    if (!buf) {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) p[i] -= lr * (gr[i] + wd * p[i]);
    } else if (first_step) {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) {
        const T g = gr[i] + wd * p[i];
        buf[i] = g;
        p[i] -= lr * (hp.nesterov ? g + m * g : g);
      }
    } else if (hp.nesterov) {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) {
        const T g = gr[i] + wd * p[i];
        buf[i] = m * buf[i] + keep * g;
        p[i] -= lr * (g + m * buf[i]);
      }
    } else {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) {
        const T g = gr[i] + wd * p[i];
        buf[i] = m * buf[i] + keep * g;
        p[i] -= lr * buf[i];
      }
    }
  });
}

// m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²;  p −= lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + eps)
void CpuBackend::adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                           const AdamParams& hp, int64_t step, const Tensor* skip_flag) {
  NNLAB_LOG_KERNEL("adam_step", param);  // nnlab explain: record the call
  if (skipped(skip_flag)) return;
  cpu::dispatch_float("adam_step", param, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(param.raw_data());
    const T* gr = static_cast<const T*>(grad.raw_data());
    T* m = static_cast<T*>(exp_avg.raw_data());
    T* v = static_cast<T*>(exp_avg_sq.raw_data());
    // The bias corrections are scalars, computed in double as PyTorch does in Python.
    const double bc1 = 1.0 - std::pow(hp.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(hp.beta2, static_cast<double>(step));
    const T step_size = static_cast<T>(hp.lr / bc1), bc2_sqrt = static_cast<T>(std::sqrt(bc2));
    const T b1 = static_cast<T>(hp.beta1), b2 = static_cast<T>(hp.beta2), eps = static_cast<T>(hp.eps);
    // 1 − β in double, then rounded, as PyTorch passes it (alpha/value = 1 − beta): in float32,
    // 1 − float(0.999) would be off by 1.3e-5 relative.
    const T one_minus_b1 = static_cast<T>(1.0 - hp.beta1), one_minus_b2 = static_cast<T>(1.0 - hp.beta2);
    const T wd = static_cast<T>(hp.weight_decay), decay = static_cast<T>(1.0 - hp.lr * hp.weight_decay);
    const long n = static_cast<long>(param.numel());
    // omp simd: without it the three pointers kept the loop scalar; the mode tests become selects.
    const int mode = hp.weight_decay == 0.0 ? 0 : hp.decoupled_weight_decay ? 2 : 1;
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i) {
      T g = gr[i];
      if (mode == 1) g += wd * p[i];
      if (mode == 2) p[i] *= decay;
      m[i] = b1 * m[i] + one_minus_b1 * g;
      v[i] = b2 * v[i] + one_minus_b2 * g * g;
      p[i] -= step_size * (m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps));
    }
  });
}

}  // namespace nnlab
