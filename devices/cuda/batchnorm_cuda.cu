// Batch normalisation on CUDA, the twin of devices/cpu/batchnorm_cpu.cpp: one block per
// channel j computes the statistics of its m = n·h·w values in double, in a fixed order
// (strided partials + a shared-memory tree), then normalises the channel. Two passes (mean,
// then squared deviations) as on the CPU, to avoid Σx² − m·mean² cancelling.
//
//   mean = Σ x / m      var = Σ (x − mean)² / m      x̂ = (x − mean) / √(var + eps)
//   y = γ · x̂ + β;  running ← (1 − momentum)·running + momentum·batch (unbiased var · m/(m−1))
#include "devices/cuda/block_reduce.cuh"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// x seen as (n, c, inner); element t of channel j (t < n·inner) sits at
// ((t / inner)·c + j)·inner + t % inner.
__device__ __forceinline__ int64_t channel_at(int64_t t, int64_t j, int64_t c, int64_t inner) {
  return ((t / inner) * c + j) * inner + t % inner;
}

// ---- kernels ----------------------------------------------------------------------------

// x, y: (n, c, inner)  γ, β, running_*, save_*: (c); block j handles channel j.
__global__ void batchnorm_forward_train_kernel(const float* x, const float* gamma, const float* beta, float* rm,
                                               float* rv, double momentum, double eps, float* y, float* save_mean,
                                               float* save_invstd, int64_t n, int64_t c, int64_t inner) {
  const int64_t j = blockIdx.x, m = n * inner;
  double sum = 0.0;
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) sum += x[channel_at(t, j, c, inner)];
  const double mean = cuda::block_sum(sum) / static_cast<double>(m);
  double sq = 0.0;
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
    const double d = x[channel_at(t, j, c, inner)] - mean;
    sq += d * d;
  }
  const double var = cuda::block_sum(sq) / static_cast<double>(m);
  const double invstd = 1.0 / sqrt(var + eps);
  if (threadIdx.x == 0) {
    save_mean[j] = static_cast<float>(mean);
    save_invstd[j] = static_cast<float>(invstd);
    rm[j] = static_cast<float>((1 - momentum) * rm[j] + momentum * mean);
    rv[j] = static_cast<float>((1 - momentum) * rv[j] + momentum * var * m / (m - 1));
  }
  const float fmean = static_cast<float>(mean), scale = static_cast<float>(gamma[j] * invstd), b = beta[j];
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
    const int64_t e = channel_at(t, j, c, inner);
    y[e] = (x[e] - fmean) * scale + b;
  }
}

// x, y: (n, c, inner)   y = (x − running_mean) · γ/√(running_var + eps) + β
__global__ void batchnorm_forward_eval_kernel(const float* x, const float* gamma, const float* beta, const float* rm,
                                              const float* rv, double eps, float* y, int64_t c, int64_t inner,
                                              int64_t total) {
  NNLAB_GRID_STRIDE(e, total) {
    const int64_t j = (e / inner) % c;
    const double invstd = 1.0 / sqrt(static_cast<double>(rv[j]) + eps);
    y[e] = (x[e] - rm[j]) * static_cast<float>(gamma[j] * invstd) + beta[j];
  }
}

// x, dy, dx: (n, c, inner)  γ, save_*, dγ, dβ: (c); block j handles channel j.
//   dβ = Σ dy      dγ = Σ dy · x̂      dx = γ · invstd · (dy − dβ/m − x̂ · dγ/m)
__global__ void batchnorm_backward_kernel(const float* x, const float* dy, const float* gamma,
                                          const float* save_mean, const float* save_invstd, float* dx,
                                          float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t inner) {
  const int64_t j = blockIdx.x, m = n * inner;
  const double mean = save_mean[j], invstd = save_invstd[j];
  double s_dy = 0.0, s_dy_xhat = 0.0;
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
    const int64_t e = channel_at(t, j, c, inner);
    s_dy += dy[e];
    s_dy_xhat += dy[e] * (x[e] - mean) * invstd;
  }
  s_dy = cuda::block_sum(s_dy);
  s_dy_xhat = cuda::block_sum(s_dy_xhat);
  if (threadIdx.x == 0) {
    dbeta[j] = static_cast<float>(s_dy);
    dgamma[j] = static_cast<float>(s_dy_xhat);
  }
  const float scale = static_cast<float>(gamma[j] * invstd), mean_dy = static_cast<float>(s_dy / m);
  const float mean_dy_xhat = static_cast<float>(s_dy_xhat / m), fmean = static_cast<float>(mean),
              finvstd = static_cast<float>(invstd);
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
    const int64_t e = channel_at(t, j, c, inner);
    const float xhat = (x[e] - fmean) * finvstd;
    dx[e] = scale * (dy[e] - mean_dy - xhat * mean_dy_xhat);
  }
}

