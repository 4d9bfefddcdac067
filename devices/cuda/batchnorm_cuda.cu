// Batch normalisation on CUDA, the twin of devices/cpu/batchnorm_cpu.cpp. Each channel j's
// statistics over its m = n·h·w values are summed in double, in slices on a grid of (c, slices)
// blocks in an order fixed by the shape (block_reduce.cuh: cuda::channel_slices), and in two
// passes (mean, then squared deviations) as on the CPU, to avoid Σx² − m·mean² cancelling.
// A block's statistics come from the partials of every slice of its channel, added in slice
// order, so all blocks of a channel agree on them bit for bit.
//
//   mean = Σ x / m      var = Σ (x − mean)² / m      x̂ = (x − mean) / √(var + eps)
//   y = γ · x̂ + β;  running ← (1 − momentum)·running + momentum·batch (unbiased var · m/(m−1))
//
// Training forward, three kernels: Σ x per slice; Σ (x − mean)² per slice; normalise (block
// (j, 0) also writes the statistics). Backward, two: Σ dy and Σ dy·x̂ per slice; dx (block
// (j, 0) also writes dγ and dβ). One block per channel, as these kernels once were, gave
// resnet8's 16-channel layers 16 blocks for a 132-SM GPU.
//
// T is the activations' type (x, y, dy, dx): float32, or bf16 with float32 γ, β and statistics
// (mixed precision), loaded widened and each output rounded once as it is stored, as the CPU's
// widened kernels round theirs.
#include <initializer_list>

#include "core/bfloat16.h"
#include "devices/bf16_widening.h"
#include "devices/cuda/block_reduce.cuh"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// The mean and the 1/√(var + eps) of channel blockIdx.x from the slices' partial sums.
struct ChannelStats {
  double mean, var, invstd;
};

__device__ ChannelStats channel_stats(const double* sums, const double* squares, int64_t slices, int64_t m,
                                      double eps) {
  const int64_t j = blockIdx.x;
  const double mean = cuda::sum_of_slices(sums, j, slices) / static_cast<double>(m);
  const double var = cuda::sum_of_slices(squares, j, slices) / static_cast<double>(m);
  return {mean, var, 1.0 / sqrt(var + eps)};
}

// ---- kernels ----------------------------------------------------------------------------

// x: (n, c, inner); block (j, p): sums[j, p] = Σ x over slice p of channel j.
template <typename T>
__global__ void batchnorm_sum_kernel(const T* x, double* sums, int64_t c, int64_t inner,
                                     cuda::ChannelSlices slices) {
  double s = 0.0;
  for (cuda::ChannelWalk v(slices, c, inner); v.more(); v.next()) s += float(x[v.at()]);
  s = cuda::block_sum(s);
  if (threadIdx.x == 0) sums[blockIdx.x * slices.slices + blockIdx.y] = s;
}

// squares[j, p] = Σ (x − mean_j)² over slice p of channel j, mean_j from every slice's sum.
template <typename T>
__global__ void batchnorm_square_kernel(const T* x, const double* sums, double* squares, int64_t c,
                                        int64_t inner, cuda::ChannelSlices slices) {
  const double mean = cuda::sum_of_slices(sums, blockIdx.x, slices.slices) / static_cast<double>(slices.count);
  double sq = 0.0;
  for (cuda::ChannelWalk v(slices, c, inner); v.more(); v.next()) {
    const double d = float(x[v.at()]) - mean;
    sq += d * d;
  }
  sq = cuda::block_sum(sq);
  if (threadIdx.x == 0) squares[blockIdx.x * slices.slices + blockIdx.y] = sq;
}

// y = (x − mean)·γ/√(var + eps) + β over slice p of channel j; γ, β, running_*, save_*: (c).
template <typename T>
__global__ void batchnorm_normalise_kernel(const T* x, const float* gamma, const float* beta, float* rm,
                                           float* rv, double momentum, double eps, T* y, float* save_mean,
                                           float* save_invstd, const double* sums, const double* squares, int64_t c,
                                           int64_t inner, cuda::ChannelSlices slices) {
  const int64_t j = blockIdx.x, m = slices.count;
  const ChannelStats st = channel_stats(sums, squares, slices.slices, m, eps);
  if (blockIdx.y == 0 && threadIdx.x == 0) {
    save_mean[j] = static_cast<float>(st.mean);
    save_invstd[j] = static_cast<float>(st.invstd);
    rm[j] = static_cast<float>((1 - momentum) * rm[j] + momentum * st.mean);
    rv[j] = static_cast<float>((1 - momentum) * rv[j] + momentum * st.var * m / (m - 1));
  }
  const float fmean = static_cast<float>(st.mean), scale = static_cast<float>(gamma[j] * st.invstd), b = beta[j];
  for (cuda::ChannelWalk v(slices, c, inner); v.more(); v.next()) {
    const int64_t e = v.at();
    y[e] = T((float(x[e]) - fmean) * scale + b);
  }
}

