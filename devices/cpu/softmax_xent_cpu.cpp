// Log-softmax and the fused softmax + cross-entropy on the CPU, one row per sample.
// Numerically stable: every exponent is taken after subtracting the row maximum.
#include <cmath>
#include <vector>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// Writes y = x − max − log Σ exp(x − max) for one row of c values; returns log Σ exp(x − max).
template <typename T>
T log_softmax_row(const T* x, T* y, long c) {
  T m = x[0];
  for (long j = 1; j < c; ++j) m = x[j] > m ? x[j] : m;
  T s = 0;
  for (long j = 0; j < c; ++j) s += std::exp(x[j] - m);
  const T log_s = std::log(s);
  for (long j = 0; j < c; ++j) y[j] = x[j] - m - log_s;
  return log_s;
}

void check_labels(const int32_t* labels, long n, long c) {
  for (long i = 0; i < n; ++i)
    NNLAB_CHECK(labels[i] >= 0 && labels[i] < c, "cross_entropy: label ", labels[i], " of sample ", i,
                " is outside the model's ", c, " classes [0, ", c, "); check the data set and the model");
}

// The non-finite flag (core/nonfinite.h): the first fault's mark stays, later ones are dropped.
void raise_nonfinite_flag(Tensor& flag, NonFiniteMark mark) {
  int32_t* f = flag.data<int32_t>();
  if (f[0] != 0) return;
  f[0] = mark.step;
  f[1] = mark.source;
}

}  // namespace

// x, y: (n, c)
void CpuBackend::log_softmax_forward(const Tensor& xt, Tensor& yt) {
  NNLAB_LOG_KERNEL("log_softmax_forward", xt);  // nnlab explain: record the call
  cpu::dispatch_float("log_softmax_forward", xt, [&](auto t) {
    using T = decltype(t);
    const long n = static_cast<long>(xt.dim(0)), c = static_cast<long>(xt.numel() / std::max<int64_t>(1, xt.dim(0)));
    const T* x = static_cast<const T*>(xt.raw_data());
    T* y = static_cast<T*>(yt.raw_data());
#pragma omp parallel for schedule(static) if (n * c > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i) log_softmax_row(x + i * c, y + i * c, c);
  });
}

// dx = dy − exp(y) · Σ_j dy_j   (per row)
void CpuBackend::log_softmax_backward(const Tensor& yt, const Tensor& dyt, Tensor& dxt) {
  NNLAB_LOG_KERNEL("log_softmax_backward", yt);  // nnlab explain: record the call
  cpu::dispatch_float("log_softmax_backward", yt, [&](auto t) {
    using T = decltype(t);
    const long n = static_cast<long>(yt.dim(0)), c = static_cast<long>(yt.numel() / std::max<int64_t>(1, yt.dim(0)));
    const T* y = static_cast<const T*>(yt.raw_data());
    const T* dy = static_cast<const T*>(dyt.raw_data());
    T* dx = static_cast<T*>(dxt.raw_data());
#pragma omp parallel for schedule(static) if (n * c > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i) {
      T s = 0;
      for (long j = 0; j < c; ++j) s += dy[i * c + j];
      for (long j = 0; j < c; ++j) dx[i * c + j] = dy[i * c + j] - std::exp(y[i * c + j]) * s;
    }
  });
}

// logits, probs: (n, c)  labels: (n)  loss: scalar
void CpuBackend::softmax_xent_forward(const Tensor& lt, const Tensor& labels_t, Tensor& pt, Tensor& loss_t,
                                      Tensor* nonfinite_flag, NonFiniteMark mark) {
  NNLAB_LOG_KERNEL("softmax_xent_forward", lt);  // nnlab explain: record the call
  const long n = static_cast<long>(lt.dim(0)), c = static_cast<long>(lt.dim(1));
  const int32_t* labels = labels_t.data<int32_t>();
  check_labels(labels, n, c);
  cpu::dispatch_float("softmax_xent_forward", lt, [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(lt.raw_data());
    T* p = static_cast<T*>(pt.raw_data());
    std::vector<T> row_loss(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n * c > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i) {
      T* pr = p + i * c;
      log_softmax_row(x + i * c, pr, c);  // log-probabilities first ...
      row_loss[i] = -pr[labels[i]];
      for (long j = 0; j < c; ++j) pr[j] = std::exp(pr[j]);  // ... then probabilities
    }
    double total = 0;  // summed in row order: independent of the thread count
    for (T v : row_loss) total += v;
    const T loss = static_cast<T>(total / static_cast<double>(n));
    *static_cast<T*>(loss_t.raw_data()) = loss;
    if (nonfinite_flag && nonfinite_flag->defined() && !std::isfinite(loss))
      raise_nonfinite_flag(*nonfinite_flag, mark);
  });
}

// dlogits = dloss · (probs − onehot(labels)) / n
void CpuBackend::softmax_xent_backward(const Tensor& pt, const Tensor& labels_t, const Tensor& dloss_t,
                                       Tensor& dxt) {
  NNLAB_LOG_KERNEL("softmax_xent_backward", pt);  // nnlab explain: record the call
  const long n = static_cast<long>(pt.dim(0)), c = static_cast<long>(pt.dim(1));
  const int32_t* labels = labels_t.data<int32_t>();
  cpu::dispatch_float("softmax_xent_backward", pt, [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(pt.raw_data());
    T* dx = static_cast<T*>(dxt.raw_data());
    const T scale = *static_cast<const T*>(dloss_t.raw_data()) / static_cast<T>(n);
#pragma omp parallel for schedule(static) if (n * c > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i)
      for (long j = 0; j < c; ++j) dx[i * c + j] = scale * (p[i * c + j] - (j == labels[i] ? T(1) : T(0)));
  });
}

void CpuBackend::count_correct(const Tensor& lt, const Tensor& labels_t, Tensor& correct) {
  NNLAB_LOG_KERNEL("count_correct", lt);  // nnlab explain: record the call
  const long n = static_cast<long>(lt.dim(0)), c = static_cast<long>(lt.dim(1));
  const int32_t* labels = labels_t.data<int32_t>();
  cpu::dispatch_float("count_correct", lt, [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(lt.raw_data());
    int32_t hits = 0;
    for (long i = 0; i < n; ++i) {
      long best = 0;  // first maximum wins, as torch.argmax
      for (long j = 1; j < c; ++j)
        if (x[i * c + j] > x[i * c + best]) best = j;
      hits += best == labels[i];
    }
    *correct.data<int32_t>() += hits;
  });
}

void CpuBackend::check_finite(const Tensor& xt, Tensor& flag, NonFiniteMark mark) {
  NNLAB_LOG_KERNEL("check_finite", xt);  // nnlab explain: record the call
  cpu::dispatch_float("check_finite", xt, [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(xt.raw_data());
    const long n = static_cast<long>(xt.numel());
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i) bad |= !std::isfinite(x[i]);
    if (bad) raise_nonfinite_flag(flag, mark);
  });
}

}  // namespace nnlab
