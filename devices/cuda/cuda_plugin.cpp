// The CUDA backend library's one exported entry point (devices/cuda_plugin.h): the table of
// the functions the registry calls, filled from cuda_backend.h.
#include "devices/cuda_plugin.h"

#include "devices/cuda/cuda_backend.h"

extern "C" __attribute__((visibility("default"))) const nnlab::CudaPlugin* nnlab_cuda_plugin() {
  static const nnlab::CudaPlugin table{
      nnlab::kCudaPluginVersion,     &nnlab::cuda_probe,         &nnlab::cuda_backend,
      &nnlab::cuda_device_report,    &nnlab::set_cuda_math_mode, &nnlab::cuda_math_tf32,
      &nnlab::set_cuda_deterministic, &nnlab::cuda_deterministic,
  };
  return &table;
}
