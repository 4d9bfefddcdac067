#include "devices/cpu/gemm_libxsmm.h"

#ifdef NNLAB_WITH_LIBXSMM
#include <libxsmm.h>
#include <omp.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/threads.h"
#endif

namespace nnlab::cpu {

#ifndef NNLAB_WITH_LIBXSMM

bool libxsmm_gemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*) {
  return false;
}
int64_t libxsmm_column_chunks(bool, int64_t, int64_t, int64_t, float) { return 0; }
bool libxsmm_gemm_chunk(bool, int64_t, int64_t, int64_t, const float*, const float*, float, float*, int64_t) {
  return false;
}

#else

namespace {

// Products beyond these are OpenBLAS's. Every Linear layer of the zoo is inside: one side is
// the batch, and the largest, cifar-cnn's f1 (64 × 512 × 4096), ran at 186–248 GFLOP/s on one
// Zen 5 core against OpenBLAS's 112–119, cnn's f1 (64 × 128 × 3136) at 217–260 against 111–121
// (scripts/bench_libxsmm.cpp). Square products on 2 threads (`nnlab sgemm`): libxsmm 464
// GFLOP/s at 1024³ and 350 at 2048³ against OpenBLAS's 264 and 260, but 175 at 4096³, where
// OpenBLAS's cache blocking wins; hence at most 2048³ multiply-adds.
constexpr int64_t kLargestSide = 4096;
constexpr double kLargestProduct = double(int64_t(1) << 33);  // m · n · k
// Below this many flops a product stays on one thread: waking a second costs more.
constexpr double kParallelFlops = 2e6;
// A B of more bytes than this (half the L2 cache: with A and C beside it, it would not stay) is
// split into chunks of kColumnChunk columns (product_columns). At 1 MB, cifar-cnn's f1 weight
// gradient (512 × 4096 × 64, TN: B its 1 MB input) ran by rows, streaming all of B for every few
// rows of C; by chunks its backward node took 1.49 against 1.60 ms (explain, 6 alternated pairs).
constexpr double kLargeB = 1 << 19;
constexpr int64_t kColumnChunk = 128;

// libxsmm generates code for the instruction set cpu_isa() chose, so NNLAB_CPU_ISA=avx2
// gets AVX2 code on an AVX-512 machine too. Set once, before the first kernel.
void initialise() {
  static std::once_flag once;
  std::call_once(once, [] {
    libxsmm_init();
    libxsmm_set_target_arch(cpu_isa() == CpuIsa::avx512 ? "avx512_core" : "hsw");
  });
}

// out (cols × rows) = in (rows × cols)ᵀ, row-major, in square tiles: a row-by-row copy writes
// with a stride of `rows` floats and touches a new cache line with every element (0.5 ms for
// the mlp's 256 × 784 weight, more than the product it feeds); 16 × 16 tiles keep both the
// tile read and the tile written in the L1 cache.
void transpose_rows(const float* in, int64_t rows, int64_t cols, float* out, int64_t i0) {
  constexpr int64_t kTile = 16;
  for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = i0; i < i1; ++i) out[j * rows + i] = in[i * cols + j];
  }
}

// One thread runs the plain loop, not a parallel region with a false if clause: LLVM's OpenMP
// runtime (the clang sanitizer build) kept that region's num_threads(1) for the next region,
// OpenBLAS's, which then ran its two-thread GEMM on one thread and waited for the other forever.
void transpose(const float* in, int64_t rows, int64_t cols, float* out, int threads) {
  constexpr int64_t kTile = 16;
  if (threads <= 1) {
    for (int64_t i0 = 0; i0 < rows; i0 += kTile) transpose_rows(in, rows, cols, out, i0);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) transpose_rows(in, rows, cols, out, i0);
}

// The kernel for a block of C of `rows` × `cols` (C's rows n floats apart): column-major
// C' (cols × rows) = B' · A' (see the header); null when libxsmm refuses the shape.
libxsmm_smmfunction block_kernel(bool trans_a, int64_t rows, int64_t cols, int64_t n, int64_t k, int64_t lda,
                                 int64_t ldb, float beta) {
  const libxsmm_blasint m_x = cols, n_x = rows, k_x = k, lda_x = ldb, ldb_x = lda, ldc_x = n;
  const float alpha = 1.0f;
  const int flags = trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
  return libxsmm_smmdispatch(m_x, n_x, k_x, &lda_x, &ldb_x, &ldc_x, &alpha, &beta, &flags, nullptr);
}

