// The CUDA simulator's cublas_v2.h: the part of cuBLAS nnlab uses (a handle, its stream and
// math mode, the version query, cublasSgemm and cublasGemmEx), for the host compiler. Only the simulator
// build puts this folder on the include path; under nvcc the toolkit's header is used.
//
// Names, numeric values and signatures are the toolkit's (cublas_api.h, library_types.h of
// CUDA 13.x), including the _v2 entry points behind the cublasCreate/cublasSgemm macros, so
// devices/cuda/*.cu compile unchanged and status codes print the same on both builds.
// The implementation is devices/cuda/sim/sim_cublas.cpp.
#pragma once
#include <cuda_runtime.h>

// The toolkit version the simulator mirrors; cublasGetProperty reports these numbers.
#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 1
#define CUBLAS_VER_PATCH 0
#define CUBLAS_VER_BUILD 3
#define CUBLAS_VERSION (CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH)

// library_types.h's property selector, shared with cudnn.h (whichever is included first
// defines it).
#ifndef NNLAB_SIM_LIBRARY_PROPERTY_TYPE
#define NNLAB_SIM_LIBRARY_PROPERTY_TYPE 1
typedef enum libraryPropertyType_t { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL } libraryPropertyType;
#endif

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3
} cublasOperation_t;

typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;

typedef enum {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_FP32_EMULATED_BF16X9_MATH = 4,
  CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH = 8,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
} cublasMath_t;

// library_types.h: the element types a layout or a scale may name (the ones nnlab could use).
typedef enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10
} cudaDataType;

// cublas_api.h: the arithmetic of a product (cublasGemmEx, cublasLtMatmulDescCreate).
typedef enum {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70
} cublasComputeType_t;

// cublasGemmEx's algorithm: the library's choice (the only one the simulator takes).
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;

struct cublasContext;
typedef struct cublasContext* cublasHandle_t;

extern "C" {
cublasStatus_t cublasCreate_v2(cublasHandle_t* handle);
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value);
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId);
// Scratch memory of the handle's own (a graph capture must not let cuBLAS allocate any).
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes);
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode);
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);

// C(m×n) = alpha · op(A)(m×k) · op(B)(k×n) + beta · C, column-major, alpha/beta on the host.
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                              int n, int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc);
// The same with the element types and the arithmetic named: the simulator takes float32
// matrices with CUBLAS_COMPUTE_32F, _32F_FAST_TF32 (computed as float32, as cublasSgemm's TF32
// mode is) or _32F_FAST_16BF (A and B rounded to bf16, to nearest even, as the tensor cores
// take them; float32 sums).
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);
}

#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasSetStream cublasSetStream_v2
#define cublasGetStream cublasGetStream_v2
#define cublasSetWorkspace cublasSetWorkspace_v2
#define cublasGetPointerMode cublasGetPointerMode_v2
#define cublasSetPointerMode cublasSetPointerMode_v2
#define cublasSgemm cublasSgemm_v2
