// The CUDA simulator's cuDNN, the library around the convolutions: handle and stream,
// version and status names, tensor/filter/convolution descriptors with cuDNN's argument
// checks, the output-size query, and cudnnAddTensor. The convolution entry points are in
// sim_cudnn_algorithms.cpp, their arithmetic in sim_cudnn_conv.cpp.
//
// A descriptor is a plain record: setting it checks the values as cuDNN does and stores
// them; the calls that use it copy what they need, so a descriptor may change or go once a
// call has returned, even while its work is still queued on a stream.
#include <climits>
#include <string>

#include <cudnn.h>

#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_cudnn_internal.h"

namespace nnlab::sim::dnn {

cudnnStatus_t fail(cudnnStatus_t status, const char* call, const std::string& why) {
  set_diagnostic(std::string(call) + ": " + why);
  return status;
}

}  // namespace nnlab::sim::dnn

namespace {

using nnlab::sim::dnn::fail;

bool known_type(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: case CUDNN_DATA_DOUBLE: case CUDNN_DATA_HALF: case CUDNN_DATA_INT8:
    case CUDNN_DATA_INT32: case CUDNN_DATA_UINT8: case CUDNN_DATA_BFLOAT16: case CUDNN_DATA_INT64:
    case CUDNN_DATA_BOOLEAN: return true;
  }
  return false;
}

// Formats other than NCHW are valid cuDNN but not simulated.
cudnnStatus_t check_format(const char* call, cudnnTensorFormat_t format) {
  if (format == CUDNN_TENSOR_NCHW) return CUDNN_STATUS_SUCCESS;
  if (format == CUDNN_TENSOR_NHWC || format == CUDNN_TENSOR_NCHW_VECT_C)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "the simulator supports CUDNN_TENSOR_NCHW only");
  return fail(CUDNN_STATUS_BAD_PARAM, call, "format is not a valid cudnnTensorFormat_t");
}