// A product deeper than this runs as a sum of products kDepthChunk deep, where op(B) is
// larger than kDeepPanel: libxsmm's kernel streams the whole depth of op(B) once for every few
// rows of C, so a 1 MB op(B) (cifar-cnn's f1 forward, 4096 × 64 after its transpose) came from
// the L3 cache some 40 times per thread; a 256-deep slice (64 KB) stays in the L2 cache.
constexpr int64_t kDepthChunk = 256;
constexpr double kDeepPanel = 256 * 1024;

// The depth of each slice of a product k deep with op(B) of k × n floats: k itself, or kDepthChunk.
int64_t depth_slice(int64_t k, int64_t n) {
  return k > 2 * kDepthChunk && double(k) * double(n) * sizeof(float) > kDeepPanel ? kDepthChunk : k;
}

// Whether libxsmm takes every kernel product_rows will ask for: the first slice with beta, the
// others (full slices and the last, shorter one) adding to C.
bool rows_kernels_ready(bool trans_a, int64_t rows, int64_t n, int64_t k, int64_t lda, int64_t ldb, float beta) {
  const int64_t slice = depth_slice(k, n), last = k - (k - 1) / slice * slice;
  if (!block_kernel(trans_a, rows, n, n, std::min(slice, k), lda, ldb, beta)) return false;
  if (slice == k) return true;
  return block_kernel(trans_a, rows, n, n, slice, lda, ldb, 1.0f) && block_kernel(trans_a, rows, n, n, last, lda, ldb, 1.0f);
}

// Rows [first, first + rows) of C, every column, in depth slices (depth_slice): C = op(A)[:, s] ·
// op(B)[s, :] summed over the slices s in order, so the bits depend on the shape alone.
bool product_rows(bool trans_a, int64_t first, int64_t rows, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c) {
  const int64_t slice = depth_slice(k, n);
  for (int64_t k0 = 0; k0 < k; k0 += slice) {
    const libxsmm_smmfunction kernel =
        block_kernel(trans_a, rows, n, n, std::min(slice, k - k0), lda, ldb, k0 == 0 ? beta : 1.0f);
    if (!kernel) return false;
    // Row `first` of op(A) from column k0: A (NN) stored m × k, or column `first` of the stored k × m A (TN).
    const float* a_rows = trans_a ? a + k0 * lda + first : a + first * lda + k0;
    kernel(b + k0 * ldb, a_rows, c + first * n);
  }
  return true;
}

// Columns [first, first + cols) of C, every row: B's columns [first, first + cols) and all of A.
// A chunk of kColumnChunk columns of B (k × 128 floats: 256 KB at k = 512) and A stay in the L2
// cache while the kernel passes over them.
bool product_columns(bool trans_a, int64_t first, int64_t cols, int64_t m, int64_t n, int64_t k, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c) {
  const libxsmm_smmfunction kernel = block_kernel(trans_a, m, cols, n, k, lda, ldb, beta);
  if (!kernel) return false;
  kernel(b + first, a, c + first);
  return true;
}

// Whether op(A) · B (B stored k × n) runs in column chunks: a B past kLargeB with a C at least
// 4× wider than tall (see libxsmm_gemm).
bool by_column_chunks(int64_t m, int64_t n, int64_t k) {
  return double(k) * double(n) * sizeof(float) > kLargeB && n >= 4 * m;
}

// Whether the sizes and scalars are libxsmm's at all (alpha 1 is the callers').
bool within_limits(int64_t m, int64_t n, int64_t k, float beta) {
  if (beta != 0.0f && beta != 1.0f) return false;
  if (m > kLargestSide || n > kLargestSide || k > kLargestSide || m < 1 || n < 1 || k < 1) return false;
  return double(m) * double(n) * double(k) <= kLargestProduct;
}

}  // namespace

int64_t libxsmm_column_chunks(bool trans_a, int64_t m, int64_t n, int64_t k, float beta) {
  if (!within_limits(m, n, k, beta) || !by_column_chunks(m, n, k)) return 0;
  initialise();
  const int64_t chunks = (n + kColumnChunk - 1) / kColumnChunk, last = n - (chunks - 1) * kColumnChunk;
  for (const int64_t width : {std::min(kColumnChunk, n), last})
    if (!block_kernel(trans_a, m, width, n, k, trans_a ? m : k, n, beta)) return 0;
  return chunks;
}

bool libxsmm_gemm_chunk(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta,
                        float* c, int64_t chunk) {
  const int64_t first = chunk * kColumnChunk;
  return product_columns(trans_a, first, std::min(kColumnChunk, n - first), m, n, k, a, trans_a ? m : k, b, n, beta,
                         c);
}

