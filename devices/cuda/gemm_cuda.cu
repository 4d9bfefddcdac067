// GEMM on CUDA through cuBLAS, float32 (or bf16 storage, float32 sums). The row-major trick
// (which column-major cuBLAS call computes nnlab's row-major product) is worked out in
// devices/cuda/gemm_plan.h. With --gemm-impl naive|tiled|registers the product runs on
// nnlab's own kernels instead (gemm_ladder_cuda.cu); cuBLAS is the default.
//
// A Linear layer's forward and backward (the twins of gemm_cpu.cpp's) fold the bias, the ReLU
// and the bias gradient into cuBLASLt epilogues (gemm_lt.h): forward one call where the plain
// path is a GEMM, a bias kernel and a ReLU kernel; backward dW and db in one call.
#include "devices/bf16_widening.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/cuda/gemm_lt.h"
#include "devices/cuda/gemm_plan.h"
#include "devices/gemm_impl.h"
#include "devices/kernel_log.h"
#include "devices/reduce_impl.h"

namespace nnlab {

namespace {

// c: (n), float32 or bf16   c = beta·c; beta = 0 writes zeros and never reads c (NaNs in c
// included)
template <typename T>
__global__ void scale_kernel(T* c, float beta, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) c[i] = T(beta == 0.0f ? 0.0f : beta * float(c[i]));
}

template <typename T>
void launch_scale(const cuda::Context& ctx, const Tensor& c, float beta, int64_t n) {
  cuda::launch("scale_kernel", scale_kernel<T>, cuda::grid_for(ctx, n), cuda::kThreads, ctx.stream, cuda::ptr<T>(c),
               beta, n);
}

// z: (n, out) float32, the product's sums   b: (out) bf16, or null   y: (n, out) bf16
//   y = round_bf16([max(0, ·)] (z + b)): the bias and ReLU of a bf16 Linear layer, with one
//   rounding for the whole layer, as an epilogue inside the product would round. Rounding the
//   product first and adding the bias after would round twice, and where the bias cancels most
//   of the product the first rounding's error becomes a large share of what is left.
__global__ void linear_epilogue_bf16_kernel(const float* z, const BFloat16* b, BFloat16* y, int64_t out, bool relu,
                                            int64_t n) {
  NNLAB_GRID_STRIDE(i, n) {
    float v = z[i] + (b ? float(b[i % out]) : 0.0f);
    if (relu) v = v > 0.0f ? v : 0.0f;
    y[i] = BFloat16(v);
  }
}

}  // namespace

// The bf16 Linear forward: x·wᵀ on the tensor cores with float32 sums, the bias and ReLU applied
// to those sums and the result rounded once. With a bias, one cublasLtMatmul with the epilogue
// where cuBLASLt has an algorithm for it; else (and without a bias but with the ReLU)
// gemm_bf16_storage into a float32 scratch, then linear_epilogue_bf16_kernel; with neither, the
// product straight into y, rounded as it is stored.
void CudaBackend::linear_forward_bf16(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu) {
  const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
  const bool bias = b && b->defined();
  if (bias && n > 0 && in > 0 && out > 0 &&
      cuda::lt_gemm(*ctx_, relu ? cuda::LtEpilogue::BiasRelu : cuda::LtEpilogue::Bias, DType::BFloat16, false, true, n,
                    out, in, x.raw_data(), w.raw_data(), y.raw_data(), b->raw_data()))
    return;
  if (!bias && !relu) return gemm(false, true, n, out, in, 1.0, x, w, 0.0, y);
  Tensor z = Tensor::empty(y.shape(), DType::Float32, y.device());
  gemm(false, true, n, out, in, 1.0, x, w, 0.0, z);
  if (!z.numel()) return;
  NNLAB_LOG_KERNEL("linear_epilogue_bf16", y);  // nnlab explain: record the call
  cuda::launch("linear_epilogue_bf16_kernel", linear_epilogue_bf16_kernel, cuda::grid_for(*ctx_, z.numel()),
               cuda::kThreads, ctx_->stream, cuda::ptr<float>(z), bias ? cuda::ptr<BFloat16>(*b) : nullptr,
               cuda::ptr<BFloat16>(y), out, relu, z.numel());
}

