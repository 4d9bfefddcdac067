// The GPU tests' entry point: with no usable CUDA device it prints why and returns 77, which
// CTest reports as "skipped" (SKIP_RETURN_CODE 77); otherwise it runs the Catch2 session.
#include <cstdio>
#include <cstdlib>

#include "devices/cpu/threads.h"
#include "devices/registry.h"
#include "catch_session.h"

int main(int argc, char* argv[]) {
  // On the simulator the tests see two devices, so the multi-GPU paths run (peer access, NCCL
  // between ranks on devices of their own); the programs they start inherit it. A GPU build
  // ignores it.
  setenv("NNLAB_SIM_DEVICES", "2", 0);
  const nnlab::CudaStatus status = nnlab::cuda_status();
  if (!status.usable) {
    std::printf("nnlab_gpu_tests: skipped, no usable CUDA device: %s\n", status.reason.c_str());
    return 77;
  }
  // NNLAB_THREADS: the CPU side's thread count (scripts/racecheck.sh runs it single-threaded:
  // OpenMP's runtime is not built for ThreadSanitizer).
  if (const char* threads = std::getenv("NNLAB_THREADS")) nnlab::set_cpu_threads(std::atoi(threads));
  if (nnlab::cuda_simulated())
    std::printf("nnlab_gpu_tests: on the CUDA simulator (devices/cuda/sim): every kernel, cuBLAS and cuDNN call "
                "runs on the CPU\n");
  return run_catch_session(argc, argv);
}
