// The CUDA backend library's one exported entry point (devices/cuda_plugin.h): the table of
// the functions the registry calls, filled from cuda_backend.h, and from nccl_cuda.h when the
// library is built with NCCL (NNLAB_WITH_NCCL, cmake/cuda_backend.cmake).
#include "devices/cuda_plugin.h"

#include "devices/cuda/cuda_backend.h"
#ifdef NNLAB_WITH_NCCL
#include "devices/cuda/nccl_cuda.h"
#endif

namespace {
std::string nccl_unavailable() {
#if defined(NNLAB_WITH_NCCL)
  return "";  // the toolkit's NCCL, or on the simulator its own (devices/cuda/sim/sim_nccl.cpp)
#else
  return "this nnlab's CUDA backend was built without NCCL (nccl.h and libnccl were not found at configure time; "
         "install NCCL into the CUDA toolkit and rebuild)";
#endif
}
}  // namespace

extern "C" __attribute__((visibility("default"))) const nnlab::CudaPlugin* nnlab_cuda_plugin() {
  static const nnlab::CudaPlugin table{
      nnlab::kCudaPluginVersion,
      &nnlab::cuda_probe,
      &nnlab::cuda_backend,
      &nnlab::cuda_device_report,
      &nnlab::set_cuda_math_mode,
      &nnlab::cuda_math_mode,
      &nnlab::set_cuda_deterministic,
      &nnlab::cuda_deterministic,
      &nccl_unavailable,
#ifdef NNLAB_WITH_NCCL
      &nnlab::cuda::nccl_version,
      &nnlab::cuda::gpu_uuid,
      &nnlab::cuda::nccl_unique_id,
      &nnlab::cuda::nccl_comm_create,
      &nnlab::cuda::nccl_sum,
      &nnlab::cuda::nccl_join,
      &nnlab::cuda::nccl_take_device_seconds,
      &nnlab::cuda::nccl_comm_destroy,
#else
      nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
#endif
  };
  return &table;
}
