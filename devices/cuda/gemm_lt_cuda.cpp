// cuBLASLt products with an epilogue (gemm_lt.h). A plan (descriptors, layouts and the
// heuristic's algorithm) is made once per shape and epilogue and kept in the context, as the
// convolution plans are; each call then sets the bias pointer and queues one cublasLtMatmul.
#include "devices/cuda/gemm_lt.h"

#include <string>

#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/gemm_plan.h"
#include "devices/kernel_log.h"

namespace nnlab::cuda {

LtPlan::~LtPlan() {
  if (out) cublasLtMatrixLayoutDestroy(out);
  if (second) cublasLtMatrixLayoutDestroy(second);
  if (first) cublasLtMatrixLayoutDestroy(first);
  if (desc) cublasLtMatmulDescDestroy(desc);
}

const char* lt_epilogue_name(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::None: return "none";
    case LtEpilogue::Bias: return "bias";
    case LtEpilogue::BiasRelu: return "bias+relu";
    case LtEpilogue::BiasGradA: return "bias gradient";
  }
  return "?";
}

namespace {

// --math: strict float32, TF32 or bf16 tensor cores (inputs rounded, float32 sums and storage).
cublasComputeType_t compute_type(CudaMath math) {
  switch (math) {
    case CudaMath::Fp32: return CUBLAS_COMPUTE_32F;
    case CudaMath::Tf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case CudaMath::Bf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
  }
  return CUBLAS_COMPUTE_32F;
}

cublasLtEpilogue_t column_major_epilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::BiasRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case LtEpilogue::BiasGradA: return CUBLASLT_EPILOGUE_BGRADB;  // row-major A is the second operand
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The column-major problem of gemm_plan.h, described to cuBLASLt, and the heuristic's first
// answer for it with at most the context's workspace. bf16 storage computes in plain float32
// (bf16 products are exact on the tensor cores), whatever --math says.
std::unique_ptr<LtPlan> make_plan(Context& ctx, LtEpilogue e, bool bf16, bool trans_a, bool trans_b, int64_t m,
                                  int64_t n, int64_t k, CudaMath math) {
  auto plan = std::make_unique<LtPlan>();
  const ColumnMajorGemm p = column_major_plan(trans_a, trans_b, m, n, k);
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  NNLAB_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&plan->desc, bf16 ? CUBLAS_COMPUTE_32F : compute_type(math), CUDA_R_32F));
  const int32_t op_first = p.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t op_second = p.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint32_t epilogue = column_major_epilogue(e);
  NNLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  NNLAB_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  NNLAB_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (bf16 && e != LtEpilogue::None) {  // the bias (or its gradient) in bf16 too, said outright
    const int32_t bias_type = type;
    NNLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                      sizeof(bias_type)));
  }
  // Stored shapes (column-major rows × cols): op(first) is p.m × p.k, op(second) p.k × p.n.
  NNLAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->first, type, p.trans_first ? p.k : p.m,
                                                p.trans_first ? p.m : p.k, p.ld_first));
  NNLAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->second, type, p.trans_second ? p.n : p.k,
                                                p.trans_second ? p.k : p.n, p.ld_second));
  NNLAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->out, type, p.m, p.n, p.ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  NNLAB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace = Context::kLtWorkspaceBytes;
  NNLAB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                          sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // NOT_SUPPORTED (or no result) means no algorithm: not an error, the plain path runs instead.
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.cublas_lt, plan->desc, plan->first, plan->second,
                                                           plan->out, plan->out, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) NNLAB_CUBLAS_CHECK(st);
  plan->usable = st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
                 result.workspaceSize <= Context::kLtWorkspaceBytes;
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  return plan;
}

}  // namespace

bool lt_gemm(Context& ctx, LtEpilogue e, DType storage, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
             const void* a, const void* b, void* c, void* bias) {
  NNLAB_CHECK(storage == DType::Float32 || storage == DType::BFloat16, "cublasLtMatmul: float32 or bf16 storage, got ",
              dtype_name(storage));
  const bool bf16 = storage == DType::BFloat16;
  const CudaMath math = static_cast<CudaMath>(cuda_math_mode());
  const LtKey key{trans_a, trans_b, m, n, k, static_cast<int64_t>(e), static_cast<int64_t>(math), bf16 ? 1 : 0};
  auto it = ctx.lt_plans.find(key);
  if (it == ctx.lt_plans.end())
    it = ctx.lt_plans.emplace(key, make_plan(ctx, e, bf16, trans_a, trans_b, m, n, k, math)).first;
  LtPlan& plan = *it->second;
  if (!plan.usable) return false;
  // The workspace is taken on first use, not at start-up (a program that never runs a Linear
  // layer on the GPU keeps the memory), from the caching allocator (so running out is its one
  // clear message) and kept for the context's life. Never inside a capture, whose blocks belong
  // to the graph: there, without it, the plain path runs (train's capture always follows an
  // eager step, which made it).
  if (!ctx.lt_workspace) {
    if (ctx.capturing) return false;
    ctx.lt_workspace = ctx.allocator->allocate(Context::kLtWorkspaceBytes);
  }
  if (e != LtEpilogue::None)
    NNLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float one = 1.0f, zero = 0.0f;
  KernelTiming timing(kernel_log_enabled()  // nnlab explain: the call as the row-major product it computes
                          ? record_kernel(std::string("cublasLtMatmul (") +
                                              (bf16                     ? "bf16 storage, "
                                               : math == CudaMath::Fp32 ? ""
                                                                        : std::string(cuda_math_name(math)) + ", ") +
                                              lt_epilogue_name(e) + ")",
                                          std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " " +
                                              dims_text({m, n, k}))
                          : kNotRecorded);
  NNLAB_CUBLAS_CHECK(cublasLtMatmul(ctx.cublas_lt, plan.desc, &one, b, plan.first, a, plan.second, &zero, c, plan.out,
                                    c, plan.out, &plan.algo, ctx.lt_workspace, plan.workspace, ctx.stream));
  return true;
}

}  // namespace nnlab::cuda
