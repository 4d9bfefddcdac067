// The CUDA simulator's cuBLAS: a handle (stream, math mode, pointer mode), cublasSgemm and
// cublasGemmEx on float32 matrices (with FAST_16BF, the inputs rounded to bf16 first, as the
// tensor cores take them), checked as cuBLAS documents and then run on the handle's stream by
// OpenBLAS.
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

#include "devices/cuda/sim/sim.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

namespace nnlab::sim {

// Round to nearest even on the 16 bits dropped: add 0x7fff plus the lowest kept bit, then cut.
// A NaN is kept a NaN (its quiet bit set), which the addition could otherwise carry into an
// infinity.
float round_to_bf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    bits = (bits | 0x00400000u) & 0xffff0000u;
  } else {
    bits += 0x7fffu + ((bits >> 16) & 1u);
    bits &= 0xffff0000u;
  }
  float out = 0.0f;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace nnlab::sim

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

// Bytes spanned by a column-major rows×cols matrix with leading dimension ld: the last
// column starts at (cols − 1)·ld and holds rows elements. An empty matrix spans nothing.
size_t column_major_bytes(int rows, int cols, int ld) {
  if (rows <= 0 || cols <= 0) return 0;
  return (static_cast<size_t>(cols - 1) * static_cast<size_t>(ld) + static_cast<size_t>(rows)) * sizeof(float);
}

// A scalar the device reads must be device memory in CUBLAS_POINTER_MODE_DEVICE; in host
// mode it is read now, so the caller may reuse it as soon as the call returns.
bool scalar_ok(const char* call, const cublasContext* h, const char* what, const float* p) {
  if (!p) return false;
  if (h->pointer_mode == CUBLAS_POINTER_MODE_HOST) return true;
  return nnlab::sim::check_device_access(call, what, p, sizeof(float));
}

// A copy of the column-major rows×cols matrix x (leading dimension ld) with every element
// rounded to bf16, same layout: what a bf16 tensor core multiplies.
std::vector<float> rounded_to_bf16(const float* x, int rows, int cols, int ld) {
  std::vector<float> out(column_major_bytes(rows, cols, ld) / sizeof(float));
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) {
      const size_t at = static_cast<size_t>(j) * static_cast<size_t>(ld) + static_cast<size_t>(i);
      out[at] = nnlab::sim::round_to_bf16(x[at]);
    }
  return out;
}

// cublasSgemm and cublasGemmEx on float32 matrices (`call` names the entry point in
// diagnostics). bf16_inputs: A and B rounded to bf16 before the product (FAST_16BF).
cublasStatus_t float_gemm(const char* call, cublasHandle_t handle, cublasOperation_t transa,
                          cublasOperation_t transb, int m, int n, int k, const float* alpha, const float* A, int lda,
                          const float* B, int ldb, const float* beta, float* C, int ldc, bool bf16_inputs) {
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
  if (!nnlab::sim::check_device_access(call, "A", A, column_major_bytes(a_rows, a_cols, lda)) ||
      !nnlab::sim::check_device_access(call, "B", B, column_major_bytes(b_rows, b_cols, ldb)) ||
      !nnlab::sim::check_device_access(call, "C", C, column_major_bytes(m, n, ldc)))
    return CUBLAS_STATUS_INVALID_VALUE;

  const bool host_scalars = handle->pointer_mode == CUBLAS_POINTER_MODE_HOST;
  const float alpha_now = host_scalars ? *alpha : 0.0f, beta_now = host_scalars ? *beta : 0.0f;
  nnlab::sim::enqueue(handle->stream, "cublas", call, [=] {
    const float a_s = host_scalars ? alpha_now : *alpha, b_s = host_scalars ? beta_now : *beta;
    if (k == 0) {  // C = beta · C; beta == 0 writes zeros and never reads C (it may hold NaN)
      for (int j = 0; j < n; ++j) {
        float* col = C + static_cast<size_t>(j) * ldc;
        if (b_s == 0.0f)
          std::fill(col, col + m, 0.0f);
        else
          for (int i = 0; i < m; ++i) col[i] *= b_s;
      }
      return;
    }
    // OpenBLAS, like cuBLAS, does not read C when beta == 0. With bf16 inputs it multiplies
    // the rounded copies: bf16 · bf16 is exact in float32, so only the rounding and the sum's
    // order separate it from a tensor core.
    std::vector<float> a16, b16;
    if (bf16_inputs) a16 = rounded_to_bf16(A, a_rows, a_cols, lda), b16 = rounded_to_bf16(B, b_rows, b_cols, ldb);
    cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, a_s,
                bf16_inputs ? a16.data() : A, lda, bf16_inputs ? b16.data() : B, ldb, b_s, C, ldc);
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
  return float_gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, false);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  const char* call = "cublasGemmEx";
  if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F)
    return refuse(call, "the simulator takes float32 matrices only (CUDA_R_32F)", CUBLAS_STATUS_NOT_SUPPORTED);
  if (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32 &&
      computeType != CUBLAS_COMPUTE_32F_FAST_16BF)
    return refuse(call, "compute type " + std::to_string(computeType) + " is not simulated",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)
    return refuse(call, "the simulator runs the default algorithm only", CUBLAS_STATUS_NOT_SUPPORTED);
  return float_gemm(call, handle, transa, transb, m, n, k, static_cast<const float*>(alpha),
                    static_cast<const float*>(A), lda, static_cast<const float*>(B), ldb,
                    static_cast<const float*>(beta), static_cast<float*>(C), ldc,
                    computeType == CUBLAS_COMPUTE_32F_FAST_16BF);
}

}  // extern "C"
