// The NCCL functions of the CUDA backend's library (devices/cuda/nccl_cuda.cpp), filled into
// the plugin table's NCCL slots (devices/cuda_plugin.h) when the library is built with NCCL.
// No CUDA or NCCL header here: a communicator is an opaque handle.
#pragma once
#include <cstddef>
#include <string>

#include "core/tensor.h"
#include "devices/cuda_plugin.h"

namespace nnlab::cuda {

int nccl_version();
std::string gpu_uuid(int device);
void nccl_unique_id(char* id);
void* nccl_comm_create(const char* id, int ranks, int rank, int device);
void nccl_sum(void* comm, Tensor& data);
void nccl_join(void* comm);
double nccl_take_device_seconds(void* comm);
void nccl_comm_destroy(void* comm);

}  // namespace nnlab::cuda
