// Elementwise kernels on the CPU: binary ops with suffix broadcasting, activations, axpby.
#include <cmath>

#include "devices/bf16_widening.h"
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
void binary_forward_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& y) {
  const BroadcastLayout L = layout_of(a, b, y);
  const T* a_data = static_cast<const T*>(a.raw_data());
  const T* b_data = static_cast<const T*>(b.raw_data());
  T* y_data = static_cast<T*>(y.raw_data());
  if (L.a_full && L.b_full) {
    // Same shapes: one flat loop over the elements, split over the threads. (The loop over
    // rows below has a single row here, and ran on one thread: resnet8's residual sum of
    // 64×16×32×32 took 0.41 ms on 2 cores.) One loop per op, so each vectorises.
    const long n = L.outer * L.inner;
    switch (op) {
      case BinaryOp::Add:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
        for (long i = 0; i < n; ++i) y_data[i] = a_data[i] + b_data[i];
        return;
      case BinaryOp::Sub:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
        for (long i = 0; i < n; ++i) y_data[i] = a_data[i] - b_data[i];
        return;
      case BinaryOp::Mul:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
        for (long i = 0; i < n; ++i) y_data[i] = a_data[i] * b_data[i];
        return;
      case BinaryOp::Div:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
        for (long i = 0; i < n; ++i) y_data[i] = a_data[i] / b_data[i];
        return;
    }
  }
#pragma omp parallel for schedule(static) if (L.outer * L.inner > cpu::kParallelGrain)
  for (long o = 0; o < L.outer; ++o) {
    const T* ar = L.a_full ? a_data + o * L.inner : a_data;
    const T* br = L.b_full ? b_data + o * L.inner : b_data;
    T* yr = y_data + o * L.inner;
    for (long i = 0; i < L.inner; ++i) yr[i] = apply_binary(op, ar[i], br[i]);
  }
}

// A full operand's gradient is written elementwise; a broadcast operand's gradient sums the
// contributions of every row it was broadcast over (parallel over its own elements, so each
// sum runs in a fixed order).
template <typename T>
void binary_backward_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                           Tensor* db) {
  const BroadcastLayout L = layout_of(a, b, dy);
  const T* a_data = static_cast<const T*>(a.raw_data());
  const T* b_data = static_cast<const T*>(b.raw_data());
  const T* dy_data = static_cast<const T*>(dy.raw_data());
  T* da_data = da ? static_cast<T*>(da->raw_data()) : nullptr;
  T* db_data = db ? static_cast<T*>(db->raw_data()) : nullptr;
  const long n = L.outer * L.inner;
  auto partials = [&](long idx, T& pa, T& pb) {
    binary_partials(op, L.a_full ? a_data[idx] : a_data[idx % L.inner], L.b_full ? b_data[idx] : b_data[idx % L.inner],
                    pa, pb);
  };
  const bool full_a = da && L.a_full, full_b = db && L.b_full;
  if (full_a || full_b) {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
    for (long idx = 0; idx < n; ++idx) {
      T pa = 0, pb = 0;
      partials(idx, pa, pb);
      if (full_a) da_data[idx] = dy_data[idx] * pa;
      if (full_b) db_data[idx] = dy_data[idx] * pb;
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
        sa += dy_data[o * L.inner + i] * pa;
        sb += dy_data[o * L.inner + i] * pb;
      }
      if (small_a) da_data[i] = sa;
      if (small_b) db_data[i] = sb;
    }
  }
}

template <typename T>
void unary_forward_typed(UnaryOp op, const Tensor& x, const Tensor& y) {
  const T* x_data = static_cast<const T*>(x.raw_data());
  T* y_data = static_cast<T*>(y.raw_data());
  const long n = static_cast<long>(x.numel());
  switch (op) {
    case UnaryOp::Relu:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) y_data[i] = x_data[i] > T(0) ? x_data[i] : T(0);
      return;
    case UnaryOp::Sigmoid:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain / 8)
      for (long i = 0; i < n; ++i) y_data[i] = T(1) / (T(1) + std::exp(-x_data[i]));
      return;
    case UnaryOp::Tanh:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain / 8)
      for (long i = 0; i < n; ++i) y_data[i] = std::tanh(x_data[i]);
      return;
  }
}

