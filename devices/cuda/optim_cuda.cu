// Fused optimizer steps on CUDA, PyTorch's update rules term for term (the twin of
// devices/cpu/optim_cpu.cpp): one kernel per parameter tensor (sgd_step, adam_step), or one
// kernel for up to 32 of them (sgd_step_all, adam_step_all: blockIdx.y picks the tensor), so
// a small model's optimizer is one launch, not one per tensor. The skip flag is read by the
// kernel on the device, so a non-finite loss stops the update without the host waiting.
#include <algorithm>
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

constexpr int kListTensors = 32;
struct SgdList {  // up to 32 parameters, passed by value (about 1 KB of kernel parameters)
  float* p[kListTensors];
  const float* g[kListTensors];
  float* buf[kListTensors];
  int64_t n[kListTensors];
  bool first[kListTensors];
  int count;
  int first_slot;  // the slot of tensor 0 in the whole step's list
};
struct AdamList {
  float* p[kListTensors];
  const float* g[kListTensors];
  float *m[kListTensors], *v[kListTensors];
  int64_t n[kListTensors];
  float step_size[kListTensors], bc2_sqrt[kListTensors];  // per parameter: each has its own step t
  int count;
  int first_slot;  // the slot of tensor 0 in the whole step's list (for numbers read on the device)
};

// ---- kernels ----------------------------------------------------------------------------

// One element: g += wd·p;  buf = first ? g : m·buf + (1 − dampening)·g;
//              g = nesterov ? g + m·buf : buf;  p −= lr·g      (buf may be null: m = 0)
__device__ void sgd_update(float& p, float g, float* buf, const SgdArgs& a, bool first) {
  if (a.weight_decay != 0.0f) g += a.weight_decay * p;
  if (buf) {
    *buf = first ? g : a.momentum * *buf + a.keep * g;
    g = a.nesterov ? g + a.momentum * *buf : *buf;
  }
  p -= a.lr * g;
}

// One element: m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²;
//              p −= lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + eps)
// AdamW decays p by (1 − lr·wd) first; Adam adds wd·p to the gradient.
__device__ void adam_update(float& p, float g, float& m, float& v, const AdamArgs& a, float step_size,
                            float bc2_sqrt) {
  if (a.weight_decay != 0.0f) {
    if (a.decoupled) p *= a.decay;
    else g += a.weight_decay * p;
  }
  m = a.beta1 * m + a.one_minus_beta1 * g;
  v = a.beta2 * v + a.one_minus_beta2 * g * g;
  p -= step_size * (m / (sqrtf(v) / bc2_sqrt + a.eps));
}

// p, g, buf: (n)
__global__ void sgd_step_kernel(float* p, const float* grad, float* buf, SgdArgs a, int64_t n, const int32_t* skip) {
  if (skip && *skip) return;
  NNLAB_GRID_STRIDE(i, n) { sgd_update(p[i], grad[i], buf ? buf + i : nullptr, a, a.first_step); }
}

// tensor t = blockIdx.y of the list: p_t, g_t, buf_t: (n_t)
// on_device (may be null): float32 {lr, momentum} in device memory, read here instead of a's
// (a CUDA graph's replay reads the values its step was given: SgdParams::on_device).
__global__ void sgd_step_list_kernel(SgdList list, SgdArgs a, const int32_t* skip, const float* on_device) {
  if (skip && *skip) return;
  if (on_device) a.lr = on_device[0], a.momentum = on_device[1];
  const int t = static_cast<int>(blockIdx.y);
  float* p = list.p[t];
  const float* g = list.g[t];
  float* buf = list.buf[t];
  NNLAB_GRID_STRIDE(i, list.n[t]) { sgd_update(p[i], g[i], buf ? buf + i : nullptr, a, list.first[t]); }
}

// p, g, m, v: (n)
__global__ void adam_step_kernel(float* p, const float* grad, float* m, float* v, AdamArgs a, int64_t n,
                                 const int32_t* skip) {
  if (skip && *skip) return;
  NNLAB_GRID_STRIDE(i, n) { adam_update(p[i], grad[i], m[i], v[i], a, a.step_size, a.bc2_sqrt); }
}

