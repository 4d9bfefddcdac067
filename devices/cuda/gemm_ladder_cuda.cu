// A GEMM ladder: three of nnlab's own CUDA kernels for C = alpha · op(A) · op(B) + beta · C,
// each fixing what limits the one before; cuBLAS (gemm_cuda.cu) is the fourth rung and the
// default. Chosen with --gemm-impl (devices/gemm_impl.h); the CPU's gemm is the reference the
// tests hold every rung to (tests/gpu/test_gpu_gemm_ladder.cpp).
//
// Row-major throughout, as Backend::gemm: op(A) is m×k, op(B) is k×n, C is m×n. A is stored
// m×k, or k×m when trans_a (then op(A)[i][p] = A[p][i]); B is stored k×n, or n×k when trans_b.
// The Linear layer asks for three products: y = x·wᵀ (NT), dx = dz·w (NN), dw = dzᵀ·x (TN).
//
// Every element of C costs k multiply-adds and reads 2k operands. What the rungs change is
// where those operands come from:
//   naive      all 2k from global memory (DRAM or L2): one FMA per 8 bytes moved, so the
//              kernel waits on memory, not on arithmetic
//   tiled      a block stages a 16×16 tile of op(A) and of op(B) in shared memory, and every
//              element staged is used by 16 threads: global reads fall 16-fold
//   registers  a block stages 64×8 strips, and each thread computes a 4×4 block of C from 4 +
//              4 values it holds in registers: 16 FMAs per 8 shared-memory reads instead of 1
//              per 2, and a quarter of the tiled kernel's global reads again
// None of them uses tensor cores or vector loads: the distance to cuBLAS that remains is
// those, double buffering and tuning (docs/backprop-to-kernels.md, "A GEMM ladder").
#include <string>

#include "devices/cuda/cuda_context.h"
#include "devices/gemm_impl.h"
#include "devices/kernel_log.h"

// Unrolls the loop after it under nvcc, so the register rung's tiles (acc, a_reg, b_reg) are
// indexed by constants and stay in registers. The simulator's host compiler unrolls as it sees
// fit (GCC does not know the pragma and would warn).
#if defined(__CUDACC__)
#define NNLAB_UNROLL _Pragma("unroll")
#else
#define NNLAB_UNROLL
#endif

