// Fused optimizer steps on CUDA: one kernel per parameter tensor, PyTorch's update rules term
// for term (the twin of devices/cpu/optim_cpu.cpp). The skip flag is read by the kernel on
// the device, so a non-finite loss stops the update without the host waiting for the GPU.
#include <cmath>

#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

struct SgdArgs {
  float lr, momentum, keep, weight_decay;  // keep = 1 − dampening
  bool nesterov, first_step;
};

struct AdamArgs {
  float step_size, bc2_sqrt, beta1, beta2, eps, weight_decay, decay;  // decay = 1 − lr·wd
  float one_minus_beta1, one_minus_beta2;  // 1 − β in double, then rounded, as PyTorch
  bool decoupled;
};

// ---- kernels ----------------------------------------------------------------------------

// p, g, buf: (n)   g += wd·p;  buf = first ? g : m·buf + (1 − dampening)·g;
//                  g = nesterov ? g + m·buf : buf;  p −= lr·g      (buf may be null: m = 0)
__global__ void sgd_step_kernel(float* p, const float* grad, float* buf, SgdArgs a, int64_t n, const int32_t* skip) {
  if (skip && *skip) return;
  NNLAB_GRID_STRIDE(i, n) {
    float g = grad[i];
    if (a.weight_decay != 0.0f) g += a.weight_decay * p[i];
    if (buf) {
      buf[i] = a.first_step ? g : a.momentum * buf[i] + a.keep * g;
      g = a.nesterov ? g + a.momentum * buf[i] : buf[i];
    }
    p[i] -= a.lr * g;
  }
}

// p, g, m, v: (n)   m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²;
//                   p −= lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + eps)
// AdamW decays p by (1 − lr·wd) first; Adam adds wd·p to the gradient.
__global__ void adam_step_kernel(float* p, const float* grad, float* m, float* v, AdamArgs a, int64_t n,
                                 const int32_t* skip) {
  if (skip && *skip) return;
  NNLAB_GRID_STRIDE(i, n) {
    float g = grad[i];
    if (a.weight_decay != 0.0f) {
      if (a.decoupled) p[i] *= a.decay;
      else g += a.weight_decay * p[i];
    }
    m[i] = a.beta1 * m[i] + a.one_minus_beta1 * g;
    v[i] = a.beta2 * v[i] + a.one_minus_beta2 * g * g;
    p[i] -= a.step_size * (m[i] / (sqrtf(v[i]) / a.bc2_sqrt + a.eps));
  }
}

const int32_t* skip_ptr(const Tensor* skip_flag) {
  if (!skip_flag || !skip_flag->defined()) return nullptr;
  check_dtype("optimizer skip flag", *skip_flag, DType::Int32);
  return cuda::ptr<int32_t>(*skip_flag);
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------

void CudaBackend::sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& hp,
                           bool first_step, const Tensor* skip_flag) {
  NNLAB_LOG_KERNEL("sgd_step", param);  // nnlab explain: record the call
  cuda::require_f32("sgd_step", param);
  if (!param.numel()) return;
  const SgdArgs a{static_cast<float>(hp.lr),          static_cast<float>(hp.momentum),
                  static_cast<float>(1.0 - hp.dampening), static_cast<float>(hp.weight_decay),
                  hp.nesterov,                         first_step};
  float* buf = momentum_buf.defined() ? cuda::ptr<float>(momentum_buf) : nullptr;
  cuda::launch("sgd_step_kernel", sgd_step_kernel, cuda::grid_for(param.numel()), cuda::kThreads, ctx_->stream,
               cuda::ptr<float>(param), cuda::ptr<float>(grad), buf, a, param.numel(), skip_ptr(skip_flag));
}

void CudaBackend::adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                            const AdamParams& hp, int64_t step, const Tensor* skip_flag) {
  NNLAB_LOG_KERNEL("adam_step", param);  // nnlab explain: record the call
  cuda::require_f32("adam_step", param);
  if (!param.numel()) return;
  // The bias corrections are scalars, computed in double on the host as on the CPU.
  const double bc1 = 1.0 - std::pow(hp.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(hp.beta2, static_cast<double>(step));
  const AdamArgs a{static_cast<float>(hp.lr / bc1),
                   static_cast<float>(std::sqrt(bc2)),
                   static_cast<float>(hp.beta1),
                   static_cast<float>(hp.beta2),
                   static_cast<float>(hp.eps),
                   static_cast<float>(hp.weight_decay),
                   static_cast<float>(1.0 - hp.lr * hp.weight_decay),
                   static_cast<float>(1.0 - hp.beta1),
                   static_cast<float>(1.0 - hp.beta2),
                   hp.decoupled_weight_decay};
  cuda::launch("adam_step_kernel", adam_step_kernel, cuda::grid_for(param.numel()), cuda::kThreads, ctx_->stream,
               cuda::ptr<float>(param), cuda::ptr<float>(grad), cuda::ptr<float>(exp_avg), cuda::ptr<float>(exp_avg_sq),
               a, param.numel(), skip_ptr(skip_flag));
}

}  // namespace nnlab
