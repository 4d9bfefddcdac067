// Fused optimizer steps on the CPU: one pass over each parameter tensor, PyTorch's update
// rules term for term (torch/optim/sgd.py, adam.py, adamw.py in 1.13).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/nonfinite_cpu.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {
bool skipped(const Tensor* skip_flag) {
  return skip_flag && skip_flag->defined() && *skip_flag->data<int32_t>() != 0;
}
}  // namespace

namespace {

// Elements [begin, end) of one parameter's SGD step, one branch-free loop per case so each
// vectorises:
// g = grad + wd·p;  buf = first ? g : m·buf + (1 − dampening)·g;  g = nesterov ? g + m·buf : buf;  p −= lr·g
template <typename T>
void sgd_elements(T* p, const T* gr, T* buf, bool first_step, const SgdParams& hp, long begin, long end) {
  const T lr = static_cast<T>(hp.lr), m = static_cast<T>(hp.momentum), wd = static_cast<T>(hp.weight_decay);
  const T keep = static_cast<T>(1.0 - hp.dampening);
  if (!buf) {
#pragma omp simd
    for (long i = begin; i < end; ++i) p[i] -= lr * (gr[i] + wd * p[i]);
  } else if (first_step) {
#pragma omp simd
    for (long i = begin; i < end; ++i) {
      const T g = gr[i] + wd * p[i];
      buf[i] = g;
      p[i] -= lr * (hp.nesterov ? g + m * g : g);
    }
  } else if (hp.nesterov) {
#pragma omp simd
    for (long i = begin; i < end; ++i) {
      const T g = gr[i] + wd * p[i];
      buf[i] = m * buf[i] + keep * g;
      p[i] -= lr * (g + m * buf[i]);
    }
  } else {
#pragma omp simd
    for (long i = begin; i < end; ++i) {
      const T g = gr[i] + wd * p[i];
      buf[i] = m * buf[i] + keep * g;
      p[i] -= lr * buf[i];
    }
  }
}

// This thread's share [begin, end) of n elements: contiguous, as a static schedule splits them,
// on 16-element boundaries so no two threads write one cache line.
std::pair<long, long> share_of(long n, bool in_parallel) {
  if (!in_parallel) return {0, n};
  const long threads = omp_get_num_threads(), t = omp_get_thread_num();
  const auto edge = [&](long i) { return std::min(n, (n * i / threads + 15) / 16 * 16); };
  return {edge(t), t + 1 == threads ? n : edge(t + 1)};
}

}  // namespace

void CpuBackend::sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& hp,
                          bool first_step, const Tensor* skip_flag) {
  Tensor flag = skip_flag ? *skip_flag : Tensor();  // a handle: nothing is checked, so nothing is raised
  sgd_step_all({SgdSlot{&param, &grad, &momentum_buf, first_step}}, hp, &flag);
}

// Every parameter in one parallel region: a small model's step has several (the mlp 6, lenet5
// 10), and a region per tensor cost each one a fork and a join. Each thread takes the same
// share of every tensor as a static schedule would, so it updates the part of a weight it
// updated the step before (and that gemm_cpu.cpp's forward product reads on the same thread).
// The gradient checks run in the same region, on the same shares: each thread scans its part of
// every checked gradient, the threads meet once to agree, and the update then reads those parts
// from the thread's own cache. Checked apart (check_finite_all, then this), the mlp's gradients
// were read twice, and the step paid a second fork and join.
void CpuBackend::sgd_step_all(const std::vector<SgdSlot>& slots, const SgdParams& hp, Tensor* skip_flag) {
  NNLAB_CHECK(!hp.on_device, "sgd_step_all: numbers read on the device are for CUDA graphs; the CPU takes them as "
              "arguments");
  if (slots.empty()) return;
  KernelTiming timing;  // nnlab explain: one record for the whole list
  if (kernel_log_enabled())
    timing.attach(record_kernel("sgd_step", slots.size() == 1 ? tensor_dims(*slots[0].param)
                                                              : std::to_string(slots.size()) + " tensors"));
  if (skipped(skip_flag)) return;
  const DType dtype = slots[0].param->dtype();
  long total = 0;
  bool checks = false;
  for (const SgdSlot& s : slots) {
    NNLAB_CHECK(s.param->dtype() == dtype && s.grad->dtype() == dtype, "sgd_step: parameters of one step must share "
                "a dtype, got ", s.param->describe(), " and ", slots[0].param->describe());
    total += static_cast<long>(s.param->numel());
    checks = checks || s.check_grad;
  }
  NNLAB_CHECK(!checks || (skip_flag && skip_flag->defined()),
              "sgd_step_all: checking gradients needs a non-finite flag to raise");
  const long none = static_cast<long>(slots.size());
  // first_bad[t]: the first checked slot in whose share of thread t a NaN or ±inf was found
  std::vector<long> first_bad(static_cast<size_t>(omp_get_max_threads()), none);
  long bad = none;
  cpu::dispatch_float("sgd_step", *slots[0].param, [&](auto t) {
    using T = decltype(t);
#pragma omp parallel if (total > cpu::kParallelGrain)
    {
      if (checks) {
        long& mine = first_bad[static_cast<size_t>(omp_get_thread_num())];
        for (long i = 0; i < none && mine == none; ++i) {
          const SgdSlot& s = slots[static_cast<size_t>(i)];
          const auto [begin, end] = share_of(static_cast<long>(s.grad->numel()), omp_in_parallel());
          if (s.check_grad && cpu::any_not_finite(static_cast<const T*>(s.grad->raw_data()), begin, end)) mine = i;
        }
#pragma omp barrier
      }
      const long found = *std::min_element(first_bad.begin(), first_bad.end());
      if (found == none)
        for (const SgdSlot& s : slots) {
          const auto [begin, end] = share_of(static_cast<long>(s.param->numel()), omp_in_parallel());
          T* buf = s.momentum_buf->defined() ? static_cast<T*>(s.momentum_buf->raw_data()) : nullptr;
          sgd_elements(static_cast<T*>(s.param->raw_data()), static_cast<const T*>(s.grad->raw_data()), buf,
                       s.first_step, hp, begin, end);
        }
#pragma omp master
      bad = found;
    }
  });
  if (bad != none) cpu::raise_nonfinite_flag(*skip_flag, slots[static_cast<size_t>(bad)].grad_mark);
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
    // The bias corrections are scalars, computed in double as PyTorch does in Python (backend.h).
    const AdamCorrections c = adam_corrections(hp, step);
    // 1 − β in double, then rounded, as PyTorch passes it (alpha/value = 1 − beta): in float32,
    // 1 − float(0.999) would be off by 1.3e-5 relative.
    const AdamScalars<T> s{static_cast<T>(c.step_size),          static_cast<T>(c.bc2_sqrt),
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
