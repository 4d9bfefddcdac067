// The CUDA simulator's cuBLASLt: descriptors, a heuristic that answers for the float32 and bf16
// products and epilogues nnlab uses, and cublasLtMatmul, checked as the library documents
// (cublasLt.h) and then run on the stream by OpenBLAS, followed by the epilogue:
//   BIAS:       D[i][j] += bias[i]            (bias: D's rows, broadcast over its columns)
//   RELU:       D = max(D, 0), after the bias where both are asked for
//   BGRADA:     bias[i] = Σ_k op(A)[i][k]     (the bias gradient from A: D's rows)
//   BGRADB:     bias[j] = Σ_k op(B)[k][j]     (the bias gradient from B: D's columns)
// bf16 matrices (A, B, C, D and the bias all CUDA_R_16BF, float32 compute and scale) are widened
// to float32, computed as above, and D (and a bias gradient) rounded to bf16 once at the end,
// as the tensor cores' float32 accumulator is rounded once by the epilogue's store.
// Other epilogues, types and compute modes get no algorithm from the heuristic
// (CUBLAS_STATUS_NOT_SUPPORTED), as a real library does for what it cannot run, so a caller
// must be ready to fall back. A call's arguments are checked on the calling thread; the
// arithmetic is queued with sim::enqueue, as sim_cublas.cpp does for cublasSgemm.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <cublasLt.h>

#include "core/bfloat16.h"
#include "devices/cuda/sim/sim.h"

struct cublasLtContext {
  int unused = 0;
};

namespace {

struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type
};
struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct Preference {
  uint64_t max_workspace = 0;
};

// Everything created and not yet destroyed; a call with anything else is refused with a
// diagnostic (the real library may read freed memory instead).
std::mutex registry_mutex;
std::map<const void*, bool> handles;  // the value is unused: a handle holds no state
std::map<const void*, MatmulDesc> descs;
std::map<const void*, Layout> layouts;
std::map<const void*, Preference> preferences;

cublasStatus_t refuse(const char* call, const std::string& why,
                      cublasStatus_t status = CUBLAS_STATUS_INVALID_VALUE) {
  nnlab::sim::set_diagnostic(std::string(call) + ": " + why);
  return status;
}

template <typename Opaque, typename Value>
cublasStatus_t create(std::map<const void*, Value>& registry, Opaque** out, const Value& value) {
  if (!out) return CUBLAS_STATUS_INVALID_VALUE;
  auto* p = new Opaque{};
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry[p] = value;
  *out = p;
  return CUBLAS_STATUS_SUCCESS;
}

// A pointer never created (or destroyed already) is `unknown`: INVALID_VALUE for descriptors,
// NOT_INITIALIZED for a handle, as cuBLAS answers.
template <typename Opaque, typename Value>
cublasStatus_t destroy(std::map<const void*, Value>& registry, Opaque* p,
                       cublasStatus_t unknown = CUBLAS_STATUS_INVALID_VALUE) {
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    if (!p || registry.erase(p) == 0) return unknown;
  }
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

template <typename Value>
bool find(const std::map<const void*, Value>& registry, const void* p, Value& out) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry.find(p);
  if (it == registry.end()) return false;
  out = it->second;
  return true;
}

bool live_handle(const cublasLtContext* h) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return h && handles.count(h) != 0;
}

// The product the descriptors describe, checked: op(A) m×k, op(B) k×n, C and D m×n.
struct Problem {
  MatmulDesc desc;
  Layout a, b, c, d;
  uint64_t m, n, k;
};

bool transposed(cublasOperation_t op) { return op != CUBLAS_OP_N; }