// bf16 A and B (C bf16 or float32) through cublasGemmEx with CUBLAS_COMPUTE_32F: the tensor
// cores' exact bf16 products, float32 sums, a bf16 C rounded once as it is stored. Always
// cuBLAS: the --gemm-impl rungs are float32 teaching kernels.
void CudaBackend::gemm_bf16_storage(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                                    const Tensor& a, const Tensor& b, double beta, Tensor& c) {
  cuda::Context& ctx = *ctx_;
  const cuda::ColumnMajorGemm p = cuda::column_major_plan(trans_a, trans_b, m, n, k);
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const cudaDataType c_type = c.dtype() == DType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F;
  KernelTiming timing(kernel_log_enabled()  // nnlab explain: the call as the row-major product it computes
                          ? record_kernel("cublasGemmEx (bf16 storage)", std::string(trans_a ? "T" : "N") +
                                                                             (trans_b ? "T" : "N") + " " +
                                                                             dims_text({m, n, k}))
                          : kNotRecorded);
  NNLAB_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, p.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  p.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, int(p.m), int(p.n), int(p.k), &alpha_f,
                                  b.raw_data(), CUDA_R_16BF, int(p.ld_first), a.raw_data(), CUDA_R_16BF,
                                  int(p.ld_second), &beta_f, c.raw_data(), c_type, int(p.ldc), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
}

