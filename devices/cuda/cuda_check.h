// Every CUDA runtime, cuBLAS and cuDNN call goes through one of these macros: a failure
// becomes an nnlab::Error naming the call, the error, the file and the line, so a user sees
// "cudaMemcpyAsync(...) failed: an illegal memory access was encountered at
// devices/cuda/memory_cuda.cu:42" instead of a crash or a silently wrong answer.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "core/error.h"

namespace nnlab::cuda {

const char* cublas_status_name(cublasStatus_t status);

// Kernel launches report errors lazily; this picks up a bad launch configuration at once
// (cuda::launch in devices/cuda/launch.h calls it after every launch).
void check_launch(const char* kernel, const char* file, int line);

// On the CUDA simulator: what the simulator found wrong in the last failed call (which
// pointer was host memory, which range ran past its allocation), as " (...)"; "" on a GPU.
std::string simulator_detail();

}  // namespace nnlab::cuda

// A failed call also leaves its error as the runtime's "last error"; it is reported here, so
// it is cleared (cudaGetLastError) before throwing, or the next launch's check would blame
// an innocent kernel for it. A sticky error (a fault) stays, as it must.
#define NNLAB_CUDA_CHECK(call)                                                                            \
  do {                                                                                                    \
    const cudaError_t nnlab_err_ = (call);                                                                \
    if (nnlab_err_ != cudaSuccess) {                                                                      \
      const std::string nnlab_detail_ = ::nnlab::cuda::simulator_detail();                                \
      cudaGetLastError();                                                                                 \
      ::nnlab::fail(#call, " failed: ", cudaGetErrorString(nnlab_err_), " (", cudaGetErrorName(nnlab_err_), \
                    ")", nnlab_detail_, " at ", __FILE__, ":", __LINE__);                                 \
    }                                                                                                     \
  } while (0)

#define NNLAB_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                             \
    const cublasStatus_t nnlab_st_ = (call);                                                       \
    if (nnlab_st_ != CUBLAS_STATUS_SUCCESS)                                                        \
      ::nnlab::fail(#call, " failed: ", ::nnlab::cuda::cublas_status_name(nnlab_st_),              \
                    ::nnlab::cuda::simulator_detail(), " at ", __FILE__, ":", __LINE__);           \
  } while (0)

#define NNLAB_CUDNN_CHECK(call)                                                                            \
  do {                                                                                                     \
    const cudnnStatus_t nnlab_st_ = (call);                                                                \
    if (nnlab_st_ != CUDNN_STATUS_SUCCESS)                                                                 \
      ::nnlab::fail(#call, " failed: ", cudnnGetErrorString(nnlab_st_), ::nnlab::cuda::simulator_detail(), \
                    " at ", __FILE__, ":", __LINE__);                                                    \
  } while (0)
