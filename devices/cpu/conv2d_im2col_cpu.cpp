// Convolution on the CPU as im2col + GEMM (OpenBLAS, or small_gemm.h for a short c·r·s), one
// image per thread. Chosen by the router (conv2d_plan.cpp) for the layers Winograd
// and the direct loops do not serve.
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
// Threads: when the batch has at least as many images as threads, each thread takes its even
// share of the images and then what another has left (balanced_loops.h), and OpenBLAS, called inside the parallel region, runs
// single-threaded in each. A smaller batch is done one image at a time with a threaded GEMM
// and threaded im2col/col2im instead. The filter gradient sums partial sums of fixed runs of
// images in run order, and col2im gives each thread whole (channel) planes, so for a given
// thread count results repeat bit for bit.
#include <cblas.h>

#include <omp.h>

#include <algorithm>

#include "devices/cpu/balanced_loops.h"
#include "devices/cpu/bias_lanes.h"
#include "devices/cpu/conv2d_im2col.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/small_gemm.h"
#include "devices/kernel_log.h"

namespace nnlab::cpu {

namespace {

// bias_lanes.h's sums and balanced_loops.h's loops, as compiled for this library's baseline
// instruction set.
using NNLAB_ISA::bias_from_image_sums;
using NNLAB_ISA::image_bias_sums;
using NNLAB_ISA::kBiasSums;
using NNLAB_ISA::for_each_item;
using NNLAB_ISA::for_each_run;
using NNLAB_ISA::summing_runs;
using NNLAB_ISA::add_partials;

// Row-major C (m × n) = op(A) · op(B), or C += op(A) · op(B) when `accumulate`, as
// Backend::gemm on raw pointers. `small`: small_gemm.h's loops, which have the NN form (= or
// +=) and the NT form (+= only); the rest is OpenBLAS.
void gemm_rm(bool small, bool ta, bool tb, long m, long n, long k, const float* a, const float* b, bool accumulate,
             float* c) {
  if (small && !ta) {
    if (!tb) return small_gemm_nn(m, n, k, a, b, c, accumulate);
    if (accumulate) return small_gemm_nt(m, n, k, a, b, c, n, true, nullptr, false);
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              1.0f, a, int(ta ? m : k), b, int(tb ? k : n), accumulate ? 1.0f : 0.0f, c, int(n));
}
void gemm_rm(bool, bool ta, bool tb, long m, long n, long k, const double* a, const double* b, bool accumulate,
             double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              1.0, a, int(ta ? m : k), b, int(tb ? k : n), accumulate ? 1.0 : 0.0, c, int(n));
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
#pragma omp parallel for schedule(static) if (crs * pq > kParallelGrain)
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
#pragma omp parallel for schedule(static) if (g.c * rs * pq > kParallelGrain)
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
  return threads > 1 && g.n >= threads && g.n * g.c * g.r * g.s * g.p * g.q > kParallelGrain;
}

// Runs body(i, thread) for every image i: spread over the threads when there are at least
// as many images as threads (each thread then uses workspace slot `thread`), else one image
// at a time on slot 0, leaving the threads to the GEMM and the loops inside body.
template <typename Body>
void for_each_image(long n, bool images_in_parallel, Body&& body) {
  for_each_item(n, images_in_parallel, body);
}

}  // namespace

std::string im2col_product_text(const Conv2dGeometry& g, ConvDirection direction) {
  const long long crs = g.c * g.r * g.s, pq = g.p * g.q;
  switch (direction) {
    case ConvDirection::Forward: return "NN " + dims_text({g.k, pq, crs});
    case ConvDirection::BackwardData: return "TN " + dims_text({crs, pq, g.k});
    case ConvDirection::BackwardFilter: return "NT " + dims_text({g.k, crs, pq});
  }
  return "";
}

// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q)
// Per image: cols = im2col(x[i]);  y[i] = W · cols + b
void im2col_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                    ConvAlgorithm product) {
  const bool small = product == ConvAlgorithm::Im2colSmallGemm;
  dispatch_float("conv2d_forward", x, [&](auto tag) {
    using T = decltype(tag);
    const long crs = g.c * g.r * g.s, pq = g.p * g.q, threads = omp_get_max_threads();
    const bool parallel_images = spread_images(g, threads);
    Tensor cols = Tensor::empty({(parallel_images ? threads : 1) * crs * pq}, x.dtype(), Device::cpu());
    const T *x_data = x.data<T>(), *w_data = w.data<T>();
    const T* b_data = b && b->defined() ? b->data<T>() : nullptr;
    T *y_data = y.data<T>(), *workspace = cols.data<T>();
    for_each_image(g.n, parallel_images, [&](long i, int slot) {
      T* c = workspace + slot * crs * pq;
      T* yi = y_data + i * g.k * pq;
      im2col(g, x_data + i * g.c * g.h * g.w, c);
      gemm_rm(small, false, false, g.k, pq, crs, w_data, c, false, yi);
      if (b_data)
        for (long kk = 0; kk < g.k; ++kk)
          for (long j = 0; j < pq; ++j) yi[kk * pq + j] += b_data[kk];
    });
  });
}

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
// Per image: dcols = Wᵀ · dy[i];  dx[i] = col2im(dcols)
void im2col_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  dispatch_float("conv2d_backward_data", dy, [&](auto tag) {
    using T = decltype(tag);
    const long crs = g.c * g.r * g.s, pq = g.p * g.q, threads = omp_get_max_threads();
    const bool parallel_images = spread_images(g, threads);
    Tensor cols = Tensor::empty({(parallel_images ? threads : 1) * crs * pq}, dy.dtype(), Device::cpu());
    const T *dy_data = dy.data<T>(), *w_data = w.data<T>();
    T *dx_data = dx.data<T>(), *workspace = cols.data<T>();
    for_each_image(g.n, parallel_images, [&](long i, int slot) {
      T* c = workspace + slot * crs * pq;
      gemm_rm(false, true, false, crs, pq, g.k, w_data, dy_data + i * g.k * pq, false, c);
      col2im(g, c, dx_data + i * g.c * g.h * g.w);
    });
  });
}