// Dimensions must be positive; cuDNN's legacy tensors hold at most 2³¹ − 1 elements.
cudnnStatus_t check_dims(const char* call, cudnnDataType_t type, int a, int b, int c, int d) {
  if (!known_type(type)) return fail(CUDNN_STATUS_BAD_PARAM, call, "dataType is not a valid cudnnDataType_t");
  if (a <= 0 || b <= 0 || c <= 0 || d <= 0) return fail(CUDNN_STATUS_BAD_PARAM, call, "a dimension is not positive");
  if (int64_t(a) * b * c * d > INT_MAX)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "the tensor has more than 2^31 - 1 elements");
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int* value) {
  if (!value) return CUDNN_STATUS_BAD_PARAM;
  switch (type) {
    case MAJOR_VERSION: *value = CUDNN_MAJOR; return CUDNN_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUDNN_MINOR; return CUDNN_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUDNN_PATCHLEVEL; return CUDNN_STATUS_SUCCESS;
  }
  return CUDNN_STATUS_BAD_PARAM;
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
#define NNLAB_SIM_STATUS(name) \
  case name: return #name;
    NNLAB_SIM_STATUS(CUDNN_STATUS_SUCCESS)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_INITIALIZED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
    NNLAB_SIM_STATUS(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
    NNLAB_SIM_STATUS(CUDNN_STATUS_DEPRECATED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_LICENSE_ERROR)
    NNLAB_SIM_STATUS(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
    NNLAB_SIM_STATUS(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
    NNLAB_SIM_STATUS(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM)
    NNLAB_SIM_STATUS(CUDNN_STATUS_INVALID_VALUE)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
    NNLAB_SIM_STATUS(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
    NNLAB_SIM_STATUS(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
    NNLAB_SIM_STATUS(CUDNN_STATUS_INTERNAL_ERROR)
    NNLAB_SIM_STATUS(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
    NNLAB_SIM_STATUS(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
    NNLAB_SIM_STATUS(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_EXECUTION_FAILED)
    NNLAB_SIM_STATUS(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
    NNLAB_SIM_STATUS(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
    NNLAB_SIM_STATUS(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
    NNLAB_SIM_STATUS(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
#undef NNLAB_SIM_STATUS
  }
  return "CUDNN_UNKNOWN_STATUS_FOUND";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}

// Queued work captured what it needs by value, so the handle may go at once.
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId) {
  if (!handle || !streamId) return CUDNN_STATUS_BAD_PARAM;
  *streamId = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

// ---- tensors ------------------------------------------------------------------------------

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  if (!tensorDesc) return CUDNN_STATUS_BAD_PARAM;
  *tensorDesc = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}

// Packed NCHW: strides (c·h·w, h·w, w, 1).
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w) {
  const char* call = "cudnnSetTensor4dDescriptor";
  if (!tensorDesc) return fail(CUDNN_STATUS_BAD_PARAM, call, "tensorDesc is null");
  cudnnStatus_t st = check_format(call, format);
  if (st == CUDNN_STATUS_SUCCESS) st = check_dims(call, dataType, n, c, h, w);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return cudnnSetTensor4dDescriptorEx(tensorDesc, dataType, n, c, h, w, c * h * w, h * w, w, 1);
}

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType, int n,
                                           int c, int h, int w, int nStride, int cStride, int hStride, int wStride) {
  const char* call = "cudnnSetTensor4dDescriptorEx";
  if (!tensorDesc) return fail(CUDNN_STATUS_BAD_PARAM, call, "tensorDesc is null");
  const cudnnStatus_t st = check_dims(call, dataType, n, c, h, w);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (nStride <= 0 || cStride <= 0 || hStride <= 0 || wStride <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "a stride is not positive");
  *tensorDesc = cudnnTensorStruct{true, dataType, n, c, h, w, nStride, cStride, hStride, wStride};
  if (tensorDesc->span() > size_t(INT_MAX)) {
    tensorDesc->set = false;
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "the strides span more than 2^31 - 1 elements");
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t* dataType, int* n,
                                         int* c, int* h, int* w, int* nStride, int* cStride, int* hStride,
                                         int* wStride) {
  if (!tensorDesc || !tensorDesc->set || !dataType || !n || !c || !h || !w || !nStride || !cStride || !hStride ||
      !wStride)
    return CUDNN_STATUS_BAD_PARAM;
  const cudnnTensorStruct& t = *tensorDesc;
  *dataType = t.type, *n = t.n, *c = t.c, *h = t.h, *w = t.w;
  *nStride = t.ns, *cStride = t.cs, *hStride = t.hs, *wStride = t.ws;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  delete tensorDesc;  // null is allowed, as in cuDNN
  return CUDNN_STATUS_SUCCESS;
}

// ---- filters ------------------------------------------------------------------------------

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  if (!filterDesc) return CUDNN_STATUS_BAD_PARAM;
  *filterDesc = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  const char* call = "cudnnSetFilter4dDescriptor";
  if (!filterDesc) return fail(CUDNN_STATUS_BAD_PARAM, call, "filterDesc is null");
  cudnnStatus_t st = check_format(call, format);
  if (st == CUDNN_STATUS_SUCCESS) st = check_dims(call, dataType, k, c, h, w);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *filterDesc = cudnnFilterStruct{true, dataType, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t filterDesc, cudnnDataType_t* dataType,
                                         cudnnTensorFormat_t* format, int* k, int* c, int* h, int* w) {
  if (!filterDesc || !filterDesc->set || !dataType || !format || !k || !c || !h || !w) return CUDNN_STATUS_BAD_PARAM;
  *dataType = filterDesc->type, *format = CUDNN_TENSOR_NCHW;
  *k = filterDesc->k, *c = filterDesc->c, *h = filterDesc->r, *w = filterDesc->s;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  delete filterDesc;
  return CUDNN_STATUS_SUCCESS;
}

// ---- convolutions -------------------------------------------------------------------------

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  if (!convDesc) return CUDNN_STATUS_BAD_PARAM;
  *convDesc = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}

// The math type is kept (set before or after), as on cuDNN.
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u,
                                              int v, int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  const char* call = "cudnnSetConvolution2dDescriptor";
  if (!convDesc) return fail(CUDNN_STATUS_BAD_PARAM, call, "convDesc is null");
  if (pad_h < 0 || pad_w < 0) return fail(CUDNN_STATUS_BAD_PARAM, call, "a padding is negative");
  if (u <= 0 || v <= 0) return fail(CUDNN_STATUS_BAD_PARAM, call, "a stride is not positive");
  if (dilation_h <= 0 || dilation_w <= 0) return fail(CUDNN_STATUS_BAD_PARAM, call, "a dilation is not positive");
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "mode is not a valid cudnnConvolutionMode_t");
  if (!known_type(computeType)) return fail(CUDNN_STATUS_BAD_PARAM, call, "computeType is not a valid type");
  const cudnnMathType_t math = convDesc->math;
  *convDesc = cudnnConvolutionStruct{true, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType, math};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t convDesc, int* pad_h, int* pad_w,
                                              int* u, int* v, int* dilation_h, int* dilation_w,
                                              cudnnConvolutionMode_t* mode, cudnnDataType_t* computeType) {
  if (!convDesc || !convDesc->set || !pad_h || !pad_w || !u || !v || !dilation_h || !dilation_w || !mode ||
      !computeType)
    return CUDNN_STATUS_BAD_PARAM;
  const cudnnConvolutionStruct& d = *convDesc;
  *pad_h = d.pad_h, *pad_w = d.pad_w, *u = d.u, *v = d.v, *dilation_h = d.dil_h, *dilation_w = d.dil_w;
  *mode = d.mode, *computeType = d.compute;
  return CUDNN_STATUS_SUCCESS;
}

// Recorded and reported back; the simulator computes in float32 whatever the math type.
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType) {
  if (!convDesc || mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH) return CUDNN_STATUS_BAD_PARAM;
  convDesc->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t* mathType) {
  if (!convDesc || !mathType) return CUDNN_STATUS_BAD_PARAM;
  *mathType = convDesc->math;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
  if (!convDesc || groupCount < 1) return CUDNN_STATUS_BAD_PARAM;
  if (groupCount > 1)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnSetConvolutionGroupCount", "the simulator supports one group only");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int* groupCount) {
  if (!convDesc || !groupCount) return CUDNN_STATUS_BAD_PARAM;
  *groupCount = 1;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  delete convDesc;
  return CUDNN_STATUS_SUCCESS;
}

// (n, k, p, q) with p = 1 + (h + 2·pad_h − ((r − 1)·dil_h + 1)) / u, likewise q. BAD_PARAM
// when the channels differ or the dilated filter is larger than the padded input.
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc, int* n, int* c, int* h,
                                                    int* w) {
  const char* call = "cudnnGetConvolution2dForwardOutputDim";
  const cudnnTensorStruct* x = inputTensorDesc;
  const cudnnFilterStruct* f = filterDesc;
  if (!convDesc || !x || !f || !convDesc->set || !x->set || !f->set || !n || !c || !h || !w)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "a descriptor or output pointer is null, or a descriptor is not set");
  if (x->c != f->c)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the input has " + std::to_string(x->c) + " channels, the filter " +
                                                  std::to_string(f->c));
  const int64_t p = nnlab::sim::dnn::conv_output_size(x->h, convDesc->pad_h, f->r, convDesc->dil_h, convDesc->u);
  const int64_t q = nnlab::sim::dnn::conv_output_size(x->w, convDesc->pad_w, f->s, convDesc->dil_w, convDesc->v);
  if (p <= 0 || q <= 0) return fail(CUDNN_STATUS_BAD_PARAM, call, "the dilated filter is larger than the padded input");
  *n = x->n, *c = f->k, *h = int(p), *w = int(q);
  return CUDNN_STATUS_SUCCESS;
}

