// Pooling on CUDA, the twin of devices/cpu/pool2d_cpu.cpp with the same window rules:
// window of output (i, j) = rows i·stride_h − pad_h … + kernel_h − 1 clipped to [0, h)
// (columns likewise); max ignores padding, average counts it as zeros with PyTorch's divisor
// (count_include_pad=True). argmax is the flat index r·w + s into the h×w plane.
//
// Backward kernels gather instead of scatter: one thread per input cell sums the outputs
// whose windows hold it, in increasing (i, j) order — the order in which the CPU adds them —
// so there are no atomics and dx repeats bit for bit.
//
// T is the element type, float32 or bf16: a bf16 kernel loads bf16, computes in float32 and
// rounds once as it stores, as the CPU's widened pools do (devices/bf16_widening.h). A max and
// its ReLU are exact in bf16; a gradient sum or an average is rounded once.
#include <algorithm>
#include <initializer_list>

#include "core/bfloat16.h"
#include "devices/bf16_widening.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// The geometry in the kernel's index type I: int32_t where every index of the call fits, else
// int64_t. The window arithmetic divides about seven times per element (the element's plane,
// row and column; the first and last windows holding it), and a GPU has no 64-bit divider: a
// 64-bit division is a routine of dozens of instructions, a 32-bit one a handful.
template <typename I>
struct PoolDims {
  I c, h, w, p, q, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool relu;
  explicit PoolDims(const Pool2dGeometry& g)
      : c(I(g.c)), h(I(g.h)), w(I(g.w)), p(I(g.p)), q(I(g.q)), kernel_h(I(g.kernel_h)), kernel_w(I(g.kernel_w)),
        stride_h(I(g.stride_h)), stride_w(I(g.stride_w)), pad_h(I(g.pad_h)), pad_w(I(g.pad_w)), relu(g.relu) {}
};

template <typename I>
struct Window {
  I h0, h1, w0, w1;  // input rows [h0, h1), columns [w0, w1)
  I divisor;
};

template <typename I>
__device__ __forceinline__ Window<I> window_of(const PoolDims<I>& g, I i, I j) {
  I h0 = i * g.stride_h - g.pad_h, w0 = j * g.stride_w - g.pad_w;
  I h1 = min(h0 + g.kernel_h, g.h + g.pad_h), w1 = min(w0 + g.kernel_w, g.w + g.pad_w);
  const I divisor = (h1 - h0) * (w1 - w0);
  return {max(h0, I(0)), min(h1, g.h), max(w0, I(0)), min(w1, g.w), divisor};
}

// The outputs [lo, hi) along one axis whose windows hold input position r:
// i·stride − pad ≤ r < i·stride − pad + kernel.
template <typename I>
__device__ __forceinline__ void outputs_holding(I r, I stride, I pad, I kernel, I out, I& lo, I& hi) {
  const I first = r + pad - kernel + 1;  // need i·stride ≥ first
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = min((r + pad) / stride + 1, out);
}

// ---- kernels ----------------------------------------------------------------------------

// x: (n, c, h, w)  bias: (c) or null  y, argmax: (n, c, p, q); one thread per output. First
// maximum wins ties; a NaN wins over any number (as in PyTorch). With a bias (a convolution's,
// moved past the pool by conv2d_forward) y = max(x) + bias[channel]: the bias is the same for
// the whole window and rounding x + b is monotonic in x, so that is max(x + b), with one
// addition per output instead of one per input. With the fused ReLU (g.relu) a window whose
// max is not positive (or NaN) gives 0 and argmax −1: no cell of it receives a gradient.
template <typename T, typename I>
__global__ void maxpool2d_forward_kernel(PoolDims<I> g, const T* x, const T* bias, T* y, int32_t* argmax, I total) {
  NNLAB_GRID_STRIDE_AS(I, o, total) {
    const I plane = o / (g.p * g.q), i = (o / g.q) % g.p, j = o % g.q;
    const T* xp = x + int64_t(plane) * g.h * g.w;
    const Window<I> win = window_of(g, i, j);
    float best = -INFINITY;
    I best_at = win.h0 * g.w + win.w0;
    for (I r = win.h0; r < win.h1; ++r) {
      for (I s = win.w0; s < win.w1; ++s) {
        const float v = float(xp[r * g.w + s]);
        if (v > best || isnan(v)) {
          best = v;
          best_at = r * g.w + s;
        }
      }
    }
    if (bias) best += float(bias[plane % g.c]);
    if (g.relu && !(best > 0.0f)) {
      best = 0.0f;
      best_at = -1;
    }
    y[o] = T(best);
    argmax[o] = static_cast<int32_t>(best_at);
  }
}

