// The CUDA backend is a library of its own, libnnlab_cuda.so, that the registry loads the
// first time a CUDA device is asked for (devices/registry.cpp). Linked into the program, the
// CUDA runtime, cuBLAS and cuDNN cost every run about 210 MiB of resident memory before it
// did anything, CPU runs included; loaded on demand, a CPU run never maps them.
//
// The library exports one C function, nnlab_cuda_plugin(), returning the table below. The
// registry calls the backend only through it, so the program has no link-time reference to
// anything CUDA. The library in turn uses the program's own Tensor, allocator and kernel log:
// programs that link nnlab export their symbols (--export-dynamic, CMakeLists.txt), and the
// library resolves against them when it is loaded, so there is one of each in the process.
//
// The table is plain C++ and needs no CUDA header, like cuda_backend.h.
#pragma once
#include <cstddef>
#include <string>

#include "devices/backend.h"

namespace nnlab {

// Bumped whenever the table changes, so a stale library next to a newer program is refused
// with a message instead of being called through the wrong slots.
inline constexpr int kCudaPluginVersion = 4;

// The size of NCCL's unique id (NCCL_UNIQUE_ID_BYTES), which the table passes as bytes.
inline constexpr size_t kNcclUniqueIdBytes = 128;

struct CudaPlugin {
  int version;
  CudaStatus (*probe)();               // cuda_probe()
  Backend& (*backend)(int index);      // cuda_backend(index)
  std::string (*device_report)();      // cuda_device_report()
  void (*set_math_mode)(int mode);     // set_cuda_math_mode: a CudaMath
  int (*math_mode)();
  void (*set_deterministic)(bool on);  // set_cuda_deterministic
  bool (*deterministic)();

  // NCCL, the all-reduce of device memory for data-parallel training (devices/nccl_comm.h,
  // devices/cuda/nccl_cuda.cpp). nccl_unavailable is always there: "" when the library was
  // built with NCCL, else why not (the simulator, or no nccl.h/libnccl at configure time).
  // The other slots are optional: nullptr unless it was. Every failure throws nnlab::Error.
  std::string (*nccl_unavailable)();
  int (*nccl_version)();                                  // ncclGetVersion: 22809 is 2.28.9
  std::string (*gpu_uuid)(int device);                    // the GPU's UUID, one per physical GPU
  void (*nccl_unique_id)(char* id);                       // ncclGetUniqueId into id[128]
  void* (*nccl_comm_create)(const char* id, int ranks, int rank, int device);  // ncclCommInitRank
  void (*nccl_sum)(void* comm, Tensor& data);             // in place, on the communicator's stream
  void (*nccl_join)(void* comm);                          // the backend's stream waits for the sums
  double (*nccl_take_device_seconds)(void* comm);         // the sums' device time since the last take
  void (*nccl_comm_destroy)(void* comm);                  // never throws
};

}  // namespace nnlab

// The one exported entry point (extern "C": found by name with dlsym).
extern "C" const nnlab::CudaPlugin* nnlab_cuda_plugin();