// ---- cudnnAddTensor -----------------------------------------------------------------------

// C = alpha · A + beta · C, every dimension of A equal to C's or 1 (a bias (1, K, 1, 1) over
// (N, K, P, Q)); alpha and beta are host floats read now; beta == 0 never reads C.
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t aDesc,
                             const void* A, const void* beta, const cudnnTensorDescriptor_t cDesc, void* C) {
  const char* call = "cudnnAddTensor";
  if (!handle || !alpha || !beta || !aDesc || !cDesc || !aDesc->set || !cDesc->set)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the handle, alpha, beta or a descriptor is null or not set");
  const cudnnTensorStruct a = *aDesc, c = *cDesc;
  if (a.type != c.type) return fail(CUDNN_STATUS_BAD_PARAM, call, "A and C have different data types");
  if (a.type != CUDNN_DATA_FLOAT) return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "the simulator adds float32 only");
  const int ad[4] = {a.n, a.c, a.h, a.w}, cd[4] = {c.n, c.c, c.h, c.w};
  for (int i = 0; i < 4; ++i)
    if (ad[i] != cd[i] && ad[i] != 1)
      return fail(CUDNN_STATUS_BAD_PARAM, call, "A's dimension " + std::to_string(i) + " is " +
                                                    std::to_string(ad[i]) + ", neither 1 nor C's " +
                                                    std::to_string(cd[i]));
  if (!A || !C) return fail(CUDNN_STATUS_BAD_PARAM, call, "A or C is null");
  // Host memory: BAD_PARAM before anything runs (a GPU would fault later instead).
  if (!nnlab::sim::check_device_access(call, "A", A, a.span() * sizeof(float)) ||
      !nnlab::sim::check_device_access(call, "C", C, c.span() * sizeof(float)))
    return CUDNN_STATUS_BAD_PARAM;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const float* src = static_cast<const float*>(A);
  float* dst = static_cast<float*>(C);
  // A broadcast dimension has stride 0: every index along it reads A's one element.
  const int64_t sa[4] = {a.n == 1 ? 0 : a.ns, a.c == 1 ? 0 : a.cs, a.h == 1 ? 0 : a.hs, a.w == 1 ? 0 : a.ws};
  const int threads = nnlab::sim::worker_threads();
  nnlab::sim::enqueue(handle->stream, "cudnn", call, [=] {
    const int64_t planes = int64_t(c.n) * c.c;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t nc = 0; nc < planes; ++nc) {
      const int64_t n = nc / c.c, ch = nc % c.c;
      for (int64_t y = 0; y < c.h; ++y)
        for (int64_t x = 0; x < c.w; ++x) {
          float& out = dst[n * c.ns + ch * c.cs + y * c.hs + x * c.ws];
          const float in = src[n * sa[0] + ch * sa[1] + y * sa[2] + x * sa[3]];
          out = be == 0.0f ? al * in : al * in + be * out;
        }
    }
  });
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
