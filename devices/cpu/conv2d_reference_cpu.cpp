// The teaching convolution: the definition of a 2-D convolution written as plain loops,
// with no im2col and no GEMM, so each line can be read against the maths. Selected with
// `--conv-impl reference` (conv2d_cpu.cpp's router records the choice in the kernel log); its
// CUDA twin is devices/cuda/conv2d_reference_cuda.cu.
//
// With hi = pi·stride_h − pad_h + ri and wi = qi·stride_w − pad_w + si (outside the image
// the input reads as zero):
//   forward          y[n,k,pi,qi]  = b[k] + Σ_{c,ri,si} x[n,c,hi,wi] · w[k,c,ri,si]
//   backward data    dx[n,c,hi,wi] = Σ_{k,pi,qi,ri,si with that hi, wi} dy[n,k,pi,qi] · w[k,c,ri,si]
//   backward filter  dw[k,c,ri,si] = Σ_{n,pi,qi} dy[n,k,pi,qi] · x[n,c,hi,wi]
// Backward data is written as the adjoint of the forward loops: walk every (output, tap)
// pair again and send dy · w back to the input element it read.
//
// Threads: images are independent in forward and backward data, so each thread owns whole
// images; in backward filter each thread owns whole (k, c) filter slices. Every sum runs in
// one fixed order, so results repeat bit for bit for any thread count.
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"

namespace nnlab::cpu {

namespace {

// Index helpers: NCHW (and KCRS) offsets, row-major.
inline long at4(long i0, long i1, long i2, long i3, long d1, long d2, long d3) {
  return ((i0 * d1 + i1) * d2 + i2) * d3 + i3;
}

// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q)
template <typename T>
void forward_loops(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y) {
#pragma omp parallel for schedule(static)
  for (long n = 0; n < g.n; ++n)
    for (long k = 0; k < g.k; ++k)
      for (long pi = 0; pi < g.p; ++pi)
        for (long qi = 0; qi < g.q; ++qi) {
          T sum = b ? b[k] : T(0);
          for (long c = 0; c < g.c; ++c)
            for (long ri = 0; ri < g.r; ++ri)
              for (long si = 0; si < g.s; ++si) {
                const long hi = pi * g.stride_h - g.pad_h + ri, wi = qi * g.stride_w - g.pad_w + si;
                if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;  // zero padding
                sum += x[at4(n, c, hi, wi, g.c, g.h, g.w)] * w[at4(k, c, ri, si, g.c, g.r, g.s)];
              }
          y[at4(n, k, pi, qi, g.k, g.p, g.q)] = sum;
        }
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
template <typename T>
void backward_data_loops(const Conv2dGeometry& g, const T* dy, const T* w, T* dx) {
#pragma omp parallel for schedule(static)
  for (long n = 0; n < g.n; ++n) {
    T* dxn = dx + n * g.c * g.h * g.w;
    for (long i = 0; i < g.c * g.h * g.w; ++i) dxn[i] = T(0);
    for (long k = 0; k < g.k; ++k)
      for (long pi = 0; pi < g.p; ++pi)
        for (long qi = 0; qi < g.q; ++qi) {
          const T grad = dy[at4(n, k, pi, qi, g.k, g.p, g.q)];
          for (long c = 0; c < g.c; ++c)
            for (long ri = 0; ri < g.r; ++ri)
              for (long si = 0; si < g.s; ++si) {
                const long hi = pi * g.stride_h - g.pad_h + ri, wi = qi * g.stride_w - g.pad_w + si;
                if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;  // padding has no gradient
                dx[at4(n, c, hi, wi, g.c, g.h, g.w)] += grad * w[at4(k, c, ri, si, g.c, g.r, g.s)];
              }
        }
  }
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)
template <typename T>
void backward_filter_loops(const Conv2dGeometry& g, const T* dy, const T* x, T* dw) {
#pragma omp parallel for schedule(static)
  for (long kc = 0; kc < g.k * g.c; ++kc) {
    const long k = kc / g.c, c = kc % g.c;
    for (long ri = 0; ri < g.r; ++ri)
      for (long si = 0; si < g.s; ++si) {
        T sum = T(0);
        for (long n = 0; n < g.n; ++n)
          for (long pi = 0; pi < g.p; ++pi)
            for (long qi = 0; qi < g.q; ++qi) {
              const long hi = pi * g.stride_h - g.pad_h + ri, wi = qi * g.stride_w - g.pad_w + si;
              if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;
              sum += dy[at4(n, k, pi, qi, g.k, g.p, g.q)] * x[at4(n, c, hi, wi, g.c, g.h, g.w)];
            }
        dw[at4(k, c, ri, si, g.c, g.r, g.s)] = sum;
      }
  }
}

}  // namespace

void conv2d_reference_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                              Tensor& y) {
  dispatch_float("conv2d_reference_forward", x, [&](auto tag) {
    using T = decltype(tag);
    forward_loops<T>(g, x.data<T>(), w.data<T>(), b && b->defined() ? b->data<T>() : nullptr, y.data<T>());
  });
}

void conv2d_reference_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  dispatch_float("conv2d_reference_backward_data", dy, [&](auto tag) {
    using T = decltype(tag);
    backward_data_loops<T>(g, dy.data<T>(), w.data<T>(), dx.data<T>());
  });
}

void conv2d_reference_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw) {
  dispatch_float("conv2d_reference_backward_filter", dy, [&](auto tag) {
    using T = decltype(tag);
    backward_filter_loops<T>(g, dy.data<T>(), x.data<T>(), dw.data<T>());
  });
}

}  // namespace nnlab::cpu