// dy, argmax: (n, c, p, q)  dx: (n, c, h, w); one thread per input cell:
// dx[r, s] = Σ dy[i, j] over the windows holding (r, s) whose argmax is r·w + s.
template <typename T, typename I>
__global__ void maxpool2d_backward_kernel(PoolDims<I> g, const T* dy, const int32_t* argmax, T* dx, I total) {
  NNLAB_GRID_STRIDE_AS(I, e, total) {
    const I plane = e / (g.h * g.w), r = (e / g.w) % g.h, s = e % g.w;
    const int32_t here = static_cast<int32_t>(r * g.w + s);
    I i0, i1, j0, j1;
    outputs_holding(r, g.stride_h, g.pad_h, g.kernel_h, g.p, i0, i1);
    outputs_holding(s, g.stride_w, g.pad_w, g.kernel_w, g.q, j0, j1);
    const T* dyp = dy + int64_t(plane) * g.p * g.q;
    const int32_t* ap = argmax + int64_t(plane) * g.p * g.q;
    float sum = 0.0f;
    for (I i = i0; i < i1; ++i)
      for (I j = j0; j < j1; ++j)
        if (ap[i * g.q + j] == here) sum += float(dyp[i * g.q + j]);
    dx[e] = T(sum);
  }
}

// x: (n, c, h, w)  y: (n, c, p, q)   y[i, j] = Σ over the window of x / divisor
template <typename T, typename I>
__global__ void avgpool2d_forward_kernel(PoolDims<I> g, const T* x, T* y, I total) {
  NNLAB_GRID_STRIDE_AS(I, o, total) {
    const I plane = o / (g.p * g.q), i = (o / g.q) % g.p, j = o % g.q;
    const T* xp = x + int64_t(plane) * g.h * g.w;
    const Window<I> win = window_of(g, i, j);
    float sum = 0.0f;
    for (I r = win.h0; r < win.h1; ++r)
      for (I s = win.w0; s < win.w1; ++s) sum += float(xp[r * g.w + s]);
    y[o] = T(sum / static_cast<float>(win.divisor));
  }
}

// dy: (n, c, p, q)  dx: (n, c, h, w)   dx[r, s] = Σ over the windows holding (r, s) of dy / divisor
template <typename T, typename I>
__global__ void avgpool2d_backward_kernel(PoolDims<I> g, const T* dy, T* dx, I total) {
  NNLAB_GRID_STRIDE_AS(I, e, total) {
    const I plane = e / (g.h * g.w), r = (e / g.w) % g.h, s = e % g.w;
    I i0, i1, j0, j1;
    outputs_holding(r, g.stride_h, g.pad_h, g.kernel_h, g.p, i0, i1);
    outputs_holding(s, g.stride_w, g.pad_w, g.kernel_w, g.q, j0, j1);
    const T* dyp = dy + int64_t(plane) * g.p * g.q;
    float sum = 0.0f;
    for (I i = i0; i < i1; ++i)
      for (I j = j0; j < j1; ++j) sum += float(dyp[i * g.q + j]) / static_cast<float>(window_of(g, i, j).divisor);
    dx[e] = T(sum);
  }
}

// Runs launch(T{}, I{}) with T the element type (float, or BFloat16 when every tensor given is
// bf16) and I int32_t where every index of a call over `total` elements (of the larger of its
// input and output) fits 32 bits with a grid's stride to spare, else int64_t. A mix of dtypes
// is widened by the caller before it gets here; anything else is refused as float32 only.
template <typename Launch>
void with_types(const char* kernel, const Pool2dGeometry& g, std::initializer_list<const Tensor*> data,
                Launch launch) {
  const bool bf16 = bf16::all(data);
  if (!bf16)
    for (const Tensor* t : data)
      if (t) cuda::require_f32(kernel, *t);
  const int64_t cells = g.n * g.c * std::max(g.h * g.w, g.p * g.q);
  const int64_t reach = std::max(g.h + 2 * g.pad_h + g.kernel_h, g.w + 2 * g.pad_w + g.kernel_w);  // largest index
  const bool narrow = cells <= (int64_t(1) << 30) && reach <= (int64_t(1) << 30);
  const auto with_index = [&](auto element) {
    if (narrow)
      launch(element, int32_t{});
    else
      launch(element, int64_t{});
  };
  if (bf16)
    with_index(BFloat16{});
  else
    with_index(float{});
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------

void CudaBackend::maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax) {
  if (!bf16::all({&x, &y}) && bf16::widened(*this, &CudaBackend::maxpool2d_forward, g, x, y, argmax)) return;
  maxpool2d_bias_forward(g, x, nullptr, y, argmax);
}