// C(m×n) = alpha · op(A)(m×k) · op(B)(k×n) + beta · C
void CudaBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                       const Tensor& b, double beta, Tensor& c) {
  const bool bf16_storage = a.dtype() == DType::BFloat16;
  if (!bf16_storage) cuda::require_f32("gemm", a);
  check_gemm_operands(m, n, k, a, b, c);
  if (m == 0 || n == 0) return;
  cuda::Context& ctx = *ctx_;
  if (k == 0) {  // an empty sum: C = beta·C
    if (c.dtype() == DType::BFloat16)
      launch_scale<BFloat16>(ctx, c, static_cast<float>(beta), m * n);
    else
      launch_scale<float>(ctx, c, static_cast<float>(beta), m * n);
    return;
  }
  if (bf16_storage) return gemm_bf16_storage(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  if (gemm_impl() != GemmImpl::Cublas)  // --gemm-impl: one of nnlab's own kernels (gemm_ladder_cuda.cu)
    return cuda::gemm_ladder(ctx, gemm_impl(), trans_a, trans_b, m, n, k, static_cast<float>(alpha),
                             cuda::ptr<float>(a), cuda::ptr<float>(b), static_cast<float>(beta), cuda::ptr<float>(c));
  const bool tf32 = cuda_math_tf32(), bf16 = cuda_math_bf16();
  if (tf32 != ctx.cublas_tf32) {  // strict float32 unless TF32 was asked for explicitly
    NNLAB_CUBLAS_CHECK(cublasSetMathMode(ctx.cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    ctx.cublas_tf32 = tf32;
  }
  const cuda::ColumnMajorGemm p = cuda::column_major_plan(trans_a, trans_b, m, n, k);
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const cublasOperation_t op_first = p.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = p.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  KernelTiming timing(kernel_log_enabled()  // nnlab explain: the call as the row-major product it computes
                          ? record_kernel(bf16 ? "cublasGemmEx (bf16)" : tf32 ? "cublasSgemm (tf32)" : "cublasSgemm",
                                          std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " " +
                                              dims_text({m, n, k}))
                          : kNotRecorded);
  if (bf16)  // float32 in memory, the inputs rounded to bf16 for the tensor cores, float32 sums
    NNLAB_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, op_first, op_second, int(p.m), int(p.n), int(p.k), &alpha_f,
                                    cuda::ptr<float>(b), CUDA_R_32F, int(p.ld_first), cuda::ptr<float>(a), CUDA_R_32F,
                                    int(p.ld_second), &beta_f, cuda::ptr<float>(c), CUDA_R_32F, int(p.ldc),
                                    CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
  else
    NNLAB_CUBLAS_CHECK(cublasSgemm(ctx.cublas, op_first, op_second, int(p.m), int(p.n), int(p.k), &alpha_f,
                                   cuda::ptr<float>(b), int(p.ld_first), cuda::ptr<float>(a), int(p.ld_second), &beta_f,
                                   cuda::ptr<float>(c), int(p.ldc)));
}

// y (n, out) = [max(0, ·)] (x (n, in) · wᵀ + b): the row-major product x·wᵀ (NT n×out×in) with
// the bias (one per column of y) and the ReLU as its epilogue.
void CudaBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu) {
  // bf16 throughout: linear_forward_bf16. Any other mix with bf16 goes through float32 copies.
  if (bf16::all({&x, &w, b, &y})) return linear_forward_bf16(x, w, b, y, relu);
  if (bf16::widened(*this, &CudaBackend::linear_forward, x, w, b, y, relu)) return;
  const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
  const bool bias = b && b->defined();
  if (gemm_impl() != GemmImpl::Cublas || !bias || n == 0 || in == 0 || out == 0)
    return Backend::linear_forward(x, w, b, y, relu);
  for (const Tensor* t : {&x, &w, b, static_cast<const Tensor*>(&y)}) cuda::require_f32("linear_forward", *t);
  if (!cuda::lt_gemm(*ctx_, relu ? cuda::LtEpilogue::BiasRelu : cuda::LtEpilogue::Bias, DType::Float32, false, true, n,
                     out, in, x.raw_data(), w.raw_data(), y.raw_data(), b->raw_data()))
    Backend::linear_forward(x, w, b, y, relu);
}

// dz = dy·[y > 0] (one kernel, with the ReLU) or dy;  dw (out, in) = dzᵀ · x (TN out×in×n) with
// db = Σ_rows dz as its epilogue;  dx = dz · w (gemm). bf16 throughout takes the same path on
// the tensor cores (dw and db each rounded once from float32 sums); any other mix with bf16
// goes through float32 copies.
void CudaBackend::linear_backward(const Tensor& dy, const Tensor* relu_output, const Tensor& x, const Tensor& w,
                                  Tensor* dx, Tensor* dw, Tensor* db) {
  const bool bf16 = bf16::all({&dy, relu_output, &x, &w, dx, dw, db});
  if (!bf16 && bf16::widened(*this, &CudaBackend::linear_backward, dy, relu_output, x, w, dx, dw, db)) return;
  const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
  // --gemm-impl and --reduce-impl pick teaching kernels, which the epilogue would bypass (bf16
  // products are always cuBLAS's: the rungs are float32).
  if ((!bf16 && gemm_impl() != GemmImpl::Cublas) || reduce_impl() != ReduceImpl::Auto || !dw || !db || n == 0 ||
      in == 0 || out == 0)
    return Backend::linear_backward(dy, relu_output, x, w, dx, dw, db);
  if (!bf16)
    for (const Tensor* t : {&dy, &x, static_cast<const Tensor*>(dw), static_cast<const Tensor*>(db)})
      cuda::require_f32("linear_backward", *t);
  Tensor dz = dy;
  if (relu_output) {
    dz = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    unary_backward(UnaryOp::Relu, *relu_output, *relu_output, dy, dz);
  }
  if (!cuda::lt_gemm(*ctx_, cuda::LtEpilogue::BiasGradA, dy.dtype(), true, false, out, in, n, dz.raw_data(),
                     x.raw_data(), dw->raw_data(), db->raw_data())) {
    bias_backward(dz, *db, 1);
    return linear_products(dz, x, w, dx, dw);
  }
  linear_products(dz, x, w, dx, nullptr);
}

}  // namespace nnlab
