// Convolution on the CPU: im2col + GEMM (OpenBLAS, or small_gemm.h for a short c·r·s), one
// image per thread.
//
// For image i, im2col lays every receptive field out as a column:
//   cols: (c·r·s, p·q)    cols[(ci·r + ri)·s + si, pi·q + qi]
//                           = x[i, ci, pi·stride_h − pad_h + ri, qi·stride_w − pad_w + si]
// (zero where that falls into the padding). In NCHW, y[i] and dy[i] already are (k, p·q)
// matrices, so with no transposes
//   forward          y[i]  = W · cols                     (k × crs) · (crs × pq)
//   backward data    dx[i] = col2im(Wᵀ · dy[i])           (crs × k) · (k × pq)
//   backward filter  dW    = Σ_i dy[i] · colsᵀ            (k × pq) · (pq × crs)
//
// Why per image rather than one GEMM over the whole batch (cols: (crs, n·pq)): measured on
// the cnn's layers at batch 64 (scripts/bench_conv.cpp), n single-threaded GEMMs of
// k × pq × crs, one image per thread, ran at least as fast as the one large two-thread GEMM,
// and the per-image layout needs no NCHW ↔ (k, n·pq) transposes (two extra passes over y or
// dy) and keeps each image's cols (crs·pq, 225 KB for the cnn's second layer) in its core's
// L2 cache between im2col and the GEMM.
//
// Threads: when the batch has at least as many images as threads, images are spread over
// the OpenMP threads (static schedule) and OpenBLAS, called inside the parallel region, runs
// single-threaded in each. A smaller batch is done one image at a time with a threaded GEMM
// and threaded im2col/col2im instead. The filter gradient sums per-thread partial sums in
// thread order, and col2im gives each thread whole (channel) planes, so for a given thread
// count results repeat bit for bit.
#include <cblas.h>

#include <omp.h>

#include <algorithm>

#include "devices/conv_impl.h"
#include "devices/cpu/conv2d_direct.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/small_gemm.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// Float32 products whose inner dimension c·r·s is short (the first layers: 9 or 27) go to
// small_gemm.h's register-blocked loops, which need no packing: OpenBLAS's kernels spend
// more on packing than on multiplying there. Forward (k × crs · crs × pq) and filter
// gradient (k × pq · (crs × pq)ᵀ) qualify; the rest stays with OpenBLAS.
constexpr long kSmallGemmMaxDepth = 64;

// Whether op(A) · op(B), m × n with inner dimension k, has a shape small_gemm takes.
bool small_gemm_shape(bool ta, bool tb, long n, long k) { return !ta && (tb ? n : k) <= kSmallGemmMaxDepth; }

// Row-major C(m×n) = alpha · op(A) · op(B) + beta · C, as Backend::gemm, on raw pointers.
void gemm_rm(bool ta, bool tb, long m, long n, long k, float alpha, const float* a, const float* b, float beta,
             float* c) {
  if (alpha == 1.0f && small_gemm_shape(ta, tb, n, k)) {  // small_gemm: C = or += the product
    if (tb && beta == 1.0f) return cpu::small_gemm_nt(m, n, k, a, b, c);
    if (!tb && (beta == 0.0f || beta == 1.0f)) return cpu::small_gemm_nn(m, n, k, a, b, c, beta == 1.0f);
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(ta ? m : k), b, int(tb ? k : n), beta, c, int(n));
}
void gemm_rm(bool ta, bool tb, long m, long n, long k, double alpha, const double* a, const double* b,
             double beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(ta ? m : k), b, int(tb ? k : n), beta, c, int(n));
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

