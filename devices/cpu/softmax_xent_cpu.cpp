// Log-softmax and the fused softmax + cross-entropy on the CPU, one row per sample.
// Numerically stable: every exponent is taken after subtracting the row maximum.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "devices/bf16_widening.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/nonfinite_cpu.h"
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

}  // namespace

// x, y: (n, c)
void CpuBackend::log_softmax_forward(const Tensor& x, Tensor& y) {
  NNLAB_LOG_KERNEL("log_softmax_forward", x);  // nnlab explain: record the call
  cpu::dispatch_float("log_softmax_forward", x, [&](auto t) {
    using T = decltype(t);
    const long n = static_cast<long>(x.dim(0)), c = static_cast<long>(x.numel() / std::max<int64_t>(1, x.dim(0)));
    const T* x_data = static_cast<const T*>(x.raw_data());
    T* y_data = static_cast<T*>(y.raw_data());
#pragma omp parallel for schedule(static) if (n * c > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i) log_softmax_row(x_data + i * c, y_data + i * c, c);
  });
}

// dx = dy − exp(y) · Σ_j dy_j   (per row)
void CpuBackend::log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  NNLAB_LOG_KERNEL("log_softmax_backward", y);  // nnlab explain: record the call
  cpu::dispatch_float("log_softmax_backward", y, [&](auto t) {
    using T = decltype(t);
    const long n = static_cast<long>(y.dim(0)), c = static_cast<long>(y.numel() / std::max<int64_t>(1, y.dim(0)));
    const T* y_data = static_cast<const T*>(y.raw_data());
    const T* dy_data = static_cast<const T*>(dy.raw_data());
    T* dx_data = static_cast<T*>(dx.raw_data());
#pragma omp parallel for schedule(static) if (n * c > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i) {
      T s = 0;
      for (long j = 0; j < c; ++j) s += dy_data[i * c + j];
      for (long j = 0; j < c; ++j) dx_data[i * c + j] = dy_data[i * c + j] - std::exp(y_data[i * c + j]) * s;
    }
  });
}

// logits, probs: (n, c)  labels: (n)  loss: scalar
void CpuBackend::softmax_xent_forward(const Tensor& logits, const Tensor& labels, Tensor& probs, Tensor& loss,
                                      Tensor* nonfinite_flag, NonFiniteMark mark) {
  // bf16 logits (a bf16 model's): read as float32, probabilities and loss float32 as they are.
  if (bf16::widened(*this, &CpuBackend::softmax_xent_forward, logits, labels, probs, loss, nonfinite_flag, mark))
    return;
  NNLAB_LOG_KERNEL("softmax_xent_forward", logits);  // nnlab explain: record the call
  const long n = static_cast<long>(logits.dim(0)), c = static_cast<long>(logits.dim(1));
  const int32_t* labels_data = labels.data<int32_t>();
  check_labels(labels_data, n, c);
  cpu::dispatch_float("softmax_xent_forward", logits, [&](auto t) {
    using T = decltype(t);
    const T* logits_data = static_cast<const T*>(logits.raw_data());
    T* probs_data = static_cast<T*>(probs.raw_data());
    std::vector<T> row_loss(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n * c > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i) {
      // p_j = e_j / Σ e with e_j = exp(x_j − max); loss_i = −log p_label = log Σ e − (x_label − max).
      // One exponential per logit: exponentials are most of this loop's time (the mlp's step).
      const T* x = logits_data + i * c;
      T* pr = probs_data + i * c;
      T m = x[0];
      for (long j = 1; j < c; ++j) m = x[j] > m ? x[j] : m;
      T sum = 0;
      for (long j = 0; j < c; ++j) sum += pr[j] = std::exp(x[j] - m);
      const T inverse = T(1) / sum;
      for (long j = 0; j < c; ++j) pr[j] *= inverse;
      row_loss[i] = std::log(sum) - (x[labels_data[i]] - m);
    }
    double total = 0;  // summed in row order: independent of the thread count
    for (T v : row_loss) total += v;
    const T mean_loss = static_cast<T>(total / static_cast<double>(n));
    *static_cast<T*>(loss.raw_data()) = mean_loss;
    if (nonfinite_flag && nonfinite_flag->defined() && !std::isfinite(mean_loss))
      cpu::raise_nonfinite_flag(*nonfinite_flag, mark);
  });
}

