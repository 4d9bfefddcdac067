// NCCL for the program, without a CUDA header: the all-reduce of CUDA memory that
// data-parallel training uses for CUDA gradients (apps/distributed/grad_reducer.h,
// docs/distributed.md). The NCCL calls live in the CUDA backend's library
// (devices/cuda/nccl_cuda.cpp), reached through its plugin table (devices/cuda_plugin.h), so
// libnccl is mapped only by a process that loads the CUDA backend, like cuDNN.
#pragma once
#include <array>
#include <string>

#include "core/tensor.h"
#include "devices/cuda_plugin.h"

namespace nnlab {

// "" when this process's CUDA backend can use NCCL; otherwise why not: no CUDA backend, the
// CUDA simulator, or a backend built without NCCL. Loads the CUDA backend.
std::string nccl_unavailable_reason();
// "NCCL 2.28.9"; requires nccl_unavailable_reason() == "".
std::string nccl_version_text();
// The UUID of the GPU behind `device`, the same in every process that uses that GPU: two
// ranks with one UUID share a GPU, which NCCL refuses. Requires NCCL (it comes with it).
std::string gpu_uuid(Device device);

// One rank's member of an NCCL communicator over `ranks` processes, each on its own GPU.
class NcclCommunicator {
 public:
  using UniqueId = std::array<char, kNcclUniqueIdBytes>;
  // ncclGetUniqueId: made by one rank (rank 0) and handed to all (MPI_Bcast).
  static UniqueId make_unique_id();
  // ncclCommInitRank on `device`: returns once all `ranks` have joined with the same id.
  NcclCommunicator(const UniqueId& id, int ranks, int rank, Device device);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // data[i] ← Σ over ranks of data[i] (ncclAllReduce, ncclFloat, ncclSum), in place. float32
  // on this communicator's device. It runs on the communicator's own stream, after the kernels
  // already queued on the device's backend stream (an event orders them), so later kernels of
  // the backend's stream (the rest of backward) run while it sums; it returns at once, as a
  // kernel launch does.
  void sum_in_place(Tensor& data);
  // The backend's stream waits for every sum queued so far: kernels queued after this read
  // the sums. No host wait.
  void join();
  // The device time of the sums queued since the last call, from CUDA events around each
  // (waiting on the host until they are done): the all-reduce's own time, hidden behind
  // backward or not, and including the wait for the slowest rank.
  double take_device_seconds();
  Device device() const { return device_; }

 private:
  const CudaPlugin* plugin_;
  void* comm_ = nullptr;
  Device device_;
};

}  // namespace nnlab