// x: (c, h, w), one image   cols: (c·r·s, p·q)   (layout above)
template <typename T>
void im2col(const Conv2dGeometry& g, const T* x, T* cols) {
  const long rs = g.r * g.s, crs = g.c * rs, pq = g.p * g.q;
#pragma omp parallel for schedule(static) if (crs * pq > cpu::kParallelGrain)
  for (long row = 0; row < crs; ++row) {
    const long ci = row / rs, ri = row % rs / g.s, si = row % g.s;
    const T* plane = x + ci * g.h * g.w;
    T* out = cols + row * pq;
    const ValidRange qv = valid_range(g.q, g.w, g.stride_w, g.pad_w, si);
    for (long pi = 0; pi < g.p; ++pi, out += g.q) {
      const long hi = pi * g.stride_h - g.pad_h + ri;
      if (hi < 0 || hi >= g.h) {
        std::fill(out, out + g.q, T(0));
        continue;
      }
      const T* src = plane + hi * g.w - g.pad_w + si;  // src[qi·stride_w] is x[ci, hi, qi·stride_w − pad_w + si]
      std::fill(out, out + qv.lo, T(0));
      if (g.stride_w == 1) std::copy(src + qv.lo, src + qv.hi, out + qv.lo);
      else
        for (long qi = qv.lo; qi < qv.hi; ++qi) out[qi] = src[qi * g.stride_w];
      std::fill(out + qv.hi, out + g.q, T(0));
    }
  }
}