// dlogits = dloss · (probs − onehot(labels)) / n
void CpuBackend::softmax_xent_backward(const Tensor& probs, const Tensor& labels, const Tensor& dloss,
                                       Tensor& dx) {
  if (bf16::widened(*this, &CpuBackend::softmax_xent_backward, probs, labels, dloss, dx)) return;  // bf16 dx
  NNLAB_LOG_KERNEL("softmax_xent_backward", probs);  // nnlab explain: record the call
  const long n = static_cast<long>(probs.dim(0)), c = static_cast<long>(probs.dim(1));
  const int32_t* labels_data = labels.data<int32_t>();
  cpu::dispatch_float("softmax_xent_backward", probs, [&](auto t) {
    using T = decltype(t);
    const T* probs_data = static_cast<const T*>(probs.raw_data());
    T* dx_data = static_cast<T*>(dx.raw_data());
    const T scale = *static_cast<const T*>(dloss.raw_data()) / static_cast<T>(n);
#pragma omp parallel for schedule(static) if (n * c > cpu::kParallelGrain)
    for (long i = 0; i < n; ++i)
      for (long j = 0; j < c; ++j)
        dx_data[i * c + j] = scale * (probs_data[i * c + j] - (j == labels_data[i] ? T(1) : T(0)));
  });
}

void CpuBackend::count_correct(const Tensor& logits, const Tensor& labels, Tensor& correct) {
  NNLAB_LOG_KERNEL("count_correct", logits);  // nnlab explain: record the call
  const long n = static_cast<long>(logits.dim(0)), c = static_cast<long>(logits.dim(1));
  const int32_t* labels_data = labels.data<int32_t>();
  cpu::dispatch_float("count_correct", logits, [&](auto t) {
    using T = decltype(t);
    const T* logits_data = static_cast<const T*>(logits.raw_data());
    int32_t hits = 0;
    for (long i = 0; i < n; ++i) {
      long best = 0;  // first maximum wins, as torch.argmax
      for (long j = 1; j < c; ++j)
        if (logits_data[i * c + j] > logits_data[i * c + best]) best = j;
      hits += best == labels_data[i];
    }
    *correct.data<int32_t>() += hits;
  });
}

void CpuBackend::check_finite(const Tensor& x, Tensor& flag, NonFiniteMark mark) {
  if (bf16::widened(*this, &CpuBackend::check_finite, x, flag, mark)) return;
  check_finite_all({x}, flag, {mark}, nullptr);
}

// All tensors in one parallel region (a step's gradients: one region each had cost a fork and a
// join apiece). Each thread scans its share of every tensor; the flag takes the mark of the
// first tensor, in list order, that holds a non-finite value, as checking one after another would.
void CpuBackend::check_finite_all(const std::vector<Tensor>& xs, Tensor& flag, const std::vector<NonFiniteMark>& marks,
                                  const Tensor* step_number) {
  NNLAB_CHECK(xs.size() == marks.size(), "check_finite_all: ", xs.size(), " tensors but ", marks.size(), " marks");
  if (step_number) check_device_counter("check_finite_all", "step number", *step_number, device());
  if (xs.empty()) return;
  KernelTiming timing;  // nnlab explain: one record for the whole list
  if (kernel_log_enabled())
    timing.attach(record_kernel("check_finite", xs.size() == 1 ? tensor_dims(xs[0]) : std::to_string(xs.size()) + " tensors"));
  long total = 0;
  for (const Tensor& x : xs) {
    NNLAB_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64,
                "check_finite: the CPU kernel takes float32 or float64, got ", x.describe());
    total += static_cast<long>(x.numel());
  }
  const long none = static_cast<long>(xs.size());
  long first_bad = none;
#pragma omp parallel if (total > cpu::kParallelGrain) reduction(min : first_bad)
  {
    long mine = none;  // the first tensor in which this thread's share has a non-finite value
    for (long i = 0; i < none && mine == none; ++i) {
      const long n = static_cast<long>(xs[i].numel());
      long begin = 0, end = n;
      if (omp_in_parallel()) {  // this thread's contiguous share, as a static schedule
        const long threads = omp_get_num_threads(), t = omp_get_thread_num();
        begin = n * t / threads;
        end = n * (t + 1) / threads;
      }
      cpu::dispatch_float("check_finite", xs[i], [&](auto tag) {
        using T = decltype(tag);
        if (cpu::any_not_finite(static_cast<const T*>(xs[i].raw_data()), begin, end)) mine = i;
      });
    }
    first_bad = std::min(first_bad, mine);
  }
  if (first_bad == none) return;
  NonFiniteMark mark = marks[static_cast<size_t>(first_bad)];
  if (step_number) mark.step = *step_number->data<int32_t>();
  cpu::raise_nonfinite_flag(flag, mark);
}

}  // namespace nnlab
