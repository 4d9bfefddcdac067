// The CUDA simulator's own semantics, with kernels written here: a block's threads meet at
// __syncthreads(), a barrier in divergent code is reported, atomics from many blocks add up,
// a bad launch configuration is refused, and streams and events keep their order. These run
// on the simulator build only (a GPU build compiles this file with the host compiler, which
// cannot define kernels); on a GPU the same semantics are the hardware's.
#include <catch2/catch.hpp>

#ifdef NNLAB_CUDA_SIMULATOR
#include <cuda_runtime.h>

#include <vector>

#include "cli_support.h"
#include "core/tensor.h"
#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_launch.h"

namespace {

constexpr int kBlock = 64;

// out: (blocks · kBlock)   out[b·kBlock + t] = slot(t) + slot((t + 1) % kBlock) with
// slot(t) = 1000·b + t: each thread reads its neighbour's shared slot, written before the
// barrier (the block number in it tells this block's value from a stale one).
__global__ void neighbour_kernel(int* out) {
  __shared__ int slot[kBlock];
  const int t = static_cast<int>(threadIdx.x);
  slot[t] = 1000 * static_cast<int>(blockIdx.x) + t;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = slot[t] + slot[(t + 1) % kBlock];
}

// Only the even threads reach the barrier: CUDA leaves that undefined; the simulator says so.
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x % 2 == 0) __syncthreads();
  out[threadIdx.x] = 1;
}

// counter: one int   every thread of every block adds 1
__global__ void count_kernel(int* counter) { atomicAdd(counter, 1); }

struct DeviceInts {
  explicit DeviceInts(size_t n) : n(n) { REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(int)) == cudaSuccess); }
  ~DeviceInts() { cudaFree(p); }
  std::vector<int> read() const {
    std::vector<int> host(n);
    REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
  size_t n;
  int* p = nullptr;
};

}  // namespace

TEST_CASE("gpu: on the simulator a block's threads meet at __syncthreads()", "[gpu][simulator]") {
  const int blocks = 5;
  DeviceInts out(blocks * kBlock);
  nnlab::sim::launch_kernel<int*>("neighbour_kernel", neighbour_kernel, blocks, kBlock, nullptr, out.p);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<int> got = out.read();
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < kBlock; ++t) REQUIRE(got[size_t(b * kBlock + t)] == 2000 * b + t + (t + 1) % kBlock);
}

TEST_CASE("gpu: on the simulator atomics from every block add up and bad launches are refused",
          "[gpu][simulator]") {
  DeviceInts counter(1);
  REQUIRE(cudaMemset(counter.p, 0, sizeof(int)) == cudaSuccess);
  nnlab::sim::launch_kernel<int*>("count_kernel", count_kernel, 300, 128, nullptr, counter.p);
  CHECK(counter.read()[0] == 300 * 128);
  nnlab::sim::launch_kernel<int*>("count_kernel", count_kernel, 1, 2048, nullptr, counter.p);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(nnlab::sim::last_diagnostic().find("count_kernel") != std::string::npos);
  CHECK(cudaGetLastError() == cudaSuccess);  // a launch error is not sticky
  CHECK(counter.read()[0] == 300 * 128);
}

TEST_CASE("gpu: on the simulator a stream's work runs in order and events mark it", "[gpu][simulator]") {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  DeviceInts a(1000), b(1000);
  std::vector<int> host(1000, 7), back(1000, 0);
  REQUIRE(cudaEventRecord(start, stream) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(a.p, 0, 1000 * sizeof(int), stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(a.p, host.data(), 1000 * sizeof(int), cudaMemcpyHostToDevice, stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(b.p, a.p, 1000 * sizeof(int), cudaMemcpyDeviceToDevice, stream) == cudaSuccess);
  REQUIRE(cudaEventRecord(stop, stream) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
  CHECK(cudaEventQuery(stop) == cudaSuccess);
  float ms = -1.0f;
  REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  CHECK(ms >= 0.0f);
  CHECK(b.read() == host);  // the copy after the memset won, and the device copy saw it
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

// The divergent barrier makes the context unusable (a sticky error, as a GPU fault would):
// every later call returns it until the simulator's test hook clears it.
TEST_CASE("gpu: on the simulator a barrier in divergent code is the launch's error", "[gpu][simulator]") {
  DeviceInts out(kBlock);
  nnlab::sim::launch_kernel<int*>("divergent_barrier_kernel", divergent_barrier_kernel, 1, kBlock, nullptr, out.p);
  const cudaError_t err = cudaDeviceSynchronize();
  CHECK(err == cudaErrorLaunchFailure);
  CHECK_THAT(nnlab::sim::last_diagnostic(), Catch::Contains("divergent_barrier_kernel") &&
                                                Catch::Contains("__syncthreads() was reached by 32 of 64 threads"));
  CHECK(cudaMemset(out.p, 0, sizeof(int)) == cudaErrorLaunchFailure);  // sticky
  // The caching allocator's next cudaMalloc (200 MB: no cached block fits) fails too, and is
  // reported as the fault it is, not as "out of memory, try a smaller --batch".
  CHECK_THROWS_WITH(nnlab::Tensor::empty({50000017}, nnlab::DType::Float32, nnlab::Device::cuda(0)),
                    Catch::Contains("unspecified launch failure") && Catch::Contains("an earlier kernel faulted") &&
                        !Catch::Contains("smaller --batch"));
  nnlab::sim::clear_sticky_error_for_tests();
  CHECK(cudaMemset(out.p, 0, sizeof(int)) == cudaSuccess);
}
TEST_CASE("gpu: the simulator's settings are checked and a bad one is one clear message", "[gpu][simulator][cli]") {
  for (const char* setting : {"NNLAB_SIM_MEMORY_MB=abc", "NNLAB_SIM_THREADS=0", "NNLAB_SIM_MEMORY_MB=-5"}) {
    const nnlab_test::CliResult r = nnlab_test::run_shell(std::string(setting) + " " + NNLAB_CLI_PATH +
                                                          " train --device cuda --model mlp --max-steps 1");
    INFO(setting << ": " << r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains("must be a positive whole number"));
  }
  const nnlab_test::CliResult small = nnlab_test::run_shell(std::string("NNLAB_SIM_MEMORY_MB=1 ") + NNLAB_CLI_PATH +
                                                            " train --device cuda --model cnn --max-steps 1");
  INFO(small.output);
  CHECK(small.exit_code != 0);
  CHECK_THAT(small.output, Catch::Contains("out of memory on cuda:0") && Catch::Contains("smaller --batch"));
}
#endif
