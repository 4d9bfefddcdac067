// The CUDA simulator's cudnn.h: the part of cuDNN 9's legacy API nnlab uses (handle and
// stream, 4-d tensor and filter descriptors, 2-d convolution descriptors, the three
// convolution directions with their workspace queries and cudnnFind*AlgorithmEx, the fused
// convolution + bias + activation, and cudnnAddTensor), for the host compiler. Only the simulator build puts this folder on the
// include path; under nvcc the toolkit's header is used.
//
// Names, numeric values, struct layouts and signatures are cuDNN 9.19's (cudnn_graph.h,
// cudnn_ops.h, cudnn_cnn.h, cudnn_version.h), so devices/cuda/*.cu compile unchanged.
// The implementation is devices/cuda/sim/sim_cudnn.cpp (API, checks, Find) and
// sim_cudnn_conv.cpp (the arithmetic).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 19
#define CUDNN_PATCHLEVEL 0
#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

// library_types.h's property selector, shared with cublas_v2.h.
#ifndef NNLAB_SIM_LIBRARY_PROPERTY_TYPE
#define NNLAB_SIM_LIBRARY_PROPERTY_TYPE 1
typedef enum libraryPropertyType_t { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL } libraryPropertyType;
#endif

typedef enum {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_NOT_INITIALIZED = 1001,
  CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH = 1002,
  CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH = 1003,
  CUDNN_STATUS_DEPRECATED = 1004,
  CUDNN_STATUS_LICENSE_ERROR = 1005,
  CUDNN_STATUS_RUNTIME_IN_PROGRESS = 1006,
  CUDNN_STATUS_RUNTIME_FP_OVERFLOW = 1007,
  CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED = 1008,
  CUDNN_STATUS_BAD_PARAM = 2000,
  CUDNN_STATUS_BAD_PARAM_NULL_POINTER = 2002,
  CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER = 2003,
  CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED = 2004,
  CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND = 2005,
  CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT = 2006,
  CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH = 2007,
  CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH = 2008,
  CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES = 2009,
  CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE = 2010,
  CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH = 2011,
  CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE = 2012,
  CUDNN_STATUS_NOT_SUPPORTED = 3000,
  CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN = 3001,
  CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002,
  CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE = 3003,
  CUDNN_STATUS_NOT_SUPPORTED_LAYOUT = 3004,
  CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER = 3005,
  CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART = 3006,
  CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH = 3007,
  CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING = 3008,
  CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE = 3009,
  CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT = 3010,
  CUDNN_STATUS_NOT_SUPPORTED_PADDING = 3011,
  CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM = 3012,
  CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API = 3013,
  CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE = 3014,
  CUDNN_STATUS_INTERNAL_ERROR = 4000,
  CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED = 4001,
  CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE = 4002,
  CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4003,
  CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED = 4004,
  CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM = 4005,
  CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED = 4006,
  CUDNN_STATUS_EXECUTION_FAILED = 5000,
  CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER = 5001,
  CUDNN_STATUS_EXECUTION_FAILED_CUBLAS = 5002,
  CUDNN_STATUS_EXECUTION_FAILED_CUDART = 5003,
  CUDNN_STATUS_EXECUTION_FAILED_CURAND = 5004,
  // cuDNN 9's deprecated aliases.
  CUDNN_STATUS_ALLOC_FAILED = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
  CUDNN_STATUS_INVALID_VALUE = 2001,
  CUDNN_STATUS_ARCH_MISMATCH = CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH,
  CUDNN_STATUS_MAPPING_ERROR = CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED,
  CUDNN_STATUS_RUNTIME_PREREQUISITE_MISSING = CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING,
  CUDNN_STATUS_VERSION_MISMATCH = CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH,
} cudnnStatus_t;

typedef enum {
  CUDNN_DATA_FLOAT = 0,
  CUDNN_DATA_DOUBLE = 1,
  CUDNN_DATA_HALF = 2,
  CUDNN_DATA_INT8 = 3,
  CUDNN_DATA_INT32 = 4,
  CUDNN_DATA_UINT8 = 6,
  CUDNN_DATA_BFLOAT16 = 9,
  CUDNN_DATA_INT64 = 10,
  CUDNN_DATA_BOOLEAN = 11,
} cudnnDataType_t;

typedef enum {
  CUDNN_DEFAULT_MATH = 0,
  CUDNN_TENSOR_OP_MATH = 1,
  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  CUDNN_FMA_MATH = 3,
} cudnnMathType_t;

typedef enum {
  CUDNN_TENSOR_NCHW = 0,
  CUDNN_TENSOR_NHWC = 1,
  CUDNN_TENSOR_NCHW_VECT_C = 2,
} cudnnTensorFormat_t;

typedef enum { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 } cudnnDeterminism_t;

typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;

typedef enum {
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
  CUDNN_CONVOLUTION_FWD_ALGO_GEMM = 2,
  CUDNN_CONVOLUTION_FWD_ALGO_DIRECT = 3,
  CUDNN_CONVOLUTION_FWD_ALGO_FFT = 4,
  CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING = 5,
  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD = 6,
  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED = 7,
  CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8
} cudnnConvolutionFwdAlgo_t;

typedef enum {
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT = 2,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 = 3,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD = 4,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED = 5,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING = 6,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT = 7
} cudnnConvolutionBwdFilterAlgo_t;

