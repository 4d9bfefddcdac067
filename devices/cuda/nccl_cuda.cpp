// NCCL in the CUDA backend's library: the all-reduce of CUDA gradients in data-parallel
// training (docs/distributed.md), reached by the program through the plugin table
// (devices/cuda_plugin.h) and its CUDA-free facade devices/nccl_comm.h. Compiled only when
// CMake found nccl.h and libnccl (cmake/cuda_backend.cmake), never on the CUDA simulator.
//
// How a communicator comes about: rank 0 asks NCCL for a unique id (128 opaque bytes naming
// the rendezvous), MPI broadcasts it, and every rank calls ncclCommInitRank(id, ranks, rank)
// on its own GPU; the call returns once all ranks have joined. After that a sum is one
// ncclAllReduce on the communicator's own stream, ordered by events after the kernels of the
// backend's stream that wrote the buffer; join() makes the backend's stream wait for the sums
// before the kernels that read them. So in overlap mode a bucket is summed while backward goes
// on with earlier layers on the backend's stream, and no step waits for it on the host.
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
// What the communicator handle stands for: NCCL's communicator, the device it lives on, its
// own stream, and the events that order and time its sums.
struct NcclComm {
  ncclComm_t comm = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;  // the sums run here, beside the backend's stream
  cudaEvent_t written = nullptr;  // recorded on the backend's stream: the buffer is written
  // Start and end of each sum queued since the last take_device_seconds (reused after it).
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timed;
  size_t queued = 0;
};

cudaStream_t backend_stream(int device) {
  return static_cast<CudaBackend&>(cuda_backend(device)).context().stream;
}
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
  auto handle = std::make_unique<NcclComm>();
  handle->device = device;
  NNLAB_NCCL_CHECK(ncclCommInitRank(&handle->comm, ranks, unique, rank), nullptr);
  NNLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&handle->stream, cudaStreamNonBlocking));
  NNLAB_CUDA_CHECK(cudaEventCreateWithFlags(&handle->written, cudaEventDisableTiming));
  return handle.release();
}

// data: (n) float32 on the communicator's device   data[i] ← Σ over ranks of data[i]
void nccl_sum(void* comm, Tensor& data) {
  auto* handle = static_cast<NcclComm*>(comm);
  require_f32("nccl_sum", data);
  NNLAB_CHECK(data.device() == Device::cuda(handle->device), "nccl_sum: the buffer is on ", data.device().str(),
              ", the NCCL communicator on cuda:", handle->device);
  if (!data.numel()) return;
  // After the kernels that wrote the buffer: the communicator's stream waits for them.
  NNLAB_CUDA_CHECK(cudaEventRecord(handle->written, backend_stream(handle->device)));
  NNLAB_CUDA_CHECK(cudaStreamWaitEvent(handle->stream, handle->written, 0));
  if (handle->queued == handle->timed.size()) {
    std::pair<cudaEvent_t, cudaEvent_t> events{};
    NNLAB_CUDA_CHECK(cudaEventCreate(&events.first));
    NNLAB_CUDA_CHECK(cudaEventCreate(&events.second));
    handle->timed.push_back(events);
  }
  const auto [start, end] = handle->timed[handle->queued++];
  NNLAB_CUDA_CHECK(cudaEventRecord(start, handle->stream));
  // In place (send buffer = receive buffer), which NCCL allows for ncclAllReduce.
  NNLAB_NCCL_CHECK(ncclAllReduce(data.raw_data(), data.raw_data(), static_cast<size_t>(data.numel()), ncclFloat,
                                 ncclSum, handle->comm, handle->stream),
                   handle->comm);
  NNLAB_CUDA_CHECK(cudaEventRecord(end, handle->stream));
}

// The sums run one after another on the communicator's stream: the last one's end is all of them.
void nccl_join(void* comm) {
  auto* handle = static_cast<NcclComm*>(comm);
  if (handle->queued == 0) return;
  NNLAB_CUDA_CHECK(cudaStreamWaitEvent(backend_stream(handle->device), handle->timed[handle->queued - 1].second, 0));
}

double nccl_take_device_seconds(void* comm) {
  auto* handle = static_cast<NcclComm*>(comm);
  double seconds = 0;
  for (size_t i = 0; i < handle->queued; ++i) {
    const auto [start, end] = handle->timed[i];
    NNLAB_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    NNLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
    seconds += ms / 1000.0;
  }
  handle->queued = 0;
  return seconds;
}

void nccl_comm_destroy(void* comm) {
  auto* handle = static_cast<NcclComm*>(comm);
  if (!handle) return;
  // Called from destructors: the reductions still queued finish first, errors are dropped.
  try {
    cuda_backend(handle->device).synchronize();
  } catch (const std::exception&) {
  }
  if (handle->stream) cudaStreamSynchronize(handle->stream);
  ncclCommDestroy(handle->comm);
  for (const auto& [start, end] : handle->timed) {
    cudaEventDestroy(start);
    cudaEventDestroy(end);
  }
  if (handle->written) cudaEventDestroy(handle->written);
  if (handle->stream) cudaStreamDestroy(handle->stream);
  delete handle;
}

}  // namespace nnlab::cuda
