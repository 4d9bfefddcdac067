// Convolution on the CPU: im2col + one OpenBLAS GEMM per direction, over a whole chunk of
// images at once (the whole batch unless the im2col matrix would pass kColsBudget).
//
// For a chunk of nb images, im2col lays every receptive field out as a column:
//   cols: (c·r·s, nb·p·q)    cols[(ci·r + ri)·s + si, (i·p + pi)·q + qi]
//                              = x[i, ci, pi·stride_h − pad_h + ri, qi·stride_w − pad_w + si]
// (zero where that falls into the padding). Then, writing Y and dY as (k, nb·p·q) matrices,
//   forward          Y  = W · cols                 (k × crs) · (crs × nb·pq)
//   backward data    dx = col2im(Wᵀ · dY)          (crs × k) · (k × nb·pq)
//   backward filter  dW = dY · colsᵀ               (k × nb·pq) · (nb·pq × crs)
// One large GEMM keeps OpenBLAS near its peak; per-image GEMMs (k × pq) are too small for it.
// The price is a transpose between NCHW's (n, k, pq) and the GEMM's (k, n·pq), fused here
// with the bias add on the way out and done as a gather on the way in.
//
// Every loop is parallel with static schedules, and col2im gives each thread whole
// (image, channel) planes, so no two threads add into one element and results repeat bit
// for bit.
#include <cblas.h>

#include <algorithm>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"

namespace nnlab {

namespace {

// Largest im2col matrix (elements) built at once: 8 Mi elements = 32 MiB in float32.
// The cnn's convolutions at batch 64 fit in one chunk; CIFAR-sized batches are split.
constexpr long kColsBudget = 1L << 23;

// Row-major C(m×n) = alpha · op(A) · op(B) + beta · C, as Backend::gemm, on raw pointers.
void gemm_rm(bool ta, bool tb, long m, long n, long k, float alpha, const float* a, const float* b, float beta,
             float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(ta ? m : k), b, int(tb ? k : n), beta, c, int(n));
}
void gemm_rm(bool ta, bool tb, long m, long n, long k, double alpha, const double* a, const double* b,
             double beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(ta ? m : k), b, int(tb ? k : n), beta, c, int(n));
}

long images_per_chunk(const Conv2dGeometry& g) {
  const long per_image = static_cast<long>(g.c * g.r * g.s * g.p * g.q);
  return std::clamp(kColsBudget / std::max(per_image, 1L), 1L, std::max(static_cast<long>(g.n), 1L));
}

// The output columns qi whose input column qi·stride − pad + offset lies inside [0, width):
// [lo, hi). Everything outside reads padding.
struct ValidRange {
  long lo, hi;
};
ValidRange valid_range(long out, long width, long stride, long pad, long offset) {
  const long first = pad - offset;  // need qi·stride ≥ first
  const long lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const long last = width - 1 + pad - offset;  // need qi·stride ≤ last
  const long hi = last < 0 ? 0 : std::min(out, last / stride + 1);
  return {std::min(lo, hi), hi};
}

// x: (n, c, h, w), images [n0, n0 + nb)   cols: (c·r·s, nb·p·q)   (layout above)
template <typename T>
void im2col(const Conv2dGeometry& g, const T* x, long n0, long nb, T* cols) {
  const long rs = g.r * g.s, crs = g.c * rs, pq = g.p * g.q, hw = g.h * g.w;
#pragma omp parallel for collapse(2) schedule(static) if (crs * nb * pq > cpu::kParallelGrain)
  for (long row = 0; row < crs; ++row) {
    for (long i = 0; i < nb; ++i) {
      const long ci = row / rs, ri = row % rs / g.s, si = row % g.s;
      const T* plane = x + ((n0 + i) * g.c + ci) * hw;
      T* out = cols + row * nb * pq + i * pq;
      const ValidRange qv = valid_range(g.q, g.w, g.stride_w, g.pad_w, si);
      for (long pi = 0; pi < g.p; ++pi, out += g.q) {
        const long hi = pi * g.stride_h - g.pad_h + ri;
        if (hi < 0 || hi >= g.h) {
          std::fill(out, out + g.q, T(0));
          continue;
        }
        const T* src = plane + hi * g.w - g.pad_w + si;  // src[qi·stride_w] is x[.., hi, qi·stride_w − pad_w + si]
        std::fill(out, out + qv.lo, T(0));
        if (g.stride_w == 1) std::copy(src + qv.lo, src + qv.hi, out + qv.lo);
        else
          for (long qi = qv.lo; qi < qv.hi; ++qi) out[qi] = src[qi * g.stride_w];
        std::fill(out + qv.hi, out + g.q, T(0));
      }
    }
  }
}

