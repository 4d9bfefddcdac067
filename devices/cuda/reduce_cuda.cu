// Bias add and reductions on CUDA. Every sum runs in a fixed order (per-thread strided
// partials, then a shared-memory tree; see block_reduce.cuh): no float atomics, so a run
// repeats bit for bit. Totals accumulate in double, as on the CPU.
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

// dy: (outer, c, inner)  db: (c)   db[j] = Σ_o Σ_i dz[o, j, i]; one block per channel j.
// dz = dy (Masked false: the bias gradient alone), or dz = dy·[y > 0], written out as well
// (Masked true: a ReLU's backward fused with the bias gradient, relu_bias_backward); both sum in
// the same order, so the fused kernel gives the two kernels' bits.
template <bool Masked>
__global__ void bias_backward_kernel(const float* dy, const float* y, float* dz, float* db, int64_t c, int64_t inner,
                                     int64_t outer) {
  const int64_t j = blockIdx.x;
  const int64_t count = outer * inner;
  double s = 0.0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t o = e / inner, i = e % inner, at = (o * c + j) * inner + i;
    float v = dy[at];
    if (Masked) {
      v = y[at] > 0.0f ? v : 0.0f;
      dz[at] = v;
    }
    s += v;
  }
  s = cuda::block_sum(s);
  if (threadIdx.x == 0) db[j] = static_cast<float>(s);
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
  cuda::launch("bias_backward_kernel", bias_backward_kernel<false>, static_cast<unsigned>(c), cuda::kThreads,
               ctx_->stream, cuda::ptr<float>(dy), static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
               cuda::ptr<float>(db), c, inner, dy.numel() / (c * inner));
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
  cuda::launch("relu_bias_backward_kernel", bias_backward_kernel<true>, static_cast<unsigned>(c), cuda::kThreads,
               ctx_->stream, cuda::ptr<float>(dy), cuda::ptr<float>(y), cuda::ptr<float>(dz), cuda::ptr<float>(*db), c,
               inner, dy.numel() / (c * inner));
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