bool libxsmm_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  const float* b, float beta, float* c) {
  if (alpha != 1.0f || !within_limits(m, n, k, beta)) return false;
  initialise();
  // op(B) stored as k × n rows for libxsmm: a transposed B (stored n × k) is copied first.
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  // Inside a parallel region (CpuBackend::linear_products's one product per thread) on the calling thread alone.
  const int threads =
      flops >= kParallelFlops && !omp_in_parallel() ? static_cast<int>(std::min<int64_t>(cpu_threads(), m)) : 1;
  // C = A·Bᵀ with a B larger than A and C together (a Linear layer's forward pass: B is the
  // weight): Cᵀ = B·Aᵀ transposes A in and Cᵀ out instead of B. The mlp's first layer moves
  // 66 K floats so instead of 201 K. (With beta = 1, C's old values would need transposing in too.)
  if (trans_b && !trans_a && beta == 0.0f && m * k + m * n < n * k) {
    thread_local std::vector<float> a_t, c_t;
    a_t.resize(static_cast<size_t>(k * m));
    c_t.resize(static_cast<size_t>(n * m));
    transpose(a, m, k, a_t.data(), threads);
    if (!libxsmm_gemm(false, false, n, m, k, 1.0f, b, a_t.data(), 0.0f, c_t.data())) return false;
    transpose(c_t.data(), n, m, c, threads);
    return true;
  }
  thread_local std::vector<float> b_copy;
  if (trans_b) {
    b_copy.resize(static_cast<size_t>(k * n));
    transpose(b, n, k, b_copy.data(), threads);
    b = b_copy.data();
  }
  const int64_t lda = trans_a ? m : k, ldb = n;
  // A B past half the L2 cache and wider than C is tall (the input gradient of cifar-cnn's f1: B is
  // its 8 MB weight, C 64 × 4096; of cnn's f1, 1.6 MB): split by rows, every thread streams all
  // of B through one long kernel; by chunks of columns, each thread takes its own part of B once,
  // a chunk at a time, in the L2 cache. The chunks are the same for any thread count, so are the
  // bits (one long kernel and its chunks differed in the last bit at k = 80). cifar-cnn's f1 on
  // 2 Zen 5 threads (best of 20 calls, three alternated runs): 265–267 GFLOP/s warm and 230–275
  // cold by rows, 409–415 and 373–375 by chunks (docs/benchmarks-history.md, 2026-11-26).
  if (by_column_chunks(m, n, k)) {
    const int64_t chunks = (n + kColumnChunk - 1) / kColumnChunk, last = n - (chunks - 1) * kColumnChunk;
    for (const int64_t width : {std::min(kColumnChunk, n), last})
      if (!block_kernel(trans_a, m, width, n, k, lda, ldb, beta)) return false;
    const auto run_chunk = [&](int64_t chunk) {
      const int64_t first = chunk * kColumnChunk;
      return product_columns(trans_a, first, std::min(kColumnChunk, n - first), m, n, k, a, lda, b, ldb, beta, c);
    };
    bool done = true;
    if (threads <= 1) {
      for (int64_t chunk = 0; chunk < chunks; ++chunk) done = run_chunk(chunk) && done;
    } else {
#pragma omp parallel for num_threads(threads) schedule(static) reduction(&& : done)
      for (int64_t chunk = 0; chunk < chunks; ++chunk) done = run_chunk(chunk) && done;
    }
    NNLAB_CHECK(done, "libxsmm refused a column chunk of a ", m, "×", n, "×", k, " product it had accepted");
    return true;
  }
  // A shape libxsmm refuses is refused whole (checked first, so nothing has been written when
  // the caller falls back to BLAS). Each thread takes a contiguous block of C's rows.
  if (threads <= 1) return rows_kernels_ready(trans_a, m, n, k, lda, ldb, beta) &&
                           product_rows(trans_a, 0, m, n, k, a, lda, b, ldb, beta, c);
  const int64_t block = (m + threads - 1) / threads, last_block = m - (threads - 1) * block;
  if (!rows_kernels_ready(trans_a, block, n, k, lda, ldb, beta)) return false;
  if (last_block > 0 && last_block != block && !rows_kernels_ready(trans_a, last_block, n, k, lda, ldb, beta))
    return false;
  bool all_done = true;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(&& : all_done)
  for (int t = 0; t < threads; ++t) {
    const int64_t first = t * block, rows = std::min(block, m - first);
    if (rows > 0) all_done = product_rows(trans_a, first, rows, n, k, a, lda, b, ldb, beta, c) && all_done;
  }
  NNLAB_CHECK(all_done, "libxsmm refused a row block of a ", m, "×", n, "×", k, " product it had accepted");
  return true;
}

#endif

}  // namespace nnlab::cpu
