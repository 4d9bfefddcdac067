// Direct convolution on CUDA for a shallow layer with a ReLU epilogue, or a ReLU and max-pool
// epilogue: the zoo's first layers (cnn's c1: 1 → 32 channels, 3×3, pooled; lenet5's c1:
// 1 → 6, 5×5, pooled; cifar-cnn's c1: 3 → 32, 3×3, ReLU). The twin of the CPU's direct loops
// (conv2d_direct_cpu.cpp), which floor and pool the same layers as they make them.
//
// Why own kernels here: every output of such a layer is a dot product of at most 32 taps, so
// the layer is reading and writing memory, not arithmetic, and cuDNN's general kernels spend
// far longer on it. On an H200 (2026-11-27, `nnlab explain --device cuda`) cnn's c1 took
// 0.022 ms forward, 0.038 ms for its filter gradient and 0.024 ms for the pool's backward,
// for a 0.2 MB input and a 1.6 MB pooled output (as much again for the winners): at the
// card's bandwidth, microseconds. These kernels never store the convolution's own output or
// its gradient. (Their own times wait for a GPU run: docs/gpu.md.)
//
// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  z: (n, k, p, q), never stored
// y: (n, k, p', q') and, pooled, argmax: windows of wh × ww, stride = window, no padding;
//    with the ReLU alone the window is 1 × 1 (p' = p, q' = q)
//
// forward, one thread per output (n, k, i, j) of y:
//   z[py, px] = Σ_{c,r,s} w[k,c,r,s] · x[n, c, py + r − pad_h, px + s − pad_w]   (zero outside)
//   for the cells of window (i, j); y = max(z) + b[k] floored at 0 (the ReLU; NaN gives 0),
//   argmax the window's winner, −1 when y is 0 — exactly maxpool2d_forward_kernel's rules.
// filter gradient: dz is dy at each window's winner (pooled: windows do not overlap, and a
//   window without winner gives nothing) or at each cell with y > 0 (the ReLU alone), else 0:
//   dw[k,c,r,s] = Σ over those cells (py, px) of dz · x[n, c, py + r − pad_h, px + s − pad_w]
//   db[k]       = Σ over those cells of dz
//   in double, in slices of channel k's outputs (block_reduce.cuh), then in slice order.
#include <algorithm>

#include "devices/cuda/block_reduce.cuh"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab::cuda {

