// Batch normalisation on the CPU (Ioffe & Szegedy, 2015), one channel at a time: the
// statistics of channel j run over the m = n·h·w values x[·, j, ·, ·]. Channels are
// independent, so the loops run in parallel over channels; each channel's sums run in one
// fixed order (accumulated in double, in kLanes lanes: LaneSums), so results repeat bit for
// bit whatever the thread count.
//
//   mean = Σ x / m      var = Σ (x − mean)² / m      (biased: what normalises)
//   x̂ = (x − mean) / √(var + eps)       y = γ · x̂ + β
#include <cmath>

#include "devices/bf16_widening.h"
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

// A sum over a channel's values in kLanes double accumulators: value k of each row goes to
// lane k mod kLanes, and the lanes are added in order at the end. The order is fixed, so the
// sums repeat bit for bit; and the lanes are kLanes independent chains of additions, which
// the compiler turns into vector adds. One running double made every value wait for the
// previous add (about 4 cycles): resnet8's BatchNorm forward took 0.65-0.76 ms for 1 M values
// on 2 Zen 5 threads, a fifth of the memory's pace.
constexpr int64_t kLanes = 8;

struct LaneSums {
  double lane[kLanes] = {};
  // Adds term(k) for k in [0, count): lane k mod kLanes.
  template <typename Term>
  void add_row(int64_t count, Term&& term) {
    int64_t k = 0;
    for (; k + kLanes <= count; k += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lane[l] += term(k + l);
    for (int64_t l = 0; k < count; ++k, ++l) lane[l] += term(k);
  }
  // Two sums over one pass of a row: this takes term_a(k), `other` takes term_b(k).
  template <typename TermA, typename TermB>
  void add_row_with(LaneSums& other, int64_t count, TermA&& term_a, TermB&& term_b) {
    int64_t k = 0;
    for (; k + kLanes <= count; k += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) {
        lane[l] += term_a(k + l);
        other.lane[l] += term_b(k + l);
      }
    for (int64_t l = 0; k < count; ++k, ++l) {
      lane[l] += term_a(k);
      other.lane[l] += term_b(k);
    }
  }
  double total() const {
    double t = 0;
    for (double v : lane) t += v;
    return t;
  }
};

// Two passes (mean, then squared deviations) rather than Σx² − m·mean², which cancels
// catastrophically when |mean| ≫ std.
template <typename T>
void channel_moments(const T* x, const ChannelLayout& L, int64_t j, double& mean, double& var) {
  LaneSums sum;
  for (int64_t i = 0; i < L.n; ++i) {
    const T* row = x + (i * L.c + j) * L.inner;
    sum.add_row(L.inner, [row](int64_t k) { return static_cast<double>(row[k]); });
  }
  mean = sum.total() / static_cast<double>(L.count());
  LaneSums sq;
  for (int64_t i = 0; i < L.n; ++i) {
    const T* row = x + (i * L.c + j) * L.inner;
    sq.add_row(L.inner, [row, mean](int64_t k) { return (row[k] - mean) * (row[k] - mean); });
  }
  var = sq.total() / static_cast<double>(L.count());
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
void forward_train_typed(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                         const Tensor& running_var, double momentum, double eps, const Tensor& y,
                         const Tensor& save_mean, const Tensor& save_invstd) {
  const ChannelLayout L = layout_of(x);
  const T* x_data = static_cast<const T*>(x.raw_data());
  const T* gamma_data = static_cast<const T*>(gamma.raw_data());
  const T* beta_data = static_cast<const T*>(beta.raw_data());
  T* running_mean_data = static_cast<T*>(running_mean.raw_data());
  T* running_var_data = static_cast<T*>(running_var.raw_data());
  T* y_data = static_cast<T*>(y.raw_data());
  T* save_mean_data = static_cast<T*>(save_mean.raw_data());
  T* save_invstd_data = static_cast<T*>(save_invstd.raw_data());
  const double m = static_cast<double>(L.count());
#pragma omp parallel for schedule(static) if (x.numel() > cpu::kParallelGrain)
  for (long j = 0; j < static_cast<long>(L.c); ++j) {
    double mean, var;
    channel_moments(x_data, L, j, mean, var);
    const double invstd = 1.0 / std::sqrt(var + eps);
    save_mean_data[j] = static_cast<T>(mean);
    save_invstd_data[j] = static_cast<T>(invstd);
    running_mean_data[j] = static_cast<T>((1 - momentum) * running_mean_data[j] + momentum * mean);
    running_var_data[j] = static_cast<T>((1 - momentum) * running_var_data[j] + momentum * var * m / (m - 1));
    normalise_channel(x_data, y_data, L, j, static_cast<T>(mean), static_cast<T>(gamma_data[j] * invstd), beta_data[j]);
  }
}

// Same shapes; the running statistics stand in for the batch's.
template <typename T>
void forward_eval_typed(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                        const Tensor& running_var, double eps, const Tensor& y) {
  const ChannelLayout L = layout_of(x);
  const T* x_data = static_cast<const T*>(x.raw_data());
  const T* gamma_data = static_cast<const T*>(gamma.raw_data());
  const T* beta_data = static_cast<const T*>(beta.raw_data());
  const T* running_mean_data = static_cast<const T*>(running_mean.raw_data());
  const T* running_var_data = static_cast<const T*>(running_var.raw_data());
  T* y_data = static_cast<T*>(y.raw_data());
#pragma omp parallel for schedule(static) if (x.numel() > cpu::kParallelGrain)
  for (long j = 0; j < static_cast<long>(L.c); ++j) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var_data[j]) + eps);
    normalise_channel(x_data, y_data, L, j, running_mean_data[j], static_cast<T>(gamma_data[j] * invstd), beta_data[j]);
  }
}