// relu: dx = dy·[x > 0];  sigmoid: dx = dy·y·(1 − y);  tanh: dx = dy·(1 − y²)
template <typename T>
void unary_backward_typed(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) {
  const T* x_data = static_cast<const T*>(x.raw_data());
  const T* y_data = static_cast<const T*>(y.raw_data());
  const T* dy_data = static_cast<const T*>(dy.raw_data());
  T* dx_data = static_cast<T*>(dx.raw_data());
  const long n = static_cast<long>(x.numel());
  // One loop per op (no switch inside), so each vectorises.
  switch (op) {
    case UnaryOp::Relu:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) dx_data[i] = x_data[i] > T(0) ? dy_data[i] : T(0);
      return;
    case UnaryOp::Sigmoid:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) dx_data[i] = dy_data[i] * y_data[i] * (T(1) - y_data[i]);
      return;
    case UnaryOp::Tanh:
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) dx_data[i] = dy_data[i] * (T(1) - y_data[i] * y_data[i]);
      return;
  }
}

}  // namespace

void CpuBackend::binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  if (bf16::widened(*this, &CpuBackend::binary_forward, op, a, b, y)) return;
  NNLAB_LOG_KERNEL(std::string("binary_forward ") + binary_op_name(op), a);  // nnlab explain: record the call
  cpu::dispatch_float("binary_forward", y, [&](auto t) { binary_forward_typed<decltype(t)>(op, a, b, y); });
}

void CpuBackend::binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                                 Tensor* db) {
  if (bf16::widened(*this, &CpuBackend::binary_backward, op, a, b, dy, da, db)) return;
  NNLAB_LOG_KERNEL(std::string("binary_backward ") + binary_op_name(op), a);  // nnlab explain: record the call
  cpu::dispatch_float("binary_backward", dy, [&](auto t) { binary_backward_typed<decltype(t)>(op, a, b, dy, da, db); });
}

void CpuBackend::unary_forward(UnaryOp op, const Tensor& x, Tensor& y) {
  if (bf16::widened(*this, &CpuBackend::unary_forward, op, x, y)) return;
  NNLAB_LOG_KERNEL(std::string("unary_forward ") + unary_op_name(op), x);  // nnlab explain: record the call
  cpu::dispatch_float("unary_forward", x, [&](auto t) { unary_forward_typed<decltype(t)>(op, x, y); });
}

void CpuBackend::unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  if (bf16::widened(*this, &CpuBackend::unary_backward, op, x, y, dy, dx)) return;
  NNLAB_LOG_KERNEL(std::string("unary_backward ") + unary_op_name(op), x);  // nnlab explain: record the call
  cpu::dispatch_float("unary_backward", dy, [&](auto t) { unary_backward_typed<decltype(t)>(op, x, y, dy, dx); });
}

void CpuBackend::axpby(double alpha, const Tensor& x, double beta, Tensor& y) {
  if (bf16::widened(*this, &CpuBackend::axpby, alpha, x, beta, y)) return;
  NNLAB_LOG_KERNEL("axpby", x);  // nnlab explain: record the call
  NNLAB_CHECK(x.numel() == y.numel(), "axpby: ", x.describe(), " and ", y.describe());
  cpu::dispatch_float("axpby", y, [&](auto t) {
    using T = decltype(t);
    const T* x_data = static_cast<const T*>(x.raw_data());
    T* y_data = static_cast<T*>(y.raw_data());
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
    const long n = static_cast<long>(y.numel());
    if (beta == 0.0) {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) y_data[i] = a * x_data[i];
    } else {
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
      for (long i = 0; i < n; ++i) y_data[i] = a * x_data[i] + b * y_data[i];
    }
  });
}

}  // namespace nnlab
