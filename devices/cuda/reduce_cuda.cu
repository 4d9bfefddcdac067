// Bias add and reductions on CUDA. Every sum runs in a fixed order (per-thread strided
// partials, then a shared-memory tree; see block_reduce.cuh): no float atomics, so a run
// repeats bit for bit. Totals accumulate in double, as on the CPU. The Linear bias gradient
// also has a ladder of four teaching kernels, chosen by --reduce-impl (devices/reduce_impl.h).
// The bias kernels also take bf16 (T = BFloat16): loads widened, sums as for float32, each
// output rounded once as it is stored; the ladder's rungs are float32 teaching kernels.
#include "devices/bf16_widening.h"
#include "devices/cuda/block_reduce.cuh"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"
#include "devices/reduce_impl.h"

namespace nnlab {

namespace {

// Blocks of the first pass of a full reduction; a fixed number keeps the order fixed.
constexpr int kReduceBlocks = 256;

// ---- kernels ----------------------------------------------------------------------------

// y: (outer, c, inner)  b: (c)     y[o, j, i] += b[j]   (Overwrite: y[o, j, i] = b[j])
// T: float32, or bf16 (the sum in float, rounded once as stored)
template <typename T, bool Overwrite>
__global__ void bias_forward_kernel(T* y, const T* b, int64_t c, int64_t inner, int64_t n) {
  NNLAB_GRID_STRIDE(idx, n) {
    const float bias = float(b[(idx / inner) % c]);
    y[idx] = Overwrite ? T(bias) : T(float(y[idx]) + bias);
  }
}

// dy: (outer, c, inner)  db: (c)   db[j] = Σ_o Σ_i dz[o, j, i], in two passes.
// dz = dy (Masked false: the bias gradient alone), or dz = dy·[y > 0], written out as well
// (Masked true: a ReLU's backward fused with the bias gradient, relu_bias_backward); both sum in
// the same order, so the fused kernel gives the two kernels' bits.
//
// Pass 1, block (j, p): the sum of slice p of channel j (cuda::channel_slices), into
// partial[j, p]. Pass 2: db[j] = Σ_p partial[j, p], p in order.
template <typename T, bool Masked>
__global__ void bias_backward_partial_kernel(const T* dy, const T* y, T* dz, double* partial, int64_t c,
                                             int64_t inner, cuda::ChannelSlices slices) {
  double s = 0.0;
  for (cuda::ChannelWalk v(slices, c, inner); v.more(); v.next()) {
    const int64_t at = v.at();
    float d = float(dy[at]);
    if (Masked) {
      d = float(y[at]) > 0.0f ? d : 0.0f;
      dz[at] = T(d);  // exact: dy's value or 0
    }
    s += d;
  }
  s = cuda::block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x * slices.slices + blockIdx.y] = s;
}

// partial: (c, slices)  db: (c)   the double sum to float32 (then to bf16, as the CPU's widened
// kernel rounds its float32 result)
template <typename T>
__global__ void bias_backward_final_kernel(const double* partial, int64_t slices, T* db, int64_t c) {
  NNLAB_GRID_STRIDE(j, c) db[j] = T(static_cast<float>(cuda::sum_of_slices(partial, j, slices)));
}

// ---- the reduction ladder: the Linear bias gradient, four ways (--reduce-impl) ------------
// dy: (rows, c)  db: (c)   db[j] = Σ_r dy[r, j]
// One sum, four kernels, each fixing what the one before wastes (docs/backprop-to-kernels.md,
// "A reduction ladder"). Each accumulates in double and sums in an order fixed by the shape,
// so each repeats bit for bit; they differ from one another, and from the CPU's
// bias_backward, only in float32 rounding.

// A block of the tree and shuffle rungs: 32 columns × 32 groups of rows.
constexpr int kLadderColumns = 32, kLadderGroups = 32;

// (a) uncoalesced. grid: c blocks, one per column j  block: 256 threads down the rows
//   thread t sums dy[t, j] + dy[t + 256, j] + …, and block_sum's tree adds the 256 partials.
// Teaches coalescing, by its absence. The 32 threads of a warp load dy[t·c + j] for 32
// neighbouring t: addresses c floats apart, so (for c ≥ 8) each lies in a 32-byte sector of its
// own and one load instruction costs 32 memory transactions where 1 would do, using 4 bytes of
// every 32 fetched. And at 64 rows (a batch) 192 of the block's 256 threads have no row at all.
__global__ void bias_backward_uncoalesced_kernel(const float* dy, float* db, int64_t rows, int64_t c) {
  const int64_t j = blockIdx.x;
  double s = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += dy[r * c + j];
  s = cuda::block_sum(s);
  if (threadIdx.x == 0) db[j] = static_cast<float>(s);
}

// (b) coalesced. grid: ⌈c/256⌉ blocks  block: 256 threads, thread → column j
//   thread j sums its whole column alone, row after row: dy[0, j] + dy[1, j] + …
// Teaches coalescing, and then occupancy. At every step the threads of a block walk one row
// together: a warp loads dy[r·c + j] for 32 neighbouring j, 128 contiguous bytes, one
// transaction. No thread waits for another (no shared memory, no barrier). But only c threads
// have work: the mlp's last layer (c = 10) runs 10 threads on one SM of a GPU that keeps
// hundreds of thousands resident, and each thread waits out the memory latency of its rows
// one load after another, with nothing else to hide it.
__global__ void bias_backward_coalesced_kernel(const float* dy, float* db, int64_t rows, int64_t c) {
  NNLAB_GRID_STRIDE(j, c) {
    double s = 0.0;
    for (int64_t r = 0; r < rows; ++r) s += dy[r * c + j];
    db[j] = static_cast<float>(s);
  }
}

// The loads of (c) and (d): column j's rows y, y + 32, y + 64, … (row group y), summed;
// 0 for a thread past the last column.
__device__ double row_group_sum(const float* dy, int64_t rows, int64_t c, int64_t j, int y) {
  double s = 0.0;
  if (j < c)
    for (int64_t r = y; r < rows; r += kLadderGroups) s += dy[r * c + j];
  return s;
}

// (c) tree. grid: ⌈c/32⌉ blocks of 32 columns  block: (32, 32), x → column, y → row group
//   thread (x, y) sums column j = 32·blockIdx.x + x over rows y, y + 32, y + 64, …, into
//   partial[y][x]; then a tree over y adds groups y and y + half for half = 16, 8, 4, 2, 1.
// Teaches occupancy with coalescing kept. Each warp is one y, so its 32 threads load 32
// neighbouring columns of one row (one transaction, as in (b)), while 32 warps share out the
// rows: 32 threads per column instead of 1, each with rows/32 loads. The price is the tree:
// five steps, each a __syncthreads() for all 1024 threads while fewer and fewer of them add.
// Threads past the last column still take part: a barrier must be reached by the whole block.
__global__ void bias_backward_tree_kernel(const float* dy, float* db, int64_t rows, int64_t c) {
  __shared__ double partial[kLadderGroups][kLadderColumns];
  const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
  const int64_t j = blockIdx.x * static_cast<int64_t>(kLadderColumns) + x;
  partial[y][x] = row_group_sum(dy, rows, c, j, y);
  __syncthreads();
  for (int half = kLadderGroups / 2; half > 0; half /= 2) {
    if (y < half) partial[y][x] += partial[y + half][x];
    __syncthreads();
  }
  if (y == 0 && j < c) db[j] = static_cast<float>(partial[0][x]);
}

// (d) shuffle. grid, block and loads as (c); then the roles turn: warp y takes column y of
//   the block, its lane x holds partial[x][y] (group x's sum), and __shfl_down_sync by 16, 8,
//   4, 2, 1 adds lane x + offset into lane x, leaving the column's sum in lane 0.
// Teaches warp shuffles. A shuffle hands a register to another lane of the same warp: no
// shared-memory traffic and no barrier of the block, since a warp's lanes meet at the call.
// One __syncthreads() (every partial written before a warp reads its column) replaces the
// tree's five. The additions are (c)'s, pair for pair, so the bits are (c)'s. A row of 33: a
// warp reads a column, elements a row apart; in rows of 32 doubles every lane would hit the
// same bank of shared memory and wait its turn; one spare element per row spreads them out.
__global__ void bias_backward_shuffle_kernel(const float* dy, float* db, int64_t rows, int64_t c) {
  __shared__ double partial[kLadderGroups][kLadderColumns + 1];
  const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
  const int64_t j = blockIdx.x * static_cast<int64_t>(kLadderColumns) + x;
  partial[y][x] = row_group_sum(dy, rows, c, j, y);
  __syncthreads();
  double v = partial[x][y];
  for (unsigned offset = kLadderGroups / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int64_t column = blockIdx.x * static_cast<int64_t>(kLadderColumns) + y;
  if (x == 0 && column < c) db[column] = static_cast<float>(v);
}

// x: (n)  partial: (kReduceBlocks)   pass 1: partial[b] = Σ f(x[i]) over block b's stride
template <bool Square>
__global__ void sum_partial_kernel(const float* x, int64_t n, double* partial) {
  double s = 0.0;
  NNLAB_GRID_STRIDE(i, n) {
    const double v = x[i];
    s += Square ? v * v : v;
  }
  s = cuda::block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// partial: (blocks)  out: scalar    pass 2: out = scale · Σ partial, one block
template <typename Out>
__global__ void sum_final_kernel(const double* partial, int blocks, double scale, Out* out) {
  double s = 0.0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) s += partial[b];
  s = cuda::block_sum(s);
  if (threadIdx.x == 0) *out = static_cast<Out>(scale * s);
}

// The rung of the reduction ladder that sums this bias: --reduce-impl's choice for a Linear
// layer's (inner 1), auto's kernel for every other.
ReduceImpl ladder_rung(int64_t inner) { return inner == 1 ? reduce_impl() : ReduceImpl::Auto; }

const char* ladder_kernel_name(ReduceImpl rung) {
  switch (rung) {
    case ReduceImpl::Uncoalesced: return "bias_backward_uncoalesced_kernel";
    case ReduceImpl::Coalesced: return "bias_backward_coalesced_kernel";
    case ReduceImpl::Tree: return "bias_backward_tree_kernel";
    case ReduceImpl::Shuffle: return "bias_backward_shuffle_kernel";
    case ReduceImpl::Auto: break;
  }
  return "bias_backward";
}

// ---- launchers --------------------------------------------------------------------------

// db (and with Masked, dz from y) from dy: (outer, c, inner), in slices fixed by the shape;
// every tensor of dy's dtype T.
template <typename T, bool Masked>
void launch_bias_backward(cuda::Context& ctx, const char* name, const Tensor& dy, const Tensor* y, Tensor* dz,
                          Tensor& db, int64_t inner) {
  const int64_t c = db.numel();
  const cuda::ChannelSlices slices = cuda::channel_slices(dy.numel() / c);
  cuda::Scratch partial(*ctx.allocator, static_cast<size_t>(c * slices.slices) * sizeof(double));
  cuda::launch(name, bias_backward_partial_kernel<T, Masked>,
               dim3(static_cast<unsigned>(c), static_cast<unsigned>(slices.slices)), cuda::kThreads, ctx.stream,
               cuda::ptr<T>(dy), y ? cuda::ptr<T>(*y) : nullptr, dz ? cuda::ptr<T>(*dz) : nullptr,
               partial.as<double>(), c, inner, slices);
  cuda::launch("bias_backward_final_kernel", bias_backward_final_kernel<T>, cuda::grid_for(ctx, c), cuda::kThreads,
               ctx.stream, static_cast<const double*>(partial.as<double>()), slices.slices, cuda::ptr<T>(db), c);
}

template <bool Masked>
void launch_bias_backward(cuda::Context& ctx, const char* name, const Tensor& dy, const Tensor* y, Tensor* dz,
                          Tensor& db, int64_t inner) {
  if (dy.dtype() == DType::BFloat16) return launch_bias_backward<BFloat16, Masked>(ctx, name, dy, y, dz, db, inner);
  launch_bias_backward<float, Masked>(ctx, name, dy, y, dz, db, inner);
}

template <bool Overwrite>
void launch_bias_forward(cuda::Context& ctx, Tensor& y, const Tensor& b, int64_t inner) {
  const int64_t c = b.numel();
  NNLAB_CHECK(c > 0 && inner > 0 && y.numel() % (c * inner) == 0, "bias_forward: ", y.describe(), " is not (outer, ",
              c, ", ", inner, ")");
  if (!y.numel()) return;
  if (y.dtype() == DType::BFloat16)
    cuda::launch("bias_forward_kernel", bias_forward_kernel<BFloat16, Overwrite>, cuda::grid_for(ctx, y.numel()),
                 cuda::kThreads, ctx.stream, cuda::ptr<BFloat16>(y), cuda::ptr<BFloat16>(b), c, inner, y.numel());
  else
    cuda::launch("bias_forward_kernel", bias_forward_kernel<float, Overwrite>, cuda::grid_for(ctx, y.numel()),
                 cuda::kThreads, ctx.stream, cuda::ptr<float>(y), cuda::ptr<float>(b), c, inner, y.numel());
}

// The rung of the ladder `rung` names, for dy: (rows, c).
void launch_bias_ladder(cuda::Context& ctx, ReduceImpl rung, const Tensor& dy, Tensor& db) {
  const int64_t c = db.numel(), rows = dy.numel() / c;
  const float* in = cuda::ptr<float>(dy);
  float* out = cuda::ptr<float>(db);
  const char* name = ladder_kernel_name(rung);
  const dim3 column_blocks(static_cast<unsigned>((c + kLadderColumns - 1) / kLadderColumns));
  const dim3 columns_by_groups(kLadderColumns, kLadderGroups);
  switch (rung) {
    case ReduceImpl::Uncoalesced:
      return cuda::launch(name, bias_backward_uncoalesced_kernel, static_cast<unsigned>(c), cuda::kThreads, ctx.stream,
                          in, out, rows, c);
    case ReduceImpl::Coalesced:
      return cuda::launch(name, bias_backward_coalesced_kernel, cuda::grid_for(ctx, c), cuda::kThreads, ctx.stream, in,
                          out, rows, c);
    case ReduceImpl::Tree:
      return cuda::launch(name, bias_backward_tree_kernel, column_blocks, columns_by_groups, ctx.stream, in, out, rows,
                          c);
    case ReduceImpl::Shuffle:
      return cuda::launch(name, bias_backward_shuffle_kernel, column_blocks, columns_by_groups, ctx.stream, in, out,
                          rows, c);
    case ReduceImpl::Auto: break;
  }
  fail("bias_backward: no kernel of the reduction ladder is called ", reduce_impl_name(rung));
}

template <bool Square>
void launch_sum(cuda::Context& c, const Tensor& x, double scale, Tensor& out) {
  NNLAB_CHECK(out.numel() == 1, "sum: the output must be a scalar, got ", out.describe());
  cuda::Scratch partial(*c.allocator, kReduceBlocks * sizeof(double));
  cuda::launch("sum_partial_kernel", sum_partial_kernel<Square>, kReduceBlocks, cuda::kThreads, c.stream,
               cuda::ptr<float>(x), x.numel(), partial.as<double>());
  if (out.dtype() == DType::Float64) {
    cuda::launch("sum_final_kernel", sum_final_kernel<double>, 1, cuda::kThreads, c.stream, partial.as<double>(),
                 kReduceBlocks, scale, cuda::ptr<double>(out));
  } else {
    cuda::require_f32("sum", out);
    cuda::launch("sum_final_kernel", sum_final_kernel<float>, 1, cuda::kThreads, c.stream, partial.as<double>(),
                 kReduceBlocks, scale, cuda::ptr<float>(out));
  }
}

}  // namespace

void CudaBackend::bias_forward(Tensor& y, const Tensor& b, int64_t inner) {
  const bool bf16_kernel = y.dtype() == DType::BFloat16 && b.dtype() == DType::BFloat16;
  if (!bf16_kernel && bf16::widened(*this, &CudaBackend::bias_forward, y, b, inner)) return;
  NNLAB_LOG_KERNEL("bias_forward", y);  // nnlab explain: record the call
  if (!bf16_kernel) cuda::require_f32("bias_forward", y);
  launch_bias_forward<false>(*ctx_, y, b, inner);
}

namespace cuda {
void bias_broadcast(Context& ctx, Tensor& y, const Tensor& b, int64_t inner) {
  NNLAB_LOG_KERNEL("bias_broadcast", y);  // nnlab explain: record the call
  NNLAB_CHECK(y.dtype() == b.dtype() && (y.dtype() == DType::Float32 || y.dtype() == DType::BFloat16),
              "bias_broadcast: ", y.describe(), " and ", b.describe(), " must both be float32 or both bf16");
  launch_bias_forward<true>(ctx, y, b, inner);
}
}  // namespace cuda

void CudaBackend::bias_backward(const Tensor& dy, Tensor& db, int64_t inner) {
  const ReduceImpl rung = ladder_rung(inner);
  const bool bf16_kernel = bf16::all({&dy, &db}) && rung == ReduceImpl::Auto;  // the rungs are float32
  if (!bf16_kernel && bf16::widened(*this, &CudaBackend::bias_backward, dy, db, inner)) return;
  NNLAB_LOG_KERNEL(ladder_kernel_name(rung), dy);  // nnlab explain: record the call, and the rung
  if (!bf16_kernel) cuda::require_f32("bias_backward", dy);
  const int64_t c = db.numel();
  NNLAB_CHECK(c > 0 && inner > 0 && dy.numel() % (c * inner) == 0, "bias_backward: ", dy.describe(),
              " is not (outer, ", c, ", ", inner, ")");
  if (rung != ReduceImpl::Auto) return launch_bias_ladder(*ctx_, rung, dy, db);  // --reduce-impl
  launch_bias_backward<false>(*ctx_, "bias_backward_partial_kernel", dy, nullptr, nullptr, db, inner);
}

// y, dy, dz: (outer, c, inner)  db: (c) or null   dz = dy·[y > 0];  db[j] = Σ_o Σ_i dz[o, j, i]
void CudaBackend::relu_bias_backward(const Tensor& y, const Tensor& dy, Tensor& dz, Tensor* db, int64_t inner) {
  const bool bf16_kernel = bf16::all({&y, &dy, &dz, db});
  if (!bf16_kernel && bf16::widened(*this, &CudaBackend::relu_bias_backward, y, dy, dz, db, inner)) return;
  if (!db) return unary_backward(UnaryOp::Relu, y, y, dy, dz);  // no bias: the ReLU's kernel alone
  // A rung of the ladder: the ReLU's kernel, then the rung on dz (Backend's two-kernel form).
  if (ladder_rung(inner) != ReduceImpl::Auto) return Backend::relu_bias_backward(y, dy, dz, db, inner);
  NNLAB_LOG_KERNEL("relu_bias_backward", dy);  // nnlab explain: record the call
  if (!bf16_kernel) cuda::require_f32("relu_bias_backward", dy);
  const int64_t c = db->numel();
  NNLAB_CHECK(c > 0 && inner > 0 && dy.numel() % (c * inner) == 0 && y.numel() == dy.numel() &&
                  dz.numel() == dy.numel(),
              "relu_bias_backward: ", dy.describe(), " is not (outer, ", c, ", ", inner, ") or does not match ",
              y.describe());
  launch_bias_backward<true>(*ctx_, "relu_bias_backward_partial_kernel", dy, &y, &dz, *db, inner);
}

void CudaBackend::sum_all(const Tensor& x, double scale, Tensor& out) {
  if (bf16::widened(*this, &CudaBackend::sum_all, x, scale, out)) return;
  NNLAB_LOG_KERNEL("sum_all", x);  // nnlab explain: record the call
  cuda::require_f32("sum_all", x);
  launch_sum<false>(*ctx_, x, scale, out);
}

void CudaBackend::sum_squares(const Tensor& x, Tensor& out) {
  NNLAB_LOG_KERNEL("sum_squares", x);  // nnlab explain: record the call
  cuda::require_f32("sum_squares", x);
  launch_sum<true>(*ctx_, x, 1.0, out);
}

}  // namespace nnlab