namespace {

// dW = Σ_i dz_i · im2col(x[i])ᵀ, where image_gradient(i, slot) gives dz_i (k, p·q) for image i
// on workspace slot `slot`. Each fixed run of images sums into a partial dW of its own (the
// im2col is recomputed rather than kept from the forward pass: one cheap pass, no state
// between kernels); the partials are then added in run order, so the sum's order is fixed.
template <typename T, typename ImageGradient>
void filter_gradient(const Conv2dGeometry& g, const T* x_data, bool small, DType dtype, T* dw_data,
                     ImageGradient&& image_gradient) {
  const long crs = g.c * g.r * g.s, pq = g.p * g.q, kcrs = g.k * crs, threads = omp_get_max_threads();
  const bool parallel_images = spread_images(g, threads);
  const long slots = parallel_images ? threads : 1, runs = summing_runs(g.n, parallel_images);
  Tensor cols = Tensor::empty({slots * crs * pq}, dtype, Device::cpu());
  Tensor partial = Tensor::zeros({runs * kcrs}, dtype, Device::cpu());
  T *workspace = cols.data<T>(), *part = partial.data<T>();
  for_each_run(g.n, runs, parallel_images, [&](long i, int slot, long run) {
    T* c = workspace + slot * crs * pq;
    const T* dz = image_gradient(i, slot);
    im2col(g, x_data + i * g.c * g.h * g.w, c);
    gemm_rm(small, false, true, g.k, crs, pq, dz, c, true, part + run * kcrs);
  });
  add_partials(part, kcrs, runs);
  std::copy(part, part + kcrs, dw_data);
}

}  // namespace

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)  db: (k) or null
// With db, each image's planes of dy are summed for the bias as the product is about to read
// them (bias_lanes.h: bias_backward's order, so its bits).
void im2col_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db,
                            ConvAlgorithm product) {
  dispatch_float("conv2d_backward_filter", dy, [&](auto tag) {
    using T = decltype(tag);
    const long pq = g.p * g.q;
    Tensor sums = db ? Tensor::empty({g.n * g.k * kBiasSums}, dy.dtype(), Device::cpu()) : Tensor();
    const T* dy_data = dy.data<T>();
    T* sum_data = db ? sums.data<T>() : nullptr;
    filter_gradient(g, x.data<T>(), product == ConvAlgorithm::Im2colSmallGemm, dy.dtype(), dw.data<T>(),
                    [&](long i, int) {
                      const T* dyi = dy_data + i * g.k * pq;
                      if (sum_data)
                        image_bias_sums<T, false>(dyi, nullptr, nullptr, g.k, pq, sum_data + i * g.k * kBiasSums);
                      return dyi;
                    });
    if (db) bias_from_image_sums(sum_data, g.n, g.k, db->data<T>());
  });
}

// y, dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, r, s)  db: (k) or null
// Per image: dz_i = dy_i·[y_i > 0] into the thread's buffer, its bias sums taken as it is
// written (bias_lanes.h), then dW += dz_i · im2col(x[i])ᵀ reads it from the cache. Unfused,
// relu_bias_backward wrote dz whole and the filter gradient read it back (cifar-cnn's first
// layer: 8 MB each way). The same sums in the same order as the two kernels: the same bits.
void im2col_relu_backward_params(const Conv2dGeometry& g, const Tensor& y, const Tensor& dy, const Tensor& x,
                                 Tensor& dw, Tensor* db, ConvAlgorithm product) {
  dispatch_float("conv2d_backward (ReLU epilogue)", dy, [&](auto tag) {
    using T = decltype(tag);
    const long pq = g.p * g.q, kpq = g.k * pq;
    const long slots = spread_images(g, omp_get_max_threads()) ? omp_get_max_threads() : 1;
    Tensor dz = Tensor::empty({slots * kpq}, dy.dtype(), Device::cpu());
    Tensor sums = Tensor::empty({g.n * g.k * kBiasSums}, dy.dtype(), Device::cpu());
    const T *y_data = y.data<T>(), *dy_data = dy.data<T>();
    T *dz_data = dz.data<T>(), *sum_data = sums.data<T>();
    filter_gradient(g, x.data<T>(), product == ConvAlgorithm::Im2colSmallGemm, dy.dtype(), dw.data<T>(),
                    [&](long i, int slot) {
                      T* dzi = dz_data + slot * kpq;
                      image_bias_sums<T, true>(dy_data + i * kpq, y_data + i * kpq, dzi, g.k, pq,
                                               sum_data + i * g.k * kBiasSums);
                      return static_cast<const T*>(dzi);
                    });
    if (db) bias_from_image_sums(sum_data, g.n, g.k, db->data<T>());
  });
}

}  // namespace nnlab::cpu
