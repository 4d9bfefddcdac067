// Batch normalisation on the CPU (Ioffe & Szegedy, 2015), one channel at a time: the
// statistics of channel j run over the m = n·h·w values x[·, j, ·, ·]. Channels are
// independent, so the loops run in parallel over channels; each channel's sums run in one
// fixed order (accumulated in double), so results repeat bit for bit.
//
//   mean = Σ x / m      var = Σ (x − mean)² / m      (biased: what normalises)
//   x̂ = (x − mean) / √(var + eps)       y = γ · x̂ + β
#include <cmath>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// x seen as (n, c, inner): element (i, j, k) at (i·c + j)·inner + k.
struct ChannelLayout {
  int64_t n, c, inner;
  int64_t count() const { return n * inner; }  // m, the values per channel
};

ChannelLayout layout_of(const Tensor& x) {
  NNLAB_CHECK(x.ndim() >= 2, "batchnorm kernel: expected (n, c, ...), got ", x.describe());
  // The product of the trailing dimensions, not numel / (n·c): an empty batch (n = 0) must
  // reach the caller's check, not divide by zero.
  int64_t inner = 1;
  for (int64_t d = 2; d < x.ndim(); ++d) inner *= x.dim(d);
  return {x.dim(0), x.dim(1), inner};
}

// Two passes (mean, then squared deviations) rather than Σx² − m·mean², which cancels
// catastrophically when |mean| ≫ std.
template <typename T>
void channel_moments(const T* x, const ChannelLayout& L, int64_t j, double& mean, double& var) {
  double sum = 0;
  for (int64_t i = 0; i < L.n; ++i) {
    const T* row = x + (i * L.c + j) * L.inner;
    for (int64_t k = 0; k < L.inner; ++k) sum += row[k];
  }
  mean = sum / static_cast<double>(L.count());
  double sq = 0;
  for (int64_t i = 0; i < L.n; ++i) {
    const T* row = x + (i * L.c + j) * L.inner;
    for (int64_t k = 0; k < L.inner; ++k) sq += (row[k] - mean) * (row[k] - mean);
  }
  var = sq / static_cast<double>(L.count());
}

// y[·, j, ·] = (x − mean) · scale + β   with scale = γ / √(var + eps)
template <typename T>
void normalise_channel(const T* x, T* y, const ChannelLayout& L, int64_t j, T mean, T scale, T beta) {
  for (int64_t i = 0; i < L.n; ++i) {
    const T* xr = x + (i * L.c + j) * L.inner;
    T* yr = y + (i * L.c + j) * L.inner;
    for (int64_t k = 0; k < L.inner; ++k) yr[k] = (xr[k] - mean) * scale + beta;
  }
}

// x, y: (n, c, h, w)  γ, β, running_mean, running_var, save_mean, save_invstd: (c)
// running ← (1 − momentum) · running + momentum · batch, with the UNBIASED variance
// var · m / (m − 1) for running_var (PyTorch's rule; the op ensures m > 1).
template <typename T>
void forward_train_typed(const Tensor& xt, const Tensor& gt, const Tensor& bt, const Tensor& rmt,
                         const Tensor& rvt, double momentum, double eps, const Tensor& yt, const Tensor& smt,
                         const Tensor& sit) {
  const ChannelLayout L = layout_of(xt);
  const T* x = static_cast<const T*>(xt.raw_data());
  const T* gamma = static_cast<const T*>(gt.raw_data());
  const T* beta = static_cast<const T*>(bt.raw_data());
  T* rm = static_cast<T*>(rmt.raw_data());
  T* rv = static_cast<T*>(rvt.raw_data());
  T* y = static_cast<T*>(yt.raw_data());
  T* save_mean = static_cast<T*>(smt.raw_data());
  T* save_invstd = static_cast<T*>(sit.raw_data());
  const double m = static_cast<double>(L.count());
#pragma omp parallel for schedule(static) if (xt.numel() > cpu::kParallelGrain)
  for (long j = 0; j < static_cast<long>(L.c); ++j) {
    double mean, var;
    channel_moments(x, L, j, mean, var);
    const double invstd = 1.0 / std::sqrt(var + eps);
    save_mean[j] = static_cast<T>(mean);
    save_invstd[j] = static_cast<T>(invstd);
    rm[j] = static_cast<T>((1 - momentum) * rm[j] + momentum * mean);
    rv[j] = static_cast<T>((1 - momentum) * rv[j] + momentum * var * m / (m - 1));
    normalise_channel(x, y, L, j, static_cast<T>(mean), static_cast<T>(gamma[j] * invstd), beta[j]);
  }
}

