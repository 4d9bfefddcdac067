// Which library sums the gradients of a data-parallel run (docs/distributed.md, "CUDA tensors"):
//
//   mpi   the gradients are packed into host buffers and summed by MPI; CUDA gradients are
//         copied down to the host for it and back up after (staged through host memory)
//   nccl  CUDA gradients stay on the GPU: packed into device buffers by kernels, summed by
//         ncclAllReduce on the backend's stream, unpacked by kernels
//
// --allreduce-backend auto (the default) takes nccl when it can work: the model trains on a
// CUDA device, every rank's CUDA backend was built with NCCL, and every rank has a GPU of its
// own (NCCL refuses two ranks on one GPU: "Duplicate GPU detected"); otherwise mpi, saying why.
// nccl or mpi force one; a forced nccl that cannot work is an error naming the reason.
#pragma once
#include <string>

#include "apps/distributed/world.h"
#include "core/device.h"

namespace nnlab {

enum class AllReduceBackend { mpi, nccl };
enum class AllReduceBackendRequest { automatic, mpi, nccl };
AllReduceBackendRequest parse_allreduce_backend(const std::string& text);  // auto | mpi | nccl

// What the choice depends on, the same on every rank (gathered from all of them).
struct AllReduceFacts {
  bool cuda_gradients = false;  // the model trains on a CUDA device
  std::string nccl_missing;     // why some rank cannot use NCCL; "" when every rank can
  int most_ranks_on_one_gpu = 1;  // the largest number of ranks sharing one GPU
};

struct AllReduceChoice {
  AllReduceBackend backend = AllReduceBackend::mpi;
  bool cuda_gradients = false;  // (with mpi: they are staged through host memory)
  std::string why;  // for the start-up line: why this backend
  std::string nccl_version;  // "NCCL 2.28.9" when backend is nccl
};
// "NCCL 2.28.9 on device memory (every rank has a GPU of its own)", "MPI on host memory (CUDA
// gradients are staged through it): <why>", or for CPU gradients "MPI on host memory".
std::string describe(const AllReduceChoice& choice);

// The rule above, as a function of the facts alone (tested without a GPU). A forced nccl
// that cannot work throws a CollectiveError: every rank sees the same facts and throws alike.
AllReduceChoice choose_allreduce_backend(AllReduceBackendRequest request, const AllReduceFacts& facts);

// Gathers the facts from every rank (a collective: every rank calls it) and chooses.
AllReduceChoice decide_allreduce_backend(const World& world, Device device, AllReduceBackendRequest request);

}  // namespace nnlab