namespace {

constexpr int kDirectMaxTaps = 32;              // c·r·s: the zoo's first layers have 9, 25 and 27
constexpr int kSumStride = kDirectMaxTaps + 1;  // a thread's taps and bias in shared memory
constexpr int kFilterThreads = 128;             // a filter-gradient block: its sums take 33.8 KB of shared memory

// The geometry as ints (direct_applies keeps every index below 2³⁰).
struct DirectDims {
  int n, c, h, w, k, r, s, pad_h, pad_w, p, q;  // the convolution
  int window_h, window_w, out_p, out_q;         // y's windows over z, and y's planes
};

DirectDims dims_of(const Conv2dGeometry& g, const ConvEpilogue& e) {
  const bool pooled = e.kind == ConvEpilogue::Kind::ReluMaxPool;
  return {int(g.n),
          int(g.c),
          int(g.h),
          int(g.w),
          int(g.k),
          int(g.r),
          int(g.s),
          int(g.pad_h),
          int(g.pad_w),
          int(g.p),
          int(g.q),
          pooled ? int(e.pool.kernel_h) : 1,
          pooled ? int(e.pool.kernel_w) : 1,
          pooled ? int(e.pool.p) : int(g.p),
          pooled ? int(e.pool.q) : int(g.q)};
}

// visit(t, v) for each tap t = (c·r + ri)·s + si of conv output (py, px) whose input
// v = xn[c, py + ri − pad_h, px + si − pad_w] lies inside the image (the padding is zero).
template <typename Visit>
__device__ __forceinline__ void for_each_tap(const DirectDims& d, const float* xn, int py, int px, Visit visit) {
  for (int c = 0; c < d.c; ++c)
    for (int r = 0; r < d.r; ++r) {
      const int yy = py + r - d.pad_h;
      if (yy < 0 || yy >= d.h) continue;
      for (int s = 0; s < d.s; ++s) {
        const int xx = px + s - d.pad_w;
        if (xx >= 0 && xx < d.w) visit((c * d.r + r) * d.s + s, xn[(c * d.h + yy) * d.w + xx]);
      }
    }
}

// ---- kernels ----------------------------------------------------------------------------

// One thread per output o = ((n·k + k)·p' + i)·q' + j: a warp's threads share k, so they read
// the same filter taps (one load for the warp). argmax: null for the ReLU alone.
__global__ void conv2d_direct_forward_kernel(DirectDims d, const float* x, const float* w, const float* b, float* y,
                                             int32_t* argmax) {
  NNLAB_GRID_STRIDE(o64, int64_t(d.n) * d.k * d.out_p * d.out_q) {
    const int o = int(o64), j = o % d.out_q, i = (o / d.out_q) % d.out_p;
    const int k = (o / (d.out_p * d.out_q)) % d.k, n = o / (d.out_p * d.out_q * d.k);
    const float* xn = x + n * d.c * d.h * d.w;
    const float* wk = w + k * d.c * d.r * d.s;
    float best = -INFINITY;
    int best_at = i * d.window_h * d.q + j * d.window_w;
    for (int py = i * d.window_h; py < i * d.window_h + d.window_h; ++py)
      for (int px = j * d.window_w; px < j * d.window_w + d.window_w; ++px) {
        float z = 0.0f;
        for_each_tap(d, xn, py, px, [&](int t, float in) { z += wk[t] * in; });
        if (z > best || isnan(z)) {
          best = z;
          best_at = py * d.q + px;
        }
      }
    if (b) best += b[k];
    if (!(best > 0.0f)) {
      best = 0.0f;
      best_at = -1;
    }
    y[o] = best;
    if (argmax) argmax[o] = best_at;
  }
}

// Block (k, p): over slice p of channel k's outputs of y, each cell of z with a gradient (Pooled:
// the window's winner in argmax; else the cell itself where y > 0) adds dy times the taps it saw,
// and dy itself: partial[(k·(taps + 1) + t)·slices + p], t = taps for the bias. The block's
// threads then meet once: each writes its sums to shared memory, and thread t adds value t's
// kFilterThreads sums in thread order (one barrier for all the taps, where block_sum's tree
// would meet about ten times for each).
template <bool Pooled>
__global__ void conv2d_direct_filter_partial_kernel(DirectDims d, const float* dy, const int32_t* argmax,
                                                    const float* y, const float* x, double* partial,
                                                    ChannelSlices slices) {
  const int taps = d.c * d.r * d.s;
  double acc[kDirectMaxTaps + 1];
  for (int t = 0; t <= taps; ++t) acc[t] = 0.0;
  for (ChannelWalk v(slices, d.k, int64_t(d.out_p) * d.out_q); v.more(); v.next()) {
    const int64_t at = v.at();
    int cell = int(v.inner());
    if (Pooled) {
      cell = argmax[at];
      if (cell < 0) continue;
    } else if (!(y[at] > 0.0f)) {
      continue;
    }
    const double g = dy[at];
    const int py = cell / d.q, px = cell % d.q;
    for_each_tap(d, x + v.outer() * d.c * d.h * d.w, py, px, [&](int t, float in) { acc[t] += g * in; });
    acc[taps] += g;
  }
  __shared__ double sums[kFilterThreads * kSumStride];  // sums[thread · kSumStride + t]
  for (int t = 0; t <= taps; ++t) sums[threadIdx.x * kSumStride + t] = acc[t];
  __syncthreads();
  if (int(threadIdx.x) <= taps) {
    double total = 0.0;
    for (int i = 0; i < kFilterThreads; ++i) total += sums[i * kSumStride + threadIdx.x];
    partial[(int64_t(blockIdx.x) * (taps + 1) + threadIdx.x) * slices.slices + blockIdx.y] = total;
  }
}

// dw: (k, c, r, s) as (k, taps)  db: (k) or null; one thread per (k, t): its slices in order.
__global__ void conv2d_direct_filter_final_kernel(const double* partial, int64_t slices, int k_count, int taps,
                                                  float* dw, float* db) {
  NNLAB_GRID_STRIDE(e, int64_t(k_count) * (taps + 1)) {
    const int64_t k = e / (taps + 1), t = e % (taps + 1);
    const double s = sum_of_slices(partial, e, slices);  // value e = k·(taps + 1) + t
    if (t < taps)
      dw[k * taps + t] = static_cast<float>(s);
    else if (db)
      db[k] = static_cast<float>(s);
  }
}

// nnlab explain: "direct conv2d fwd + ReLU + max-pool x 64×1×28×28 w 32×1×3×3 s1 p1"
size_t log_direct(const std::string& what, const Conv2dGeometry& g) {
  return record_kernel("direct conv2d " + what,
                       "x " + dims_text({g.n, g.c, g.h, g.w}) + " w " + dims_text({g.k, g.c, g.r, g.s}) + " s" +
                           std::to_string(g.stride_h) + " p" + std::to_string(g.pad_h));
}

const char* epilogue_text(const ConvEpilogue& e) {
  return e.kind == ConvEpilogue::Kind::ReluMaxPool ? "ReLU + max-pool" : "ReLU";
}

}  // namespace

