// The GPU tests' entry point: with no usable CUDA device it prints why and returns 77, which
// CTest reports as "skipped" (SKIP_RETURN_CODE 77); otherwise it runs the Catch2 session.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "devices/registry.h"

int main(int argc, char* argv[]) {
  const nnlab::CudaStatus status = nnlab::cuda_status();
  if (!status.usable) {
    std::printf("nnlab_gpu_tests: skipped, no usable CUDA device: %s\n", status.reason.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