// cols: (c·r·s, nb·p·q)   dx: (n, c, h, w), images [n0, n0 + nb)
// dx[i, ci, y, x] = Σ over the (ri, si, pi, qi) that read it of cols[...] — the adjoint of
// im2col. One thread owns each (image, channel) plane, summing in a fixed order.
template <typename T>
void col2im(const Conv2dGeometry& g, const T* cols, long n0, long nb, T* dx) {
  const long rs = g.r * g.s, pq = g.p * g.q, hw = g.h * g.w;
#pragma omp parallel for collapse(2) schedule(static) if (rs * nb * g.c * pq > cpu::kParallelGrain)
  for (long i = 0; i < nb; ++i) {
    for (long ci = 0; ci < g.c; ++ci) {
      T* plane = dx + ((n0 + i) * g.c + ci) * hw;
      std::fill(plane, plane + hw, T(0));
      for (long ri = 0; ri < g.r; ++ri) {
        for (long si = 0; si < g.s; ++si) {
          const T* in = cols + (ci * rs + ri * g.s + si) * nb * pq + i * pq;
          const ValidRange qv = valid_range(g.q, g.w, g.stride_w, g.pad_w, si);
          for (long pi = 0; pi < g.p; ++pi, in += g.q) {
            const long hi = pi * g.stride_h - g.pad_h + ri;
            if (hi < 0 || hi >= g.h) continue;
            T* dst = plane + hi * g.w - g.pad_w + si;
            for (long qi = qv.lo; qi < qv.hi; ++qi) dst[qi * g.stride_w] += in[qi];
          }
        }
      }
    }
  }
}

// ybuf: (k, nb·p·q)  ->  y: (n, k, p, q), images [n0, n0 + nb), plus b[k] when given.
template <typename T>
void scatter_output(const Conv2dGeometry& g, const T* ybuf, const T* b, long n0, long nb, T* y) {
  const long pq = g.p * g.q;
#pragma omp parallel for collapse(2) schedule(static) if (nb * g.k * pq > cpu::kParallelGrain)
  for (long i = 0; i < nb; ++i) {
    for (long kk = 0; kk < g.k; ++kk) {
      const T* src = ybuf + kk * nb * pq + i * pq;
      T* dst = y + ((n0 + i) * g.k + kk) * pq;
      const T bias = b ? b[kk] : T(0);
      for (long j = 0; j < pq; ++j) dst[j] = src[j] + bias;
    }
  }
}

// dy: (n, k, p, q), images [n0, n0 + nb)  ->  dybuf: (k, nb·p·q)
template <typename T>
void gather_output_grad(const Conv2dGeometry& g, const T* dy, long n0, long nb, T* dybuf) {
  const long pq = g.p * g.q;
#pragma omp parallel for collapse(2) schedule(static) if (g.k * nb * pq > cpu::kParallelGrain)
  for (long kk = 0; kk < g.k; ++kk) {
    for (long i = 0; i < nb; ++i) {
      const T* src = dy + ((n0 + i) * g.k + kk) * pq;
      std::copy(src, src + pq, dybuf + kk * nb * pq + i * pq);
    }
  }
}

void check_conv_dtypes(const char* kernel, const Tensor& a, const Tensor& b, const Tensor& c) {
  NNLAB_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), kernel, ": dtypes differ: ", a.describe(), ", ",
              b.describe(), ", ", c.describe());
}

}  // namespace

// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q)
// Per chunk: cols = im2col(x);  Y = W · cols;  y = Y (to NCHW) + b
void CpuBackend::conv2d_forward(const Conv2dGeometry& g, const Tensor& xt, const Tensor& wt, const Tensor* bt,
                                Tensor& yt) {
  check_conv_dtypes("conv2d_forward", xt, wt, yt);
  cpu::dispatch_float("conv2d_forward", xt, [&](auto tag) {
    using T = decltype(tag);
    const long crs = g.c * g.r * g.s, pq = g.p * g.q, chunk = images_per_chunk(g);
    Tensor cols = Tensor::empty({crs * chunk * pq}, xt.dtype(), device());
    Tensor ybuf = Tensor::empty({g.k * chunk * pq}, xt.dtype(), device());
    const T* b = bt && bt->defined() ? bt->data<T>() : nullptr;
    for (long n0 = 0; n0 < g.n; n0 += chunk) {
      const long nb = std::min(chunk, static_cast<long>(g.n) - n0);
      im2col(g, xt.data<T>(), n0, nb, cols.data<T>());
      gemm_rm(false, false, g.k, nb * pq, crs, T(1), wt.data<T>(), cols.data<T>(), T(0), ybuf.data<T>());
      scatter_output(g, ybuf.data<T>(), b, n0, nb, yt.data<T>());
    }
  });
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
// Per chunk: dY = dy (to (k, nb·pq));  dcols = Wᵀ · dY;  dx = col2im(dcols)
void CpuBackend::conv2d_backward_data(const Conv2dGeometry& g, const Tensor& dyt, const Tensor& wt, Tensor& dxt) {
  check_conv_dtypes("conv2d_backward_data", dyt, wt, dxt);
  cpu::dispatch_float("conv2d_backward_data", dyt, [&](auto tag) {
    using T = decltype(tag);
    const long crs = g.c * g.r * g.s, pq = g.p * g.q, chunk = images_per_chunk(g);
    Tensor cols = Tensor::empty({crs * chunk * pq}, dyt.dtype(), device());
    Tensor dybuf = Tensor::empty({g.k * chunk * pq}, dyt.dtype(), device());
    for (long n0 = 0; n0 < g.n; n0 += chunk) {
      const long nb = std::min(chunk, static_cast<long>(g.n) - n0);
      gather_output_grad(g, dyt.data<T>(), n0, nb, dybuf.data<T>());
      gemm_rm(true, false, crs, nb * pq, g.k, T(1), wt.data<T>(), dybuf.data<T>(), T(0), cols.data<T>());
      col2im(g, cols.data<T>(), n0, nb, dxt.data<T>());
    }
  });
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)
// Per chunk: dW (+)= dY · im2col(x)ᵀ — the im2col is recomputed rather than kept from the
// forward pass, which costs one memory pass and keeps no state between kernels.
void CpuBackend::conv2d_backward_filter(const Conv2dGeometry& g, const Tensor& dyt, const Tensor& xt, Tensor& dwt) {
  check_conv_dtypes("conv2d_backward_filter", dyt, xt, dwt);
  cpu::dispatch_float("conv2d_backward_filter", dyt, [&](auto tag) {
    using T = decltype(tag);
    const long crs = g.c * g.r * g.s, pq = g.p * g.q, chunk = images_per_chunk(g);
    Tensor cols = Tensor::empty({crs * chunk * pq}, dyt.dtype(), device());
    Tensor dybuf = Tensor::empty({g.k * chunk * pq}, dyt.dtype(), device());
    if (g.n == 0) std::fill(dwt.data<T>(), dwt.data<T>() + dwt.numel(), T(0));  // an empty sum
    for (long n0 = 0; n0 < g.n; n0 += chunk) {
      const long nb = std::min(chunk, static_cast<long>(g.n) - n0);
      gather_output_grad(g, dyt.data<T>(), n0, nb, dybuf.data<T>());
      im2col(g, xt.data<T>(), n0, nb, cols.data<T>());
      const T beta = n0 == 0 ? T(0) : T(1);  // the first chunk overwrites dw, later ones add
      gemm_rm(false, true, g.k, crs, nb * pq, T(1), dybuf.data<T>(), cols.data<T>(), beta, dwt.data<T>());
    }
  });
}

}  // namespace nnlab
