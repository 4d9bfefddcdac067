// The CUDA simulator's cuBLAS: a handle (stream, math mode, pointer mode), cublasSgemm and
// cublasGemmEx on float32 matrices (with FAST_16BF, the inputs rounded to bf16 first, as the
// tensor cores take them) or bf16 ones (a bf16 or float32 C, float32 sums), checked as cuBLAS
// documents and then run on the handle's stream by OpenBLAS.
//
// A call is split the way the real library splits it: the arguments are checked on the
// calling thread (a bad one returns a status at once and nothing is queued), then the
// arithmetic is queued with sim::enqueue, so it runs after everything queued on the stream
// before it and the call returns without waiting, as a kernel launch does.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "core/bfloat16.h"
#include "devices/cuda/sim/sim.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

namespace {

// The live handles: a destroyed or never-created handle is CUBLAS_STATUS_NOT_INITIALIZED
// (the real library may crash instead; the simulator says what went wrong).
std::mutex handles_mutex;
std::set<const cublasContext*> live_handles;

bool live(const cublasContext* h) {
  std::lock_guard<std::mutex> lock(handles_mutex);
  return h && live_handles.count(h) != 0;
}

cublasStatus_t refuse(const char* call, const std::string& why, cublasStatus_t status = CUBLAS_STATUS_INVALID_VALUE) {
  nnlab::sim::set_diagnostic(std::string(call) + ": " + why);
  return status;
}

// Bytes spanned by a column-major rows×cols matrix of `element`-byte values with leading
// dimension ld: the last column starts at (cols − 1)·ld and holds rows elements. An empty
// matrix spans nothing.
size_t column_major_bytes(int rows, int cols, int ld, size_t element = sizeof(float)) {
  if (rows <= 0 || cols <= 0) return 0;
  return (static_cast<size_t>(cols - 1) * static_cast<size_t>(ld) + static_cast<size_t>(rows)) * element;
}

// A scalar the device reads must be device memory in CUBLAS_POINTER_MODE_DEVICE; in host
// mode it is read now, so the caller may reuse it as soon as the call returns.
bool scalar_ok(const char* call, const cublasContext* h, const char* what, const float* p) {
  if (!p) return false;
  if (h->pointer_mode == CUBLAS_POINTER_MODE_HOST) return true;
  return nnlab::sim::check_device_access(call, what, p, sizeof(float));
}

// The element types of one product, as cublasGemmEx takes them under CUBLAS_COMPUTE_32F: A
// and B both float32 or both bf16, C float32 or bf16; round_inputs: float32 A and B rounded
// to bf16 first (FAST_16BF, what a bf16 tensor core multiplies).
struct GemmTypes {
  bool ab_bf16 = false, c_bf16 = false, round_inputs = false;
};

// A float32 copy of the column-major rows×cols matrix x (leading dimension ld), same layout:
// bf16 elements widened (exactly), or float32 ones rounded to bf16 when `round`.
std::vector<float> widened(const void* x, bool bf16, bool round, int rows, int cols, int ld) {
  std::vector<float> out(column_major_bytes(rows, cols, ld) / sizeof(float));
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) {
      const size_t at = static_cast<size_t>(j) * static_cast<size_t>(ld) + static_cast<size_t>(i);
      const float v = bf16 ? float(static_cast<const nnlab::BFloat16*>(x)[at]) : static_cast<const float*>(x)[at];
      out[at] = round ? nnlab::round_to_bf16(v) : v;
    }
  return out;
}