namespace nnlab::cuda {

namespace {

// The product's operands and sizes, passed to the kernels by value.
struct GemmArgs {
  int m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  const float* a;
  const float* b;
  float* c;
};

// op(A)[i][p] and op(B)[p][j], read straight from global memory.
__device__ float op_a(const GemmArgs& g, int i, int p) {
  return g.trans_a ? g.a[int64_t(p) * g.m + i] : g.a[int64_t(i) * g.k + p];
}
__device__ float op_b(const GemmArgs& g, int p, int j) {
  return g.trans_b ? g.b[int64_t(j) * g.k + p] : g.b[int64_t(p) * g.n + j];
}

// C[i][j] = alpha · sum + beta · C[i][j]; beta = 0 never reads C (it may hold NaN), as BLAS.
__device__ void store_c(const GemmArgs& g, int i, int j, float sum) {
  float& c = g.c[int64_t(i) * g.n + j];
  c = g.beta == 0.0f ? g.alpha * sum : g.alpha * sum + g.beta * c;
}

// ---- rung 1: naive ---------------------------------------------------------------------
// a: op(A) (m, k)  b: op(B) (k, n)  c: (m, n)     block (32, 8), one thread per C[i][j]:
//   C[i][j] = alpha · Σ_p op(A)[i][p] · op(B)[p][j] + beta · C[i][j]
// threadIdx.x walks j, so a warp's 32 threads share one row i: they read the same op(A)[i][p]
// (one broadcast) and 32 neighbouring op(B)[p][j] (one coalesced read when B is not
// transposed), and write 32 neighbouring C[i][j]. Each thread still reads its 2k operands
// itself: an element of op(B) is fetched once for every row of C, m times in all.
constexpr int kNaiveX = 32, kNaiveY = 8;

__global__ void gemm_naive_kernel(GemmArgs g) {
  const int j = blockIdx.x * kNaiveX + threadIdx.x, i = blockIdx.y * kNaiveY + threadIdx.y;
  if (i >= g.m || j >= g.n) return;
  float sum = 0.0f;
  for (int p = 0; p < g.k; ++p) sum += op_a(g, i, p) * op_b(g, p, j);
  store_c(g, i, j, sum);
}

// Stages a BK × W tile of a k-major matrix Y (rows × cols) into shared memory:
//   tile[p·ld + c] = Y[p0 + p][c0 + c], or 0 past Y's edge (a zero adds nothing to a sum, so a
//   ragged m, n or k needs no other case).
// Y is stored row-major, or (y_trans) its transpose is. The block's threads deal the BK·W
// elements out so that consecutive threads read consecutive addresses in either case: the
// reads of a warp coalesce into few memory transactions whatever the transposes.
template <int BK, int W>
__device__ void stage_tile(float* tile, int ld, const float* y, bool y_trans, int rows, int cols, int p0, int c0) {
  const int threads = blockDim.x * blockDim.y, rank = threadIdx.y * blockDim.x + threadIdx.x;
  for (int e = rank; e < BK * W; e += threads) {
    const int p = y_trans ? e % BK : e / W, c = y_trans ? e / BK : e % W;
    const int gp = p0 + p, gc = c0 + c;
    float v = 0.0f;
    if (gp < rows && gc < cols) v = y_trans ? y[int64_t(gc) * rows + gp] : y[int64_t(gp) * cols + gc];
    tile[p * ld + c] = v;
  }
}

// Both operands are staged k-major, so the inner loops read a tile row by row:
//   op(B) is k×n already; A is staged as op(A)ᵀ (k×m), which is stored row-major exactly when
//   trans_a (A itself is k×m then), and as its transpose (A, m×k) when not.
template <int BK, int BM>
__device__ void stage_a(float* tile, int ld, const GemmArgs& g, int p0, int row0) {
  stage_tile<BK, BM>(tile, ld, g.a, !g.trans_a, g.k, g.m, p0, row0);
}
template <int BK, int BN>
__device__ void stage_b(float* tile, int ld, const GemmArgs& g, int p0, int col0) {
  stage_tile<BK, BN>(tile, ld, g.b, g.trans_b, g.k, g.n, p0, col0);
}

// ---- rung 2: shared-memory tiles --------------------------------------------------------
// a: op(A) (m, k)  b: op(B) (k, n)  c: (m, n)     block (16, 16), one thread per C[i][j]
// The block's 16×16 outputs need rows i0..i0+15 of op(A) and columns j0..j0+15 of op(B).
// The k axis is walked in phases of 16: the block copies a 16×16 tile of each into shared
// memory (one element per thread), waits, and every thread sums its 16 products from there:
//   C[i][j] = alpha · Σ_phases Σ_{p<16} as[p][i − i0] · bs[p][j − j0] + beta · C[i][j]
// Each element brought from global memory is now read by 16 threads (an element of op(A) by
// the 16 threads of its row of C, one of op(B) by the 16 of its column), so global reads fall
// from 2k per output to 2k/16: the tile size is the reuse factor. The first __syncthreads
// keeps a thread from reading a tile before all of it is written; the second keeps the next
// phase from overwriting a tile another thread is still reading. The rows are 17 floats, not 16:
// an operand whose stored rows run along k (A when not transposed, B when transposed) is
// written down a column of its tile, and the extra float puts those 16 writes in 16
// different banks of shared memory instead of two (a bank serves one address at a time).
constexpr int kTile = 16, kTileLd = kTile + 1;

__global__ void gemm_tiled_kernel(GemmArgs g) {
  __shared__ float as[kTile * kTileLd];  // as[p][r] = op(A)[i0 + r][p0 + p]
  __shared__ float bs[kTile * kTileLd];  // bs[p][c] = op(B)[p0 + p][j0 + c]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int i0 = blockIdx.y * kTile, j0 = blockIdx.x * kTile;
  float sum = 0.0f;
  for (int p0 = 0; p0 < g.k; p0 += kTile) {
    stage_a<kTile, kTile>(as, kTileLd, g, p0, i0);
    stage_b<kTile, kTile>(bs, kTileLd, g, p0, j0);
    __syncthreads();
    for (int p = 0; p < kTile; ++p) sum += as[p * kTileLd + ty] * bs[p * kTileLd + tx];
    __syncthreads();
  }
  if (i0 + ty < g.m && j0 + tx < g.n) store_c(g, i0 + ty, j0 + tx, sum);
}

// ---- rung 3: register blocking ----------------------------------------------------------
// a: op(A) (m, k)  b: op(B) (k, n)  c: (m, n)     block (16, 16), each thread 4×4 of C
// A block computes a 64×64 tile of C, walking k in phases of 8: it stages op(A)'s 64×8 strip
// and op(B)'s 8×64 strip (two elements of each per thread), then thread (ty, tx) computes the
// 16 outputs at rows i0 + ty + 16r and columns j0 + tx + 16c (r, c = 0..3):
//   for each p:  a_r = as[p][ty + 16r], b_c = bs[p][tx + 16c]   (8 shared-memory reads)
//                acc[r][c] += a_r · b_c                         (16 FMAs on registers)
// The tiled kernel does one FMA per two shared-memory reads; here every value read is used 4
// times, so shared memory stops being the limit. And each element staged from global memory
// now serves 64 outputs instead of 16: global reads per output fall to 2k/64. The 16
// accumulators, 4 + 4 operands and the loop's indices stay in registers (the loops over r and
// c are unrolled, so every index is a constant). The strided rows and columns (ty + 16r, not
// 4ty + r) keep tx on neighbouring columns: the reads of bs and the writes of C stay
// coalesced, as in the kernels above.
constexpr int kBlockTile = 64, kStrip = 8, kPerThread = 4, kThreadsSide = kBlockTile / kPerThread;
constexpr int kStripLd = kBlockTile + 1;  // one float of padding, as in the tiled kernel

__global__ void gemm_registers_kernel(GemmArgs g) {
  __shared__ float as[kStrip * kStripLd];  // as[p][r] = op(A)[i0 + r][p0 + p]
  __shared__ float bs[kStrip * kStripLd];  // bs[p][c] = op(B)[p0 + p][j0 + c]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int i0 = blockIdx.y * kBlockTile, j0 = blockIdx.x * kBlockTile;
  float acc[kPerThread][kPerThread] = {};
  for (int p0 = 0; p0 < g.k; p0 += kStrip) {
    stage_a<kStrip, kBlockTile>(as, kStripLd, g, p0, i0);
    stage_b<kStrip, kBlockTile>(bs, kStripLd, g, p0, j0);
    __syncthreads();
    for (int p = 0; p < kStrip; ++p) {
      float a_reg[kPerThread], b_reg[kPerThread];
NNLAB_UNROLL
      for (int r = 0; r < kPerThread; ++r) a_reg[r] = as[p * kStripLd + ty + kThreadsSide * r];
NNLAB_UNROLL
      for (int c = 0; c < kPerThread; ++c) b_reg[c] = bs[p * kStripLd + tx + kThreadsSide * c];
NNLAB_UNROLL
      for (int r = 0; r < kPerThread; ++r)
NNLAB_UNROLL
        for (int c = 0; c < kPerThread; ++c) acc[r][c] += a_reg[r] * b_reg[c];
    }
    __syncthreads();
  }
NNLAB_UNROLL
  for (int r = 0; r < kPerThread; ++r)
NNLAB_UNROLL
    for (int c = 0; c < kPerThread; ++c) {
      const int i = i0 + ty + kThreadsSide * r, j = j0 + tx + kThreadsSide * c;
      if (i < g.m && j < g.n) store_c(g, i, j, acc[r][c]);
    }
}

unsigned blocks_for(int64_t extent, int per_block) {
  return static_cast<unsigned>((extent + per_block - 1) / per_block);
}

}  // namespace

// The launcher: one grid over C, shaped for the rung (a block's outputs: naive 32×8, tiled
// 16×16, registers 64×64). The caller (CudaBackend::gemm) has checked the buffers and handles
// empty products (m, n or k zero).
void gemm_ladder(Context& ctx, GemmImpl impl, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, const float* b, float beta, float* c) {
  NNLAB_CHECK(m <= (int64_t(1) << 30) && n <= (int64_t(1) << 30) && k <= (int64_t(1) << 30), "gemm ", m, "×", n,
              "×", k, ": --gemm-impl ", gemm_impl_name(impl), " takes dimensions up to 2³⁰");
  const GemmArgs args{int(m), int(n), int(k), trans_a, trans_b, alpha, beta, a, b, c};
  const int rows_per_block = impl == GemmImpl::Naive ? kNaiveY : impl == GemmImpl::Tiled ? kTile : kBlockTile;
  const int cols_per_block = impl == GemmImpl::Naive ? kNaiveX : impl == GemmImpl::Tiled ? kTile : kBlockTile;
  const dim3 grid(blocks_for(n, cols_per_block), blocks_for(m, rows_per_block));
  NNLAB_CHECK(grid.y <= 65535, "gemm ", m, "×", n, "×", k, ": --gemm-impl ", gemm_impl_name(impl), " takes up to ",
              65535 * int64_t(rows_per_block), " rows of C (a grid's y extent is at most 65535 blocks)");
  KernelTiming timing(kernel_log_enabled()  // nnlab explain: the rung and the row-major product it computes
                          ? record_kernel(std::string("gemm ") + gemm_impl_name(impl),
                                          std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " " +
                                              dims_text({m, n, k}))
                          : kNotRecorded);
  switch (impl) {
    case GemmImpl::Naive:
      launch("gemm_naive_kernel", gemm_naive_kernel, grid, dim3(kNaiveX, kNaiveY), ctx.stream, args);
      break;
    case GemmImpl::Tiled:
      launch("gemm_tiled_kernel", gemm_tiled_kernel, grid, dim3(kTile, kTile), ctx.stream, args);
      break;
    case GemmImpl::Registers:
      launch("gemm_registers_kernel", gemm_registers_kernel, grid, dim3(kThreadsSide, kThreadsSide), ctx.stream,
             args);
      break;
    case GemmImpl::Cublas: fail("gemm_ladder: cuBLAS is gemm_cuda.cu's, not a rung of this file");
  }
}

}  // namespace nnlab::cuda
