// Elementwise kernels on the CPU: binary ops with suffix broadcasting, activations, axpby.
#include <cmath>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

template <typename T>
T apply_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
  }
  return T(0);
}

// ∂(a op b)/∂a and ∂(a op b)/∂b at one element.
template <typename T>
void binary_partials(BinaryOp op, T a, T b, T& da, T& db) {
  switch (op) {
    case BinaryOp::Add: da = 1; db = 1; return;
    case BinaryOp::Sub: da = 1; db = -1; return;
    case BinaryOp::Mul: da = b; db = a; return;
    case BinaryOp::Div: da = T(1) / b; db = -a / (b * b); return;
  }
}

// y has n = outer × inner elements; an operand is either full (n) or small (inner).
struct BroadcastLayout {
  long outer, inner;
  bool a_full, b_full;
};

BroadcastLayout layout_of(const Tensor& a, const Tensor& b, const Tensor& y) {
  const long n = static_cast<long>(y.numel()), na = static_cast<long>(a.numel()), nb = static_cast<long>(b.numel());
  const long inner = std::min(na, nb);
  NNLAB_CHECK((na == n || nb == n) && inner > 0 && n % inner == 0, "binary kernel: operands of ", na, " and ", nb,
              " elements do not broadcast to ", n);
  return {n / inner, inner, na == n, nb == n};
}

template <typename T>
void binary_forward_typed(BinaryOp op, const Tensor& at, const Tensor& bt, const Tensor& yt) {
  const BroadcastLayout L = layout_of(at, bt, yt);
  const T* a = static_cast<const T*>(at.raw_data());
  const T* b = static_cast<const T*>(bt.raw_data());
  T* y = static_cast<T*>(yt.raw_data());
#pragma omp parallel for schedule(static) if (L.outer * L.inner > cpu::kParallelGrain)
  for (long o = 0; o < L.outer; ++o) {
    const T* ar = L.a_full ? a + o * L.inner : a;
    const T* br = L.b_full ? b + o * L.inner : b;
    T* yr = y + o * L.inner;
    for (long i = 0; i < L.inner; ++i) yr[i] = apply_binary(op, ar[i], br[i]);
  }
}

// A full operand's gradient is written elementwise; a broadcast operand's gradient sums the
// contributions of every row it was broadcast over (parallel over its own elements, so each
// sum runs in a fixed order).
template <typename T>
void binary_backward_typed(BinaryOp op, const Tensor& at, const Tensor& bt, const Tensor& dyt, Tensor* dat,
                           Tensor* dbt) {
  const BroadcastLayout L = layout_of(at, bt, dyt);
  const T* a = static_cast<const T*>(at.raw_data());
  const T* b = static_cast<const T*>(bt.raw_data());
  const T* dy = static_cast<const T*>(dyt.raw_data());
  T* da = dat ? static_cast<T*>(dat->raw_data()) : nullptr;
  T* db = dbt ? static_cast<T*>(dbt->raw_data()) : nullptr;
  const long n = L.outer * L.inner;
  auto partials = [&](long idx, T& pa, T& pb) {
    binary_partials(op, L.a_full ? a[idx] : a[idx % L.inner], L.b_full ? b[idx] : b[idx % L.inner], pa, pb);
  };
  const bool full_a = da && L.a_full, full_b = db && L.b_full;
  if (full_a || full_b) {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
    for (long idx = 0; idx < n; ++idx) {
      T pa = 0, pb = 0;
      partials(idx, pa, pb);
      if (full_a) da[idx] = dy[idx] * pa;
      if (full_b) db[idx] = dy[idx] * pb;
    }
  }
  const bool small_a = da && !L.a_full, small_b = db && !L.b_full;
  if (small_a || small_b) {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
    for (long i = 0; i < L.inner; ++i) {
      T sa = 0, sb = 0;
      for (long o = 0; o < L.outer; ++o) {
        T pa = 0, pb = 0;
        partials(o * L.inner + i, pa, pb);
        sa += dy[o * L.inner + i] * pa;
        sb += dy[o * L.inner + i] * pb;
      }
      if (small_a) da[i] = sa;
      if (small_b) db[i] = sb;
    }
  }
}

