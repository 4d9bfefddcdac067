// Several devices on the CUDA simulator (NNLAB_SIM_DEVICES; the GPU tests' main asks for 2):
// each device has its own memory and streams, a thread's current device decides where work
// goes, and memory of one device is refused on another until peer access is enabled, as on
// the GPUs of one machine. (Compiled on the simulator only: a .cpp file cannot define kernels
// for nvcc.)
#include <catch2/catch.hpp>

#ifdef NNLAB_CUDA_SIMULATOR
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "cli_support.h"
#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_launch.h"

namespace {

__global__ void add_one_kernel(int* data) { data[threadIdx.x] += 1; }

// Selects `device` for the test's thread and puts device 0 back after (nnlab's backend keeps
// cuda:0 selected on this thread, and its launches must go there).
struct OnDevice {
  explicit OnDevice(int device) { REQUIRE(cudaSetDevice(device) == cudaSuccess); }
  ~OnDevice() { cudaSetDevice(0); }
};

// n ints of device memory on `device`, filled with `value`.
int* ints_on(int device, int n, int value) {
  OnDevice on(device);
  int* p = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(int)) == cudaSuccess);
  std::vector<int> host(static_cast<size_t>(n), value);
  REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
  return p;
}

std::vector<int> read(const int* p, int n) {
  std::vector<int> host(static_cast<size_t>(n));
  REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

}  // namespace

TEST_CASE("gpu: the simulator presents several devices, each with its own memory and streams",
          "[gpu][simulator][devices]") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  REQUIRE(count == 2);  // tests/gpu/main.cpp sets NNLAB_SIM_DEVICES=2
  CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice);
  CHECK_THAT(nnlab::sim::last_diagnostic(), Catch::Contains("device 2 does not exist (the simulator has 2 devices"));
  cudaGetLastError();

  cudaDeviceProp zero{}, one{};
  REQUIRE(cudaGetDeviceProperties(&zero, 0) == cudaSuccess);
  REQUIRE(cudaGetDeviceProperties(&one, 1) == cudaSuccess);
  CHECK(std::memcmp(zero.uuid.bytes, one.uuid.bytes, sizeof zero.uuid.bytes) != 0);
  int reach = 0;
  REQUIRE(cudaDeviceCanAccessPeer(&reach, 0, 1) == cudaSuccess);
  CHECK(reach == 1);

  // Memory belongs to the device that was current when it was allocated.
  const int n = 32;
  int* on_zero = ints_on(0, n, 10);
  int* on_one = ints_on(1, n, 20);
  {
    OnDevice on(1);
    nnlab::sim::launch_kernel<int*>("add_one_kernel", add_one_kernel, 1, n, nullptr, on_one);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  CHECK(read(on_one, n) == std::vector<int>(n, 21));

  // A kernel on cuda:0 may not touch cuda:1's memory ...
  nnlab::sim::launch_kernel<int*>("add_one_kernel", add_one_kernel, 1, n, nullptr, on_one);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK_THAT(nnlab::sim::last_diagnostic(),
             Catch::Contains("add_one_kernel: argument 0") && Catch::Contains("is device memory of cuda:1") &&
                 Catch::Contains("runs on cuda:0") && Catch::Contains("cudaDeviceEnablePeerAccess(1)"));
  // ... until cuda:0 has peer access to it (one direction: cuda:1 still cannot use cuda:0's).
  REQUIRE(cudaDeviceEnablePeerAccess(1, 0) == cudaSuccess);
  CHECK(cudaDeviceEnablePeerAccess(1, 0) == cudaErrorPeerAccessAlreadyEnabled);
  cudaGetLastError();
  nnlab::sim::launch_kernel<int*>("add_one_kernel", add_one_kernel, 1, n, nullptr, on_one);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(read(on_one, n) == std::vector<int>(n, 22));
  {
    OnDevice on(1);
    nnlab::sim::launch_kernel<int*>("add_one_kernel", add_one_kernel, 1, n, nullptr, on_zero);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  }
  REQUIRE(cudaDeviceDisablePeerAccess(1) == cudaSuccess);
  CHECK(cudaDeviceDisablePeerAccess(1) == cudaErrorPeerAccessNotEnabled);
  cudaGetLastError();

  // A kernel goes to a stream of the current device.
  cudaStream_t stream_of_one = nullptr;
  {
    OnDevice on(1);
    REQUIRE(cudaStreamCreate(&stream_of_one) == cudaSuccess);
  }
  nnlab::sim::launch_kernel<int*>("add_one_kernel", add_one_kernel, 1, n, stream_of_one, on_zero);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK_THAT(nnlab::sim::last_diagnostic(), Catch::Contains("launched on a stream of cuda:1 while cuda:0 is the current"));

  // Copies between devices need no peer access, and check which device each side is on.
  REQUIRE(cudaMemcpyPeer(on_zero, 0, on_one, 1, n * sizeof(int)) == cudaSuccess);
  CHECK(read(on_zero, n) == std::vector<int>(n, 22));
  CHECK(cudaMemcpyPeer(on_zero, 1, on_one, 1, n * sizeof(int)) == cudaErrorInvalidValue);
  CHECK_THAT(nnlab::sim::last_diagnostic(), Catch::Contains("the destination") &&
                                                Catch::Contains("should be on cuda:1 but is device memory of cuda:0"));
  cudaGetLastError();

  {
    OnDevice on(1);
    REQUIRE(cudaStreamDestroy(stream_of_one) == cudaSuccess);
    CHECK(cudaFree(on_one) == cudaSuccess);
  }
  CHECK(cudaFree(on_zero) == cudaSuccess);
}

// (0 and words are refused with the other settings, tests/gpu/test_gpu_simulator.cpp.)
TEST_CASE("gpu: more simulated devices than 16, or a device past the last, is one clear message",
          "[gpu][simulator][devices][cli]") {
  const nnlab_test::CliResult many = nnlab_test::run_shell(std::string("NNLAB_SIM_DEVICES=17 ") + NNLAB_CLI_PATH +
                                                           " train --device cuda --model mlp --max-steps 1");
  INFO(many.output);
  CHECK(many.exit_code != 0);
  CHECK_THAT(many.output, Catch::Contains("NNLAB_SIM_DEVICES must be at most 16, got 17"));
  const nnlab_test::CliResult missing = nnlab_test::run_shell(std::string("NNLAB_SIM_DEVICES=1 ") + NNLAB_CLI_PATH +
                                                              " train --device cuda:1 --model mlp --max-steps 1");
  INFO(missing.output);
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.output, Catch::Contains("--device cuda:1: only 1 CUDA device(s) are present"));
}
#endif
