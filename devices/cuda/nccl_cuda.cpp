// NCCL in the CUDA backend's library: the all-reduce of CUDA gradients in data-parallel
// training (docs/distributed.md), reached by the program through the plugin table
// (devices/cuda_plugin.h) and its CUDA-free facade devices/nccl_comm.h. Compiled only when
// CMake found nccl.h and libnccl (cmake/cuda_backend.cmake), never on the CUDA simulator.
//
// How a communicator comes about: rank 0 asks NCCL for a unique id (128 opaque bytes naming
// the rendezvous), MPI broadcasts it, and every rank calls ncclCommInitRank(id, ranks, rank)
// on its own GPU; the call returns once all ranks have joined. After that a sum is one
// ncclAllReduce on the backend's stream, ordered after the kernels that wrote the buffer and
// before those that read it, with no host synchronisation.
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/cuda/nccl_cuda.h"

// Every NCCL call goes through this: a failure becomes an nnlab::Error naming the call,
// NCCL's text for the code and, where NCCL left one, its detailed last error (which says
// e.g. "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000").
#define NNLAB_NCCL_CHECK(call, comm)                                                                      \
  do {                                                                                                    \
    const ncclResult_t nnlab_nccl_ = (call);                                                              \
    if (nnlab_nccl_ != ncclSuccess) {                                                                     \
      const char* nnlab_last_ = ncclGetLastError(comm);                                                   \
      ::nnlab::fail(#call, " failed: ", ncclGetErrorString(nnlab_nccl_),                                  \
                    (nnlab_last_ && *nnlab_last_) ? std::string(" (") + nnlab_last_ + ")" : std::string(), \
                    " at ", __FILE__, ":", __LINE__);                                                      \
    }                                                                                                     \
  } while (0)

namespace nnlab::cuda {

namespace {
// What the communicator handle stands for: NCCL's communicator and the device it lives on.
struct NcclComm {
  ncclComm_t comm = nullptr;
  int device = 0;
};
}  // namespace

int nccl_version() {
  int version = 0;
  NNLAB_NCCL_CHECK(ncclGetVersion(&version), nullptr);
  return version;
}

std::string gpu_uuid(int device) {
  cudaDeviceProp prop{};
  NNLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::string hex;
  char byte[3];
  for (unsigned char b : prop.uuid.bytes) {
    std::snprintf(byte, sizeof byte, "%02x", b);
    hex += byte;
  }
  return hex;
}

void nccl_unique_id(char* id) {
  static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes, "NCCL's unique id is 128 bytes (NCCL_UNIQUE_ID_BYTES)");
  ncclUniqueId unique{};
  NNLAB_NCCL_CHECK(ncclGetUniqueId(&unique), nullptr);
  std::memcpy(id, unique.internal, kNcclUniqueIdBytes);
}

void* nccl_comm_create(const char* id, int ranks, int rank, int device) {
  ncclUniqueId unique{};
  std::memcpy(unique.internal, id, kNcclUniqueIdBytes);
  // NCCL binds the communicator to the calling thread's current device, which cuda_backend
  // selects (cuda_backend.cpp's select_device is the one place that sets it).
  cuda_backend(device);
  auto* handle = new NcclComm;
  handle->device = device;
  const ncclResult_t result = ncclCommInitRank(&handle->comm, ranks, unique, rank);
  if (result != ncclSuccess) {
    delete handle;
    NNLAB_NCCL_CHECK(result, nullptr);  // ncclCommInitRank(...) failed: ...
  }
  return handle;
}

// data: (n) float32 on the communicator's device   data[i] ← Σ over ranks of data[i]
void nccl_sum(void* comm, Tensor& data) {
  auto* handle = static_cast<NcclComm*>(comm);
  require_f32("nccl_sum", data);
  NNLAB_CHECK(data.device() == Device::cuda(handle->device), "nccl_sum: the buffer is on ", data.device().str(),
              ", the NCCL communicator on cuda:", handle->device);
  if (!data.numel()) return;
  auto& backend = static_cast<CudaBackend&>(cuda_backend(handle->device));
  // In place (send buffer = receive buffer), which NCCL allows for ncclAllReduce.
  NNLAB_NCCL_CHECK(ncclAllReduce(data.raw_data(), data.raw_data(), static_cast<size_t>(data.numel()), ncclFloat,
                                 ncclSum, handle->comm, backend.context().stream),
                   handle->comm);
}

void nccl_comm_destroy(void* comm) {
  auto* handle = static_cast<NcclComm*>(comm);
  if (!handle) return;
  // Called from destructors: the reductions still queued finish first, errors are dropped.
  try {
    cuda_backend(handle->device).synchronize();
  } catch (const std::exception&) {
  }
  ncclCommDestroy(handle->comm);
  delete handle;
}

}  // namespace nnlab::cuda