// tensor t = blockIdx.y of the list: p_t, g_t, m_t, v_t: (n_t)
// on_device (may be null): float32 {1 − lr·wd, β1, 1 − β1, then per slot s: lr/(1 − β1ᵗ),
// √(1 − β2ᵗ)} in device memory, read here instead of a's and the list's (AdamParams::on_device).
__global__ void adam_step_list_kernel(AdamList list, AdamArgs a, const int32_t* skip, const float* on_device) {
  if (skip && *skip) return;
  const int t = static_cast<int>(blockIdx.y);
  float step_size = list.step_size[t], bc2_sqrt = list.bc2_sqrt[t];
  if (on_device) {
    a.decay = on_device[0], a.beta1 = on_device[1], a.one_minus_beta1 = on_device[2];
    step_size = on_device[3 + 2 * (list.first_slot + t)];
    bc2_sqrt = on_device[4 + 2 * (list.first_slot + t)];
  }
  float* p = list.p[t];
  const float* g = list.g[t];
  float* m = list.m[t];
  float* v = list.v[t];
  NNLAB_GRID_STRIDE(i, list.n[t]) { adam_update(p[i], g[i], m[i], v[i], a, step_size, bc2_sqrt); }
}

// The bias corrections are scalars, computed in double on the host as on the CPU
// (backend.h), then rounded to float.
void adam_corrections(const AdamParams& hp, int64_t step, float* step_size, float* bc2_sqrt) {
  const AdamCorrections c = nnlab::adam_corrections(hp, step);
  *step_size = static_cast<float>(c.step_size);
  *bc2_sqrt = static_cast<float>(c.bc2_sqrt);
}

AdamArgs adam_args(const AdamParams& hp, int64_t step) {
  AdamArgs a{0.0f,
             0.0f,
             static_cast<float>(hp.beta1),
             static_cast<float>(hp.beta2),
             static_cast<float>(hp.eps),
             static_cast<float>(hp.weight_decay),
             static_cast<float>(1.0 - hp.lr * hp.weight_decay),
             static_cast<float>(1.0 - hp.beta1),
             static_cast<float>(1.0 - hp.beta2),
             hp.decoupled_weight_decay};
  adam_corrections(hp, step, &a.step_size, &a.bc2_sqrt);
  return a;
}

// SgdParams/AdamParams::on_device: float32 (at least `numel`) on this device, or null.
const float* numbers_on_device(const char* op, const Tensor* numbers, int64_t numel) {
  if (!numbers) return nullptr;
  cuda::require_f32(op, *numbers);
  NNLAB_CHECK(numbers->numel() >= numel, op, ": ", numel, " numbers read on the device, but the tensor holds ",
              numbers->describe());
  return cuda::ptr<float>(*numbers);
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
  cuda::launch("sgd_step_kernel", sgd_step_kernel, cuda::grid_for(*ctx_, param.numel()), cuda::kThreads, ctx_->stream,
               cuda::ptr<float>(param), cuda::ptr<float>(grad), buf, a, param.numel(), skip_ptr(skip_flag));
}

void CudaBackend::adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                            const AdamParams& hp, int64_t step, const Tensor* skip_flag) {
  NNLAB_LOG_KERNEL("adam_step", param);  // nnlab explain: record the call
  cuda::require_f32("adam_step", param);
  if (!param.numel()) return;
  const AdamArgs a = adam_args(hp, step);
  cuda::launch("adam_step_kernel", adam_step_kernel, cuda::grid_for(*ctx_, param.numel()), cuda::kThreads, ctx_->stream,
               cuda::ptr<float>(param), cuda::ptr<float>(grad), cuda::ptr<float>(exp_avg), cuda::ptr<float>(exp_avg_sq),
               a, param.numel(), skip_ptr(skip_flag));
}