void CudaBackend::maxpool2d_bias_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor* bias, Tensor& y,
                                         Tensor& argmax) {
  NNLAB_LOG_KERNEL(bias ? "maxpool2d_forward (+ bias)" : "maxpool2d_forward", x);  // nnlab explain: record the call
  check_dtype("maxpool2d_forward", argmax, DType::Int32);
  NNLAB_CHECK(!bias || bias->numel() == g.c, "maxpool2d_forward: a bias of ", bias ? bias->numel() : 0,
              " values for ", g.c, " channels");
  const int64_t total = g.n * g.c * g.p * g.q;
  if (!total) return;
  with_types("maxpool2d_forward", g, {&x, bias, &y}, [&](auto element, auto index) {
    using T = decltype(element);
    using I = decltype(index);
    cuda::launch("maxpool2d_forward_kernel", maxpool2d_forward_kernel<T, I>, cuda::grid_for(*ctx_, total),
                 cuda::kThreads, ctx_->stream, PoolDims<I>(g), cuda::ptr<T>(x), bias ? cuda::ptr<T>(*bias) : nullptr,
                 cuda::ptr<T>(y), cuda::ptr<int32_t>(argmax), I(total));
  });
}

void CudaBackend::maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  if (!bf16::all({&dy, &dx}) && bf16::widened(*this, &CudaBackend::maxpool2d_backward, g, dy, argmax, dx)) return;
  NNLAB_LOG_KERNEL("maxpool2d_backward", dy);  // nnlab explain: record the call
  const int64_t total = g.n * g.c * g.h * g.w;
  if (!total) return;
  with_types("maxpool2d_backward", g, {&dy, &dx}, [&](auto element, auto index) {
    using T = decltype(element);
    using I = decltype(index);
    cuda::launch("maxpool2d_backward_kernel", maxpool2d_backward_kernel<T, I>, cuda::grid_for(*ctx_, total),
                 cuda::kThreads, ctx_->stream, PoolDims<I>(g), cuda::ptr<T>(dy), cuda::ptr<int32_t>(argmax),
                 cuda::ptr<T>(dx), I(total));
  });
}

void CudaBackend::avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y) {
  if (!bf16::all({&x, &y}) && bf16::widened(*this, &CudaBackend::avgpool2d_forward, g, x, y)) return;
  NNLAB_LOG_KERNEL("avgpool2d_forward", x);  // nnlab explain: record the call
  const int64_t total = g.n * g.c * g.p * g.q;
  if (!total) return;
  with_types("avgpool2d_forward", g, {&x, &y}, [&](auto element, auto index) {
    using T = decltype(element);
    using I = decltype(index);
    cuda::launch("avgpool2d_forward_kernel", avgpool2d_forward_kernel<T, I>, cuda::grid_for(*ctx_, total),
                 cuda::kThreads, ctx_->stream, PoolDims<I>(g), cuda::ptr<T>(x), cuda::ptr<T>(y), I(total));
  });
}

void CudaBackend::avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx) {
  if (!bf16::all({&dy, &dx}) && bf16::widened(*this, &CudaBackend::avgpool2d_backward, g, dy, dx)) return;
  NNLAB_LOG_KERNEL("avgpool2d_backward", dy);  // nnlab explain: record the call
  const int64_t total = g.n * g.c * g.h * g.w;
  if (!total) return;
  with_types("avgpool2d_backward", g, {&dy, &dx}, [&](auto element, auto index) {
    using T = decltype(element);
    using I = decltype(index);
    cuda::launch("avgpool2d_backward_kernel", avgpool2d_backward_kernel<T, I>, cuda::grid_for(*ctx_, total),
                 cuda::kThreads, ctx_->stream, PoolDims<I>(g), cuda::ptr<T>(dy), cuda::ptr<T>(dx), I(total));
  });
}

}  // namespace nnlab