// cublasSgemm and cublasGemmEx (`call` names the entry point in diagnostics) on matrices of
// the element types `types`; the scalars and the sums are float32.
cublasStatus_t simulated_gemm(const char* call, cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha, const void* A,
                              int lda, const void* B, int ldb, const float* beta, void* C, int ldc,
                              GemmTypes types) {
  if (!live(handle)) {
    return refuse(call, "the handle was not created by cublasCreate or was destroyed", CUBLAS_STATUS_NOT_INITIALIZED);
  }
  auto op_ok = [](cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; };
  if (!op_ok(transa) || !op_ok(transb)) return refuse(call, "transa/transb is not CUBLAS_OP_N, _T or _C");
  if (m < 0 || n < 0 || k < 0)
    return refuse(call, "m, n, k = " + std::to_string(m) + ", " + std::to_string(n) + ", " + std::to_string(k) +
                   " (must be >= 0)");
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;  // real data: C and T are the same
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (lda < std::max(1, a_rows))
    return refuse(call, "lda = " + std::to_string(lda) + " < max(1, " + std::to_string(a_rows) + ")");
  if (ldb < std::max(1, b_rows))
    return refuse(call, "ldb = " + std::to_string(ldb) + " < max(1, " + std::to_string(b_rows) + ")");
  if (ldc < std::max(1, m)) return refuse(call, "ldc = " + std::to_string(ldc) + " < max(1, " + std::to_string(m) + ")");
  if (!scalar_ok(call, handle, "alpha", alpha) || !scalar_ok(call, handle, "beta", beta))
    return refuse(call, "alpha or beta is null or not readable in this pointer mode");
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to compute, nothing read

  // Every operand the device touches must be device (or mapped) memory; the diagnostic
  // names the call and the argument, and the error is INVALID_VALUE (a GPU would fault later
  // with an illegal address, far from the call that caused it).
  const size_t ab_size = types.ab_bf16 ? 2 : 4, c_size = types.c_bf16 ? 2 : 4;
  if (!nnlab::sim::check_device_access(call, "A", A, column_major_bytes(a_rows, a_cols, lda, ab_size)) ||
      !nnlab::sim::check_device_access(call, "B", B, column_major_bytes(b_rows, b_cols, ldb, ab_size)) ||
      !nnlab::sim::check_device_access(call, "C", C, column_major_bytes(m, n, ldc, c_size)))
    return CUBLAS_STATUS_INVALID_VALUE;

  const bool host_scalars = handle->pointer_mode == CUBLAS_POINTER_MODE_HOST;
  const float alpha_now = host_scalars ? *alpha : 0.0f, beta_now = host_scalars ? *beta : 0.0f;
  nnlab::sim::enqueue(handle->stream, "cublas", call, [=] {
    const float a_s = host_scalars ? alpha_now : *alpha, b_s = host_scalars ? beta_now : *beta;
    // A bf16 C is computed in a float32 copy and rounded once as it is stored, as the
    // library's epilogue does; beta == 0 never reads C (it may hold NaN), as OpenBLAS and
    // cuBLAS do not.
    std::vector<float> c32;
    if (types.c_bf16) c32 = b_s == 0.0f ? std::vector<float>(column_major_bytes(m, n, ldc) / sizeof(float))
                                        : widened(C, true, false, m, n, ldc);
    float* const c = types.c_bf16 ? c32.data() : static_cast<float*>(C);
    if (k == 0) {  // C = beta · C
      for (int j = 0; j < n; ++j) {
        float* col = c + static_cast<size_t>(j) * ldc;
        if (b_s == 0.0f)
          std::fill(col, col + m, 0.0f);
        else
          for (int i = 0; i < m; ++i) col[i] *= b_s;
      }
    } else {
      // bf16 inputs are multiplied as float32 copies: bf16 · bf16 is exact in float32, so only
      // the rounding and the sum's order separate it from a tensor core.
      std::vector<float> a32, b32;
      const bool copy = types.ab_bf16 || types.round_inputs;
      if (copy) {
        a32 = widened(A, types.ab_bf16, types.round_inputs, a_rows, a_cols, lda);
        b32 = widened(B, types.ab_bf16, types.round_inputs, b_rows, b_cols, ldb);
      }
      cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, a_s,
                  copy ? a32.data() : static_cast<const float*>(A), lda,
                  copy ? b32.data() : static_cast<const float*>(B), ldb, b_s, c, ldc);
    }
    if (types.c_bf16)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          const size_t at = static_cast<size_t>(j) * static_cast<size_t>(ldc) + static_cast<size_t>(i);
          static_cast<nnlab::BFloat16*>(C)[at] = nnlab::BFloat16(c32[at]);
        }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  auto* h = new cublasContext;
  std::lock_guard<std::mutex> lock(handles_mutex);
  live_handles.insert(h);
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

// Work already queued captured its arguments by value, so the handle may go at once.
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  {
    std::lock_guard<std::mutex> lock(handles_mutex);
    if (!handle || live_handles.erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// The simulator reports the toolkit version it mirrors (cublas_v2.h); nnlab's report says
// separately that the simulator ran.
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  if (!value) return CUBLAS_STATUS_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = streamId;
  return CUBLAS_STATUS_SUCCESS;
}

// The simulated products need no scratch; the workspace is checked as cuBLAS would use it.
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspaceSizeInBytes && !nnlab::sim::check_device_access("cublasSetWorkspace", "the workspace", workspace,
                                                               workspaceSizeInBytes))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!streamId) return CUBLAS_STATUS_INVALID_VALUE;
  *streamId = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

// The mode is kept so GetMathMode reads it back. TF32 (and the other tensor-op modes)
// change nothing here: the simulator always computes in plain float32, which is what TF32
// approximates, so a --math tf32 run on the simulator is a strict float32 run.
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const unsigned base = static_cast<unsigned>(mode) & ~unsigned(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  if (base > CUBLAS_FP32_EMULATED_BF16X9_MATH && base != CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

// C(m×n) = alpha · op(A)(m×k) · op(B)(k×n) + beta · C, all column-major.
// op(A) is m×k, so A itself is stored m×k (N) or k×m (T): lda ≥ max(1, N ? m : k);
// likewise ldb ≥ max(1, N ? k : n) and ldc ≥ max(1, m). k == 0 leaves C = beta · C.
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                              int n, int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  return simulated_gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                        GemmTypes{});
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  const char* call = "cublasGemmEx";
  const auto float_or_bf16 = [](cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16BF; };
  if (!float_or_bf16(Atype) || Btype != Atype || !float_or_bf16(Ctype) || (Atype == CUDA_R_32F && Ctype != CUDA_R_32F))
    return refuse(call,
                  "the simulator takes float32 matrices, or bf16 A and B with a bf16 or float32 C (CUDA_R_32F, "
                  "CUDA_R_16BF)",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  if (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32 &&
      computeType != CUBLAS_COMPUTE_32F_FAST_16BF)
    return refuse(call, "compute type " + std::to_string(computeType) + " is not simulated",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  if (Atype == CUDA_R_16BF && computeType != CUBLAS_COMPUTE_32F)  // as cuBLAS's table of type combinations
    return refuse(call, "bf16 matrices take CUBLAS_COMPUTE_32F", CUBLAS_STATUS_NOT_SUPPORTED);
  if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)
    return refuse(call, "the simulator runs the default algorithm only", CUBLAS_STATUS_NOT_SUPPORTED);
  GemmTypes types;
  types.ab_bf16 = Atype == CUDA_R_16BF;
  types.c_bf16 = Ctype == CUDA_R_16BF;
  types.round_inputs = computeType == CUBLAS_COMPUTE_32F_FAST_16BF;
  return simulated_gemm(call, handle, transa, transb, m, n, k, static_cast<const float*>(alpha), A, lda, B, ldb,
                    static_cast<const float*>(beta), C, ldc, types);
}

}  // extern "C"