namespace {

// Slots in chunks of up to kListTensors: fill(list, slot) puts each slot of a chunk into its
// List (and counts it), then launch(list, grid) runs the chunk, blockIdx.y over its tensors and
// the blocks along x over the largest of them.
template <typename List, typename Slot, typename Fill, typename Launch>
void for_each_chunk(const cuda::Context& c, const std::vector<Slot>& slots, Fill fill, Launch launch) {
  for (size_t from = 0; from < slots.size(); from += kListTensors) {
    List list{};
    list.first_slot = static_cast<int>(from);
    int64_t most = 0;
    for (size_t i = from; i < slots.size() && i < from + kListTensors; ++i) {
      fill(list, slots[i]);
      most = std::max(most, slots[i].param->numel());
    }
    if (most) launch(list, dim3(std::min<unsigned>(cuda::grid_for(c, most), 1024), static_cast<unsigned>(list.count)));
  }
}

}  // namespace

// Up to 32 parameters per launch, after one check of the gradients that asked for it.
void CudaBackend::sgd_step_all(const std::vector<SgdSlot>& slots, const SgdParams& hp, Tensor* skip_flag) {
  check_slot_gradients(slots, skip_flag);
  const SgdArgs a{static_cast<float>(hp.lr),          static_cast<float>(hp.momentum),
                  static_cast<float>(1.0 - hp.dampening), static_cast<float>(hp.weight_decay),
                  hp.nesterov,                         false};
  const float* on_device = numbers_on_device("sgd_step_all", hp.on_device, 2);
  for (const SgdSlot& s : slots)
    NNLAB_CHECK(!on_device || !s.first_step, "sgd_step_all: a momentum buffer's first step cannot read its numbers "
                "on the device (it takes buf = g); take one step with host numbers first");
  for_each_chunk<SgdList>(
      *ctx_, slots,
      [](SgdList& list, const SgdSlot& s) {
        NNLAB_LOG_KERNEL("sgd_step", *s.param);  // nnlab explain: one record per parameter, as before
        cuda::require_f32("sgd_step_all", *s.param);
        const int t = list.count++;
        list.p[t] = cuda::ptr<float>(*s.param);
        list.g[t] = cuda::ptr<float>(*s.grad);
        list.buf[t] = s.momentum_buf->defined() ? cuda::ptr<float>(*s.momentum_buf) : nullptr;
        list.n[t] = s.param->numel();
        list.first[t] = s.first_step;
      },
      [&](const SgdList& list, dim3 grid) {
        cuda::launch("sgd_step_list_kernel", sgd_step_list_kernel, grid, cuda::kThreads, ctx_->stream, list, a,
                     skip_ptr(skip_flag), on_device);
      });
}

void CudaBackend::adam_step_all(const std::vector<AdamSlot>& slots, const AdamParams& hp, const Tensor* skip_flag) {
  const AdamArgs a = adam_args(hp, 1);  // the per-parameter corrections go in the list
  const float* on_device = numbers_on_device("adam_step_all", hp.on_device, 3 + 2 * int64_t(slots.size()));
  for_each_chunk<AdamList>(
      *ctx_, slots,
      [&hp](AdamList& list, const AdamSlot& s) {
        NNLAB_LOG_KERNEL("adam_step", *s.param);  // nnlab explain: one record per parameter, as before
        cuda::require_f32("adam_step_all", *s.param);
        const int t = list.count++;
        list.p[t] = cuda::ptr<float>(*s.param);
        list.g[t] = cuda::ptr<float>(*s.grad);
        list.m[t] = cuda::ptr<float>(*s.exp_avg);
        list.v[t] = cuda::ptr<float>(*s.exp_avg_sq);
        list.n[t] = s.param->numel();
        adam_corrections(hp, s.step, &list.step_size[t], &list.bc2_sqrt[t]);
      },
      [&](const AdamList& list, dim3 grid) {
        cuda::launch("adam_step_list_kernel", adam_step_list_kernel, grid, cuda::kThreads, ctx_->stream, list, a,
                     skip_ptr(skip_flag), on_device);
      });
}

}  // namespace nnlab
