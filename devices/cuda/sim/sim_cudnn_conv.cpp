// The simulator's convolution arithmetic: cuDNN's three directions as im2col + GEMM on the
// CPU, float32 throughout, with OpenBLAS doing the products.
//
// x: (n, c, h, w)  w: (k, c, r, s)  y: (n, k, p, q)
//   y[n,k,p,q]  = Σ_{c,r,s} w[k,c,r,s] · x[n, c, p·u − pad_h + r'·dil_h, q·v − pad_w + s'·dil_w]
// with r' = r, s' = s for CUDNN_CROSS_CORRELATION and r' = R−1−r, s' = S−1−s for
// CUDNN_CONVOLUTION (the filter rotated by 180°); x is zero outside the image.
//
// Unfold one image into col (CRS × PQ): col[(c·R + r)·S + s][p·Q + q] = the x value above.
// The flip lives in the unfolding, so every direction uses w as stored:
//   forward:          y_n  = W (K×CRS) · col_n
//   backward data:    dx_n = fold(Wᵀ · dy_n)     (fold = im2col's adjoint, a scatter-add)
//   backward filter:  dW   = Σ_n dy_n (K×PQ) · col_nᵀ
//
// Two algorithms per direction, as cuDNN offers a workspace-free one beside ones that want
// memory: the first works image by image in internal buffers (no workspace, images spread
// over threads); the second unfolds the whole batch into the caller's workspace and does one
// large GEMM (OpenBLAS's own threads). Which is faster depends on the shape, so Find has a
// real choice to make. Internal buffers are allocated before a parallel region (one slice per
// thread), so running out of memory throws on the calling thread, not inside OpenMP.
//
// bf16 tensors (cuDNN's PSEUDO_BFLOAT16 configuration: bf16 data, float32 compute) are widened
// to float32 copies, convolved as above, and the result out = alpha·conv + beta·out rounded to
// bf16 once, to nearest even, as the GPU's epilogue stores it (conv_run_stored).
//
// Every sum runs in a fixed order that does not depend on the thread count, so a result
// repeats bit for bit (OpenBLAS splits its work over rows and columns of C, never over the
// summed dimension).
#include "devices/cuda/sim/sim_cudnn_internal.h"

#include "core/bfloat16.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <vector>

namespace nnlab::sim::dnn {

namespace {

// col (CRS rows, leading dimension ld) ← the unfolded image x_n (C × H × W).
void im2col(const ConvGeometry& g, const float* x, float* col, int64_t ld) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        const int64_t rr = g.flip ? g.r - 1 - r : r, ss = g.flip ? g.s - 1 - s : s;
        float* row = col + ((c * g.r + r) * g.s + s) * ld;
        const float* plane = x + c * g.h * g.w;
        for (int64_t p = 0; p < g.p; ++p) {
          float* dst = row + p * g.q;
          const int64_t ih = p * g.stride_h - g.pad_h + rr * g.dil_h;
          if (ih < 0 || ih >= g.h) {
            std::fill(dst, dst + g.q, 0.0f);
            continue;
          }
          for (int64_t q = 0; q < g.q; ++q) {
            const int64_t iw = q * g.stride_w - g.pad_w + ss * g.dil_w;
            dst[q] = (iw >= 0 && iw < g.w) ? plane[ih * g.w + iw] : 0.0f;
          }
        }
      }
}

// acc (C × H × W) ← fold(col): every col entry added back onto the pixel it was read from,
// in the fixed (c, r, s, p, q) order.
void col2im(const ConvGeometry& g, const float* col, int64_t ld, float* acc) {
  std::fill(acc, acc + g.chw(), 0.0f);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        const int64_t rr = g.flip ? g.r - 1 - r : r, ss = g.flip ? g.s - 1 - s : s;
        const float* row = col + ((c * g.r + r) * g.s + s) * ld;
        float* plane = acc + c * g.h * g.w;
        for (int64_t p = 0; p < g.p; ++p) {
          const int64_t ih = p * g.stride_h - g.pad_h + rr * g.dil_h;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t q = 0; q < g.q; ++q) {
            const int64_t iw = q * g.stride_w - g.pad_w + ss * g.dil_w;
            if (iw >= 0 && iw < g.w) plane[ih * g.w + iw] += row[p * g.q + q];
          }
        }
      }
}

// out = alpha · result + beta · out; beta == 0 does not read out.
void blend(float* out, const float* result, int64_t count, float alpha, float beta) {
  if (beta == 0.0f)
    for (int64_t i = 0; i < count; ++i) out[i] = alpha * result[i];
  else
    for (int64_t i = 0; i < count; ++i) out[i] = alpha * result[i] + beta * out[i];
}

int threads_for(int64_t images, int threads) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, images)));
}

// row-major C (m×n) = alpha · op(A) · op(B) + beta · C; OpenBLAS does not read C when beta == 0.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// ---- forward -----------------------------------------------------------------------------