template <typename T>
void unary_forward_typed(UnaryOp op, const Tensor& xt, const Tensor& yt) {
  const T* x = static_cast<const T*>(xt.raw_data());
  T* y = static_cast<T*>(yt.raw_data());
  const long n = static_cast<long>(xt.numel());
  switch (op) {
    case UnaryOp::Relu:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
      return;
    case UnaryOp::Sigmoid:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain / 8)
      for (long i = 0; i < n; ++i) y[i] = T(1) / (T(1) + std::exp(-x[i]));
      return;
    case UnaryOp::Tanh:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain / 8)
      for (long i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      return;
  }
}

// relu: dx = dy·[x > 0];  sigmoid: dx = dy·y·(1 − y);  tanh: dx = dy·(1 − y²)
template <typename T>
void unary_backward_typed(UnaryOp op, const Tensor& xt, const Tensor& yt, const Tensor& dyt, const Tensor& dxt) {
  const T* x = static_cast<const T*>(xt.raw_data());
  const T* y = static_cast<const T*>(yt.raw_data());
  const T* dy = static_cast<const T*>(dyt.raw_data());
  T* dx = static_cast<T*>(dxt.raw_data());
  const long n = static_cast<long>(xt.numel());
  // One loop per op (no switch inside), so each vectorises.
  switch (op) {
    case UnaryOp::Relu:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) dx[i] = x[i] > T(0) ? dy[i] : T(0);
      return;
    case UnaryOp::Sigmoid:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
      return;
    case UnaryOp::Tanh:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
      return;
  }
}

}  // namespace

void CpuBackend::binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  NNLAB_LOG_KERNEL(std::string("binary_forward ") + binary_op_name(op), a);  // nnlab explain: record the call
  cpu::dispatch_float("binary_forward", y, [&](auto t) { binary_forward_typed<decltype(t)>(op, a, b, y); });
}

void CpuBackend::binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                                 Tensor* db) {
  NNLAB_LOG_KERNEL(std::string("binary_backward ") + binary_op_name(op), a);  // nnlab explain: record the call
  cpu::dispatch_float("binary_backward", dy, [&](auto t) { binary_backward_typed<decltype(t)>(op, a, b, dy, da, db); });
}

void CpuBackend::unary_forward(UnaryOp op, const Tensor& x, Tensor& y) {
  NNLAB_LOG_KERNEL(std::string("unary_forward ") + unary_op_name(op), x);  // nnlab explain: record the call
  cpu::dispatch_float("unary_forward", x, [&](auto t) { unary_forward_typed<decltype(t)>(op, x, y); });
}

void CpuBackend::unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  NNLAB_LOG_KERNEL(std::string("unary_backward ") + unary_op_name(op), x);  // nnlab explain: record the call
  cpu::dispatch_float("unary_backward", dy, [&](auto t) { unary_backward_typed<decltype(t)>(op, x, y, dy, dx); });
}

void CpuBackend::axpby(double alpha, const Tensor& xt, double beta, Tensor& yt) {
  NNLAB_LOG_KERNEL("axpby", xt);  // nnlab explain: record the call
  NNLAB_CHECK(xt.numel() == yt.numel(), "axpby: ", xt.describe(), " and ", yt.describe());
  cpu::dispatch_float("axpby", yt, [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(xt.raw_data());
    T* y = static_cast<T*>(yt.raw_data());
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
    const long n = static_cast<long>(yt.numel());
    if (beta == 0.0) {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) y[i] = a * x[i];
    } else {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) y[i] = a * x[i] + b * y[i];
    }
  });
}

}  // namespace nnlab