// Fills `p` from the descriptors; on failure, says why (for the diagnostic) and returns the status.
cublasStatus_t read_problem(const char* call, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                            cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                            Problem& p) {
  if (!find(descs, desc, p.desc)) return refuse(call, "the matmul descriptor was not created or was destroyed");
  if (!find(layouts, a, p.a) || !find(layouts, b, p.b) || !find(layouts, c, p.c) || !find(layouts, d, p.d))
    return refuse(call, "a matrix layout was not created or was destroyed");
  const bool ta = transposed(p.desc.trans_a), tb = transposed(p.desc.trans_b);
  p.m = ta ? p.a.cols : p.a.rows;
  p.k = ta ? p.a.rows : p.a.cols;
  p.n = tb ? p.b.rows : p.b.cols;
  const uint64_t b_k = tb ? p.b.cols : p.b.rows;
  if (b_k != p.k)
    return refuse(call, "op(A) has " + std::to_string(p.k) + " columns but op(B) has " + std::to_string(b_k) + " rows");
  if (p.d.rows != p.m || p.d.cols != p.n || p.c.rows != p.m || p.c.cols != p.n)
    return refuse(call, "C or D is not " + std::to_string(p.m) + "×" + std::to_string(p.n));
  for (const Layout* l : {&p.a, &p.b, &p.c, &p.d})
    if (l->ld < static_cast<int64_t>(std::max<uint64_t>(1, l->rows)))
      return refuse(call, "a leading dimension " + std::to_string(l->ld) + " is below its rows " +
                              std::to_string(l->rows));
  return CUBLAS_STATUS_SUCCESS;
}

// What the simulator runs: float32 matrices (TF32 computes as float32 here, as in
// sim_cublas.cpp; FAST_16BF rounds A and B to bf16 first), or bf16 ones with plain float32
// compute, and the epilogues listed at the top.
bool simulated(const Problem& p) {
  const auto all_of = [&](cudaDataType_t t) {
    return p.a.type == t && p.b.type == t && p.c.type == t && p.d.type == t && p.desc.scale == CUDA_R_32F &&
           (p.desc.bias_type == -1 || p.desc.bias_type == t);
  };
  const bool f32 = all_of(CUDA_R_32F) && (p.desc.compute == CUBLAS_COMPUTE_32F ||
                                          p.desc.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                                          p.desc.compute == CUBLAS_COMPUTE_32F_FAST_16BF);
  const bool bf16 = all_of(CUDA_R_16BF) && p.desc.compute == CUBLAS_COMPUTE_32F;
  switch (p.desc.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS: case CUBLASLT_EPILOGUE_BGRADA: case CUBLASLT_EPILOGUE_BGRADB:
      return f32 || bf16;
    default: return false;
  }
}

// The algorithm the heuristic hands out names the problem it was chosen for; cublasLtMatmul
// refuses one chosen for another problem (a real library may run it and compute garbage).
constexpr uint64_t kAlgoMagic = 0x6e6e6c61624c7431ull;  // "nnlabLt1"
uint64_t problem_tag(const Problem& p) {
  return p.m * 1000003ull ^ p.n * 10007ull ^ p.k * 101ull ^ uint64_t(p.d.type) << 40 ^ uint64_t(p.desc.epilogue) << 48 ^
         uint64_t(transposed(p.desc.trans_a)) << 60 ^ uint64_t(transposed(p.desc.trans_b)) << 61;
}

size_t element_bytes(cudaDataType_t t) { return t == CUDA_R_16BF ? sizeof(uint16_t) : sizeof(float); }

// Elements from the first to the last of a column-major matrix (the gaps of ld included).
size_t layout_elements(const Layout& l) {
  if (l.rows == 0 || l.cols == 0) return 0;
  return (l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows;
}
size_t layout_bytes(const Layout& l) { return layout_elements(l) * element_bytes(l.type); }

// `count` values at p as float32: float32 data as it is, bf16 widened into `copy`.
const float* as_float(const void* p, size_t count, bool bf16, std::vector<float>& copy) {
  if (!bf16) return static_cast<const float*>(p);
  const auto* bits = static_cast<const nnlab::BFloat16*>(p);
  copy.resize(count);
  for (size_t i = 0; i < count; ++i) copy[i] = float(bits[i]);
  return copy.data();
}

// Float32 results back into bf16 storage, each rounded once: `rows` of each of `cols` columns
// ld apart (the gaps between columns are not the matrix's and are left as they are).
void store_rounded(const std::vector<float>& values, uint64_t rows, uint64_t cols, int64_t ld, void* p) {
  auto* bits = static_cast<nnlab::BFloat16*>(p);
  for (uint64_t j = 0; j < cols; ++j)
    for (uint64_t i = 0; i < rows; ++i) bits[i + j * ld] = nnlab::BFloat16(values[i + j * ld]);
}

// Element (i, j) of op(X) for a column-major X with leading dimension ld.
inline float at(const float* x, int64_t ld, bool trans, uint64_t i, uint64_t j) {
  return trans ? x[j + i * ld] : x[i + j * ld];
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) { return create(handles, lightHandle, true); }

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  return destroy(handles, lightHandle, CUBLAS_STATUS_NOT_INITIALIZED);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  MatmulDesc d;
  d.compute = computeType;
  d.scale = scaleType;
  return create(descs, matmulDesc, d);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) { return destroy(descs, matmulDesc); }