// IMPLICIT_GEMM: each thread unfolds one image at a time into its own buffer; y_n = W · col_n.
void forward_per_image(const ConvGeometry& g, const float* x, const float* w, float* y, float alpha, float beta,
                       int threads) {
  const int t = threads_for(g.n, threads);
  const int64_t col_size = g.crs() * g.pq();
  std::vector<float> cols(static_cast<size_t>(t * col_size));
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t n = 0; n < g.n; ++n) {
    float* col = cols.data() + omp_get_thread_num() * col_size;
    im2col(g, x + n * g.chw(), col, g.pq());
    gemm(false, false, g.k, g.pq(), g.crs(), alpha, w, g.crs(), col, g.pq(), beta, y + n * g.kpq(), g.pq());
  }
}

// GEMM: workspace = [COL (CRS × N·PQ) | Y (K × N·PQ)]; Y = W · COL in one product, then
// image n's columns of Y are blended into y_n.
void forward_batched(const ConvGeometry& g, const float* x, const float* w, float* y, float alpha, float beta,
                     float* ws, int threads) {
  const int64_t npq = g.n * g.pq();
  float* col = ws;
  float* big_y = ws + g.crs() * npq;
  const int t = threads_for(g.n, threads);
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t n = 0; n < g.n; ++n) im2col(g, x + n * g.chw(), col + n * g.pq(), npq);
  gemm(false, false, g.k, npq, g.crs(), 1.0f, w, g.crs(), col, npq, 0.0f, big_y, npq);
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k)
      blend(y + n * g.kpq() + k * g.pq(), big_y + k * npq + n * g.pq(), g.pq(), alpha, beta);
}

// ---- backward data -----------------------------------------------------------------------

// ALGO_0: per image, col = Wᵀ · dy_n (CRS × PQ), dx_n = fold(col).
void backward_data_per_image(const ConvGeometry& g, const float* w, const float* dy, float* dx, float alpha,
                             float beta, int threads) {
  const int t = threads_for(g.n, threads);
  const int64_t col_size = g.crs() * g.pq();
  std::vector<float> cols(static_cast<size_t>(t * col_size)), accs(static_cast<size_t>(t * g.chw()));
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t n = 0; n < g.n; ++n) {
    float* col = cols.data() + omp_get_thread_num() * col_size;
    float* acc = accs.data() + omp_get_thread_num() * g.chw();
    gemm(true, false, g.crs(), g.pq(), g.k, 1.0f, w, g.crs(), dy + n * g.kpq(), g.pq(), 0.0f, col, g.pq());
    col2im(g, col, g.pq(), acc);
    blend(dx + n * g.chw(), acc, g.chw(), alpha, beta);
  }
}

// ALGO_1: workspace = [DY (K × N·PQ) | COL (CRS × N·PQ)]; dy regrouped channel-major, one
// product COL = Wᵀ · DY, then each image's columns folded back.
void backward_data_batched(const ConvGeometry& g, const float* w, const float* dy, float* dx, float alpha,
                           float beta, float* ws, int threads) {
  const int64_t npq = g.n * g.pq();
  float* big_dy = ws;
  float* col = ws + g.k * npq;
  const int t = threads_for(g.n, threads);
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k)
      std::copy_n(dy + n * g.kpq() + k * g.pq(), g.pq(), big_dy + k * npq + n * g.pq());
  gemm(true, false, g.crs(), npq, g.k, 1.0f, w, g.crs(), big_dy, npq, 0.0f, col, npq);
  std::vector<float> accs(static_cast<size_t>(t * g.chw()));
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t n = 0; n < g.n; ++n) {
    float* acc = accs.data() + omp_get_thread_num() * g.chw();
    col2im(g, col + n * g.pq(), npq, acc);
    blend(dx + n * g.chw(), acc, g.chw(), alpha, beta);
  }
}

// ---- backward filter ---------------------------------------------------------------------

// ALGO_0: dW = Σ_n dy_n · col_nᵀ without workspace. The images are summed in groups of a
// fixed size (not one per thread, so the order of the sum does not depend on the thread
// count): each group's partial dW is built image by image in internal memory, the groups
// run in parallel, and the partials are then added in group order.
void backward_filter_per_image(const ConvGeometry& g, const float* x, const float* dy, float* dw, float alpha,
                               float beta, int threads) {
  constexpr int64_t kGroup = 8;
  const int64_t groups = (g.n + kGroup - 1) / kGroup;
  const int t = threads_for(groups, threads);
  const int64_t col_size = g.crs() * g.pq(), w_size = g.k * g.crs();
  std::vector<float> cols(static_cast<size_t>(t * col_size)), partial(static_cast<size_t>(groups * w_size));
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t group = 0; group < groups; ++group) {
    float* col = cols.data() + omp_get_thread_num() * col_size;
    float* part = partial.data() + group * w_size;
    const int64_t first = group * kGroup, end = std::min(g.n, first + kGroup);
    for (int64_t n = first; n < end; ++n) {
      im2col(g, x + n * g.chw(), col, g.pq());
      gemm(false, true, g.k, g.crs(), g.pq(), 1.0f, dy + n * g.kpq(), g.pq(), col, g.pq(), n == first ? 0.0f : 1.0f,
           part, g.crs());
    }
  }
  for (int64_t group = 1; group < groups; ++group)
    for (int64_t i = 0; i < w_size; ++i) partial[size_t(i)] += partial[size_t(group * w_size + i)];
  blend(dw, partial.data(), w_size, alpha, beta);
}