// x, y: (n, c, inner)   y = (x − running_mean) · γ/√(running_var + eps) + β
template <typename T>
__global__ void batchnorm_forward_eval_kernel(const T* x, const float* gamma, const float* beta, const float* rm,
                                              const float* rv, double eps, T* y, int64_t c, int64_t inner,
                                              int64_t total) {
  NNLAB_GRID_STRIDE(e, total) {
    const int64_t j = (e / inner) % c;
    const double invstd = 1.0 / sqrt(static_cast<double>(rv[j]) + eps);
    y[e] = T((float(x[e]) - rm[j]) * static_cast<float>(gamma[j] * invstd) + beta[j]);
  }
}

// x, dy: (n, c, inner)  save_*: (c); block (j, p): over slice p of channel j,
//   sums[j, p] = Σ dy      products[j, p] = Σ dy · x̂
template <typename T>
__global__ void batchnorm_backward_sums_kernel(const T* x, const T* dy, const float* save_mean,
                                               const float* save_invstd, double* sums, double* products, int64_t c,
                                               int64_t inner, cuda::ChannelSlices slices) {
  const int64_t j = blockIdx.x;
  const double mean = save_mean[j], invstd = save_invstd[j];
  double s_dy = 0.0, s_dy_xhat = 0.0;
  for (cuda::ChannelWalk v(slices, c, inner); v.more(); v.next()) {
    const int64_t e = v.at();
    const float d = float(dy[e]);
    s_dy += d;
    s_dy_xhat += d * (float(x[e]) - mean) * invstd;
  }
  s_dy = cuda::block_sum(s_dy);
  s_dy_xhat = cuda::block_sum(s_dy_xhat);
  if (threadIdx.x == 0) {
    sums[j * slices.slices + blockIdx.y] = s_dy;
    products[j * slices.slices + blockIdx.y] = s_dy_xhat;
  }
}

