// A kernel launch on the CUDA simulator: devices/cuda/launch.h calls launch_kernel where nvcc
// would compile kernel<<<grid, block, 0, stream>>>(args...).
//
// Before anything runs, every pointer argument is checked against the simulator's memory map
// (device memory or mapped host memory, never ordinary host memory), as compute-sanitizer
// would report a kernel touching host memory. The grid then runs in stream order: its blocks
// spread over the simulator's CPU threads, each block's threads on fibers
// (devices/cuda/sim/sim_threads.cpp).
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <type_traits>

namespace nnlab::sim {

// Queues the grid; `thread_body` runs once per CUDA thread with threadIdx & co. set.
// Returns cudaErrorInvalidConfiguration for a block of more than 1024 threads or an empty grid.
cudaError_t launch_grid(const char* kernel, dim3 grid, dim3 block, cudaStream_t stream,
                        std::function<void()> thread_body);

// Whether pointer argument `index` of `kernel` may be used on the device; records the launch
// error and a diagnostic naming the kernel and the argument when not.
bool check_kernel_pointer(const char* kernel, int index, const void* p);

template <typename T>
bool check_kernel_argument(const char* kernel, int index, const T& value) {
  if constexpr (std::is_pointer_v<T>) return check_kernel_pointer(kernel, index, value);
  return true;
}

template <typename... Params>
void launch_kernel(const char* kernel_name, void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                   Params... args) {
  int index = 0;
  const bool pointers_ok = (check_kernel_argument(kernel_name, index++, args) && ...);
  if (!pointers_ok) return;
  launch_grid(kernel_name, grid, block, stream, [=] { kernel(args...); });
}

}  // namespace nnlab::sim