// Each attribute has one size; a wrong size is INVALID_VALUE, as cublasLt.h says.
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  const char* call = "cublasLtMatmulDescSetAttribute";
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = descs.find(matmulDesc);
  if (it == descs.end()) return refuse(call, "the descriptor was not created or was destroyed");
  MatmulDesc& d = it->second;
  auto read = [&](auto& field) {
    if (!buf || sizeInBytes != sizeof(field))
      return refuse(call, "attribute " + std::to_string(attr) + " takes " + std::to_string(sizeof(field)) +
                              " bytes, got " + std::to_string(sizeInBytes));
    std::memcpy(&field, buf, sizeof(field));
    return CUBLAS_STATUS_SUCCESS;
  };
  int32_t value = 0;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
      if ((st = read(value)) != CUBLAS_STATUS_SUCCESS) return st;
      if (value < CUBLAS_OP_N || value > CUBLAS_OP_C) return refuse(call, "a transpose is not N, T or C");
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d.trans_a : d.trans_b) = static_cast<cublasOperation_t>(value);
      return st;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return read(d.epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read(d.bias);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return read(d.bias_type);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      if ((st = read(value)) != CUBLAS_STATUS_SUCCESS) return st;
      if (value != 0) return refuse(call, "the simulator takes alpha and beta on the host only", CUBLAS_STATUS_NOT_SUPPORTED);
      return st;
    default: return refuse(call, "attribute " + std::to_string(attr) + " is not simulated", CUBLAS_STATUS_NOT_SUPPORTED);
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  return create(layouts, matLayout, Layout{type, rows, cols, ld});
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) { return destroy(layouts, matLayout); }

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return create(preferences, pref, Preference{});
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) { return destroy(preferences, pref); }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = preferences.find(pref);
  if (it == preferences.end()) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    return refuse("cublasLtMatmulPreferenceSetAttribute", "only the workspace limit is simulated",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  if (!buf || sizeInBytes != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&it->second.max_workspace, buf, sizeof(uint64_t));
  return CUBLAS_STATUS_SUCCESS;
}