struct ChannelLayout {
  int64_t n, c, inner;
};

ChannelLayout layout_of(const Tensor& x) {
  NNLAB_CHECK(x.ndim() >= 2, "batchnorm kernel: expected (n, c, ...), got ", x.describe());
  // The product of the trailing dimensions, not numel / (n·c): an empty batch (n = 0) must
  // reach the caller's check, not divide by zero.
  int64_t inner = 1;
  for (int64_t d = 2; d < x.ndim(); ++d) inner *= x.dim(d);
  return {x.dim(0), x.dim(1), inner};
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------

void CudaBackend::batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                                          Tensor& y, Tensor& save_mean, Tensor& save_invstd) {
  NNLAB_LOG_KERNEL("batchnorm_forward_train", x);  // nnlab explain: record the call
  cuda::require_f32("batchnorm_forward_train", x);
  const ChannelLayout L = layout_of(x);
  NNLAB_CHECK(L.n * L.inner > 1, "batchnorm: training needs more than one value per channel, got ", x.describe());
  cuda::launch("batchnorm_forward_train_kernel", batchnorm_forward_train_kernel, static_cast<unsigned>(L.c),
               cuda::kThreads, ctx_->stream, cuda::ptr<float>(x), cuda::ptr<float>(gamma), cuda::ptr<float>(beta),
               cuda::ptr<float>(running_mean), cuda::ptr<float>(running_var), momentum, eps, cuda::ptr<float>(y),
               cuda::ptr<float>(save_mean), cuda::ptr<float>(save_invstd), L.n, L.c, L.inner);
}

void CudaBackend::batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         const Tensor& running_mean, const Tensor& running_var, double eps,
                                         Tensor& y) {
  NNLAB_LOG_KERNEL("batchnorm_forward_eval", x);  // nnlab explain: record the call
  cuda::require_f32("batchnorm_forward_eval", x);
  const ChannelLayout L = layout_of(x);
  if (!x.numel()) return;
  cuda::launch("batchnorm_forward_eval_kernel", batchnorm_forward_eval_kernel, cuda::grid_for(*ctx_, x.numel()),
               cuda::kThreads, ctx_->stream, cuda::ptr<float>(x), cuda::ptr<float>(gamma), cuda::ptr<float>(beta),
               cuda::ptr<float>(running_mean), cuda::ptr<float>(running_var), eps, cuda::ptr<float>(y), L.c, L.inner,
               x.numel());
}

void CudaBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                                     const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  NNLAB_LOG_KERNEL("batchnorm_backward", x);  // nnlab explain: record the call
  cuda::require_f32("batchnorm_backward", x);
  const ChannelLayout L = layout_of(x);
  cuda::launch("batchnorm_backward_kernel", batchnorm_backward_kernel, static_cast<unsigned>(L.c), cuda::kThreads,
               ctx_->stream, cuda::ptr<float>(x), cuda::ptr<float>(dy), cuda::ptr<float>(gamma),
               cuda::ptr<float>(save_mean), cuda::ptr<float>(save_invstd), cuda::ptr<float>(dx),
               cuda::ptr<float>(dgamma), cuda::ptr<float>(dbeta), L.n, L.c, L.inner);
}

}  // namespace nnlab
