// Bias add and reductions on CUDA. Every sum runs in a fixed order (per-thread strided
// partials, then a shared-memory tree; see block_reduce.cuh): no float atomics, so a run
// repeats bit for bit. Totals accumulate in double, as on the CPU.
#include <algorithm>

#include "devices/cuda/block_reduce.cuh"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// Blocks of the first pass of a full reduction; a fixed number keeps the order fixed.
constexpr int kReduceBlocks = 256;

// ---- kernels ----------------------------------------------------------------------------

// y: (outer, c, inner)  b: (c)     y[o, j, i] += b[j]
__global__ void bias_forward_kernel(float* y, const float* b, int64_t c, int64_t inner, int64_t n) {
  NNLAB_GRID_STRIDE(idx, n) y[idx] += b[(idx / inner) % c];
}

// dy: (outer, c, inner)  db: (c)   db[j] = Σ_o Σ_i dz[o, j, i], in two passes.
// dz = dy (Masked false: the bias gradient alone), or dz = dy·[y > 0], written out as well
// (Masked true: a ReLU's backward fused with the bias gradient, relu_bias_backward); both sum in
// the same order, so the fused kernel gives the two kernels' bits.
//
// Pass 1, block (j, p): channel j's values are e = o·inner + i for e < count = outer·inner;
// block p of `chunks` sums the slice e ∈ [p·len, (p+1)·len), its threads taking neighbouring e
// (neighbouring i, so their reads are coalesced), and writes partial[j, p]. One block per
// channel, as this kernel once was, left most of the GPU idle: cnn's c1 has 32 channels of
// 64·784 values, 32 blocks for a 132-SM H200, and its backward took 0.13 ms.
template <bool Masked>
__global__ void bias_backward_partial_kernel(const float* dy, const float* y, float* dz, double* partial, int64_t c,
                                             int64_t inner, int64_t outer, int64_t len) {
  const int64_t j = blockIdx.x, p = blockIdx.y, chunks = gridDim.y;
  const int64_t end = min((p + 1) * len, outer * inner);
  double s = 0.0;
  int64_t e = p * len + threadIdx.x;
  // (o, i) of e, advanced by blockDim each round without a division per value.
  int64_t o = e / inner, i = e % inner;
  const int64_t step_o = blockDim.x / inner, step_i = blockDim.x % inner;
  for (; e < end; e += blockDim.x) {
    const int64_t at = (o * c + j) * inner + i;
    float v = dy[at];
    if (Masked) {
      v = y[at] > 0.0f ? v : 0.0f;
      dz[at] = v;
    }
    s += v;
    o += step_o, i += step_i;
    if (i >= inner) i -= inner, ++o;
  }
  s = cuda::block_sum(s);
  if (threadIdx.x == 0) partial[j * chunks + p] = s;
}

// partial: (c, chunks)  db: (c)   pass 2: db[j] = Σ_p partial[j, p], p in order
__global__ void bias_backward_final_kernel(const double* partial, int64_t chunks, float* db, int64_t c) {
  NNLAB_GRID_STRIDE(j, c) {
    double s = 0.0;
    for (int64_t p = 0; p < chunks; ++p) s += partial[j * chunks + p];
    db[j] = static_cast<float>(s);
  }
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

// ---- launchers --------------------------------------------------------------------------

// db (and with Masked, dz) from dy: (outer, c, inner). The slices per channel depend on the
// shape alone (at least 4096 values each, at most 64 slices), so the order of the sum is fixed.
template <bool Masked>
void launch_bias_backward(cuda::Context& ctx, const char* name, const Tensor& dy, const float* y, float* dz,
                          Tensor& db, int64_t inner) {
  const int64_t c = db.numel(), outer = dy.numel() / (c * inner), count = outer * inner;
  const int64_t chunks = std::min<int64_t>(std::max<int64_t>(count / 4096, 1), 64);
  const int64_t len = (count + chunks - 1) / chunks;
  cuda::Scratch partial(*ctx.allocator, static_cast<size_t>(c * chunks) * sizeof(double));
  cuda::launch(name, bias_backward_partial_kernel<Masked>, dim3(static_cast<unsigned>(c), static_cast<unsigned>(chunks)),
               cuda::kThreads, ctx.stream, cuda::ptr<float>(dy), y, dz, partial.as<double>(), c, inner, outer, len);
  cuda::launch("bias_backward_final_kernel", bias_backward_final_kernel, cuda::grid_for(c), cuda::kThreads, ctx.stream,
               static_cast<const double*>(partial.as<double>()), chunks, cuda::ptr<float>(db), c);
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
  NNLAB_LOG_KERNEL("bias_forward", y);  // nnlab explain: record the call
  cuda::require_f32("bias_forward", y);
  const int64_t c = b.numel();
  NNLAB_CHECK(c > 0 && inner > 0 && y.numel() % (c * inner) == 0, "bias_forward: ", y.describe(), " is not (outer, ",
              c, ", ", inner, ")");
  if (!y.numel()) return;
  cuda::launch("bias_forward_kernel", bias_forward_kernel, cuda::grid_for(y.numel()), cuda::kThreads, ctx_->stream,
               cuda::ptr<float>(y), cuda::ptr<float>(b), c, inner, y.numel());
}

void CudaBackend::bias_backward(const Tensor& dy, Tensor& db, int64_t inner) {
  NNLAB_LOG_KERNEL("bias_backward", dy);  // nnlab explain: record the call
  cuda::require_f32("bias_backward", dy);
  const int64_t c = db.numel();
  NNLAB_CHECK(c > 0 && inner > 0 && dy.numel() % (c * inner) == 0, "bias_backward: ", dy.describe(),
              " is not (outer, ", c, ", ", inner, ")");
  launch_bias_backward<false>(*ctx_, "bias_backward_partial_kernel", dy, nullptr, nullptr, db, inner);
}

// y, dy, dz: (outer, c, inner)  db: (c) or null   dz = dy·[y > 0];  db[j] = Σ_o Σ_i dz[o, j, i]
void CudaBackend::relu_bias_backward(const Tensor& y, const Tensor& dy, Tensor& dz, Tensor* db, int64_t inner) {
  if (!db) return unary_backward(UnaryOp::Relu, y, y, dy, dz);  // no bias: the ReLU's kernel alone
  NNLAB_LOG_KERNEL("relu_bias_backward", dy);  // nnlab explain: record the call
  cuda::require_f32("relu_bias_backward", dy);
  const int64_t c = db->numel();
  NNLAB_CHECK(c > 0 && inner > 0 && dy.numel() % (c * inner) == 0 && y.numel() == dy.numel() &&
                  dz.numel() == dy.numel(),
              "relu_bias_backward: ", dy.describe(), " is not (outer, ", c, ", ", inner, ") or does not match ",
              y.describe());
  launch_bias_backward<true>(*ctx_, "relu_bias_backward_partial_kernel", dy, cuda::ptr<float>(y), cuda::ptr<float>(dz),
                             *db, inner);
}

void CudaBackend::sum_all(const Tensor& x, double scale, Tensor& out) {
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
