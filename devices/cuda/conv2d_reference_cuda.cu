// The teaching convolution on CUDA: one thread per output element, each summing its own
// dot product with plain loops — the twin of devices/cpu/conv2d_reference_cpu.cpp, selected
// with `--conv-impl reference`. No shared memory, no tiling, no atomics: slow, but every
// kernel reads like the formula it computes, and no sum depends on thread timing.
//
// With hi = pi·stride_h − pad_h + ri and wi = qi·stride_w − pad_w + si:
//   forward          thread (n,k,pi,qi):  y  = b[k] + Σ_{c,ri,si} x[n,c,hi,wi] · w[k,c,ri,si]
//   backward data    thread (n,c,hi,wi):  dx = Σ_{k,ri,si} dy[n,k,pi,qi] · w[k,c,ri,si]
//                    over the (pi, qi) whose window put tap (ri, si) on (hi, wi):
//                    pi = (hi + pad_h − ri) / stride_h when that divides exactly and 0 ≤ pi < p
//   backward filter  thread (k,c,ri,si):  dw = Σ_{n,pi,qi} dy[n,k,pi,qi] · x[n,c,hi,wi]
// Backward data gathers (each input element sums what reaches it) instead of scattering as
// the CPU's loops do, so that threads never write the same element.
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// The geometry as plain ints for the kernels (passed by value).
struct Geo {
  int n, c, h, w, k, r, s, sh, sw, ph, pw, p, q;
};

Geo geo_of(const Conv2dGeometry& g) {
  return {int(g.n), int(g.c), int(g.h), int(g.w), int(g.k), int(g.r), int(g.s),
          int(g.stride_h), int(g.stride_w), int(g.pad_h), int(g.pad_w), int(g.p), int(g.q)};
}

// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q)
__global__ void conv2d_reference_forward_kernel(Geo g, const float* x, const float* w, const float* b, float* y) {
  NNLAB_GRID_STRIDE(i, int64_t(g.n) * g.k * g.p * g.q) {
    const int qi = int(i % g.q), pi = int(i / g.q % g.p), k = int(i / (int64_t(g.q) * g.p) % g.k);
    const int n = int(i / (int64_t(g.q) * g.p * g.k));
    float sum = b ? b[k] : 0.0f;
    for (int c = 0; c < g.c; ++c)
      for (int ri = 0; ri < g.r; ++ri)
        for (int si = 0; si < g.s; ++si) {
          const int hi = pi * g.sh - g.ph + ri, wi = qi * g.sw - g.pw + si;
          if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;  // zero padding
          sum += x[((int64_t(n) * g.c + c) * g.h + hi) * g.w + wi] * w[((int64_t(k) * g.c + c) * g.r + ri) * g.s + si];
        }
    y[i] = sum;
  }
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
__global__ void conv2d_reference_backward_data_kernel(Geo g, const float* dy, const float* w, float* dx) {
  NNLAB_GRID_STRIDE(i, int64_t(g.n) * g.c * g.h * g.w) {
    const int wi = int(i % g.w), hi = int(i / g.w % g.h), c = int(i / (int64_t(g.w) * g.h) % g.c);
    const int n = int(i / (int64_t(g.w) * g.h * g.c));
    float sum = 0.0f;
    for (int k = 0; k < g.k; ++k)
      for (int ri = 0; ri < g.r; ++ri)
        for (int si = 0; si < g.s; ++si) {
          const int ph = hi + g.ph - ri, pw = wi + g.pw - si;  // = pi·stride, qi·stride
          if (ph < 0 || pw < 0 || ph % g.sh != 0 || pw % g.sw != 0) continue;
          const int pi = ph / g.sh, qi = pw / g.sw;
          if (pi >= g.p || qi >= g.q) continue;
          sum += dy[((int64_t(n) * g.k + k) * g.p + pi) * g.q + qi] * w[((int64_t(k) * g.c + c) * g.r + ri) * g.s + si];
        }
    dx[i] = sum;
  }
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)
__global__ void conv2d_reference_backward_filter_kernel(Geo g, const float* dy, const float* x, float* dw) {
  NNLAB_GRID_STRIDE(i, int64_t(g.k) * g.c * g.r * g.s) {
    const int si = int(i % g.s), ri = int(i / g.s % g.r), c = int(i / (int64_t(g.s) * g.r) % g.c);
    const int k = int(i / (int64_t(g.s) * g.r * g.c));
    float sum = 0.0f;
    for (int n = 0; n < g.n; ++n)
      for (int pi = 0; pi < g.p; ++pi)
        for (int qi = 0; qi < g.q; ++qi) {
          const int hi = pi * g.sh - g.ph + ri, wi = qi * g.sw - g.pw + si;
          if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;
          sum += dy[((int64_t(n) * g.k + k) * g.p + pi) * g.q + qi] * x[((int64_t(n) * g.c + c) * g.h + hi) * g.w + wi];
        }
    dw[i] = sum;
  }
}

std::string conv_text(const Conv2dGeometry& g) {
  return "one thread per output, x " + dims_text({g.n, g.c, g.h, g.w}) + " w " + dims_text({g.k, g.c, g.r, g.s}) +
         " s" + std::to_string(g.stride_h) + " p" + std::to_string(g.pad_h);
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------

namespace cuda {

void conv2d_reference_forward(Context& c, const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                              Tensor& y) {
  require_f32("conv2d_reference_forward", x);
  KernelTiming timing(kernel_log_enabled() ? record_kernel("conv2d_reference_forward_kernel", conv_text(g)) : kNotRecorded);
  cuda::launch("conv2d_reference_forward_kernel", conv2d_reference_forward_kernel, grid_for(c, y.numel()), kThreads,
               c.stream, geo_of(g), ptr<float>(x), ptr<float>(w), b && b->defined() ? ptr<float>(*b) : nullptr,
               ptr<float>(y));
}

void conv2d_reference_backward_data(Context& c, const Conv2dGeometry& g, const Tensor& dy, const Tensor& w,
                                    Tensor& dx) {
  require_f32("conv2d_reference_backward_data", dy);
  KernelTiming timing(kernel_log_enabled() ? record_kernel("conv2d_reference_backward_data_kernel", conv_text(g)) : kNotRecorded);
  cuda::launch("conv2d_reference_backward_data_kernel", conv2d_reference_backward_data_kernel, grid_for(c, dx.numel()),
               kThreads, c.stream, geo_of(g), ptr<float>(dy), ptr<float>(w), ptr<float>(dx));
}

void conv2d_reference_backward_filter(Context& c, const Conv2dGeometry& g, const Tensor& dy, const Tensor& x,
                                      Tensor& dw) {
  require_f32("conv2d_reference_backward_filter", dy);
  KernelTiming timing(kernel_log_enabled() ? record_kernel("conv2d_reference_backward_filter_kernel", conv_text(g)) : kNotRecorded);
  cuda::launch("conv2d_reference_backward_filter_kernel", conv2d_reference_backward_filter_kernel,
               grid_for(c, dw.numel()), kThreads, c.stream, geo_of(g), ptr<float>(dy), ptr<float>(x), ptr<float>(dw));
}

}  // namespace cuda

}  // namespace nnlab