// Backward through the batch statistics (mean and var depend on every x of the channel):
//   dβ = Σ dy      dγ = Σ dy · x̂      dx = γ · invstd · (dy − dβ/m − x̂ · dγ/m)
template <typename T>
void backward_typed(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                    const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  const ChannelLayout L = layout_of(x);
  const T* x_data = static_cast<const T*>(x.raw_data());
  const T* dy_data = static_cast<const T*>(dy.raw_data());
  const T* gamma_data = static_cast<const T*>(gamma.raw_data());
  const T* save_mean_data = static_cast<const T*>(save_mean.raw_data());
  const T* save_invstd_data = static_cast<const T*>(save_invstd.raw_data());
  T* dx_data = static_cast<T*>(dx.raw_data());
  T* dgamma_data = static_cast<T*>(dgamma.raw_data());
  T* dbeta_data = static_cast<T*>(dbeta.raw_data());
  const double m = static_cast<double>(L.count());
#pragma omp parallel for schedule(static) if (x.numel() > cpu::kParallelGrain)
  for (long j = 0; j < static_cast<long>(L.c); ++j) {
    const double mean = save_mean_data[j], invstd = save_invstd_data[j];
    LaneSums dy_sums, dy_xhat_sums;
    for (int64_t i = 0; i < L.n; ++i) {
      const T* dy_row = dy_data + (i * L.c + j) * L.inner;
      const T* x_row = x_data + (i * L.c + j) * L.inner;
      dy_sums.add_row_with(
          dy_xhat_sums, L.inner, [dy_row](int64_t k) { return static_cast<double>(dy_row[k]); },
          [=](int64_t k) { return dy_row[k] * (x_row[k] - mean); });
    }
    // Σ dy · x̂ = invstd · Σ dy · (x − mean): the constant factor leaves the loop.
    const double sum_dy = dy_sums.total(), sum_dy_xhat = dy_xhat_sums.total() * invstd;
    dbeta_data[j] = static_cast<T>(sum_dy);
    dgamma_data[j] = static_cast<T>(sum_dy_xhat);
    const T scale = static_cast<T>(gamma_data[j] * invstd), mean_dy = static_cast<T>(sum_dy / m);
    const T mean_dy_xhat = static_cast<T>(sum_dy_xhat / m), tmean = static_cast<T>(mean),
            tinvstd = static_cast<T>(invstd);
    for (int64_t i = 0; i < L.n; ++i) {
      const int64_t row = (i * L.c + j) * L.inner;
      for (int64_t k = 0; k < L.inner; ++k) {
        const T xhat = (x_data[row + k] - tmean) * tinvstd;
        dx_data[row + k] = scale * (dy_data[row + k] - mean_dy - xhat * mean_dy_xhat);
      }
    }
  }
}

}  // namespace

void CpuBackend::batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                                         Tensor& y, Tensor& save_mean, Tensor& save_invstd) {
  // bf16 activations (float32 parameters and statistics): on float32 copies, y rounded once
  if (bf16::widened(*this, &CpuBackend::batchnorm_forward_train, x, gamma, beta, running_mean, running_var, momentum,
                    eps, y, save_mean, save_invstd))
    return;
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
  if (bf16::widened(*this, &CpuBackend::batchnorm_forward_eval, x, gamma, beta, running_mean, running_var, eps, y))
    return;
  NNLAB_LOG_KERNEL("batchnorm_forward_eval", x);  // nnlab explain: record the call
  cpu::dispatch_float("batchnorm_forward_eval", x, [&](auto t) {
    forward_eval_typed<decltype(t)>(x, gamma, beta, running_mean, running_var, eps, y);
  });
}

void CpuBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  if (bf16::widened(*this, &CpuBackend::batchnorm_backward, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta))
    return;
  NNLAB_LOG_KERNEL("batchnorm_backward", x);  // nnlab explain: record the call
  cpu::dispatch_float("batchnorm_backward", x, [&](auto t) {
    backward_typed<decltype(t)>(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
  });
}

}  // namespace nnlab
