// A block-wide sum in a fixed order: every thread holds a partial sum, then a shared-memory
// tree halves the active threads until thread 0 holds the total. The order of additions
// depends only on blockDim, never on timing, so results repeat bit for bit (no atomics).
#pragma once
#include "devices/cuda/cuda_context.h"

namespace nnlab::cuda {

// Call from every thread of a block of kThreads threads; the total is valid in thread 0.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T partial[kThreads];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const T total = partial[0];
  __syncthreads();  // the buffer may be reused by the next call
  return total;
}

}  // namespace nnlab::cuda