typedef enum {
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT = 2,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING = 3,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD = 4,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED = 5,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6
} cudnnConvolutionBwdDataAlgo_t;

// What cudnnFind*AlgorithmEx reports per (algorithm, math type) pair: the status of the
// trial run, its time in milliseconds, the workspace it needs, and its determinism.
typedef struct cudnnConvolutionFwdAlgoPerfStruct {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
} cudnnConvolutionFwdAlgoPerf_t;

typedef struct cudnnConvolutionBwdDataAlgoPerfStruct {
  cudnnConvolutionBwdDataAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
} cudnnConvolutionBwdDataAlgoPerf_t;

typedef struct cudnnConvolutionBwdFilterAlgoPerfStruct {
  cudnnConvolutionBwdFilterAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
} cudnnConvolutionBwdFilterAlgoPerf_t;

struct cudnnContext;
// The activation of the fused convolution (cudnnConvolutionBiasActivationForward).
typedef enum {
  CUDNN_ACTIVATION_SIGMOID = 0,
  CUDNN_ACTIVATION_RELU = 1,
  CUDNN_ACTIVATION_TANH = 2,
  CUDNN_ACTIVATION_CLIPPED_RELU = 3,
  CUDNN_ACTIVATION_ELU = 4,
  CUDNN_ACTIVATION_IDENTITY = 5,
  CUDNN_ACTIVATION_SWISH = 6
} cudnnActivationMode_t;
typedef enum { CUDNN_NOT_PROPAGATE_NAN = 0, CUDNN_PROPAGATE_NAN = 1 } cudnnNanPropagation_t;

typedef struct cudnnContext* cudnnHandle_t;
typedef struct cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct* cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct* cudnnConvolutionDescriptor_t;
typedef struct cudnnActivationStruct* cudnnActivationDescriptor_t;

extern "C" {
size_t cudnnGetVersion(void);
const char* cudnnGetErrorString(cudnnStatus_t status);
cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int* value);
cudnnStatus_t cudnnCreate(cudnnHandle_t* handle);
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle);
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId);
cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId);

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc);
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w);
cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType, int n,
                                           int c, int h, int w, int nStride, int cStride, int hStride, int wStride);
cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t* dataType, int* n,
                                         int* c, int* h, int* w, int* nStride, int* cStride, int* hStride,
                                         int* wStride);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc);

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc);
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w);
cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t filterDesc, cudnnDataType_t* dataType,
                                         cudnnTensorFormat_t* format, int* k, int* c, int* h, int* w);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc);

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc);
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u,
                                              int v, int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType);
cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t convDesc, int* pad_h, int* pad_w,
                                              int* u, int* v, int* dilation_h, int* dilation_w,
                                              cudnnConvolutionMode_t* mode, cudnnDataType_t* computeType);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType);
cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t* mathType);
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount);
cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int* groupCount);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc);
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc, int* n, int* c, int* h,
                                                    int* w);

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int* count);
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int* count);
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int* count);

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                      const cudnnFilterDescriptor_t wDesc,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      const cudnnTensorDescriptor_t yDesc,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes);
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                           const cudnnTensorDescriptor_t dyDesc,
                                                           const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t dxDesc,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes);
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                             const cudnnTensorDescriptor_t dyDesc,
                                                             const cudnnConvolutionDescriptor_t convDesc,
                                                             const cudnnFilterDescriptor_t gradDesc,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t* sizeInBytes);

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                     const cudnnFilterDescriptor_t wDesc,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     const cudnnTensorDescriptor_t yDesc, const int requestedAlgoCount,
                                                     int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults);
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                          const cudnnTensorDescriptor_t dyDesc,
                                                          const cudnnConvolutionDescriptor_t convDesc,
                                                          const cudnnTensorDescriptor_t dxDesc,
                                                          const int requestedAlgoCount, int* returnedAlgoCount,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perfResults);
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                            const cudnnTensorDescriptor_t dyDesc,
                                                            const cudnnConvolutionDescriptor_t convDesc,
                                                            const cudnnFilterDescriptor_t dwDesc,
                                                            const int requestedAlgoCount, int* returnedAlgoCount,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perfResults);

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnFilterDescriptor_t wDesc,
    const void* w, const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc, void* y,
    const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults,
    void* workSpace, size_t workSpaceSizeInBytes);
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnTensorDescriptor_t dyDesc,
    const void* dy, const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, void* dx,
    const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t* perfResults,
    void* workSpace, size_t workSpaceSizeInBytes);
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnTensorDescriptor_t dyDesc,
    const void* y, const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void* dw,
    const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t* perfResults,
    void* workSpace, size_t workSpaceSizeInBytes);

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void* x, const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y);
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void* w,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx);
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void* x,
                                             const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace,
                                             size_t workSpaceSizeInBytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw);

cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* activationDesc);
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t activationDesc, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t reluNanOpt, double coef);
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t activationDesc);
// y = act(alpha1 · conv(x, w) + alpha2 · z + bias), bias (1, K, 1, 1): sim_cudnn_fused.cpp.
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void* alpha1, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* alpha2,
    const cudnnTensorDescriptor_t zDesc, const void* z, const cudnnTensorDescriptor_t biasDesc, const void* bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc, void* y);

// C = alpha · A + beta · C, each dimension of A equal to C's or 1 (broadcast).
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t aDesc,
                             const void* A, const void* beta, const cudnnTensorDescriptor_t cDesc, void* C);
}