// One algorithm, needing no workspace, for what `simulated` accepts; none otherwise.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  const char* call = "cublasLtMatmulAlgoGetHeuristic";
  if (!live_handle(lightHandle)) return refuse(call, "the handle was not created or was destroyed", CUBLAS_STATUS_NOT_INITIALIZED);
  Preference pref;
  if (!find(preferences, preference, pref)) return refuse(call, "the preference was not created or was destroyed");
  if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount)
    return refuse(call, "requestedAlgoCount <= 0 or a null result pointer");
  Problem p;
  const cublasStatus_t st = read_problem(call, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  *returnAlgoCount = 0;
  if (!simulated(p))
    return refuse(call, "no algorithm for this type, compute mode or epilogue", CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[0];
  r = cublasLtMatmulHeuristicResult_t{};
  r.algo.data[0] = kAlgoMagic;
  r.algo.data[1] = problem_tag(p);
  r.workspaceSize = 0;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                              cudaStream_t stream) {
  const char* call = "cublasLtMatmul";
  if (!live_handle(lightHandle)) return refuse(call, "the handle was not created or was destroyed", CUBLAS_STATUS_NOT_INITIALIZED);
  Problem p;
  const cublasStatus_t st = read_problem(call, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (!simulated(p)) return refuse(call, "no algorithm for this type, compute mode or epilogue", CUBLAS_STATUS_NOT_SUPPORTED);
  if (algo && (algo->data[0] != kAlgoMagic || algo->data[1] != problem_tag(p)))
    return refuse(call, "the algorithm was not chosen by the heuristic for this product");
  if (!alpha || !beta) return refuse(call, "alpha or beta is null");
  const uint32_t ep = p.desc.epilogue;
  const bool add_bias = ep & CUBLASLT_EPILOGUE_BIAS, relu = ep & CUBLASLT_EPILOGUE_RELU;
  const bool grad_a = ep == CUBLASLT_EPILOGUE_BGRADA, grad_b = ep == CUBLASLT_EPILOGUE_BGRADB;
  const uint64_t bias_length = grad_b ? p.n : p.m;
  if ((add_bias || grad_a || grad_b) && !p.desc.bias)
    return refuse(call, "the epilogue needs CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  if ((grad_a || grad_b) && p.k == 0) return refuse(call, "a bias gradient over k = 0 terms");
  if (!nnlab::sim::check_device_access(call, "A", A, layout_bytes(p.a)) ||
      !nnlab::sim::check_device_access(call, "B", B, layout_bytes(p.b)) ||
      !nnlab::sim::check_device_access(call, "C", C, layout_bytes(p.c)) ||
      !nnlab::sim::check_device_access(call, "D", D, layout_bytes(p.d)) ||
      ((add_bias || grad_a || grad_b) &&
       !nnlab::sim::check_device_access(call, "the bias", p.desc.bias, bias_length * element_bytes(p.d.type))) ||
      (workspaceSizeInBytes && !nnlab::sim::check_device_access(call, "the workspace", workspace, workspaceSizeInBytes)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;

  const float a_s = *static_cast<const float*>(alpha), b_s = *static_cast<const float*>(beta);
  nnlab::sim::enqueue(stream, "cublas", "cublasLtMatmul", [=] {
    const bool bf16 = p.d.type == CUDA_R_16BF;
    std::vector<float> a16, b16, c_wide, d_wide, bias_wide;  // float32 copies of bf16 or rounded operands
    const float* a = as_float(A, layout_elements(p.a), bf16, a16);
    const float* b = as_float(B, layout_elements(p.b), bf16, b16);
    if (p.desc.compute == CUBLAS_COMPUTE_32F_FAST_16BF) {  // the operands as the bf16 tensor cores take them
      a16.assign(a, a + layout_elements(p.a));
      b16.assign(b, b + layout_elements(p.b));
      for (float& v : a16) v = nnlab::round_to_bf16(v);
      for (float& v : b16) v = nnlab::round_to_bf16(v);
      a = a16.data(), b = b16.data();
    }
    const float* c = b_s == 0.0f ? nullptr : as_float(C, layout_elements(p.c), bf16, c_wide);
    if (bf16) d_wide.resize(layout_elements(p.d));
    float* d = bf16 ? d_wide.data() : static_cast<float*>(D);
    float* bias = static_cast<float*>(p.desc.bias);
    if (bf16 && (add_bias || grad_a || grad_b)) {  // the bias read widened, or its gradient summed here
      if (add_bias) as_float(p.desc.bias, bias_length, true, bias_wide);
      else bias_wide.assign(bias_length, 0.0f);
      bias = bias_wide.data();
    }
    const bool ta = transposed(p.desc.trans_a), tb = transposed(p.desc.trans_b);
    // D = beta·C first (beta = 0 never reads C), then D += alpha·op(A)·op(B).
    for (uint64_t j = 0; j < p.n; ++j)
      for (uint64_t i = 0; i < p.m; ++i)
        d[i + j * p.d.ld] = b_s == 0.0f ? 0.0f : b_s * c[i + j * p.c.ld];
    if (p.k > 0)
      cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(p.m), int(p.n),
                  int(p.k), a_s, a, int(p.a.ld), b, int(p.b.ld), 1.0f, d, int(p.d.ld));
    for (uint64_t j = 0; j < p.n && (add_bias || relu); ++j)
      for (uint64_t i = 0; i < p.m; ++i) {
        float& v = d[i + j * p.d.ld];
        if (add_bias) v += bias[i];
        if (relu) v = v > 0.0f ? v : 0.0f;
      }
    // The bias gradients sum the k terms of a row of op(A) or a column of op(B), in float32.
    if (grad_a)
      for (uint64_t i = 0; i < p.m; ++i) {
        float s = 0.0f;
        for (uint64_t kk = 0; kk < p.k; ++kk) s += at(a, p.a.ld, ta, i, kk);
        bias[i] = s;
      }
    if (grad_b)
      for (uint64_t j = 0; j < p.n; ++j) {
        float s = 0.0f;
        for (uint64_t kk = 0; kk < p.k; ++kk) s += at(b, p.b.ld, tb, kk, j);
        bias[j] = s;
      }
    if (!bf16) return;
    store_rounded(d_wide, p.m, p.n, int64_t(p.d.ld), D);
    if (grad_a || grad_b) store_rounded(bias_wide, bias_length, 1, int64_t(bias_length), p.desc.bias);
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