// ALGO_1: workspace = [COL (CRS × N·PQ) | DY (K × N·PQ)]; dW = alpha · DY · COLᵀ + beta · dW
// in one product over all N·PQ positions.
void backward_filter_batched(const ConvGeometry& g, const float* x, const float* dy, float* dw, float alpha,
                             float beta, float* ws, int threads) {
  const int64_t npq = g.n * g.pq();
  float* col = ws;
  float* big_dy = ws + g.crs() * npq;
#pragma omp parallel for num_threads(threads_for(g.n, threads)) schedule(static)
  for (int64_t n = 0; n < g.n; ++n) {
    im2col(g, x + n * g.chw(), col + n * g.pq(), npq);
    for (int64_t k = 0; k < g.k; ++k)
      std::copy_n(dy + n * g.kpq() + k * g.pq(), g.pq(), big_dy + k * npq + n * g.pq());
  }
  gemm(false, true, g.k, g.crs(), npq, alpha, big_dy, npq, col, npq, beta, dw, g.crs());
}

constexpr int kForward[kAlgorithmsPerDirection] = {0, 2};  // IMPLICIT_GEMM, GEMM
constexpr int kBackward[kAlgorithmsPerDirection] = {0, 1};  // ALGO_0, ALGO_1

}  // namespace

const int* implemented_algorithms(Direction dir) { return dir == Direction::Forward ? kForward : kBackward; }

bool conv_workspace_bytes(Direction dir, int algo, const ConvGeometry& g, size_t* bytes) {
  const int* algos = implemented_algorithms(dir);
  const bool batched = algo == algos[1];
  if (algo != algos[0] && !batched) return false;
  // BLAS takes 32-bit dimensions: the batched product's N·PQ must fit, as must every
  // per-image one.
  const int64_t npq = g.n * g.pq();
  for (int64_t d : {g.k, g.crs(), g.pq(), g.chw(), batched ? npq : int64_t(0)})
    if (d > INT_MAX) return false;
  *bytes = batched ? static_cast<size_t>((g.crs() + g.k) * npq) * sizeof(float) : 0;
  return true;
}

void conv_run(Direction dir, int algo, const ConvGeometry& g, const float* in0, const float* in1, float* out,
              float alpha, float beta, float* workspace, int threads) {
  const bool batched = algo == implemented_algorithms(dir)[1];
  switch (dir) {
    case Direction::Forward:
      if (batched) return forward_batched(g, in0, in1, out, alpha, beta, workspace, threads);
      return forward_per_image(g, in0, in1, out, alpha, beta, threads);
    case Direction::BackwardData:
      if (batched) return backward_data_batched(g, in0, in1, out, alpha, beta, workspace, threads);
      return backward_data_per_image(g, in0, in1, out, alpha, beta, threads);
    case Direction::BackwardFilter:
      if (batched) return backward_filter_batched(g, in0, in1, out, alpha, beta, workspace, threads);
      return backward_filter_per_image(g, in0, in1, out, alpha, beta, threads);
  }
}

size_t operand_elements(Direction dir, const ConvGeometry& g, int i) {
  const int64_t x = g.n * g.chw(), w = g.k * g.crs(), y = g.n * g.kpq();
  const int64_t sizes[3][3] = {{x, w, y}, {w, y, x}, {x, y, w}};
  return size_t(sizes[int(dir)][i]);
}

namespace {

std::vector<float> widened(const void* data, size_t count) {
  const auto* bits = static_cast<const BFloat16*>(data);
  std::vector<float> wide(count);
  for (size_t i = 0; i < count; ++i) wide[i] = float(bits[i]);
  return wide;
}

}  // namespace

void conv_run_stored(Direction dir, int algo, const ConvGeometry& g, const void* in0, const void* in1, void* out,
                     float alpha, float beta, float* workspace, int threads) {
  if (!g.bf16)
    return conv_run(dir, algo, g, static_cast<const float*>(in0), static_cast<const float*>(in1),
                    static_cast<float*>(out), alpha, beta, workspace, threads);
  const std::vector<float> a = widened(in0, operand_elements(dir, g, 0)), b = widened(in1, operand_elements(dir, g, 1));
  const size_t count = operand_elements(dir, g, 2);
  // beta == 0 never reads out, as for float32: it may hold any bits, NaN included
  std::vector<float> result = beta != 0.0f ? widened(out, count) : std::vector<float>(count);
  conv_run(dir, algo, g, a.data(), b.data(), result.data(), alpha, beta, workspace, threads);
  auto* stored = static_cast<BFloat16*>(out);
  for (size_t i = 0; i < count; ++i) stored[i] = BFloat16(result[i]);
}

}  // namespace nnlab::sim::dnn