// dβ = Σ dy      dγ = Σ dy · x̂      dx = γ · invstd · (dy − dβ/m − x̂ · dγ/m)   over slice p of
// channel j; block (j, 0) writes dγ and dβ.
template <typename T>
__global__ void batchnorm_backward_dx_kernel(const T* x, const T* dy, const float* gamma,
                                             const float* save_mean, const float* save_invstd, const double* sums,
                                             const double* products, T* dx, float* dgamma, float* dbeta,
                                             int64_t c, int64_t inner, cuda::ChannelSlices slices) {
  const int64_t j = blockIdx.x, m = slices.count;
  const double s_dy = cuda::sum_of_slices(sums, j, slices.slices);
  const double s_dy_xhat = cuda::sum_of_slices(products, j, slices.slices);
  if (blockIdx.y == 0 && threadIdx.x == 0) {
    dbeta[j] = static_cast<float>(s_dy);
    dgamma[j] = static_cast<float>(s_dy_xhat);
  }
  const double invstd = save_invstd[j];
  const float scale = static_cast<float>(gamma[j] * invstd), mean_dy = static_cast<float>(s_dy / m);
  const float mean_dy_xhat = static_cast<float>(s_dy_xhat / m), fmean = save_mean[j],
              finvstd = static_cast<float>(invstd);
  for (cuda::ChannelWalk v(slices, c, inner); v.more(); v.next()) {
    const int64_t e = v.at();
    const float xhat = (float(x[e]) - fmean) * finvstd;
    dx[e] = T(scale * (float(dy[e]) - mean_dy - xhat * mean_dy_xhat));
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

namespace {

// Runs launch(T{}) with T the activations' type: BFloat16 when x and every other activation
// given are bf16 (γ, β and the statistics float32), else float32 throughout.
template <typename Launch>
void with_activation_type(const char* kernel, std::initializer_list<const Tensor*> activations,
                          std::initializer_list<const Tensor*> parameters, Launch launch) {
  if (bf16::all(activations)) {
    for (const Tensor* t : parameters) check_dtype(kernel, *t, DType::Float32);
    return launch(BFloat16{});
  }
  for (const Tensor* t : activations) cuda::require_f32(kernel, *t);
  launch(float{});
}

}  // namespace

void CudaBackend::batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                                          Tensor& y, Tensor& save_mean, Tensor& save_invstd) {
  NNLAB_LOG_KERNEL("batchnorm_forward_train", x);  // nnlab explain: record the call
  const ChannelLayout L = layout_of(x);
  NNLAB_CHECK(L.n * L.inner > 1, "batchnorm: training needs more than one value per channel, got ", x.describe());
  if (!L.c) return;
  const cuda::ChannelSlices slices = cuda::channel_slices(L.n * L.inner);
  const dim3 grid(static_cast<unsigned>(L.c), static_cast<unsigned>(slices.slices));
  cuda::Scratch partial(*ctx_->allocator, 2 * static_cast<size_t>(L.c * slices.slices) * sizeof(double));
  double* sums = partial.as<double>();
  double* squares = sums + L.c * slices.slices;
  with_activation_type("batchnorm_forward_train", {&x, &y}, {&gamma, &beta, &running_mean, &running_var},
                       [&](auto element) {
    using T = decltype(element);
    cuda::launch("batchnorm_sum_kernel", batchnorm_sum_kernel<T>, grid, cuda::kThreads, ctx_->stream,
                 cuda::ptr<T>(x), sums, L.c, L.inner, slices);
    cuda::launch("batchnorm_square_kernel", batchnorm_square_kernel<T>, grid, cuda::kThreads, ctx_->stream,
                 cuda::ptr<T>(x), static_cast<const double*>(sums), squares, L.c, L.inner, slices);
    cuda::launch("batchnorm_normalise_kernel", batchnorm_normalise_kernel<T>, grid, cuda::kThreads, ctx_->stream,
                 cuda::ptr<T>(x), cuda::ptr<float>(gamma), cuda::ptr<float>(beta), cuda::ptr<float>(running_mean),
                 cuda::ptr<float>(running_var), momentum, eps, cuda::ptr<T>(y), cuda::ptr<float>(save_mean),
                 cuda::ptr<float>(save_invstd), static_cast<const double*>(sums), static_cast<const double*>(squares),
                 L.c, L.inner, slices);
  });
}

void CudaBackend::batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         const Tensor& running_mean, const Tensor& running_var, double eps,
                                         Tensor& y) {
  NNLAB_LOG_KERNEL("batchnorm_forward_eval", x);  // nnlab explain: record the call
  const ChannelLayout L = layout_of(x);
  if (!x.numel()) return;
  with_activation_type("batchnorm_forward_eval", {&x, &y}, {&gamma, &beta, &running_mean, &running_var},
                       [&](auto element) {
    using T = decltype(element);
    cuda::launch("batchnorm_forward_eval_kernel", batchnorm_forward_eval_kernel<T>, cuda::grid_for(*ctx_, x.numel()),
                 cuda::kThreads, ctx_->stream, cuda::ptr<T>(x), cuda::ptr<float>(gamma), cuda::ptr<float>(beta),
                 cuda::ptr<float>(running_mean), cuda::ptr<float>(running_var), eps, cuda::ptr<T>(y), L.c, L.inner,
                 x.numel());
  });
}

void CudaBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                                     const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  NNLAB_LOG_KERNEL("batchnorm_backward", x);  // nnlab explain: record the call
  const ChannelLayout L = layout_of(x);
  if (!L.c) return;  // an empty batch still writes dγ = dβ = 0 below
  const cuda::ChannelSlices slices = cuda::channel_slices(L.n * L.inner);
  const dim3 grid(static_cast<unsigned>(L.c), static_cast<unsigned>(slices.slices));
  cuda::Scratch partial(*ctx_->allocator, 2 * static_cast<size_t>(L.c * slices.slices) * sizeof(double));
  double* sums = partial.as<double>();
  double* products = sums + L.c * slices.slices;
  with_activation_type("batchnorm_backward", {&x, &dy, &dx}, {&gamma, &save_mean, &save_invstd, &dgamma, &dbeta},
                       [&](auto element) {
    using T = decltype(element);
    cuda::launch("batchnorm_backward_sums_kernel", batchnorm_backward_sums_kernel<T>, grid, cuda::kThreads,
                 ctx_->stream, cuda::ptr<T>(x), cuda::ptr<T>(dy), cuda::ptr<float>(save_mean),
                 cuda::ptr<float>(save_invstd), sums, products, L.c, L.inner, slices);
    cuda::launch("batchnorm_backward_dx_kernel", batchnorm_backward_dx_kernel<T>, grid, cuda::kThreads, ctx_->stream,
                 cuda::ptr<T>(x), cuda::ptr<T>(dy), cuda::ptr<float>(gamma), cuda::ptr<float>(save_mean),
                 cuda::ptr<float>(save_invstd), static_cast<const double*>(sums), static_cast<const double*>(products),
                 cuda::ptr<T>(dx), cuda::ptr<float>(dgamma), cuda::ptr<float>(dbeta), L.c, L.inner, slices);
  });
}

}  // namespace nnlab