// cols: (c·r·s, p·q)   dx: (c, h, w), one image
// dx[ci, y, x] = Σ over the (ri, si, pi, qi) that read it of cols[...] — the adjoint of
// im2col. One thread owns each channel plane, summing in a fixed order.
template <typename T>
void col2im(const Conv2dGeometry& g, const T* cols, T* dx) {
  const long rs = g.r * g.s, pq = g.p * g.q, hw = g.h * g.w;
#pragma omp parallel for schedule(static) if (g.c * rs * pq > cpu::kParallelGrain)
  for (long ci = 0; ci < g.c; ++ci) {
    T* plane = dx + ci * hw;
    std::fill(plane, plane + hw, T(0));
    for (long ri = 0; ri < g.r; ++ri) {
      for (long si = 0; si < g.s; ++si) {
        const T* in = cols + (ci * rs + ri * g.s + si) * pq;
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

// Images go to threads when there are enough of them, and enough work to pay for waking
// the pool (a gradient check's tiny convolutions run serially).
bool spread_images(const Conv2dGeometry& g, long threads) {
  return threads > 1 && g.n >= threads && g.n * g.c * g.r * g.s * g.p * g.q > cpu::kParallelGrain;
}

// Runs body(i, thread) for every image i: spread over the threads when there are at least
// as many images as threads (each thread then uses workspace slot `thread`), else one image
// at a time on slot 0, leaving the threads to the GEMM and the loops inside body.
template <typename Body>
void for_each_image(long n, bool images_in_parallel, Body&& body) {
#pragma omp parallel for schedule(static) if (images_in_parallel)
  for (long i = 0; i < n; ++i) body(i, images_in_parallel ? omp_get_thread_num() : 0);
}

// What the kernel log shows for one call: "im2col+sgemm conv2d fwd x 64×1×28×28 w 32×1×3×3 s1 p1",
// then the per-image GEMM it runs ("cblas_sgemm NN 32×784×9 ×64 images").
void log_conv(const char* direction, const Conv2dGeometry& g, bool trans_a, bool trans_b, long m, long n, long k) {
  record_kernel("im2col+sgemm", std::string("conv2d ") + direction + " x " + dims_text({g.n, g.c, g.h, g.w}) +
                                    " w " + dims_text({g.k, g.c, g.r, g.s}) + " s" + std::to_string(g.stride_h) +
                                    " p" + std::to_string(g.pad_h));
  const char* gemm = small_gemm_shape(trans_a, trans_b, n, k) ? "small_gemm (float32)" : "cblas_sgemm";
  record_kernel(gemm, std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " " + dims_text({m, n, k}) + " ×" +
                          std::to_string(g.n) + " images");
}

// Throws when the selected implementation is not one the CPU runs (cudnn).
bool use_reference() {
  check_conv_impl(conv_impl(), Device::cpu());
  return conv_impl() == ConvImpl::Reference;
}

// The CPU's fast path (--conv-impl winograd, the default) serves layers with few input
// channels by direct loops; im2col for the rest or on request.
bool use_direct(const Conv2dGeometry& g, cpu::ConvDirection which, const char* direction) {
  const ConvImpl impl = resolved_conv_impl(conv_impl(), Device::cpu());
  if (impl != ConvImpl::Winograd || !cpu::direct_applies(g, which)) return false;
  if (kernel_log_enabled())
    record_kernel("direct", std::string("conv2d ") + direction + " x " + dims_text({g.n, g.c, g.h, g.w}) + " w " +
                                dims_text({g.k, g.c, g.r, g.s}) + " p" + std::to_string(g.pad_h) +
                                ": " + cpu::direct_method(g, which));
  return true;
}

// Winograd (the CPU's default) for the shapes it serves; im2col for the rest or on request.
bool use_winograd(const Conv2dGeometry& g, const char* direction) {
  const ConvImpl impl = resolved_conv_impl(conv_impl(), Device::cpu());
  if (impl != ConvImpl::Winograd || !cpu::winograd_applies(g)) return false;
  if (kernel_log_enabled())
    record_kernel("winograd", std::string("F(2×2,3×3) conv2d ") + direction + " x " +
                                  dims_text({g.n, g.c, g.h, g.w}) + " w " + dims_text({g.k, g.c, g.r, g.s}) + " p" +
                                  std::to_string(g.pad_h) + ": 16 products per image chunk");
  return true;
}

void check_conv_dtypes(const char* kernel, const Tensor& a, const Tensor& b, const Tensor& c) {
  NNLAB_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), kernel, ": dtypes differ: ", a.describe(), ", ",
              b.describe(), ", ", c.describe());
}

}  // namespace


// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q)
// Per image: cols = im2col(x[i]);  y[i] = W · cols + b
void CpuBackend::conv2d_forward(const Conv2dGeometry& g, const Tensor& xt, const Tensor& wt, const Tensor* bt,
                                Tensor& yt) {
  check_conv_dtypes("conv2d_forward", xt, wt, yt);
  if (use_reference()) return cpu::conv2d_reference_forward(g, xt, wt, bt, yt);  // --conv-impl reference
  if (use_winograd(g, "fwd")) return cpu::winograd_forward(g, xt, wt, bt, yt);
  if (use_direct(g, cpu::ConvDirection::Forward, "fwd")) return cpu::direct_forward(g, xt, wt, bt, yt);
  if (kernel_log_enabled()) log_conv("fwd", g, false, false, g.k, g.p * g.q, g.c * g.r * g.s);
  cpu::dispatch_float("conv2d_forward", xt, [&](auto tag) {
    using T = decltype(tag);
    const long crs = g.c * g.r * g.s, pq = g.p * g.q, threads = omp_get_max_threads();
    const bool parallel_images = spread_images(g, threads);
    Tensor cols = Tensor::empty({(parallel_images ? threads : 1) * crs * pq}, xt.dtype(), device());
    const T *x = xt.data<T>(), *w = wt.data<T>(), *b = bt && bt->defined() ? bt->data<T>() : nullptr;
    T *y = yt.data<T>(), *ws = cols.data<T>();
    for_each_image(g.n, parallel_images, [&](long i, int slot) {
      T* c = ws + slot * crs * pq;
      T* yi = y + i * g.k * pq;
      im2col(g, x + i * g.c * g.h * g.w, c);
      gemm_rm(false, false, g.k, pq, crs, T(1), w, c, T(0), yi);
      if (b)
        for (long kk = 0; kk < g.k; ++kk)
          for (long j = 0; j < pq; ++j) yi[kk * pq + j] += b[kk];
    });
  });
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
// Per image: dcols = Wᵀ · dy[i];  dx[i] = col2im(dcols)
void CpuBackend::conv2d_backward_data(const Conv2dGeometry& g, const Tensor& dyt, const Tensor& wt, Tensor& dxt) {
  check_conv_dtypes("conv2d_backward_data", dyt, wt, dxt);
  if (use_reference()) return cpu::conv2d_reference_backward_data(g, dyt, wt, dxt);  // --conv-impl reference
  if (use_winograd(g, "bwd data")) return cpu::winograd_backward_data(g, dyt, wt, dxt);
  if (use_direct(g, cpu::ConvDirection::BackwardData, "bwd data")) return cpu::direct_backward_data(g, dyt, wt, dxt);
  if (kernel_log_enabled()) log_conv("bwd data", g, true, false, g.c * g.r * g.s, g.p * g.q, g.k);
  cpu::dispatch_float("conv2d_backward_data", dyt, [&](auto tag) {
    using T = decltype(tag);
    const long crs = g.c * g.r * g.s, pq = g.p * g.q, threads = omp_get_max_threads();
    const bool parallel_images = spread_images(g, threads);
    Tensor cols = Tensor::empty({(parallel_images ? threads : 1) * crs * pq}, dyt.dtype(), device());
    const T *dy = dyt.data<T>(), *w = wt.data<T>();
    T *dx = dxt.data<T>(), *ws = cols.data<T>();
    for_each_image(g.n, parallel_images, [&](long i, int slot) {
      T* c = ws + slot * crs * pq;
      gemm_rm(true, false, crs, pq, g.k, T(1), w, dy + i * g.k * pq, T(0), c);
      col2im(g, c, dx + i * g.c * g.h * g.w);
    });
  });
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)
// Each thread sums dy[i] · im2col(x[i])ᵀ over its own images into a partial dW (the im2col
// is recomputed rather than kept from the forward pass: one cheap pass, no state between
// kernels); the partials are then added in thread order, so the sum's order is fixed.
void CpuBackend::conv2d_backward_filter(const Conv2dGeometry& g, const Tensor& dyt, const Tensor& xt, Tensor& dwt) {
  check_conv_dtypes("conv2d_backward_filter", dyt, xt, dwt);
  if (use_reference()) return cpu::conv2d_reference_backward_filter(g, dyt, xt, dwt);  // --conv-impl reference
  if (use_winograd(g, "bwd filter")) return cpu::winograd_backward_filter(g, dyt, xt, dwt);
  if (use_direct(g, cpu::ConvDirection::BackwardFilter, "bwd filter")) return cpu::direct_backward_filter(g, dyt, xt, dwt);
  if (kernel_log_enabled()) log_conv("bwd filter", g, false, true, g.k, g.c * g.r * g.s, g.p * g.q);
  cpu::dispatch_float("conv2d_backward_filter", dyt, [&](auto tag) {
    using T = decltype(tag);
    const long crs = g.c * g.r * g.s, pq = g.p * g.q, kcrs = g.k * crs, threads = omp_get_max_threads();
    const bool parallel_images = spread_images(g, threads);
    const long slots = parallel_images ? threads : 1;
    Tensor cols = Tensor::empty({slots * crs * pq}, dyt.dtype(), device());
    Tensor partial = Tensor::zeros({slots * kcrs}, dyt.dtype(), device());
    const T *dy = dyt.data<T>(), *x = xt.data<T>();
    T *ws = cols.data<T>(), *part = partial.data<T>(), *dw = dwt.data<T>();
    for_each_image(g.n, parallel_images, [&](long i, int slot) {
      T* c = ws + slot * crs * pq;
      im2col(g, x + i * g.c * g.h * g.w, c);
      gemm_rm(false, true, g.k, crs, pq, T(1), dy + i * g.k * pq, c, T(1), part + slot * kcrs);
    });
#pragma omp parallel for schedule(static) if (kcrs * slots > cpu::kParallelGrain)
    for (long j = 0; j < kcrs; ++j) {
      T s = part[j];
      for (long t = 1; t < slots; ++t) s += part[t * kcrs + j];
      dw[j] = s;
    }
  });
}

}  // namespace nnlab