bool direct_applies(const Conv2dGeometry& g, const ConvEpilogue& e) {
  const bool pooled = e.kind == ConvEpilogue::Kind::ReluMaxPool;
  if (e.kind != ConvEpilogue::Kind::Relu && !pooled) return false;
  const Pool2dGeometry& pool = e.pool;
  const bool windows = !pooled || (pool.pad_h == 0 && pool.pad_w == 0 && pool.stride_h == pool.kernel_h &&
                                   pool.stride_w == pool.kernel_w && pool.h == g.p && pool.w == g.q);
  const int64_t cells = g.n * std::max(g.c * g.h * g.w, g.k * g.p * g.q);
  return windows && g.stride_h == 1 && g.stride_w == 1 && g.c * g.r * g.s <= kDirectMaxTaps && cells > 0 &&
         cells < (int64_t(1) << 30);
}

void conv2d_direct_forward(Context& c, const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& x,
                           const Tensor& w, const Tensor* b, Tensor& y, Tensor* argmax) {
  KernelTiming timing(kernel_log_enabled() ? log_direct(std::string("fwd + ") + epilogue_text(e), g) : kNotRecorded);
  const DirectDims d = dims_of(g, e);
  const int64_t outputs = int64_t(d.n) * d.k * d.out_p * d.out_q;
  launch("conv2d_direct_forward_kernel", conv2d_direct_forward_kernel, grid_for(c, outputs), kThreads, c.stream, d,
         ptr<float>(x), ptr<float>(w), b ? ptr<float>(*b) : nullptr, ptr<float>(y),
         argmax ? ptr<int32_t>(*argmax) : nullptr);
}

void conv2d_direct_backward_filter(Context& c, const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& dy,
                                   const Tensor& saved, const Tensor& x, Tensor& dw, Tensor* db) {
  KernelTiming timing(kernel_log_enabled() ? log_direct(std::string("bwd filter, through the ") + epilogue_text(e), g)
                                           : kNotRecorded);
  const DirectDims d = dims_of(g, e);
  const int taps = d.c * d.r * d.s;
  // Slices of 1024 outputs or more: lenet5's c1 has 6 channels, 4096 would leave it 18 blocks.
  const ChannelSlices slices = channel_slices(int64_t(d.n) * d.out_p * d.out_q, 1024);
  Scratch partial(*c.allocator, static_cast<size_t>(g.k * slices.slices * (taps + 1)) * sizeof(double));
  const dim3 grid(static_cast<unsigned>(g.k), static_cast<unsigned>(slices.slices));
  if (e.kind == ConvEpilogue::Kind::ReluMaxPool)
    launch("conv2d_direct_filter_partial_kernel", conv2d_direct_filter_partial_kernel<true>, grid, kFilterThreads,
           c.stream, d, ptr<float>(dy), ptr<int32_t>(saved), static_cast<const float*>(nullptr), ptr<float>(x),
           partial.as<double>(), slices);
  else
    launch("conv2d_direct_filter_partial_kernel", conv2d_direct_filter_partial_kernel<false>, grid, kFilterThreads,
           c.stream, d, ptr<float>(dy), static_cast<const int32_t*>(nullptr), ptr<float>(saved), ptr<float>(x),
           partial.as<double>(), slices);
  launch("conv2d_direct_filter_final_kernel", conv2d_direct_filter_final_kernel, grid_for(c, g.k * (taps + 1)),
         kThreads, c.stream, static_cast<const double*>(partial.as<double>()), slices.slices, int(g.k), taps,
         ptr<float>(dw), db ? ptr<float>(*db) : nullptr);
}

}  // namespace nnlab::cuda
