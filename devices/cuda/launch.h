// The one way nnlab launches a kernel:
//     cuda::launch("relu_forward_kernel", relu_forward_kernel, grid, block, stream, args...);
// Under nvcc it is the plain kernel<<<grid, block, 0, stream>>>(args...) followed by the
// launch check (a bad configuration is reported at once, naming the kernel and the line that
// launched it). In the simulator build (NNLAB_CUDA_SIMULATOR) the same kernel function runs
// on the CPU instead, each CUDA thread a fiber (devices/cuda/sim/). No kernel uses dynamic
// shared memory, so the launch takes none.
//
// While `nnlab explain` has the kernel log on, each launch also records the kernel's name,
// grid and block into the call that launched it (devices/kernel_log.h), the same on a GPU and
// on the simulator: the configuration is the launch's, whoever runs it.
#pragma once
#include "devices/cuda/cuda_check.h"
#include "devices/kernel_log.h"
#ifdef NNLAB_CUDA_SIMULATOR
#include "devices/cuda/sim/sim_launch.h"
#endif

namespace nnlab::cuda {

// The kernel's name and the file and line of the launch, for error messages.
struct LaunchSite {
  const char* kernel;
  const char* file;
  int line;
  LaunchSite(const char* kernel_name, const char* file_ = __builtin_FILE(), int line_ = __builtin_LINE())
      : kernel(kernel_name), file(file_), line(line_) {}
};

template <typename... Params, typename... Args>
void launch(LaunchSite site, void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "cuda::launch: wrong number of kernel arguments");
  if (kernel_log_enabled()) record_launch(site.kernel, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z});
#if defined(NNLAB_CUDA_SIMULATOR)
  sim::launch_kernel<Params...>(site.kernel, kernel, grid, block, stream, static_cast<Params>(args)...);
#elif defined(__CUDACC__)
  kernel<<<grid, block, 0, stream>>>(static_cast<Params>(args)...);
#else
  static_assert(sizeof...(Params) != sizeof...(Params), "cuda::launch is called from .cu files (nvcc) only");
#endif
  check_launch(site.kernel, site.file, site.line);
}

}  // namespace nnlab::cuda