// Same shapes; the running statistics stand in for the batch's.
template <typename T>
void forward_eval_typed(const Tensor& xt, const Tensor& gt, const Tensor& bt, const Tensor& rmt,
                        const Tensor& rvt, double eps, const Tensor& yt) {
  const ChannelLayout L = layout_of(xt);
  const T* x = static_cast<const T*>(xt.raw_data());
  const T* gamma = static_cast<const T*>(gt.raw_data());
  const T* beta = static_cast<const T*>(bt.raw_data());
  const T* rm = static_cast<const T*>(rmt.raw_data());
  const T* rv = static_cast<const T*>(rvt.raw_data());
  T* y = static_cast<T*>(yt.raw_data());
#pragma omp parallel for schedule(static) if (xt.numel() > cpu::kParallelGrain)
  for (long j = 0; j < static_cast<long>(L.c); ++j) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(rv[j]) + eps);
    normalise_channel(x, y, L, j, rm[j], static_cast<T>(gamma[j] * invstd), beta[j]);
  }
}

// Backward through the batch statistics (mean and var depend on every x of the channel):
//   dβ = Σ dy      dγ = Σ dy · x̂      dx = γ · invstd · (dy − dβ/m − x̂ · dγ/m)
template <typename T>
void backward_typed(const Tensor& xt, const Tensor& dyt, const Tensor& gt, const Tensor& smt, const Tensor& sit,
                    const Tensor& dxt, const Tensor& dgt, const Tensor& dbt) {
  const ChannelLayout L = layout_of(xt);
  const T* x = static_cast<const T*>(xt.raw_data());
  const T* dy = static_cast<const T*>(dyt.raw_data());
  const T* gamma = static_cast<const T*>(gt.raw_data());
  const T* save_mean = static_cast<const T*>(smt.raw_data());
  const T* save_invstd = static_cast<const T*>(sit.raw_data());
  T* dx = static_cast<T*>(dxt.raw_data());
  T* dgamma = static_cast<T*>(dgt.raw_data());
  T* dbeta = static_cast<T*>(dbt.raw_data());
  const double m = static_cast<double>(L.count());
#pragma omp parallel for schedule(static) if (xt.numel() > cpu::kParallelGrain)
  for (long j = 0; j < static_cast<long>(L.c); ++j) {
    const double mean = save_mean[j], invstd = save_invstd[j];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t i = 0; i < L.n; ++i) {
      const int64_t row = (i * L.c + j) * L.inner;
      for (int64_t k = 0; k < L.inner; ++k) {
        sum_dy += dy[row + k];
        sum_dy_xhat += dy[row + k] * (x[row + k] - mean) * invstd;
      }
    }
    dbeta[j] = static_cast<T>(sum_dy);
    dgamma[j] = static_cast<T>(sum_dy_xhat);
    const T scale = static_cast<T>(gamma[j] * invstd), mean_dy = static_cast<T>(sum_dy / m);
    const T mean_dy_xhat = static_cast<T>(sum_dy_xhat / m), tmean = static_cast<T>(mean),
            tinvstd = static_cast<T>(invstd);
    for (int64_t i = 0; i < L.n; ++i) {
      const int64_t row = (i * L.c + j) * L.inner;
      for (int64_t k = 0; k < L.inner; ++k) {
        const T xhat = (x[row + k] - tmean) * tinvstd;
        dx[row + k] = scale * (dy[row + k] - mean_dy - xhat * mean_dy_xhat);
      }
    }
  }
}

}  // namespace

void CpuBackend::batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                                         Tensor& y, Tensor& save_mean, Tensor& save_invstd) {
  NNLAB_LOG_KERNEL("batchnorm_forward_train", x);  // nnlab explain: record the call
  const ChannelLayout L = layout_of(x);
  NNLAB_CHECK(L.count() > 1, "batchnorm: training needs more than one value per channel, got ", x.describe());
  cpu::dispatch_float("batchnorm_forward_train", x, [&](auto t) {
    forward_train_typed<decltype(t)>(x, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean,
                                     save_invstd);
  });
}

void CpuBackend::batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                        const Tensor& running_mean, const Tensor& running_var, double eps,
                                        Tensor& y) {
  NNLAB_LOG_KERNEL("batchnorm_forward_eval", x);  // nnlab explain: record the call
  cpu::dispatch_float("batchnorm_forward_eval", x, [&](auto t) {
    forward_eval_typed<decltype(t)>(x, gamma, beta, running_mean, running_var, eps, y);
  });
}

void CpuBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  NNLAB_LOG_KERNEL("batchnorm_backward", x);  // nnlab explain: record the call
  cpu::dispatch_float("batchnorm_backward", x, [&](auto t) {
    backward_typed<decltype(t)>(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
  });
}

}  // namespace nnlab
