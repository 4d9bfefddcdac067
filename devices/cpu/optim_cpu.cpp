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

namespace {

// The scalars of one Adam step, in the parameter's dtype.
template <typename T>
struct AdamScalars {
  T step_size, bc2_sqrt, b1, b2, eps, one_minus_b1, one_minus_b2, wd, decay;
};
enum class AdamDecay { None, L2, Decoupled };

// Elements [0, n) of one Adam step, the kind of weight decay fixed at compile time: with the
// choice made inside the loop GCC kept it scalar (0.53 ms for the cnn's 401,408-weight layer).
template <AdamDecay Decay, typename T>
void adam_elements(long n, T* p, const T* gr, T* m, T* v, const AdamScalars<T>& s) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelGrain)
  for (long i = 0; i < n; ++i) {
    T g = gr[i];
    if constexpr (Decay == AdamDecay::L2) g += s.wd * p[i];
    T pi = p[i];
    if constexpr (Decay == AdamDecay::Decoupled) pi *= s.decay;
    const T mi = s.b1 * m[i] + s.one_minus_b1 * g;
    const T vi = s.b2 * v[i] + s.one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - s.step_size * (mi / (std::sqrt(vi) / s.bc2_sqrt + s.eps));
  }
}

}  // namespace

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
    // 1 − β in double, then rounded, as PyTorch passes it (alpha/value = 1 − beta): in float32,
    // 1 − float(0.999) would be off by 1.3e-5 relative.
    const AdamScalars<T> s{static_cast<T>(hp.lr / bc1),          static_cast<T>(std::sqrt(bc2)),
                           static_cast<T>(hp.beta1),             static_cast<T>(hp.beta2),
                           static_cast<T>(hp.eps),               static_cast<T>(1.0 - hp.beta1),
                           static_cast<T>(1.0 - hp.beta2),       static_cast<T>(hp.weight_decay),
                           static_cast<T>(1.0 - hp.lr * hp.weight_decay)};
    const long n = static_cast<long>(param.numel());
    if (hp.weight_decay == 0.0) adam_elements<AdamDecay::None>(n, p, gr, m, v, s);
    else if (hp.decoupled_weight_decay) adam_elements<AdamDecay::Decoupled>(n, p, gr, m, v, s);
    else adam_elements<AdamDecay::L2>(n, p, gr, m, v, s);
  });
}

}  // namespace nnlab
